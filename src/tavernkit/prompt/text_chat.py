"""Parts of the text-completion builder (:mod:`tavernkit.prompt.text_completion`) that read
no build state: the chat line before formatting, the in-chat injections
(``doChatInject``), the user's prompt bias, the last prompt line (``modifyLastPromptLine``),
the continued text's cleanup and refit (``checkPromptSize``), and the labelled pieces the
turn runner re-trims by.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from tavernkit.jscompat import js_trim_start
from tavernkit.models.templates import InstructTemplate
from tavernkit.prompt.card import collapse_newlines
from tavernkit.prompt.extensions import extension_prompt_text
from tavernkit.prompt.instruct import InstructNames, format_instruct_chat, format_instruct_prompt
from tavernkit.prompt.state import ExtensionPosition, ExtensionPrompt, PromptState, Substitute

__all__ = [
    "ChatItem",
    "ContinueFit",
    "LastLine",
    "cleanup_continue",
    "fit_continue",
    "inject_in_chat",
    "labelled_pieces",
    "last_prompt_line",
    "user_prompt_bias",
]

_MAX_INJECTION_DEPTH = 10000


@dataclass(slots=True)
class ChatItem:
    """A chat line before formatting (a message, an injection or the post-history text)."""

    name: str
    is_user: bool
    text: str
    narrator: bool = False
    force_avatar: bool = False
    injected: bool = False
    original_text: str = ""


def labelled_pieces(
    prompt: str,
    head: list[tuple[str, str]],
    chat: list[tuple[str, str]],
    tail: str,
    *,
    collapse: bool,
) -> tuple[tuple[str, str], ...]:
    """The prompt as labelled pieces (``(kind, text)``: ``history`` pieces are chat messages,
    the rest is kept whole), or ``()`` when they would not join back to ``prompt`` exactly
    (newline collapsing across a boundary, a continue's refit): a prompt is then one piece."""
    if not chat:
        return ()
    parts = [*head, *chat, ("continue", tail)]
    pieces = tuple(
        (kind, collapse_newlines(text.replace("\r", "")) if collapse else text.replace("\r", ""))
        for kind, text in parts
        if text
    )
    return pieces if "".join(t for _, t in pieces) == prompt else ()


def inject_in_chat(
    items: list[ChatItem],
    prompts: dict[str, ExtensionPrompt],
    sub: Substitute,
    names: InstructNames,
    is_continue: bool,
) -> list[int]:
    """``doChatInject``: in-chat extension prompts as pseudo-messages (system, user, assistant
    order per depth); returns their positions in ``items`` (oldest first)."""
    in_chat = [p for p in prompts.values() if p.position == ExtensionPosition.IN_CHAT and p.value]
    if any(p.depth is None for p in in_chat):
        depths = list(range(_MAX_INJECTION_DEPTH + 1))
    else:
        depths = sorted({p.depth for p in in_chat if p.depth is not None and p.depth >= 0})
    newest_first = list(reversed(items))
    inserted_at: list[int] = []
    total = 0
    role_names = {0: "", 1: names.user, 2: names.char}
    for depth in depths:
        role_items: list[ChatItem] = []
        for role in (0, 1, 2):
            text = js_trim_start(
                extension_prompt_text(
                    prompts,
                    sub,
                    position=ExtensionPosition.IN_CHAT,
                    depth=depth,
                    role=role,
                    wrap=False,
                )
            )
            if text:
                role_items.append(
                    ChatItem(
                        name=role_names[role],
                        is_user=role == 1,
                        text=text,
                        narrator=role == 0,
                        injected=True,
                    )
                )
        if role_items:
            at = (1 if is_continue and depth == 0 else depth) + total
            at = min(at, len(newest_first))
            newest_first[at:at] = role_items
            inserted_at.extend(range(at, at + len(role_items)))
            total += len(role_items)
    newest_first.reverse()
    items[:] = newest_first
    return [len(items) - 1 - k for k in inserted_at]


def user_prompt_bias(state: PromptState, sub: Substitute) -> str:
    """``getBiasStrings`` without typed input, for both builders: the newest user (or
    narrator) message's own bias, else the user prompt bias setting, macro-substituted."""
    bias = ""
    for message in reversed(state.messages):
        if message.is_user or message.is_system or message.extra.type == "narrator":
            if message.extra.bias and message.extra.bias.strip():
                bias = message.extra.bias
            break
    bias = bias or state.settings.user_prompt_bias or ""
    return sub(bias) if bias else ""


@dataclass(frozen=True, slots=True)
class LastLine:
    """What the prompt's last line carries besides the chat: a quiet generation's prompt
    (``quiet_to_loud``: as the character, not the system; ``quiet_name``: the speaker
    instead of "System"), the user's prompt bias, and whether the character's name always
    opens the reply (``force_name2``)."""

    quiet_prompt: str = ""
    quiet_to_loud: bool = False
    quiet_name: str | None = None
    prompt_bias: str = ""
    force_name2: bool = False


def last_prompt_line(
    text: str,
    *,
    state: PromptState,
    instruct: InstructTemplate | None,
    sub: Substitute,
    names: InstructNames,
    kind: str,
    line: LastLine,
) -> str:
    """``modifyLastPromptLine``: the quiet prompt, then the line that opens the reply."""
    quiet_prompt, quiet_to_loud, quiet_name = line.quiet_prompt, line.quiet_to_loud, line.quiet_name
    prompt_bias, force_name2 = line.prompt_bias, line.force_name2
    is_continue = kind == "continue"
    is_impersonate = kind == "impersonate"
    if quiet_prompt:
        if instruct is not None:
            text += format_instruct_chat(
                instruct,
                sub,
                names,
                name=names.user,
                text=quiet_prompt,
                is_user=False,
                is_narrator=True,
            )
        else:
            return text + f"\n{quiet_prompt}"
    if instruct is not None and not is_continue:
        if quiet_prompt and not quiet_to_loud and not is_impersonate:
            name = quiet_name or "System"
        else:
            name = names.user if is_impersonate else names.char
        text += format_instruct_prompt(
            instruct,
            sub,
            names,
            name=name,
            is_impersonate=is_impersonate,
            prompt_bias=prompt_bias,
            is_quiet=bool(quiet_prompt) and kind == "quiet",
            quiet_to_loud=quiet_to_loud,
        )
    if instruct is None and is_impersonate and not is_continue:
        if not text.endswith("\n"):
            text += "\n"
        text += names.user + ":"
    messages = state.messages
    continuing_first = len(messages) == 1 and is_continue
    if instruct is None and force_name2 and not continuing_first and not is_impersonate:
        if not text.endswith("\n"):
            text += "\n"
        if not is_continue or not (messages and messages[-1].is_user):
            text += f"{names.char}:"
    return text


def cleanup_continue(cache: str, char: str, bias: str, is_instruct: bool) -> str:
    if js_trim_start(cache).startswith(f"{char}:"):
        cache = js_trim_start(cache.replace(f"{char}:", "", 1))
    if bias and js_trim_start(cache).startswith(bias):
        cache = cache.replace(bias, "", 1)
    if cache and not cache[0].isspace() and not is_instruct:
        cache = " " + cache
    return cache


@dataclass(frozen=True, slots=True)
class ContinueFit:
    """What a continuation's fitting keeps whole: the story string, the chat's separator,
    the continued reply (``cache``) and the quiet prompt; and the budget: ``count`` (a
    tokenizer's), the padding and the prompt's maximum."""

    story: str
    separator: str
    cache: str
    quiet_prompt: str
    max_prompt: int
    count: Callable[[str], int]
    padding: int


def fit_continue(
    mes_send: list[str],
    examples: list[str],
    example_count: int,
    pinned: str | None,
    fit: ContinueFit,
) -> tuple[list[str], int]:
    """``checkPromptSize`` for continuations: drop examples, then the oldest messages."""
    story, separator, cache, quiet_prompt = fit.story, fit.separator, fit.cache, fit.quiet_prompt
    count, padding, max_prompt = fit.count, fit.padding, fit.max_prompt
    messages = list(mes_send)
    while True:
        shown = pinned if pinned is not None else "".join(examples[:example_count])
        prompt = "".join(
            [story, shown, separator + "".join(messages), "\n", cache, quiet_prompt]
        ).replace("\r", "")
        if count(prompt) + padding <= max_prompt:
            return messages, example_count
        if example_count > 0:
            example_count -= 1
        elif messages:
            messages.pop(0)
        else:
            return messages, example_count
