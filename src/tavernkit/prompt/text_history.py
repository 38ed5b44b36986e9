"""The chat lines of a text-completion build (:mod:`tavernkit.prompt.text_completion`): the
chat's messages as items, formatted plainly or with instruct sequences, newest first, the
user alignment message, and the lines that fit the budget."""

from __future__ import annotations

from collections.abc import Callable

from tavernkit.prompt.core_chat import core_chat
from tavernkit.prompt.instruct import FIRST, LAST, format_instruct_chat
from tavernkit.prompt.regex import chat_texts
from tavernkit.prompt.text_chat import ChatItem
from tavernkit.prompt.text_frame import TextFrame

__all__ = ["chat_items", "chat_lines", "fill_chat", "format_item", "user_alignment"]


def chat_items(build: TextFrame) -> list[ChatItem]:
    """The chat's messages the build sends, oldest first, with their reasoning added."""
    state = build.state
    chat = core_chat(state.messages, build.kind, tools=False)
    texts = chat_texts(state, chat, kind=build.kind, substitute=build.sub)
    return [
        ChatItem(
            name=m.name,
            is_user=m.is_user,
            text=texts.text(i, m),
            narrator=m.extra.type == "narrator",
            force_avatar=bool(m.force_avatar),
        )
        for i, m in chat
    ]


def format_item(build: TextFrame, item: ChatItem, force: int | None = None) -> str:
    """One chat item as the prompt writes it (instruct sequences, or ``name: text``)."""
    char_name = item.name or build.state.char
    item_name = item.name if item.is_user else char_name
    if build.is_instruct:
        return format_instruct_chat(
            build.instruct,
            build.sub,
            build.names,
            name=item_name,
            text=item.text,
            is_user=item.is_user,
            is_narrator=item.narrator,
            force_avatar=item.force_avatar,
            force_sequence=force,
        )
    if item.name and not item.narrator:
        return f"{item_name}: {item.text}\n"
    return f"{item.text}\n"


def chat_lines(
    build: TextFrame, items: list[ChatItem], injected_positions: list[int]
) -> tuple[list[str], list[int], list[int]]:
    """The items formatted, newest first (the first and the last user message with their
    forced sequences; a continued reply cut after its text), with the newest-first indices
    of the user messages and of the injections."""
    is_instruct, is_continue = build.is_instruct, build.kind == "continue"
    total = len(items)
    last_user = max((k for k, it in enumerate(items) if it.is_user), default=-1)
    chat2: list[str] = [""] * total  # newest first
    user_indices: list[int] = []
    for j, item in enumerate(items):
        i = total - 1 - j
        text = format_item(build, item)
        if j == 0 and is_instruct:
            text = format_item(build, item, FIRST)
        if last_user >= 0 and j == last_user and is_instruct:
            text = format_item(build, item, LAST)
        if i == 0 and is_continue:
            if is_instruct:
                text = format_item(build, item, LAST)
            end = text.rfind(item.text)
            text = text[: end + len(item.text)] if end >= 0 else text
            chat2[i] = text
            continue
        chat2[i] = text
        if item.is_user:
            user_indices.append(i)
    injected = sorted(total - 1 - p for p in injected_positions)
    return chat2, user_indices, injected


def user_alignment(build: TextFrame) -> str:
    """The instruct template's user alignment message, formatted ("" when none)."""
    template = build.instruct
    if not (build.is_instruct and template.user_alignment_message):
        return ""
    return format_instruct_chat(
        template,
        build.sub,
        build.names,
        name=build.state.user,
        text=build.sub(template.user_alignment_message),
        is_user=True,
        is_narrator=False,
        force_sequence=FIRST,
    )


def fill_chat(
    chat2: list[str],
    injected: list[int],
    count: Callable[[str], int],
    token_count: int,
    max_prompt: int,
) -> dict[int, str]:
    """The chat lines that fit (newest first; injections before the other lines, as
    SillyTavern fills them), by newest-first index in the order they were added."""
    added: dict[int, str] = {}
    for index in injected:
        if index >= len(chat2):
            continue
        token_count += count(chat2[index].replace("\r", ""))
        if token_count >= max_prompt:
            break  # the other lines are still tried, with this one's tokens counted (ST)
        added[index] = chat2[index]
    for index, item_text in enumerate(chat2):
        if index in added:
            continue
        token_count += count(item_text.replace("\r", ""))
        if token_count >= max_prompt:
            return added
        added[index] = item_text
    return added
