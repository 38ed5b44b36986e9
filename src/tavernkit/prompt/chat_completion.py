"""The chat-completion prompt builder (SillyTavern's ``prepareOpenAIMessages`` and
``populateChatCompletion``, §2.2-§2.6 of the behaviour reference).

Order of work, as in SillyTavern: the prompt collection (preset order, markers filled, card
overrides); a budget of max context minus the response, less 3 for priming; the markers and
main prompt; the control prompts (quiet, impersonate, continue prefill) reserved for the very
end; auxiliary, post-history and custom relative prompts; relative extension prompts into the
main prompt; in-chat injections merged into the chat; the history newest first until a message
does not fit; example blocks (after the history unless pinned); the control prompts; and
optionally the squash of consecutive system messages.

The messages a prompt sees are :mod:`.core_chat`'s; a message's tokens :mod:`.message_tokens`'.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, TypedDict, Unpack

from tavernkit.models.preset import ChatCompletionPreset
from tavernkit.prompt._completion import Msg, MsgCollection, PromptSlots
from tavernkit.prompt.assembled import AssembledChat
from tavernkit.prompt.card import CardFields, base_chat_replace, card_fields
from tavernkit.prompt.chat_history import (
    ChatHistory,
    HistoryOptions,
    OpenAIMessage,
    chat_messages,
    fill_examples,
    fill_history,
    inject_prompts,
)
from tavernkit.prompt.collection import (
    KNOWN_EXTENSION_KEYS,
    CollectionResult,
    Prompt,
    TurnTexts,
    build_prompt_collection,
)
from tavernkit.prompt.core_chat import CoreChat, core_chat
from tavernkit.prompt.examples import parse_example_block, parse_mes_examples
from tavernkit.prompt.extensions import build_extension_prompts, worldinfo_outlets
from tavernkit.prompt.macros import bind_card_fields, macro_substitute
from tavernkit.prompt.message_tokens import MessageTokens
from tavernkit.prompt.regex import ChatTexts, chat_texts
from tavernkit.prompt.state import ExtensionPrompt, PromptState, Substitute
from tavernkit.prompt.text_chat import user_prompt_bias
from tavernkit.text.tokens import Tokenizer, tokenizer_for_model
from tavernkit.worldinfo.result import WorldInfoResult

__all__ = ["ChatBuildOptions", "build_chat_completion", "squash_system_messages"]

_SQUASH_EXCLUDED = frozenset({"newMainChat", "newChat", "groupNudge"})


class ChatBuildOptions(TypedDict, total=False):
    """The chat-completion builder's options (:func:`build_chat_completion`).

    ``kind`` is the generation type (normal, continue, impersonate, swipe, regenerate, quiet
    with ``quiet_prompt``). ``tokenizer`` defaults to the model's (o200k for the gpt-4o
    family, else cl100k). ``substitute`` defaults to the macro engine with an environment
    built from the state. ``tool_tokens`` reserves room for tool definitions. ``history``
    replaces the chat messages (oldest first; the task envelope). ``card`` is the build's card
    fields when the world-info scan already evaluated them (SillyTavern evaluates them once per
    generation; a second pass would roll ``{{random}}`` and run ``{{incvar}}`` again).
    """

    kind: str
    tokenizer: Tokenizer | None
    compat: str
    substitute: Substitute | None
    quiet_prompt: str
    quiet_image: str | None
    bias: str | None
    tool_tokens: int
    tools: bool
    inline_images: bool
    dry_run: bool
    in_group: bool
    history: Sequence[OpenAIMessage] | None
    card: CardFields | None


def build_chat_completion(
    state: PromptState,
    wi: WorldInfoResult | None = None,
    **options: Unpack[ChatBuildOptions],
) -> AssembledChat:
    """Build the message list SillyTavern would send for ``state`` (pure), in the module
    docstring's order; ``wi`` is this turn's world-info result, ``options`` the
    :class:`ChatBuildOptions`.

    Raises :class:`~tavernkit.prompt.state.TokenBudgetExceeded` when the mandatory prompts do
    not fit.
    """
    unknown = sorted(set(options) - set(ChatBuildOptions.__annotations__))
    if unknown:
        raise TypeError(f"build_chat_completion() got an unexpected keyword {unknown[0]!r}")
    build = _ChatBuild.start(state, wi, options)
    _fill_prompts(build, options.get("quiet_image"), options.get("tool_tokens", 0))
    messages = _history_messages(build, options.get("history"))
    ordered = inject_prompts(build.absolute, messages, build.extension_prompts, build.sub)
    history = _history_options(build)
    example_blocks = _example_blocks(state, wi, build.fields.mes_examples, build.sub)
    header = build.counter.make(
        "system", build.sub(build.preset.new_example_chat_prompt), "newChat", source="control"
    )
    completion, prompts, make = build.completion, build.result.prompts, build.counter.make
    if state.settings.pin_examples:
        fill_examples(completion, prompts, example_blocks, header, make)
        fill_history(completion, prompts, ordered, build.sub, make, history)
    else:
        fill_history(completion, prompts, ordered, build.sub, make, history)
        fill_examples(completion, prompts, example_blocks, header, make)
    return _finish(build, options.get("dry_run", False))


@dataclass
class _ChatBuild:
    """One chat-completion build under way: the inputs as the build reads them, the prompt
    collection, the budget being filled and the control prompts held for the end."""

    state: PromptState
    wi: WorldInfoResult | None
    kind: str
    preset: ChatCompletionPreset
    in_group: bool
    tools: bool
    inline_images: bool
    counter: MessageTokens
    sub: Substitute
    fields: CardFields
    extension_prompts: dict[str, ExtensionPrompt]
    chat: CoreChat
    prompt_texts: ChatTexts
    bias: str
    result: CollectionResult
    completion: PromptSlots
    budget: int
    control: MsgCollection = field(default_factory=lambda: MsgCollection("controlPrompts"))
    absolute: list[Prompt] = field(default_factory=list)

    @classmethod
    def start(
        cls, state: PromptState, wi: WorldInfoResult | None, options: ChatBuildOptions
    ) -> _ChatBuild:
        """The build's inputs read, the card fields evaluated, the prompt collection made and
        the budget opened (max context less the response, less 3 for priming)."""
        kind = options.get("kind", "normal")
        tokenizer = options.get("tokenizer")
        preset = state.preset if state.preset is not None else ChatCompletionPreset()
        counter = MessageTokens(
            tokenizer if tokenizer is not None else tokenizer_for_model(state.model)
        )
        sub = options.get("substitute") or macro_substitute(
            state, outlets=worldinfo_outlets(wi), compat=options.get("compat", "default")
        )
        card = options.get("card")
        fields = card if card is not None else card_fields(state, sub)
        bind_card_fields(sub, fields)
        extension_prompts = build_extension_prompts(state, wi, fields)
        tools = options.get("tools", True)
        chat = core_chat(state.messages, kind, tools=tools)
        prompt_texts = chat_texts(state, chat, kind=kind, substitute=sub)
        bias = options.get("bias")
        if bias is None:
            bias = "" if kind in ("impersonate", "continue") else user_prompt_bias(state, sub)
        quiet_prompt = options.get("quiet_prompt", "")
        result = build_prompt_collection(
            state,
            preset,
            fields,
            extension_prompts,
            sub,
            kind=kind,
            texts=TurnTexts(
                world_info_before=wi.before if wi else "",
                world_info_after=wi.after if wi else "",
                quiet_prompt=sub(quiet_prompt) if quiet_prompt else "",
                bias=bias,
            ),
        )
        max_context = (
            state.max_context if state.max_context is not None else preset.openai_max_context
        )
        max_response = (
            state.max_response if state.max_response is not None else preset.openai_max_tokens
        )
        completion = PromptSlots(max_context - max_response)
        budget = completion.budget
        completion.reserve(3)
        return cls(
            state=state,
            wi=wi,
            kind=kind,
            preset=preset,
            in_group=options.get("in_group", False) or state.group is not None,
            tools=tools,
            inline_images=options.get("inline_images", False),
            counter=counter,
            sub=sub,
            fields=fields,
            extension_prompts=extension_prompts,
            chat=chat,
            prompt_texts=prompt_texts,
            bias=bias,
            result=result,
            completion=completion,
            budget=budget,
        )

    def add_prompt(self, identifier: str) -> None:
        prompts = self.result.prompts
        prompt = prompts.get(identifier)
        if prompt is None:
            return
        if self.result.disabled(identifier) and identifier != "main":
            return
        if prompt.absolute:
            return
        collection = MsgCollection(identifier, [self.counter.from_prompt(prompt)])
        self.completion.add(collection, prompts.index(identifier))


def _fill_prompts(build: _ChatBuild, quiet_image: str | None, tool_tokens: int) -> None:
    """The markers and the main prompt; the control prompts reserved for the end; the
    auxiliary, post-history and custom relative prompts; the relative extension prompts."""
    prompts, counter, completion = build.result.prompts, build.counter, build.completion
    for identifier in (
        "worldInfoBefore",
        "main",
        "worldInfoAfter",
        "charDescription",
        "charPersonality",
        "scenario",
        "personaDescription",
    ):
        build.add_prompt(identifier)

    control = build.control
    impersonate = prompts.get("impersonate")
    if build.kind == "impersonate" and impersonate is not None:
        control.items.append(counter.from_prompt(impersonate, "control"))
    quiet = prompts.get("quietPrompt")
    if quiet is not None and quiet.content:
        content: Any = quiet.content
        if quiet_image and build.inline_images:
            content = [
                {"type": "text", "text": quiet.content},
                {"type": "image_url", "image_url": {"url": quiet_image}},
            ]
        control.items.append(counter.make(quiet.role, content, quiet.identifier, source="control"))
    completion.reserve(control.tokens)

    relative = [p.identifier for p in prompts if p.system_prompt is False and not p.absolute]
    for identifier in ("nsfw", "jailbreak", *relative):
        build.add_prompt(identifier)
    if prompts.has("enhanceDefinitions"):
        build.add_prompt("enhanceDefinitions")
    if build.bias and build.bias.strip():
        build.add_prompt("bias")

    build.absolute = [p for p in prompts if p.absolute]
    _insert_relative_extensions(completion, prompts.prompts, build.absolute, counter)
    completion.reserve(tool_tokens)


def _history_messages(build: _ChatBuild, history: Sequence[OpenAIMessage] | None) -> ChatHistory:
    """The chat's messages as the history walk takes them (``history`` in their place for a
    task); a continuation's last message becomes the continue prefill (a control prompt)."""
    state, preset = build.state, build.preset
    messages = (
        ChatHistory(head=list(reversed(history)))
        if history is not None
        else chat_messages(
            build.chat,
            user=state.user,
            names_behavior=preset.names_behavior,
            in_group=build.in_group,
            texts=build.prompt_texts.added,
            rewrite=build.prompt_texts.rewrite,
            carry_reasoning=(
                (
                    lambda m: (
                        m.extra.api == state.api
                        and m.extra.model == state.model
                        and (state.group is None or m.name == state.char)
                    )
                )
                if state.api
                else None
            ),
        )
    )
    if build.kind == "continue" and preset.continue_prefill and messages:
        last = messages.pop_newest()
        prefix = "\n\n" if state.source == "claude" and last.role == "assistant" else ""
        prefill = build.counter.make(
            last.role,
            prefix + build.sub(last.content),
            "continuePrefill",
            source="control",
            message_index=last.message_index,
        )
        build.control.items.append(prefill)
        build.completion.reserve(prefill.tokens)
    return messages


def _history_options(build: _ChatBuild) -> HistoryOptions:
    """The history walk's control messages: the continue and group nudges, the new-chat
    marker and the empty-message replacement."""
    preset, sub, counter, kind = build.preset, build.sub, build.counter, build.kind
    nudge = None
    if kind == "continue" and not preset.continue_prefill and build.chat:
        last_text = build.prompt_texts.text(*build.chat[-1])
        nudge_text = sub(
            sub(preset.continue_nudge_prompt, dynamic={"lastChatMessage": last_text.strip()})
        )
        nudge = counter.make("system", nudge_text, "continueNudge", source="control")
    new_chat_text = preset.new_group_chat_prompt if build.in_group else preset.new_chat_prompt
    group_nudge = None
    if build.in_group and kind != "impersonate":
        template = preset.group_nudge_prompt
        group = build.state.group
        if group is not None and group.nudge is not None:
            template = group.nudge
        nudge_text = sub(template) if template else ""
        if nudge_text:
            group_nudge = counter.make("system", nudge_text, "groupNudge", source="control")
    return HistoryOptions(
        names_behavior=preset.names_behavior,
        inline_images=build.inline_images,
        tools=build.tools,
        continue_nudge=nudge,
        new_chat=counter.make("system", sub(new_chat_text), "newMainChat", source="control"),
        send_if_empty=(
            counter.make(
                "user", sub(preset.send_if_empty), "emptyUserMessageReplacement", source="control"
            )
            if preset.send_if_empty
            else None
        ),
        group_nudge=group_nudge,
    )


def _finish(build: _ChatBuild, dry_run: bool) -> AssembledChat:
    """The control prompts last, the squash of consecutive system messages (not in a dry
    run: the inspector shows every block), and the built chat."""
    completion, control = build.completion, build.control
    completion.free(control.tokens)
    if control.items:
        completion.add(control)
    flat = completion.flatten()
    if build.preset.squash_system_messages and not dry_run:
        flat = squash_system_messages(flat, build.counter.message)
    wi = build.wi
    activated = tuple(a.key for a in wi.activated) if wi is not None else ()
    return AssembledChat(
        blocks=completion.blocks(flat),
        budget=build.budget,
        kind=build.kind,
        activated_entries=activated,
    )


def _insert_relative_extensions(
    completion: PromptSlots, prompts: list[Prompt], absolute: list[Prompt], counter: MessageTokens
) -> None:
    """Summary, Author's Note, vectors and other relative extension prompts go into the main
    prompt's collection; without one they follow main into the chat (its depth and role)."""
    known = list(KNOWN_EXTENSION_KEYS.values())
    ordered = [p for ident in known for p in prompts if p.identifier == ident]
    ordered += [p for p in prompts if p.extension]
    main = next((p for p in prompts if p.identifier == "main"), None)
    for prompt in ordered:
        if not prompt.position:
            continue
        if completion.has("main"):
            completion.insert(counter.from_prompt(prompt, "extension"), "main", prompt.position)
        elif main is not None and main.absolute:
            moved = replace(
                prompt,
                injection_position=main.injection_position,
                injection_depth=main.injection_depth,
                injection_order=main.injection_order,
                role=main.role,
            )
            where = absolute.index(main) if main in absolute else len(absolute)
            absolute.insert(where if prompt.position == "start" else where + 1, moved)


def _example_blocks(
    state: PromptState, wi: WorldInfoResult | None, mes_examples: str, sub: Substitute
) -> list[list[Any]]:
    if state.settings.strip_examples:
        return []
    blocks = parse_mes_examples(mes_examples)
    if wi is not None:
        for example in wi.examples:
            if not example.content:
                continue
            parsed = parse_mes_examples(base_chat_replace(example.content, state, sub))
            if example.position == 0:
                blocks[0:0] = parsed
            else:
                blocks.extend(parsed)
    members = state.group.names if state.group is not None else ()
    return [
        parse_example_block(
            b,
            user=state.user,
            char=state.char,
            group_members=members,
            in_group=state.group is not None,
        )
        for b in blocks
    ]


def squash_system_messages(messages: list[Msg], count: Any) -> list[Msg]:
    """Merge runs of unnamed system messages with ``\\n`` (SillyTavern's
    ``squashSystemMessages``); empty system messages go, the chat headers stay apart."""

    def squashable(m: Msg) -> bool:
        return m.identifier not in _SQUASH_EXCLUDED and m.role == "system" and not m.name

    out: list[Msg] = []
    last: Msg | None = None
    for message in messages:
        if message.role == "system" and not message.content:
            continue
        if squashable(message) and last is not None and squashable(last):
            last.content = f"{last.content}\n{message.content}"
            last.tokens = count(last.role, last.content)
            continue
        message = replace(message)
        out.append(message)
        last = message
    return out
