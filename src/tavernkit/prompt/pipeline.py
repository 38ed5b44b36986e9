"""The prompt pipeline: one way from the store's state to a built prompt.

:func:`prepare` is the step every prompt build of a turn, a quiet generation or a preview goes
through: the prompt engine's view of the state for one :class:`PromptTarget` (API family,
model, source, tokenizer), one macro evaluator (chat and global variables included), the card
fields evaluated once, the world-info scan over the state's books, then the chat- or
text-completion builder the target's family calls for. Callers that need only part of it (a
greeting's macros, a lorebook's scan, a task envelope) open a :class:`PromptSession` with
:func:`begin` and run the stages they need, so the stages are the same code everywhere.

:func:`~tavernkit.prompt.from_chat_state.main_api_of` is the one answer to "which API family
is this": SillyTavern's ``main_api`` (``openai`` = chat completion) of a resolved connection,
else of the state's profile, else of the settings.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tavernkit.models.state import ChatState
from tavernkit.prompt.assembled import AssembledChat, AssembledText
from tavernkit.prompt.card import CardFields, card_fields
from tavernkit.prompt.chat_completion import build_chat_completion
from tavernkit.prompt.extensions import worldinfo_outlets
from tavernkit.prompt.from_chat_state import (
    main_api_of,
    prompt_state_from_chat_state,
    state_substitute,
)
from tavernkit.prompt.macros import MacroSubstitute
from tavernkit.prompt.state import ExtensionPrompt, PromptState
from tavernkit.prompt.text_completion import build_text_completion
from tavernkit.prompt.wi_scan import scan_world_info
from tavernkit.text.tokens import ByteEstimateTokenizer, Tokenizer, tokenizer_for_model
from tavernkit.worldinfo.result import WorldInfoResult
from tavernkit.worldinfo.scan import scan as wi_scan

if TYPE_CHECKING:
    from tavernkit.text.render import PromptRenderer

__all__ = [
    "PreparedPrompt",
    "PromptBuild",
    "PromptSession",
    "PromptTarget",
    "begin",
    "main_api_of",
    "prepare",
    "prompt_state",
]


@dataclass(frozen=True, slots=True)
class PromptTarget:
    """Who a prompt is built for. ``main_api`` ``None`` takes the state's family
    (:func:`~tavernkit.prompt.from_chat_state.main_api_of`); ``model`` ``None`` the profile's,
    then the preset's source model; ``source`` overrides the chat-completion source;
    ``tokenizer`` ``None`` counts with the model's tokenizer (chat) or SillyTavern's byte
    estimate (text, tokenizer "None")."""

    main_api: str | None = None
    model: str | None = None
    source: str | None = None
    tokenizer: Tokenizer | None = None

    @classmethod
    def for_connection(
        cls,
        family: str,
        api: str,
        *,
        model: str | None,
        source: str | None = None,
        tokenizer: Tokenizer | None = None,
    ) -> PromptTarget:
        """The target of a resolved connection (its family, API, model and source)."""
        return cls(main_api_of(family=family, api=api), model or None, source or None, tokenizer)


def prompt_state(
    state: ChatState,
    target: PromptTarget,
    *,
    extension_prompts: Mapping[str, ExtensionPrompt] | None = None,
) -> PromptState:
    """The prompt engine's view of ``state`` for ``target``."""
    built = prompt_state_from_chat_state(
        state, model=target.model, main_api=target.main_api, extension_prompts=extension_prompts
    )
    return built.replace(source=target.source) if target.source else built


def _default_tokenizer(prompt_state: PromptState, is_chat: bool) -> Tokenizer:
    if is_chat:
        return tokenizer_for_model(prompt_state.model)
    # Text completion with tokenizer NONE (SillyTavern's default): the byte estimate.
    if prompt_state.settings.tokenizer == 0:
        return ByteEstimateTokenizer()
    return tokenizer_for_model(prompt_state.model)


@dataclass(kw_only=True)
class PromptBuild:
    """One build's shared parts, whatever the state came from: the prompt state, the macro
    evaluator, the card fields (evaluated once, on first use, and shared by the scan and the
    builder, as SillyTavern's ``Generate`` evaluates them once), the tokenizer and the
    compatibility mode. The books the scan reads come from :meth:`scan_books` (a
    :class:`PromptSession`'s: its chat state's; a recorded generation's: the recording's)."""

    prompt_state: PromptState
    substitute: MacroSubstitute
    compat: str
    _tokenizer: Tokenizer | None = field(default=None, repr=False)
    _card: CardFields | None = field(default=None, repr=False)

    def scan_books(self) -> tuple[Sequence[Any], Any, str | None]:
        """The world-info scan's books (``(name, data, scope)`` tuples), its settings (anything
        ``ScanSettings.coerce`` reads) and the character's file name; none by default."""
        return (), {}, None

    @property
    def tokenizer(self) -> Tokenizer:
        # made on first use: a greeting's or a typed message's macros count nothing
        if self._tokenizer is None:
            self._tokenizer = _default_tokenizer(self.prompt_state, self.is_chat)
        return self._tokenizer

    @property
    def is_chat(self) -> bool:
        return self.prompt_state.settings.main_api == "openai"

    @property
    def card(self) -> CardFields:
        if self._card is None:
            self._card = card_fields(self.prompt_state, self.substitute)
        return self._card

    def scan(
        self,
        kind: str = "normal",
        *,
        rng: Callable[[], float] | None = None,
        dry_run: bool = False,
        explain: bool = False,
        texts: Sequence[str] | None = None,
        count_tokens: Callable[[str], int] | None = None,
        force_activate: Iterable[str] = (),
        scanner: Callable[..., Any] | None = None,
    ) -> WorldInfoResult | None:
        """The world-info scan over the build's books (``None`` when it has none); the
        result's ``timed_state`` is the chat's next ``timedWorldInfo``. ``texts`` replaces the
        chat as scanned (newest first); ``count_tokens`` the build's tokenizer. ``explain``
        records why each entry fired or not (off on the hot path). ``force_activate``:
        ``"world.uid"`` keys activated as if a key matched (vectorized entries). ``scanner``
        replaces ``worldinfo.scan`` (a benchmark's or a test's)."""
        books, settings, character_filename = self.scan_books()
        if not books:
            return None
        if scanner is None and explain:
            scanner = functools.partial(wi_scan, explain=True)
        return scan_world_info(
            self.prompt_state,
            books,
            settings,
            self.substitute,
            kind=kind,
            is_chat=self.is_chat,
            count_tokens=count_tokens if count_tokens is not None else self.tokenizer.count,
            character_filename=character_filename,
            rng=rng,
            compat=self.compat,
            dry_run=dry_run,
            card=self.card,
            scan=scanner,
            texts=texts,
            force_activate=force_activate,
        )

    def build(
        self,
        kind: str,
        wi: WorldInfoResult | None,
        *,
        quiet_prompt: str = "",
        dry_run: bool = False,
        engine: Callable[..., Any] | None = None,
        **builder_options: Any,
    ) -> AssembledChat | AssembledText:
        """The chat- or text-completion builder over ``wi`` (its outlets bound to the
        build's macros). ``builder_options`` go to the builder (``tool_tokens=``...);
        ``engine`` replaces the builder the family calls for (a benchmark's or a test's)."""
        if wi is not None:
            self.substitute.env.outlets = worldinfo_outlets(wi)
        shared: dict[str, Any] = {
            "kind": kind,
            "tokenizer": self.tokenizer,
            "compat": self.compat,
            "substitute": self.substitute,
            "quiet_prompt": quiet_prompt,
            "card": self.card,
        }
        if engine is not None:
            built: AssembledChat | AssembledText = engine(
                self.prompt_state, wi, **shared, **builder_options
            )
            return built
        if self.is_chat:
            return build_chat_completion(
                self.prompt_state, wi, dry_run=dry_run, **shared, **builder_options
            )
        return build_text_completion(self.prompt_state, wi, **shared, **builder_options)

    def run(
        self,
        generation_type: str = "normal",
        *,
        rng: Callable[[], float] | None = None,
        wi: WorldInfoResult | None = None,
        quiet_prompt: str = "",
        dry_run: bool = False,
        explain: bool = False,
        scanner: Callable[..., Any] | None = None,
        engine: Callable[..., Any] | None = None,
        **builder_options: Any,
    ) -> tuple[AssembledChat | AssembledText, WorldInfoResult | None]:
        """The scan (unless ``wi`` is given), then the build over it: :func:`prepare`'s
        stages, which a recorded generation's replay runs too."""
        if wi is None:
            wi = self.scan(
                generation_type, rng=rng, dry_run=dry_run, explain=explain, scanner=scanner
            )
        prompt = self.build(
            generation_type,
            wi,
            quiet_prompt=quiet_prompt,
            dry_run=dry_run,
            engine=engine,
            **builder_options,
        )
        return prompt, wi


@dataclass(kw_only=True)
class PromptSession(PromptBuild):
    """A build of the store's state (:func:`begin`): the scan reads the state's books, its
    world-info settings and the character's file name."""

    state: ChatState

    def scan_books(self) -> tuple[Sequence[Any], Any, str | None]:
        books = [(b.name, b.book, b.scope) for b in self.state.books]
        return books, self.state.settings.world_info, self.state.character_filename


def begin(
    state: ChatState,
    target: PromptTarget | None = None,
    *,
    compat: str | None = None,
    variables: Any = None,
    renderer: PromptRenderer | None = None,
    extension_prompts: Mapping[str, ExtensionPrompt] | None = None,
) -> PromptSession:
    """Open one build of ``state`` for ``target`` (the state's own family by default).

    ``compat`` defaults to the state's setting. ``variables`` (any ``Variables``) is what
    ``{{setvar}}`` and friends change; by default copies of the chat's and the owner's, so a
    dry build changes nothing. ``renderer`` (``Tavern.prompt_renderer``) makes every macro go
    through the renderer service."""
    target = target if target is not None else PromptTarget()
    pstate = prompt_state(state, target, extension_prompts=extension_prompts)
    mode = compat or state.compat
    sub = state_substitute(state, pstate, compat=mode, variables=variables, renderer=renderer)
    return PromptSession(
        state=state, prompt_state=pstate, substitute=sub, compat=mode, _tokenizer=target.tokenizer
    )


@dataclass(frozen=True, slots=True)
class PreparedPrompt:
    """What :func:`prepare` made: the built prompt, the world-info result it was built over
    (``None`` without books) and the session, for callers that read its parts."""

    prompt: AssembledChat | AssembledText
    wi: WorldInfoResult | None
    session: PromptSession


def prepare(
    state: ChatState,
    target: PromptTarget | None = None,
    generation_type: str = "normal",
    *,
    compat: str | None = None,
    variables: Any = None,
    renderer: PromptRenderer | None = None,
    extension_prompts: Mapping[str, ExtensionPrompt] | None = None,
    **run_options: Any,
) -> PreparedPrompt:
    """Build the prompt of one generation from the store's state, SillyTavern's way.

    ``generation_type`` (``normal``, ``swipe``, ``regenerate``, ``continue``, ``impersonate``,
    ``quiet``) reaches the world-info scan (entry triggers) and the builder (preset triggers,
    continue prefill, impersonation prompt). The scan runs unless ``wi`` is given (a scan to
    reuse; its timed state is then the caller's to save); ``explain`` makes it record why each
    entry fired. The target's family decides the builder: ``openai`` builds a
    :class:`~tavernkit.prompt.assembled.AssembledChat`, anything else a
    :class:`~tavernkit.prompt.assembled.AssembledText`. A card's macros are evaluated once and
    shared by the scan and the builder: a ``{{random}}`` in the description is rolled once and
    an ``{{incvar}}`` moves once per build. ``compat`` to ``extension_prompts`` open the build
    (:func:`begin`); the other keywords (``rng``, ``wi``, ``quiet_prompt``, ``dry_run``,
    ``explain``, the builder's options) run it (:meth:`PromptSession.run`).
    """
    session = begin(
        state,
        target,
        compat=compat,
        variables=variables,
        renderer=renderer,
        extension_prompts=extension_prompts,
    )
    prompt, wi = session.run(generation_type, **run_options)
    return PreparedPrompt(prompt, wi, session)
