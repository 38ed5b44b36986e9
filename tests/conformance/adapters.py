"""Thin adapters between the golden cases and tavernkit's engines.

Each adapter turns one case (the README schema of the conformance folder) into one call of an
engine and returns a small outcome object that the test compares with the recording. They are
the only place that knows both the case schema and the engine's API, so the tests never change
when an engine's signature does.

Life cycle of an adapter:

1. The engine does not exist: ``EngineRef.load()`` raises ``EngineMissing`` and the test
   skips with that reason.
2. The engine's entry point exists but the adapter does not call it yet: the adapter raises
   ``AdapterNotWired``, an ``AssertionError``. The skips disappear the moment an engine lands,
   and the failures point here. The engineer who lands an engine fills in the marked function
   (``# FILL IN``) and nothing else.
3. Wired: the test compares outputs exactly.

Every call runs in ``compat="st-1.18"``: the goldens record SillyTavern's behaviour, quirks
included (README "SillyTavern behaviour worth knowing").
"""

from __future__ import annotations

import copy
import importlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

COMPAT = "st-1.18"


class EngineMissing(Exception):
    """The engine a case needs is not in the package yet: the test skips."""


class AdapterNotWired(AssertionError):
    """The engine exists but this adapter does not call it yet: the test fails."""


@dataclass(frozen=True)
class EngineRef:
    """Where an engine's entry point will live (the names ARCHITECTURE.md gives them)."""

    module: str
    attribute: str
    reason: str

    def load(self) -> Any:
        try:
            module = importlib.import_module(self.module)
        except ModuleNotFoundError as exc:
            # Only "the engine module is absent" is a skip; an import error *inside* an
            # existing engine is a bug and must fail.
            if exc.name is not None and (
                self.module == exc.name or self.module.startswith(exc.name + ".")
            ):
                raise EngineMissing(self.reason) from exc
            raise
        target = getattr(module, self.attribute, None)
        if target is None:
            raise EngineMissing(f"{self.reason} ({self.module}.{self.attribute} is missing)")
        return target

    def not_wired(self, adapter: str) -> AdapterNotWired:
        return AdapterNotWired(
            f"{self.module}.{self.attribute} exists, but tests/conformance/adapters.py:"
            f"{adapter} does not call it yet; fill in the call there"
        )


MACRO_ENGINE = EngineRef(
    "tavernkit.text.macros", "substitute_macros", "macro engine not implemented yet (issue #3)"
)
WORLDINFO_ENGINE = EngineRef(
    "tavernkit.worldinfo", "scan", "world-info engine not implemented yet (later issue)"
)
CHAT_PROMPT_ENGINE = EngineRef(
    "tavernkit.prompt",
    "build_chat_completion",
    "chat-completion prompt engine not implemented yet (later issue)",
)
TEXT_PROMPT_ENGINE = EngineRef(
    "tavernkit.prompt",
    "build_text_completion",
    "text-completion prompt engine not implemented yet (later issue)",
)
REGEX_ENGINE = EngineRef(
    "tavernkit.text.regex_scripts",
    "run_scripts",
    "regex scripts not implemented yet (issue 35)",
)
REQUEST_BODY_BUILDER = EngineRef(
    "tavernkit.providers.adapters",
    "build_request_body",
    "provider wire adapters not implemented yet (later issue)",
)


class ReplayRandom:
    """An RNG that returns the recorded ``Math.random()`` values of one turn, in order.

    README "Randomness": world info draws only for probability rolls and group weight rolls,
    and a re-implementation replays ``random_consumed`` in call order. Asking for more values
    than were recorded means our engine rolls where SillyTavern did not: that fails at once.
    """

    def __init__(self, values: Sequence[float]) -> None:
        self._values = list(values)
        self.used = 0

    def random(self) -> float:
        if self.used >= len(self._values):
            raise AssertionError(
                f"the engine drew random value #{self.used + 1}, but SillyTavern drew only "
                f"{len(self._values)} in this turn"
            )
        value = self._values[self.used]
        self.used += 1
        return value

    __call__ = random  # the world-info engine takes the RNG as a plain callable

    @property
    def remaining(self) -> int:
        return len(self._values) - self.used


# --- macros ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class MacroOutcome:
    """What one evaluation produced: the text and both variable scopes afterwards.

    Variable values keep JSON types: numbers after add/inc, strings otherwise (README §1).
    """

    output: str
    local_vars: dict[str, Any]
    global_vars: dict[str, Any]


def evaluate_macros(
    text: str,
    *,
    names: Mapping[str, str],
    local_vars: dict[str, Any],
    global_vars: dict[str, Any],
    chat_metadata: Mapping[str, Any],
    env_extra: Mapping[str, Any],
    now: datetime | None,
    tz_offset_min: int,
) -> MacroOutcome:
    """Evaluate ``text`` the way SillyTavern's ``substituteParams`` does, in compat st-1.18.

    The recorded call is ``MacroEngine.evaluate(text, MacroEnvBuilder.buildFromRawEnv(
    {content: text, name1Override: 'User', name2Override: 'Character', ...env_extra}))`` with:

    - ``names``: ``env_seen.names`` ({user, char, group, groupNotMuted, notChar}); no
      character selected, so card fields ({{description}}, ...) are empty and the model is ''.
    - ``local_vars`` / ``global_vars``: the chat's and the global variable scope before the
      call (mutated copies are fine: the caller passes deep copies). Preset values are strings.
    - ``chat_metadata``: e.g. ``{"chat_id_hash": 123456}``, which seeds ``{{pick}}``; empty
      means no chat is open (``{{pick}}`` then behaves as ``e2e_059_*`` record).
    - ``env_extra``: extra env fields, e.g. ``{"original": "ORIG"}`` for ``{{original}}``.
    - ``now`` / ``tz_offset_min``: the pinned clock for time macros (the page time recorded
      before the call, and JS ``getTimezoneOffset()``); None when the case is not
      time-dependent (the engine may use any clock then; such outputs are not compared).
    """
    engine = MACRO_ENGINE.load()
    from datetime import timedelta, timezone

    from tavernkit.text.macros import MacroEnv
    from tavernkit.text.variables import InMemoryVariables

    variables = InMemoryVariables(local_vars, global_vars)
    env = MacroEnv(
        user=names.get("user", "User"),
        char=names.get("char", "Character"),
        group=names.get("group"),
        group_not_muted=names.get("groupNotMuted"),
        not_char=names.get("notChar"),
        original=env_extra.get("original"),
        chat_id_hash=chat_metadata.get("chat_id_hash"),
        pick_reroll_seed=chat_metadata.get("pick_reroll_seed"),
        variables=variables,
        tz=timezone(timedelta(minutes=-tz_offset_min)),
        compat=COMPAT,
    )
    if now is not None:
        pinned = now
        env.clock = lambda: pinned
    output = engine(text, env, compat=COMPAT)
    return MacroOutcome(output, variables.local_vars, variables.global_vars)


def run_macro_case(case: Mapping[str, Any]) -> MacroOutcome:
    """One ``macros.jsonl`` line: evaluate ``input`` with the variables it gives."""
    env_seen = case.get("env_seen") or {}
    names = env_seen.get("names") or {"user": "User", "char": "Character"}
    now = None
    if case.get("time_dependent") and case.get("page_time_before"):
        now = datetime.fromisoformat(str(case["page_time_before"]).replace("Z", "+00:00"))
    return evaluate_macros(
        case["input"],
        names=names,
        local_vars=copy.deepcopy(dict(case["local_vars_before"])),
        global_vars=copy.deepcopy(dict(case["global_vars_before"])),
        chat_metadata=dict(case.get("chat_metadata_set") or {}),
        env_extra=dict(case.get("env_extra") or {}),
        now=now,
        tz_offset_min=int(case.get("page_tz_offset_min") or 0),
    )


def run_perf_macro_set(macro_set: Mapping[str, Any]) -> tuple[str | dict[str, str], MacroOutcome]:
    """One benchmark set of ``macro_inputs.json``, as one timed run does it.

    Per run (``per_run_reset``): variables reset to the set's ``*_vars_before`` and
    ``chat_metadata_set`` applied; then each string is evaluated in order with its own env,
    the variables carrying over between strings. A ``list`` set yields ``{item id: output}``
    (the shape of ``results.json → macro_engine.outputs``), a ``single`` set one string.
    """
    local_vars = copy.deepcopy(dict(macro_set["local_vars_before"]))
    global_vars = copy.deepcopy(dict(macro_set["global_vars_before"]))
    chat_metadata = dict(macro_set.get("chat_metadata_set") or {})
    names = {"user": "User", "char": "Character"}
    texts: list[tuple[str | None, str]] = (
        [(item["id"], item["text"]) for item in macro_set["items"]]
        if macro_set["kind"] == "list"
        else [(None, macro_set["text"])]
    )
    outputs: dict[str, str] = {}
    outcome = MacroOutcome("", local_vars, global_vars)
    for item_id, text in texts:
        outcome = evaluate_macros(
            text,
            names=names,
            local_vars=outcome.local_vars,
            global_vars=outcome.global_vars,
            chat_metadata=chat_metadata,
            env_extra={},
            now=None,
            tz_offset_min=0,
        )
        if item_id is not None:
            outputs[item_id] = outcome.output
    return (outputs if macro_set["kind"] == "list" else outcome.output), outcome


# --- world info ------------------------------------------------------------------------------


@dataclass(frozen=True)
class WorldInfoTurn:
    """One ``checkWorldInfo`` turn: the result object, the timed state, the rolls drawn."""

    result: dict[str, Any]
    timed_state_after: dict[str, Any]
    random_used: int
    scan_chat_length: int | None = None  # the world-info chat length, when the engine says


class WorldInfoSession(Protocol):
    """The persistent state one scenario runs on (chat, timed effects, variables)."""

    def run_turn(self, turn: Mapping[str, Any], rng: ReplayRandom) -> WorldInfoTurn: ...


def start_worldinfo_session(scenario: Mapping[str, Any]) -> WorldInfoSession:
    """Load a scenario's books, character, persona, chat and settings into one state.

    Fields (README §2):

    - ``settings`` (the ``world_info_*`` values), ``effective_settings`` (what ST held; only
      ``budget_tiktoken`` needs ``oai_settings``: gpt-4o token counts), ``tokenizer``
      (most scenarios: ``ceil(utf8_bytes / 3.35)``), ``max_context`` (the budget basis:
      ``round(world_info_budget * max_context / 100) or 1``, capped by the budget cap);
    - ``books``: ``[{name, scope, data}]``, ``data`` being ST world-info JSON; scope global,
      character, character_extra, chat or persona. Load entries keeping their key order:
      timed-effect records are keyed by a hash of each entry's JSON in the file's order;
    - ``character`` (``avatar_base`` is what ``characterFilter.names`` compares, ``tag_ids``
      feed the tag filter), ``persona``, ``chat`` (oldest first), ``inject_scan`` (extension
      prompts scanned like chat text);
    - start from an empty timed state ``{"sticky": {}, "cooldown": {}}`` and no variables.

    Each turn of the returned session (``run_turn(turn, rng)``) then: truncates the chat to
    ``set_chat_length`` when given, appends ``append``, builds the scan list as Generate does
    (drop ``is_system``, macro-substitute message 0, ``"name: mes"`` when include_names is
    on, newest first; ``wi_chat_length`` is its length), scans for real (not a dry run) with
    ``trigger`` and ``global_scan_data``, drawing every random number from ``rng``, and returns
    the ``result`` object (its eight keys, ``activated`` as ``"<world>.<uid>"`` in activation
    order) and the timed state afterwards.

    Macros in entries, keys and message 0 go through the real macro engine (SillyTavern's
    ``substituteParams`` with ``{{char}}`` = the card name and ``{{user}}`` = the persona
    name), so these cases also need the macro engine.
    """
    WORLDINFO_ENGINE.load()
    MACRO_ENGINE.load()
    from tavernkit.worldinfo.replay import ScenarioReplay

    character = scenario.get("character") or {}
    persona = scenario.get("persona") or {}
    names = {"char": str(character.get("name") or ""), "user": str(persona.get("name") or "User")}
    local_vars: dict[str, Any] = {}
    global_vars: dict[str, Any] = {}

    def substitute(text: str) -> str:
        return evaluate_macros(
            text,
            names=names,
            local_vars=local_vars,
            global_vars=global_vars,
            chat_metadata={},
            env_extra={},
            now=None,
            tz_offset_min=0,
        ).output

    options: dict[str, Any] = {"substitute": substitute, "compat": COMPAT}
    if (scenario.get("tokenizer") or {}).get("main_api") == "openai":
        # SillyTavern counts WI text as one system chat message (countTokensOpenAIAsync with
        # full=true): the plain count plus the message overhead.
        from tavernkit.worldinfo.tokens import chat_message_counter

        options["count_tokens"] = chat_message_counter(_gpt4o_token_counter())
    replay = ScenarioReplay(scenario, **options)

    class Session:
        def run_turn(self, turn: Mapping[str, Any], rng: ReplayRandom) -> WorldInfoTurn:
            outcome = replay.run_turn(turn, rng)
            return WorldInfoTurn(
                result=outcome.st_result,
                timed_state_after=outcome.timed_state_after,
                random_used=rng.used,
                scan_chat_length=outcome.scan_chat_length,
            )

    return Session()


def _gpt4o_token_counter() -> Any:
    """gpt-4o (o200k) token counts for ``budget_tiktoken``, from an offline encoder."""
    for module_name in ("quicktok", "tiktoken"):
        try:
            encoding = importlib.import_module(module_name).get_encoding("o200k_base")
        except Exception:  # not installed, or its BPE file cannot be fetched offline
            continue
        return lambda text: len(encoding.encode(text, disallowed_special=())) if text else 0
    raise EngineMissing("this scenario needs an offline gpt-4o (o200k) tokenizer")


def run_worldinfo_scenario(scenario: Mapping[str, Any]) -> list[WorldInfoTurn]:
    """Every turn of one scenario, in order, on one persistent state."""
    session = start_worldinfo_session(scenario)
    return [
        session.run_turn(turn, ReplayRandom(turn["random_consumed"])) for turn in scenario["turns"]
    ]


# --- prompts ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class PromptOutcome:
    """The prompt engine's part of a request (README "Notes for implementers").

    Chat completion: ``messages`` (``[{role, content, ...}]`` as sent). Text completion and
    KoboldAI classic: ``prompt``; text completion also ``stop`` (the request's
    ``stop``/``stopping_strings``). Sampler fields are the provider layer's (``request_body``).
    """

    messages: list[dict[str, Any]] | None = None
    prompt: str | None = None
    stop: list[str] | None = field(default=None)


def build_prompt(case: Mapping[str, Any]) -> PromptOutcome:
    """Build one case's prompt from ``inputs`` and ``effective_settings``.

    ``inputs`` (README §3): ``card`` (the character ST loaded, V2 ``data``), ``persona``
    ``{name, description, position, depth, role}``, ``preset`` (chat completion: the full
    preset JSON), ``instruct``/``context``/``sysprompt`` (text completion: the templates ST
    actually used), ``books`` plus ``character_world_book`` and ``wi_settings`` (overrides on
    the world-info defaults), ``author_note`` + ``author_note_chat_metadata``, ``chat`` (ST's
    chat array right before Generate), ``generate`` ``{type, quiet_prompt?}`` and ``settings``
    (``main_api``, ``max_context``, ``amount_gen``, tokenizer, ...). ``effective_settings``
    holds everything else ST had live (``power_user``, ``oai_settings``, ``world_info``...);
    for chat completion the context size is ``oai_settings.openai_max_context``.
    Chat completion counts tokens with gpt-4o's tokenizer; text completion with
    ``ceil(utf8_bytes / 3.35)`` (tokenizer NONE).
    """
    ref = CHAT_PROMPT_ENGINE if case["api"] == "cc" else TEXT_PROMPT_ENGINE
    engine = ref.load()
    from tavernkit.prompt.st_replay import replay_generation

    generate = case["inputs"].get("generate") or {}
    result: Any = replay_generation(
        case["inputs"],
        case.get("effective_settings") or {},
        kind=str(generate.get("type") or "normal"),
        quiet_prompt=str(generate.get("quiet_prompt") or ""),
        compat=COMPAT,
        engine=engine,
        scan=WORLDINFO_ENGINE.load() if _has_books(case["inputs"]) else None,
    )
    if case["api"] == "cc":
        return PromptOutcome(messages=result.messages)
    return PromptOutcome(prompt=result.prompt, stop=list(result.stop))


def _has_books(inputs: Mapping[str, Any]) -> bool:
    book = inputs.get("character_world_book")
    return bool(inputs.get("books")) or (isinstance(book, Mapping) and bool(book.get("data")))


def build_request_body(case: Mapping[str, Any]) -> dict[str, Any]:
    """The whole JSON body the backend would receive (``request_body``), samplers included.

    ``request_path`` tells the wire API: ``/v1/chat/completions`` (OpenAI-compatible chat,
    after SillyTavern's server dropped front-end-only keys), ``/v1/completions``
    (text-generation-webui type koboldcpp) or ``/api/v1/generate`` (KoboldAI classic).
    """
    engine = REQUEST_BODY_BUILDER.load()
    ref = CHAT_PROMPT_ENGINE if case["api"] == "cc" else TEXT_PROMPT_ENGINE
    prompt_engine = ref.load()
    from tavernkit.prompt.convert import to_provider_request
    from tavernkit.prompt.st_replay import replay_generation

    # Our prompt (not the recorded messages), then our adapter with ST's live samplers.
    generate = case["inputs"].get("generate") or {}
    built: Any = replay_generation(
        case["inputs"],
        case.get("effective_settings") or {},
        kind=str(generate.get("type") or "normal"),
        quiet_prompt=str(generate.get("quiet_prompt") or ""),
        compat=COMPAT,
        engine=prompt_engine,
        scan=WORLDINFO_ENGINE.load() if _has_books(case["inputs"]) else None,
    )
    body: dict[str, Any] = engine(case, to_provider_request(built))
    return body


def build_perf_prompt(inputs: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The chat-completion ``messages`` for ``prompt_build_inputs.json`` (perf benchmark 2).

    Same recipe as a chat-completion case: ``card``, ``persona``, ``preset`` (Default plus 28
    custom prompts), ``chat`` (1,000 messages), ``lorebook`` (500 entries, selected as a global
    book) with ``wi_settings``, ``settings`` (max context 32768, 300 response tokens, gpt-4o
    token counts), generation type ``normal``.
    """
    engine = CHAT_PROMPT_ENGINE.load()
    from tavernkit.prompt.st_replay import perf_case_inputs, replay_generation

    case_inputs = perf_case_inputs(inputs)
    result: Any = replay_generation(
        case_inputs,
        {},
        kind="normal",
        compat=COMPAT,
        engine=engine,
        scan=WORLDINFO_ENGINE.load() if _has_books(case_inputs) else None,
    )
    return list(result.messages)


# --- groups ----------------------------------------------------------------------------------

GROUP_ENGINE = EngineRef(
    "tavernkit.groups.st_replay", "replay_group_turn", "group chats not implemented yet (issue 21)"
)


@dataclass(frozen=True)
class GroupRequestOutcome:
    """One request of a group turn: the drafted member's name and the prompt part."""

    drafted: str
    prompt: PromptOutcome


def build_group_requests(case: Mapping[str, Any]) -> list[GroupRequestOutcome]:
    """Every request of one group turn (README §5), in order.

    The speakers come from the group wrapper's selection with mulberry32 seeded by
    ``random_seed`` (README §5 "Randomness"); each later speaker sees the earlier replies,
    whose texts are the ones the recording's ``chat_after`` gained.
    """
    engine = GROUP_ENGINE.load()
    from tavernkit.groups.st_replay import recorded_replies

    replies = recorded_replies(case)
    ref = CHAT_PROMPT_ENGINE if case["api"] == "cc" else TEXT_PROMPT_ENGINE
    prompt_engine = ref.load()
    turns = engine(
        case["inputs"],
        case.get("effective_settings") or {},
        seed=case.get("random_seed"),
        replies=lambda i, member: replies[i] if i < len(replies) else "",
        compat=COMPAT,
        engine=prompt_engine,
        scan=WORLDINFO_ENGINE.load() if case["inputs"].get("books") else None,
    )
    out = []
    for turn in turns:
        result = turn.prompt
        if case["api"] == "cc":
            outcome = PromptOutcome(messages=result.messages)
        else:
            outcome = PromptOutcome(prompt=result.prompt, stop=list(result.stop))
        out.append(GroupRequestOutcome(turn.member.name, outcome))
    return out
