"""The text-completion prompt builder (SillyTavern's ``Generate`` for text APIs, §2.7).

Story string (context template, Handlebars subset) in the instruct wrapper; example blocks;
the chat separator; chat messages (depth injections and post-history instructions included)
formatted plainly or with instruct sequences; the last prompt line; the continued text. The
budget is max context minus the response, counted with the selected tokenizer plus
``token_padding``: injections first, then messages newest first until one does not fit, then
examples while they fit.

This module runs the stages in order; the story string and examples are
:mod:`.text_story`'s, the chat lines :mod:`.text_history`'s, what the stages read alike
:mod:`.text_frame`'s and the parts that read no build state :mod:`.text_chat`'s.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypedDict, Unpack

from tavernkit.jscompat import js_trim_start
from tavernkit.models.templates import ContextTemplate, InstructTemplate
from tavernkit.prompt.assembled import AssembledText
from tavernkit.prompt.card import CardFields, card_fields, collapse_newlines
from tavernkit.prompt.extensions import (
    build_extension_prompts,
    extension_prompt_text,
    worldinfo_outlets,
)
from tavernkit.prompt.instruct import InstructNames
from tavernkit.prompt.macros import bind_card_fields, macro_substitute
from tavernkit.prompt.state import ExtensionPosition, ExtensionPrompt, PromptState, Substitute
from tavernkit.prompt.stop_strings import stop_strings
from tavernkit.prompt.text_chat import (
    ChatItem,
    ContinueFit,
    LastLine,
    cleanup_continue,
    fit_continue,
    inject_in_chat,
    labelled_pieces,
    last_prompt_line,
    user_prompt_bias,
)
from tavernkit.prompt.text_frame import TextFrame
from tavernkit.prompt.text_history import chat_items, chat_lines, fill_chat, user_alignment
from tavernkit.prompt.text_story import (
    STORY_STRING_KEY,
    example_blocks,
    render_story,
    story_params,
    system_texts,
)
from tavernkit.text.tokens import ByteEstimateTokenizer, Tokenizer
from tavernkit.worldinfo.result import WorldInfoResult

__all__ = ["TextBuildOptions", "build_text_completion"]


class TextBuildOptions(TypedDict, total=False):
    """The text-completion builder's options (:func:`build_text_completion`).

    ``kind`` is the generation type; ``tokenizer`` defaults to SillyTavern's byte estimate
    (tokenizer "None"); ``substitute`` to the macro engine over the state; ``quiet_prompt``,
    ``quiet_to_loud`` and ``quiet_name`` shape a quiet generation's last line;
    ``force_name2`` the character's name on it (default: the setting, or always when quiet);
    ``card`` is the build's card fields when the world-info scan already evaluated them (once
    per generation, as in SillyTavern).
    """

    kind: str
    tokenizer: Tokenizer | None
    compat: str
    substitute: Substitute | None
    quiet_prompt: str
    quiet_to_loud: bool
    quiet_name: str | None
    force_name2: bool | None
    in_group: bool
    card: CardFields | None


def build_text_completion(
    state: PromptState,
    wi: WorldInfoResult | None = None,
    **options: Unpack[TextBuildOptions],
) -> AssembledText:
    """Build the prompt string and stop strings SillyTavern would send for ``state`` (pure):
    the story string and examples, the chat lines with their injections, the history fitted
    newest first, the last line, then the prompt's pieces and stop strings."""
    unknown = sorted(set(options) - set(TextBuildOptions.__annotations__))
    if unknown:
        raise TypeError(f"build_text_completion() got an unexpected keyword {unknown[0]!r}")
    text = _TextBuild.start(state, wi, options)
    system, jailbreak = system_texts(state, text.fields.system, text.fields.jailbreak, text.sub)
    extension_prompts = dict(build_extension_prompts(state, wi, text.fields))
    _story_and_examples(text, wi, system, extension_prompts)
    chat2, user_indices, injected = _chat_with_injections(text, extension_prompts, jailbreak)
    mes_send, send_kinds, example_count = _fit_history(text, chat2, user_indices, injected)
    return _assemble(text, wi, mes_send, send_kinds, example_count)


@dataclass
class _TextBuild:
    """One text-completion build under way: what its stages read alike (:class:`TextFrame`),
    the budget, and the pieces of the prompt as they are made."""

    base: TextFrame
    fields: CardFields
    count: Callable[[str], int]
    padding: int
    max_prompt: int
    compat: str
    quiet_prompt: str
    quiet_to_loud: bool
    quiet_name: str | None
    force_name2: bool
    story: str = ""
    examples: list[str] = field(default_factory=list)
    before_anchor: str = ""
    chat_separator: str = ""
    alignment: str = ""
    #: a continued reply, moved out of the chat lines
    cycle: str = ""
    examples_text: str = ""
    chat_text: str = ""
    #: the examples when pinned (they are kept whatever the budget)
    pinned: str | None = None
    prompt_bias: str = ""

    @property
    def state(self) -> PromptState:
        return self.base.state

    @property
    def sub(self) -> Substitute:
        return self.base.sub

    @property
    def kind(self) -> str:
        return self.base.kind

    @classmethod
    def start(
        cls, state: PromptState, wi: WorldInfoResult | None, options: TextBuildOptions
    ) -> _TextBuild:
        """The templates and names read, the card fields evaluated, the budget opened (max
        context less the response) and the quiet prompt evaluated."""
        kind = options.get("kind", "normal")
        tokenizer = options.get("tokenizer")
        context = state.context if state.context is not None else ContextTemplate()
        instruct_template = state.instruct if state.instruct is not None else InstructTemplate()
        settings = state.settings
        sub = options.get("substitute") or macro_substitute(
            state, outlets=worldinfo_outlets(wi), compat=options.get("compat", "default")
        )
        card = options.get("card")
        fields = card if card is not None else card_fields(state, sub)
        bind_card_fields(sub, fields)
        group = state.group
        names = InstructNames(
            user=state.user,
            char=state.char,
            in_group=options.get("in_group", False) or group is not None,
            members=tuple(group.names) if group is not None else (),
        )
        instruct_enabled = state.instruct_enabled
        base = TextFrame(state, sub, names, context, instruct_template, instruct_enabled, kind)
        force_name2 = options.get("force_name2")
        if force_name2 is None:
            force_name2 = settings.always_force_name2 or kind == "quiet"
        max_context = state.max_context if state.max_context is not None else settings.max_context
        max_response = state.max_response if state.max_response is not None else settings.amount_gen
        quiet_prompt = options.get("quiet_prompt", "")
        return cls(
            base=base,
            fields=fields,
            count=(tokenizer if tokenizer is not None else ByteEstimateTokenizer()).count,
            padding=settings.token_padding,
            max_prompt=max_context - max_response,
            compat=options.get("compat", "default"),
            quiet_prompt=sub(quiet_prompt) if quiet_prompt else "",
            quiet_to_loud=options.get("quiet_to_loud", False),
            quiet_name=options.get("quiet_name"),
            force_name2=force_name2,
        )

    def tokens(self) -> int:
        """The tokens of the prompt's parts so far (with the padding; 0 when empty)."""
        joined = "".join(
            [
                self.before_anchor,
                self.story,
                self.examples_text,
                self.chat_text,
                self.quiet_prompt,
                self.cycle,
                self.alignment,
            ]
        ).replace("\r", "")
        return self.count(joined) + self.padding if joined else 0


def _story_and_examples(
    text: _TextBuild,
    wi: WorldInfoResult | None,
    system: str,
    extension_prompts: dict[str, ExtensionPrompt],
) -> None:
    """The example blocks and the story string (in the chat at its depth when the context
    template says so: then an extension prompt)."""
    build, state, sub = text.base, text.state, text.sub
    context = build.context
    instruct = build.instruct if build.is_instruct else None
    examples, raw_examples = example_blocks(build, wi, text.fields)
    text.before_anchor = js_trim_start(
        extension_prompt_text(extension_prompts, sub, position=ExtensionPosition.BEFORE_PROMPT)
    )
    params = story_params(build, wi, text.fields, system, extension_prompts, text.before_anchor)
    params["mesExamples"] = "".join(examples)
    params["mesExamplesRaw"] = "".join(raw_examples)
    story = render_story(state, context, instruct, params, sub)
    if context.story_string_position == ExtensionPosition.IN_CHAT:
        extension_prompts[STORY_STRING_KEY] = ExtensionPrompt(
            story, ExtensionPosition.IN_CHAT, context.story_string_depth, context.story_string_role
        )
        story = ""
    text.story = story
    text.examples = [] if state.settings.strip_examples else examples


def _chat_with_injections(
    text: _TextBuild, extension_prompts: dict[str, ExtensionPrompt], jailbreak: str
) -> tuple[list[str], list[int], list[int]]:
    """The chat items, oldest first, with the depth injections and the post-history
    instructions, formatted newest first (:func:`chat_lines`)."""
    build = text.base
    is_continue = build.kind == "continue"
    items = chat_items(build)
    injected_positions = inject_in_chat(
        items, extension_prompts, build.sub, build.names, is_continue
    )
    if jailbreak:
        phi = ChatItem(name=build.names.user, is_user=True, text=jailbreak, injected=True)
        at = len(items) - 1 if is_continue and items else len(items)
        items.insert(at, phi)
        injected_positions = [p + (1 if p >= at else 0) for p in injected_positions] + [at]
    return chat_lines(build, items, injected_positions)


def _fit_history(
    text: _TextBuild, chat2: list[str], user_indices: list[int], injected: list[int]
) -> tuple[list[str], list[str], int]:
    """The chat lines that fit, newest first until one does not, then the examples that
    still fit; returned oldest first with their kinds, and how many examples fit."""
    build, sub = text.base, text.sub
    settings = text.state.settings
    is_continue = build.kind == "continue"
    text.alignment = user_alignment(build)
    if not chat2:
        chat2.append("")
    context = build.context
    text.chat_separator = sub(context.chat_start + "\n") if context.chat_start else ""
    text.chat_text = text.chat_separator
    if settings.pin_examples:
        text.pinned = text.examples_text = "".join(text.examples)
    if is_continue and len(chat2) > 1:
        text.cycle = chat2.pop(0)
        if text.compat != "st-1.18":  # SillyTavern forgets that the indices moved by one
            injected = [k - 1 for k in injected if k > 0]
            user_indices = [k - 1 for k in user_indices if k > 0]

    added = fill_chat(chat2, injected, text.count, text.tokens(), text.max_prompt)
    text.chat_text += "".join(added.values())
    last_added = max(added, default=-1)
    arr = [added[k] for k in sorted(added)]
    # newest first, as ``arr``: what each piece is, so an attempt can re-trim history only
    arr_kinds = ["injection" if k in injected else "history" for k in sorted(added)]
    if text.alignment and last_added not in user_indices:
        text.chat_text += text.alignment
        arr.append(text.alignment)
        arr_kinds.append("control")

    token_count = text.tokens()
    example_count = 0
    if not settings.pin_examples:
        for example in text.examples:
            token_count += text.count(example.replace("\r", ""))
            text.examples_text += example
            if token_count < text.max_prompt:
                example_count += 1
            else:
                break
    return list(reversed(arr)), list(reversed(arr_kinds)), example_count


def _last_line(
    text: _TextBuild, mes_send: list[str], send_kinds: list[str], example_count: int
) -> tuple[list[str], list[str], str]:
    """The last line (the character's name, the quiet prompt, the bias) and a
    continuation's fitting; the lines, their kinds and the examples sent."""
    build, state, sub, kind = text.base, text.state, text.sub, text.kind
    is_continue = kind == "continue"
    is_impersonate = kind == "impersonate"
    is_instruct = build.is_instruct
    if (
        mes_send
        and not is_continue
        and (not is_instruct or (build.instruct.wrap and kind != "quiet"))
    ):
        mes_send[-1] = re.sub(r"\n?$", "", mes_send[-1], count=1)

    prompt_bias = "" if is_impersonate or is_continue else user_prompt_bias(state, sub)
    text.prompt_bias = prompt_bias
    pinned, examples = text.pinned, text.examples
    mes_examples = pinned if pinned is not None else "".join(examples[:example_count])
    if mes_send:
        mes_send[-1] = last_prompt_line(
            mes_send[-1],
            state=state,
            instruct=build.instruct if is_instruct else None,
            sub=sub,
            names=build.names,
            kind=kind,
            line=LastLine(
                quiet_prompt=text.quiet_prompt,
                quiet_to_loud=text.quiet_to_loud,
                quiet_name=text.quiet_name,
                prompt_bias=prompt_bias,
                force_name2=text.force_name2,
            ),
        )
    if is_continue and text.cycle:
        send_kinds = []  # the fitting rewrites the list: no pieces for a continue
        mes_send, example_count = fit_continue(
            mes_send,
            examples,
            example_count,
            pinned,
            ContinueFit(
                story=text.story,
                separator=text.chat_separator,
                cache=text.cycle,
                quiet_prompt=text.quiet_prompt,
                max_prompt=text.max_prompt,
                count=text.count,
                padding=text.padding,
            ),
        )
        mes_examples = pinned if pinned is not None else "".join(examples[:example_count])

    if not is_instruct and not is_impersonate and prompt_bias.strip() and mes_send:
        last = mes_send[-1]
        bias = js_trim_start(prompt_bias)
        mes_send[-1] = last + (bias if last[-1:].isspace() else f" {bias}")
    return mes_send, send_kinds, mes_examples


def _assemble(
    text: _TextBuild,
    wi: WorldInfoResult | None,
    mes_send: list[str],
    send_kinds: list[str],
    example_count: int,
) -> AssembledText:
    """The prompt string (story, examples, chat, a continuation's cleaned reply), its
    labelled pieces and the stop strings."""
    build, state, kind = text.base, text.state, text.kind
    settings = state.settings
    mes_send, send_kinds, mes_examples = _last_line(text, mes_send, send_kinds, example_count)
    cycle = text.cycle
    cache = (
        cleanup_continue(cycle, build.names.char, text.prompt_bias, build.is_instruct)
        if cycle
        else ""
    )
    story, chat_separator = text.story, text.chat_separator
    body = chat_separator + "".join(mes_send)
    prompt = (story + mes_examples + body + cache).replace("\r", "")
    if settings.collapse_newlines:
        prompt = collapse_newlines(prompt)
    pieces = labelled_pieces(
        prompt,
        [("story", story), ("examples", mes_examples), ("separator", chat_separator)],
        list(zip(send_kinds, mes_send, strict=True)) if len(send_kinds) == len(mes_send) else [],
        cache,
        collapse=settings.collapse_newlines,
    )
    stop = stop_strings(
        state,
        build.context,
        build.instruct if build.is_instruct else None,
        text.sub,
        build.names,
        kind,
    )
    activated = tuple(a.key for a in wi.activated) if wi is not None else ()
    return AssembledText(
        prompt=prompt,
        stop=stop,
        kind=kind,
        budget=text.max_prompt,
        token_count=text.count(prompt) + text.padding,
        activated_entries=activated,
        sections=(
            ("story", story),
            ("examples", mes_examples),
            ("chat", body),
            ("continue", cache),
        ),
        pieces=pieces,
    )
