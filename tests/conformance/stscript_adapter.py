"""Replays an STscript golden (conformance README §8) on tavernkit's script engine.

The recorder ran each script in SillyTavern 1.18 on one session: card Aria, persona User, the
4-message base chat (``chat_before``), the case's chat and global variables, the input box set
to ``inputs.textarea``, ``Math.random`` reseeded (mulberry32) and the Quick Reply extension with
its ``Default`` set (three replies) in the global list. Quick-reply cases also created
``OracleSet`` from ``qr_setup`` (not bound; a button click binds it globally first).

Here the same state is an in-memory :class:`~tavernkit.stscript.host.ScriptHost`; the model is
the recorder's mock (``inputs.mock_reply``), and a generation that adds messages adds them in
SillyTavern's shapes (the chat service's part, which this adapter stands in for). Each
generation the script asks for is recorded, so its number and the script-controlled part of
each request (the quiet prompt, the raw messages, the length and stop strings) can be compared.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tavernkit.errors import ScriptError
from tavernkit.groups.rng import Mulberry32
from tavernkit.models.quick_reply import QuickReplySet
from tavernkit.stscript import (
    CharacterRef,
    ClosureResult,
    GenerationRequest,
    QuickReplyLibrary,
    RegexPlacement,
    ScriptClosure,
    ScriptHost,
    ScriptRunner,
    SetLink,
    Toast,
    default_registry,
)
from tavernkit.stscript.executor import Budget
from tavernkit.text.tokens import tokenizer_for_model
from tavernkit.text.variables import InMemoryVariables

from . import cases
from .adapters import EngineRef

#: The regex scripts' engine, as a bridge for scripts (``tavernkit.stscript.host.RegexBridge``):
#: ``script_bridge(global_scripts)``. Cases with regex scripts skip until it exists.
REGEX_BRIDGE = EngineRef(
    "tavernkit.regex",
    "script_bridge",
    "regex scripts not implemented yet (issue 35, regex part): STscript cases with "
    "inputs.regex_scripts need tavernkit.regex.script_bridge",
)

FILE = Path(cases.ST_DIR) / "stscript" / "cases.jsonl"
VOLATILE = ("send_date", "gen_started", "gen_finished")
VOLATILE_EXTRA = ("gen_id", "token_count")
#: the Default set a fresh profile has (its messages are not part of any golden)
DEFAULT_SET = {
    "version": 2,
    "name": "Default",
    "disableSend": False,
    "placeBeforeInput": False,
    "injectInput": False,
    "color": "transparent",
    "onlyBorderColor": False,
    "qrList": [
        {"id": 1, "label": "HELP", "message": "/help"},
        {"id": 2, "label": "New Chat", "message": "/newchat"},
        {"id": 3, "label": "Match UI to Background", "message": "/bg-match"},
    ],
    "idIndex": 3,
}


def discover(root: Path) -> list[cases.Case]:
    """One case per line of ``st-1.18/stscript/cases.jsonl`` (broken lines become failures)."""
    path = root / FILE
    if not path.is_file():
        return []
    found: list[cases.Case] = []
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            data = json.loads(raw)
        except json.JSONDecodeError as exc:
            found.append(
                cases.Case(f"stscript:{number}", "stscript", path, problem=str(exc), line=number)
            )
            continue
        case_id = data.get("id") if isinstance(data, dict) else None
        if not isinstance(case_id, str):
            found.append(
                cases.Case(f"stscript:{number}", "stscript", path, problem="no id", line=number)
            )
            continue
        found.append(cases.Case(case_id, "stscript", path, data=data, line=number))
    return found


@dataclass
class Outcome:
    """What a case did, in the recording's terms."""

    result: dict[str, Any] | None
    error: dict[str, Any] | None
    toasts: list[dict[str, Any]]
    local_vars: dict[str, Any]
    global_vars: dict[str, Any]
    chat: list[dict[str, Any]]
    textarea: str
    script_injects: Any
    requests: list[GenerationRequest]
    drawn: int
    qr_state: dict[str, Any] | None = None
    export_text: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def strip_volatile(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for message in copy.deepcopy(messages):
        for key in VOLATILE:
            message.pop(key, None)
        if isinstance(message.get("extra"), dict):
            for key in VOLATILE_EXTRA:
                message["extra"].pop(key, None)
        for info in message.get("swipe_info") or []:
            if isinstance(info, dict):
                for key in VOLATILE:
                    info.pop(key, None)
                if isinstance(info.get("extra"), dict):
                    for key in VOLATILE_EXTRA:
                        info["extra"].pop(key, None)
        out.append(message)
    return out


class _Session:
    """The recorder's SillyTavern session for one case."""

    def __init__(self, case: Mapping[str, Any]) -> None:
        inputs = case.get("inputs") or {}
        env = case.get("env") or {}
        self.case = case
        self.api = inputs.get("api", "cc")
        self.mock_reply = str(inputs.get("mock_reply") or "Fixed oracle reply.")
        self.requests: list[GenerationRequest] = []
        self.rng = Mulberry32(int(case.get("random_seed") or 0))
        library = QuickReplyLibrary()
        library.add_set(QuickReplySet.model_validate(DEFAULT_SET))
        library.global_links.append(SetLink("Default"))
        setup = case.get("qr_setup")
        if setup:
            oracle = library.create_set(str(setup["set"]))
            for item in setup.get("qrs") or []:
                oracle.add(label=item["label"], message=item["message"])
        self.host = ScriptHost(
            user_name=str(env.get("name1") or "User"),
            char_name=str(env.get("name2") or "Aria"),
            chat=copy.deepcopy(list(case.get("chat_before") or [])),
            variables=InMemoryVariables(
                copy.deepcopy(case.get("local_vars_before") or {}),
                copy.deepcopy(case.get("global_vars_before") or {}),
            ),
            input_text=str(inputs.get("textarea") or ""),
            quick_replies=library,
            characters=[CharacterRef("Aria", "Aria.png")],
            user_avatar="user-default.png",
            personas={"user-default.png": "User"},
            generator=self.generate,
            # chat completion counts with gpt-4o's tokenizer; text completion (tokenizer NONE)
            # with SillyTavern's estimate, the host's default
            count_tokens=tokenizer_for_model("gpt-4o").count if self.api == "cc" else None,
            clock=lambda: datetime(2026, 12, 6, tzinfo=UTC),
        )
        scripts = inputs.get("regex_scripts") or []
        if scripts:
            self.host.regex = REGEX_BRIDGE.load()(copy.deepcopy(scripts))
        self.runner = ScriptRunner(
            self.host,
            default_registry(),
            budget=Budget(max_seconds=30),
            rng=self.rng,
        )

    async def generate(self, request: GenerationRequest, host: ScriptHost) -> str:
        self.requests.append(request)
        # the reply is cleaned up as SillyTavern's cleanUpMessage does: AI-output regex scripts
        reply = host.regex.apply(self.mock_reply, RegexPlacement.AI_OUTPUT)
        if request.kind in ("quiet", "raw"):
            return reply
        if request.kind == "impersonate":
            host.input_text = reply
            return reply
        last = host.chat[-1] if host.chat else None
        if request.kind == "continue" and last is not None and not last.get("is_user"):
            # power_user.continue_postfix is a space
            last["mes"] = f"{last.get('mes', '')} {reply}"
            if isinstance(last.get("swipes"), list) and last["swipes"]:
                last["swipes"][int(last.get("swipe_id") or 0)] = last["mes"]
            return reply
        if request.kind == "regenerate" and last is not None and not last.get("is_user"):
            host.chat.pop()
        if request.kind == "swipe" and last is not None and not last.get("is_user"):
            swipes = last.setdefault("swipes", [last.get("mes", "")])
            swipes.append(reply)
            last["swipe_id"] = len(swipes) - 1
            last["mes"] = reply
            last.setdefault("swipe_info", []).append({"extra": dict(last.get("extra") or {})})
            return reply
        if request.kind == "send":
            text = host.input_text
            host.input_text = ""
            host.chat.append(
                {
                    "name": host.user_name,
                    "is_user": True,
                    "is_system": False,
                    "mes": self.runner.substitute_plain(text),
                    "extra": {"isSmallSys": False},
                    "force_avatar": f"/thumbnail?type=persona&file={host.user_avatar}",
                }
            )
        if host.chat and host.chat[-1].get("is_user"):
            host.chat[-1].setdefault("extra", {}).setdefault("reasoning", "")
        extra = {
            "api": "custom" if self.api == "cc" else "koboldcpp",
            "model": "gpt-4o",
            "reasoning": "",
            "reasoning_duration": None,
            "reasoning_signature": None,
        }
        host.chat.append(
            {
                "extra": extra,
                "name": host.char_name,
                "is_user": False,
                "mes": reply,
                "title": "",
                "swipes": [reply],
                "swipe_id": 0,
                "swipe_info": [{"extra": dict(extra)}],
            }
        )
        return reply

    def outcome(self, result: ClosureResult | None, error: Any) -> Outcome:
        host = self.host
        injects = host.metadata.get("script_injects")
        qr_state = None
        if self.case.get("qr_setup") or self.case.get("kind") != "script":
            library = host.quick_replies
            qr_state = {
                "sets": [s.st_json() for s in library.sets if s.name.startswith("Oracle")],
                "global_sets": [link.name for link in library.global_links],
                "chat_sets": [link.name for link in library.chat_links],
            }
        return Outcome(
            result=_result(result),
            error=_error(error),
            toasts=[_toast(t) for t in host.toasts],
            local_vars=host.variables.local_vars,
            global_vars=host.variables.global_vars,
            chat=strip_volatile(host.chat),
            textarea=host.input_text,
            script_injects=injects if injects else None,
            requests=self.requests,
            drawn=self.rng.drawn,
            qr_state=qr_state,
        )


def _result(result: ClosureResult | None) -> dict[str, Any] | None:
    if result is None:
        return None
    pipe = result.pipe
    if pipe is None:
        pipe_type = "undefined"
    elif isinstance(pipe, ScriptClosure):
        pipe_type = "closure"
    else:
        pipe_type = "string"
    return {
        "pipe": None if pipe is None else str(pipe),
        "pipe_type": pipe_type,
        "isBreak": result.is_break,
        "isAborted": result.is_aborted,
        "isQuietlyAborted": result.is_quietly_aborted,
        "abortReason": result.abort_reason,
        "isError": result.is_error,
        "errorMessage": result.error_message,
    }


def _error(error: Any) -> dict[str, Any] | None:
    if error is None:
        return None
    return {
        "name": error.name,
        "message": error.message,
        "line": error.line,
        "column": error.column,
        "hint": error.hint,
    }


def _toast(toast: Toast) -> dict[str, Any]:
    return {
        "type": toast.type,
        "message": toast.message,
        "title": toast.title,
        "options": toast.options,
    }


async def run_case(case: Mapping[str, Any]) -> Outcome:
    """Run one golden case (``script``, ``qr_click`` or ``qr_export``)."""
    session = _Session(case)
    kind = case.get("kind")
    if kind == "script":
        try:
            result = await session.runner.run(str(case.get("script") or ""))
        except ScriptError as exc:
            return session.outcome(None, exc)
        return session.outcome(result, None)
    pre = case.get("pre_action") or {}
    if pre.get("script"):
        await session.runner.run(str(pre["script"]))
    library = session.host.quick_replies
    setup = case.get("qr_setup") or {}
    oracle = library.get(str(setup.get("set") or "OracleSet"))
    if kind == "qr_click":
        library.bind(library.global_links, oracle.name if oracle else "OracleSet")
        click = case.get("click") or {}
        session.host.input_text = str(click.get("textarea_before") or "")
        assert oracle is not None
        reply = oracle.find(str(click.get("label")))
        assert reply is not None, f"no quick reply {click.get('label')!r} in the set"
        await session.runner.run_quick_reply(oracle, reply, mode="click")
        return session.outcome(None, None)
    outcome = session.outcome(None, None)
    outcome.export_text = oracle.export_text() if oracle is not None else None
    return outcome
