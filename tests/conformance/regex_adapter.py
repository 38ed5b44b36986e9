"""Replays the Regex extension goldens (conformance README §7) through tavernkit.

- engine cases (``engine.jsonl``): each ``getRegexedString`` call through
  ``text.regex_scripts`` on the case's lists, allow lists and variables; the ``/regex``,
  ``/regex-state`` and ``/regex-toggle`` lines through the command hooks the STscript
  executor calls (a few lines of pipe handling here stand in for that executor: ``|``,
  ``name=value`` arguments, ``{{pipe}}``, ``/echo``);
- request and storage cases (``rx_req_*``, ``rx_store_*``): the chat as recorded, the user's
  text stored through the same step the chat service uses, the prompt built by the replay
  pipeline (``prompt.st_replay``) with the scripts in the prompt state, the mock's reply
  stored the same way, and the display text of each message;
- export/card cases: the editor's script shape, the export file, and a card's scoped scripts
  imported through the card format, off until allowed.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from html import unescape
from pathlib import Path
from typing import Any

import pytest

from tavernkit.chat.regex_text import RegexText, display_depths
from tavernkit.errors import FormatError
from tavernkit.formats.cards import read_card
from tavernkit.models.chat import Message
from tavernkit.models.regex_script import (
    ALLOW_QUESTION,
    RegexScript,
    embedded_scripts,
    export_filename,
    export_text,
    parse_import,
    script_from_editor,
)
from tavernkit.prompt.core_chat import core_chat
from tavernkit.prompt.macros import macro_substitute
from tavernkit.prompt.regex import chat_texts, regex_macros
from tavernkit.prompt.st_replay import prepare_replay
from tavernkit.text.macros import MacroEnv, substitute_macros
from tavernkit.text.regex_scripts import (
    CommandResult,
    RegexMacros,
    RegexScriptError,
    ScriptLists,
    regex_command,
    regex_state,
    regex_toggle,
    replace_script,
    sanitize_regex_macro,
)
from tavernkit.text.variables import InMemoryVariables

from . import cases, compare
from .adapters import COMPAT, PromptOutcome


def scripts_of(raw: Sequence[Mapping[str, Any]]) -> list[RegexScript]:
    return [RegexScript.model_validate(dict(s)) for s in raw]


def engine_macros(
    env: MacroEnv,
    dynamic: Mapping[str, str] | None = None,
) -> RegexMacros:
    """SillyTavern's ``substituteParams`` (the new macro engine) over ``env``."""

    def with_env(e: MacroEnv) -> Callable[[str], str]:
        def run(text: str) -> str:
            if dynamic:
                e2 = dataclasses.replace(e, dynamic_macros={**(e.dynamic_macros or {}), **dynamic})
                return substitute_macros(text, e2, compat=COMPAT)
            return substitute_macros(text, e, compat=COMPAT)

        return run

    escaped_env = dataclasses.replace(env, post_process=sanitize_regex_macro)
    return RegexMacros(
        plain=with_env(env),
        escaped=with_env(escaped_env),
        for_character=lambda text, name: with_env(dataclasses.replace(env, char=name))(text),
    )


@dataclass
class CallOutcome:
    output: Any
    error: dict[str, Any] | None
    toasts: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class EngineOutcome:
    calls: list[CallOutcome]
    local_vars: dict[str, Any]
    global_vars: dict[str, Any]
    global_scripts: list[dict[str, Any]]


def _lists(case: Mapping[str, Any], global_scripts: list[RegexScript]) -> ScriptLists:
    scripts = case["scripts"]
    state = case.get("state") or {}
    # the preset list is the current API's preset: the cases put theirs into the chat
    # completion preset, so it counts only when the current API is chat completion
    preset = scripts_of(scripts.get("preset") or []) if state.get("preset_api") == "openai" else []
    return ScriptLists(
        global_scripts=global_scripts,
        preset_scripts=preset,
        scoped_scripts=scripts_of(scripts.get("scoped") or []),
        preset_allowed=bool(case.get("allow_preset")),
        scoped_allowed=bool(case.get("allow_scoped")),
        enabled=not case.get("regex_extension_disabled"),
    )


def run_engine_case(case: Mapping[str, Any]) -> EngineOutcome:
    env_in = case.get("env") or {}
    variables = InMemoryVariables(
        copy.deepcopy(dict(case["local_vars_before"])),
        copy.deepcopy(dict(case["global_vars_before"])),
    )
    env = MacroEnv(
        user=str(env_in.get("name1") or "User"),
        char=str(env_in.get("name2") or ""),
        variables=variables,
        compat=COMPAT,
    )
    global_scripts = scripts_of(case["scripts"].get("global") or [])
    outcomes: list[CallOutcome] = []
    for call in case["calls"]:
        lists = _lists(case, global_scripts)
        if call.get("via") == "slash":
            outcome, changed = _run_slash(str(call["script"]), lists, env)
            if changed is not None and changed.scope == "global":
                global_scripts = list(replace_script(lists, changed).global_scripts)
            outcomes.append(outcome)
            continue
        params = call.get("params") or {}
        placement = None if call.get("placement_absent") else call.get("placement")
        try:
            output = lists.active().run(
                call.get("input"),
                placement,
                engine_macros(env),
                markdown=bool(params.get("isMarkdown")),
                prompt=bool(params.get("isPrompt")),
                edit=bool(params.get("isEdit")),
                depth=params.get("depth"),
                character_override=params.get("characterOverride"),
                strict=True,
            )
        except RegexScriptError as exc:
            outcomes.append(CallOutcome(None, {"name": "TypeError", "message": str(exc)}))
            continue
        outcomes.append(CallOutcome(output, None))
    return EngineOutcome(
        outcomes,
        variables.local_vars,
        variables.global_vars,
        [s.to_wire() for s in global_scripts],
    )


# --- a stand-in for the STscript executor (test only) ----------------------------------------

_NAMED = re.compile(r"^(\w+)=(\S*)$")


def _split_pipes(script: str) -> list[str]:
    parts, depth, current = [], 0, []
    i = 0
    while i < len(script):
        if script.startswith("{{", i):
            depth += 1
        elif script.startswith("}}", i) and depth:
            depth -= 1
        if script[i] == "|" and not depth:
            parts.append("".join(current))
            current = []
        else:
            current.append(script[i])
        i += 1
    parts.append("".join(current))
    return [p.strip() for p in parts if p.strip()]


def _run_slash(
    script: str, lists: ScriptLists, env: MacroEnv
) -> tuple[CallOutcome, CommandResult | None]:
    pipe = ""
    toasts: list[dict[str, Any]] = []
    changed: CommandResult | None = None
    for command in _split_pipes(script):
        name, _, rest = command[1:].partition(" ")
        words = rest.split(" ") if rest else []
        named: dict[str, str] = {}
        while words and _NAMED.match(words[0]):
            key, value = words.pop(0).split("=", 1)
            named[key] = value
        unnamed = " ".join(words).strip()
        macros = engine_macros(env, {"pipe": pipe})
        unnamed = macros.plain(unnamed) if unnamed else pipe
        if name == "regex":
            result = regex_command(lists, named.get("name"), unnamed, engine_macros(env))
        elif name == "regex-state":
            result = regex_state(lists, unnamed)
        elif name == "regex-toggle":
            quiet = named.get("quiet", "false").lower() in ("true", "on", "1")
            result = regex_toggle(lists, unnamed, state=named.get("state"), quiet=quiet)
            if result.changed is not None:
                changed = result
                lists = replace_script(lists, result)
        elif name == "echo":
            result = CommandResult(unnamed)
            toasts.append(
                {"type": "info", "message": unnamed, "title": None, "options": {"escapeHtml": True}}
            )
        else:
            raise AssertionError(f"the regex cases' stand-in executor has no /{name}")
        toasts.extend(
            {"type": n.kind, "message": n.message, "title": None, "options": None}
            for n in result.notices
        )
        pipe = result.output
    return CallOutcome(pipe, None, toasts), changed


def export_shape(script: RegexScript) -> tuple[str, str, dict[str, Any]]:
    text = export_text(script)
    return export_filename(script), text, json.loads(text)


# --- request and storage cases ---------------------------------------------------------------

#: The recorder's card (README §7: "one V2 JSON card Aria"). The case files do not carry it;
#: these are its fields as every recorded request shows them.
ARIA_CARD: dict[str, Any] = {
    "spec": "chara_card_v2",
    "spec_version": "2.0",
    "data": {
        "name": "Aria",
        "description": (
            "{{char}} is a wandering bard who collects old songs. She travels with {{user}}."
        ),
        "personality": "curious, warm, a little vain",
        "scenario": "{{char}} and {{user}} rest at a roadside inn.",
        "first_mes": "Hello, traveler! I am {{char}}.",
        "mes_example": (
            "<START>\n{{user}}: Sing something.\n{{char}}: *clears her throat* La la la!"
        ),
        "creator_notes": "",
        "system_prompt": "",
        "post_history_instructions": "",
        "alternate_greetings": [],
        "tags": [],
        "creator": "",
        "character_version": "",
        "extensions": {},
    },
}


def _data_file(*parts: str) -> dict[str, Any]:
    path = cases.configured_root().path / "data" / "st-1.18-default" / Path(*parts)
    if not path.is_file():
        pytest.skip(f"SillyTavern default data not found at {path}")
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def _session_inputs(
    data: Mapping[str, Any], chat: list[dict[str, Any]]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """A prompt case's ``inputs`` and ``effective_settings`` for the recorder's session."""
    inputs = data["inputs"]
    effective = data["effective"]
    reasoning = dict(data.get("reasoning_settings") or {})
    book = inputs.get("book")
    case_inputs: dict[str, Any] = {
        "card": ARIA_CARD,
        "card_avatar": effective.get("character_avatar") or "Aria.png",
        "persona": None,
        "books": [book] if book else [],
        "chat": chat,
    }
    power: dict[str, Any] = {"reasoning": reasoning}
    if data["api"] == "cc":
        preset = _data_file("presets", "openai", "Default.json")
        preset.update(
            {"chat_completion_source": "custom", "custom_model": "gpt-4o", "stream_openai": False}
        )
        case_inputs["preset"] = preset
        case_inputs["settings"] = {"main_api": "openai", "cc_custom_model": "gpt-4o"}
    else:
        tc = inputs.get("tc") or {}
        instruct = _data_file("presets", "instruct", f"{tc.get('instruct', 'ChatML')}.json")
        instruct["enabled"] = bool(tc.get("instruct_on", True))
        sysprompt = _data_file(
            "presets", "sysprompt", f"{tc.get('sysprompt', 'Neutral - Chat')}.json"
        )
        sysprompt["enabled"] = bool(tc.get("sysprompt_on", True))
        case_inputs["instruct"] = instruct
        case_inputs["context"] = _data_file(
            "presets", "context", f"{tc.get('context', 'ChatML')}.json"
        )
        case_inputs["sysprompt"] = sysprompt
        case_inputs["settings"] = {
            "main_api": "textgenerationwebui",
            "max_context": 4096,
            "amount_gen": 200,
        }
    live = {
        "name1": effective.get("name1") or "User",
        "power_user": power,
        "chat_metadata": {"variables": copy.deepcopy(dict(inputs.get("local_vars") or {}))},
    }
    return case_inputs, live


def _generation_lists(data: Mapping[str, Any]) -> ScriptLists:
    scripts = data["inputs"]["scripts"]
    # the recorder allowed the preset and the character in these sessions
    return ScriptLists(
        global_scripts=scripts_of(scripts.get("global") or []),
        preset_scripts=scripts_of(scripts.get("preset") or []),
        scoped_scripts=scripts_of(scripts.get("scoped") or []),
        preset_allowed=True,
        scoped_allowed=True,
    )


@dataclass
class GenerationRun:
    prompt: Any  # PromptOutcome of the first request, or None
    chat_after: list[Message]
    textarea: str
    display: list[tuple[str, str | None]]  # per message: shown text, shown reasoning


def _message(
    name: str, text: str, *, is_user: bool, extra: Mapping[str, Any] | None = None
) -> Message:
    return Message.model_validate(
        {
            "name": name,
            "is_user": is_user,
            "is_system": False,
            "mes": text,
            "extra": dict(extra or {}),
        }
    )


def run_generation_case(data: Mapping[str, Any]) -> GenerationRun:
    inputs = data["inputs"]
    lists = _generation_lists(data)
    chat = [dict(m) for m in inputs.get("chat") or []]
    case_inputs, live = _session_inputs(data, chat)
    replay = prepare_replay(case_inputs, live, compat=COMPAT)
    active = lists.active()
    state = dataclasses.replace(replay.state, regex=active)
    replay.state = state
    storage_sub = macro_substitute(state, compat=COMPAT)
    text = RegexText(active, regex_macros(storage_sub))
    messages = list(state.messages)
    user = str(data["effective"].get("name1") or "User")
    char = state.char
    textarea = ""

    user_input = inputs.get("user_input")
    if user_input:
        typed = storage_sub(text.user_input(str(user_input)))
        messages.append(_message(user, typed, is_user=True))
    slash = inputs.get("slash")
    if slash:
        messages.extend(_slash_messages(str(slash), text, storage_sub, user, char))

    prompt = None
    generate = inputs.get("generate")
    if generate:
        kind = str(generate)
        replay.state = dataclasses.replace(state, messages=messages)
        built: Any = replay.run(kind=kind)
        if data["api"] == "cc":
            prompt = PromptOutcome(messages=built.messages)
        else:
            prompt = PromptOutcome(prompt=built.prompt, stop=list(built.stop))
        reply = str(inputs.get("mock_reply") or "")
        reasoning = text.reasoning(str(inputs.get("mock_reasoning") or ""))
        if kind == "impersonate":
            textarea = text.impersonation(reply)
        elif kind == "continue":
            # SillyTavern continues from the message's *prompt* text (prompt-only scripts
            # applied: reference A7, "continue stores prompt-only edits")
            chat_view = core_chat(messages, kind)
            prefix = chat_texts(replay.state, chat_view, kind=kind, substitute=storage_sub).text(
                *chat_view[-1]
            )
            stored = text.reply(reply)
            joined = prefix + ("" if prefix.endswith(" ") else " ") + stored
            last = messages[-1].model_copy(deep=True)
            last.mes = joined
            messages[-1] = last
        else:
            messages.append(
                _message(char, text.reply(reply), is_user=False, extra={"reasoning": reasoning})
            )
    depths = display_depths(messages)
    display = [
        (
            text.display(m, depths[i]),
            text.display_reasoning(m.extra.reasoning) if m.extra.reasoning else None,
        )
        for i, m in enumerate(messages)
    ]
    return GenerationRun(prompt, messages, textarea, display)


def _slash_messages(
    script: str, text: RegexText, substitute: Callable[[str], str], user: str, char: str
) -> list[Message]:
    """``/send``, ``/sendas``, ``/sys`` and ``/comment`` as the chat stores them."""
    out: list[Message] = []
    for command in _split_pipes(script):
        name, _, rest = command[1:].partition(" ")
        words = rest.split(" ") if rest else []
        named: dict[str, str] = {}
        while words and _NAMED.match(words[0]):
            key, value = words.pop(0).split("=", 1)
            named[key] = value
        body = " ".join(words).strip()
        if name == "send":
            out.append(
                _message(named.get("name", user), substitute(text.user_input(body)), is_user=True)
            )
        elif name == "sendas":
            speaker = named.get("name", char)
            out.append(_message(speaker, substitute(text.send_as(body, speaker)), is_user=False))
        elif name in ("sys", "nar"):
            out.append(
                _message(
                    named.get("name", "System"), body, is_user=False, extra={"type": "narrator"}
                )
            )
        elif name == "comment":
            message = _message("Note", body, is_user=False, extra={"type": "comment"})
            message.is_system = True
            out.append(message)
        else:
            raise AssertionError(f"the regex cases' stand-in executor has no /{name}")
    return out


_TAG = re.compile(r"<[^>]*>")
_SPACE = re.compile(r"\s+")


def shown_html_text(html: str) -> str:
    """The words SillyTavern's rendered HTML shows (tags dropped, entities decoded)."""
    return _SPACE.sub(" ", unescape(_TAG.sub("", html))).strip()


def shown_text(text: str) -> str:
    """Our display text reduced the same way (tags and markdown emphasis dropped)."""
    return _SPACE.sub(
        " ", _TAG.sub("", text).replace("*", "").replace("_", "").replace("`", "")
    ).strip()


def check_generation_case(data: Mapping[str, Any]) -> None:
    run = run_generation_case(data)
    if data.get("request_body") is not None:
        assert run.prompt is not None, "SillyTavern sent a request, the replay built none"
        compare.check_prompt_outcome(
            run.prompt, {"api": data["api"], "request_body": data["request_body"]}
        )
    after = data["chat_after"]
    assert len(run.chat_after) == len(after), "messages after the action"
    for index, (ours, theirs) in enumerate(zip(run.chat_after, after, strict=True)):
        where = f"chat_after[{index}]"
        assert ours.name == theirs.get("name"), f"{where}.name"
        assert bool(ours.is_user) == bool(theirs.get("is_user")), f"{where}.is_user"
        compare.assert_json_equal(ours.text, theirs.get("mes"), f"{where}.mes")
        want_reasoning = (theirs.get("extra") or {}).get("reasoning")
        if want_reasoning:
            compare.assert_json_equal(ours.extra.reasoning, want_reasoning, f"{where}.reasoning")
    if "textarea_after" in data:
        assert run.textarea == (data.get("textarea_after") or ""), "the input box"
    for shown in data.get("display") or []:
        index = shown["index"]
        ours_text, ours_reasoning = run.display[index]
        where = f"display[{index}]"
        assert shown_text(ours_text) == shown_html_text(shown["messageFormatting"]), where
        if shown.get("reasoning_formatting"):
            assert ours_reasoning is not None, f"{where}: reasoning"
            assert shown_text(ours_reasoning) == shown_html_text(shown["reasoning_formatting"]), (
                f"{where}: reasoning"
            )


_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")


def _any_uuid(value: Any) -> Any:
    """``value`` with every ``id`` that is a UUID v4 replaced by a marker (README §7.3: ids
    are random, compared as "any UUID")."""
    if isinstance(value, dict):
        return {
            k: ("<uuid>" if k == "id" and isinstance(v, str) and _UUID.match(v) else _any_uuid(v))
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_any_uuid(v) for v in value]
    return value


def check_export_case(data: Mapping[str, Any]) -> None:
    """The editor's save (its form: the defaults, then what was typed) and the export file."""
    fields = {**dict(data.get("editor_form_defaults") or {}), **dict(data["editor_input"])}
    script = script_from_editor(fields)
    stored = script.to_wire()
    assert list(stored) == list(data["stored_script"]), "the stored script's keys and order"
    compare.assert_json_equal(_any_uuid(stored), _any_uuid(data["stored_script"]), "stored script")
    name, text, parsed = export_shape(script)
    if "export_filename" in data:
        assert name == data["export_filename"]
    want_text = re.sub(r'"id": "[0-9a-f-]{36}"', '"id": "<uuid>"', data["export_text"])
    got_text = re.sub(r'"id": "[0-9a-f-]{36}"', '"id": "<uuid>"', text)
    assert got_text == want_text, "the export file, byte for byte"
    compare.assert_json_equal(_any_uuid(parsed), _any_uuid(data["export_json"]), "export JSON")


def _file_json(item: Any) -> Any:
    if isinstance(item, Mapping):
        for key in ("content", "text", "data", "json"):
            if key in item:
                value = item[key]
                return json.loads(value) if isinstance(value, str) else value
    return json.loads(item) if isinstance(item, str) else item


def check_import_case(data: Mapping[str, Any]) -> None:
    """Files imported into the global list one after another (a bad one changes nothing)."""
    global_scripts: list[RegexScript] = []
    imports = data["imports"]
    for index, item in enumerate(data["files"]):
        with contextlib.suppress(FormatError, ValueError):
            global_scripts.extend(parse_import(_file_json(item)))
        if index < len(imports) and "global_scripts_after" in imports[index]:
            compare.assert_json_equal(
                _any_uuid([s.to_wire() for s in global_scripts]),
                _any_uuid(imports[index]["global_scripts_after"]),
                f"global scripts after file {index}",
            )


def check_card_case(data: Mapping[str, Any]) -> None:
    """A card with scoped scripts: read through the card format, its scripts kept as they
    are, off until the character is allowed, then on."""
    card_json = json.loads(json.dumps(ARIA_CARD))
    card_json["data"]["name"] = "Rhea"
    card_json["data"]["extensions"]["regex_scripts"] = data["card_scripts"]
    card = read_card(json.dumps(card_json).encode("utf-8"), source="card.json").card
    held = embedded_scripts(card.data.extensions)
    compare.assert_json_equal([s.to_wire() for s in held], data["scripts_held_by_st"], "scripts")
    popup = data.get("popup_text_on_select")
    if popup:
        assert popup.startswith(ALLOW_QUESTION)
    env = MacroEnv(user="User", char="Rhea", compat=COMPAT)
    for key, allowed in (
        ("outputs_while_popup_open", False),
        ("outputs_after_cancel", False),
        ("outputs_after_allow", True),
    ):
        lists = ScriptLists(scoped_scripts=held, scoped_allowed=allowed)
        for call in data.get(key) or []:
            params = call.get("params") or {}
            got = lists.active().run(
                call["input"],
                call["placement"],
                engine_macros(env),
                markdown=bool(params.get("isMarkdown")),
                prompt=bool(params.get("isPrompt")),
                depth=params.get("depth"),
                strict=True,
            )
            assert got == call["output"], f"{key}: {call['input']!r} {params}"
