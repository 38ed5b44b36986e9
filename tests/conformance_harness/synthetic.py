"""A tiny conformance folder with the README schema, for testing the harness itself."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def macro_case(case_id: str, **overrides: Any) -> dict[str, Any]:
    case: dict[str, Any] = {
        "id": case_id,
        "source": "synthetic",
        "section": "synthetic",
        "input": "{{setvar::x::1}}{{user}}",
        "local_vars_before": {},
        "global_vars_before": {},
        "output": "User",
        "local_vars_after": {"x": "1"},
        "global_vars_after": {},
        "env_seen": {"names": {"user": "User", "char": "Character"}},
    }
    case.update(overrides)
    return case


def worldinfo_case(case_id: str) -> dict[str, Any]:
    result = {
        "worldInfoBefore": "Lore.",
        "worldInfoAfter": "",
        "EMEntries": [],
        "WIDepthEntries": [],
        "ANBeforeEntries": [],
        "ANAfterEntries": [],
        "outletEntries": {},
        "activated": ["Book.0"],
    }
    return {
        "id": case_id,
        "description": "one keyword entry",
        "settings": {"world_info_depth": 2},
        "effective_settings": {},
        "tokenizer": {},
        "books": [{"name": "Book", "scope": "global", "data": {"entries": {}}}],
        "character": {"name": "C"},
        "persona": {"name": "User", "description": ""},
        "chat": [{"name": "User", "is_user": True, "is_system": False, "mes": "hello"}],
        "max_context": 4096,
        "inject_scan": [],
        "random_seed": None,
        "random_sequence": [],
        "turns": [
            {
                "append": [],
                "trigger": "normal",
                "global_scan_data": {},
                "chat_length": 1,
                "wi_chat_length": 1,
                "result": result,
                "random_consumed": [0.25],
                "timed_state_after": {"sticky": {}, "cooldown": {}},
            }
        ],
    }


def prompt_case(case_id: str, api: str = "cc") -> dict[str, Any]:
    body: dict[str, Any] = (
        {"messages": [{"role": "system", "content": "Hi"}], "model": "gpt-4o"}
        if api == "cc"
        else {"prompt": "Hi\nUser:", "stop": ["\nUser:"], "stopping_strings": ["\nUser:"]}
    )
    return {
        "id": case_id,
        "description": "synthetic",
        "api": api,
        "inputs": {},
        "effective_settings": {},
        "request_path": "/v1/chat/completions",
        "request_body": body,
        "st_frontend_request": {},
        "reply_in_chat": {},
    }


def group_case(case_id: str) -> dict[str, Any]:
    """A group turn of one member with no card text (README §5 shape)."""
    return {
        "id": case_id,
        "api": "cc",
        "inputs": {
            "group": {"members": [], "activation_strategy": 1, "cards": []},
            "chat": [],
            "user_input": "",
            "generate": {"type": "normal"},
        },
        "effective_settings": {},
        "drafted_member": [],
        "random_seed": 1,
        "random_consumed": [],
        "requests": [],
    }


def write_folder(root: Path, *, macros: list[Any] | None = None) -> Path:
    """Write st-1.18/ with two macro lines, one world-info scenario, two prompt cases and a
    group case."""
    st = root / "st-1.18"
    (st / "worldinfo").mkdir(parents=True)
    (st / "prompts").mkdir()
    (st / "groups").mkdir()
    write_json(st / "groups" / "g_cc.json", group_case("g_cc"))
    lines = macros if macros is not None else [macro_case("m_one"), macro_case("m_two")]
    text = "\n".join(line if isinstance(line, str) else json.dumps(line) for line in lines)
    (st / "macros.jsonl").write_text(text + "\n\n", encoding="utf-8")
    write_json(st / "worldinfo" / "wi_a.json", worldinfo_case("wi_a"))
    write_json(st / "prompts" / "p_cc.json", prompt_case("p_cc"))
    write_json(st / "prompts" / "p_tc.json", prompt_case("p_tc", api="tc"))
    return root


def write_json(path: Path, value: Any) -> None:
    path.write_text(json.dumps(value), encoding="utf-8")
