"""The regex engine on its own: JavaScript's regex and replace semantics, the bound on hostile
patterns, the scopes and the ``/regex`` command hooks (the goldens in tests/conformance cover
SillyTavern's recorded behaviour; these pin what the goldens do not)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from tavernkit.errors import RegexScriptError
from tavernkit.models.regex_script import RegexScript
from tavernkit.models.settings import settings_from_st
from tavernkit.text.regex_scripts import (
    RegexPlacement,
    ScriptLists,
    ScriptRegexGuard,
    plain_macros,
    regex_command,
    regex_from_string,
    regex_state,
    regex_toggle,
    run_script,
    run_scripts,
    script_view,
)


def script(**fields: Any) -> RegexScript:
    base: dict[str, Any] = {
        "id": "x",
        "scriptName": "S",
        "findRegex": "/a/g",
        "replaceString": "b",
        "trimStrings": [],
        "placement": [1, 2],
        "disabled": False,
        "markdownOnly": False,
        "promptOnly": False,
        "runOnEdit": True,
        "substituteRegex": 0,
        "minDepth": None,
        "maxDepth": None,
    }
    base.update(fields)
    return RegexScript.model_validate(base)


def run(text: str, **fields: Any) -> str:
    return run_script(script(**fields), text, plain_macros())


def test_flags_parse_as_sillytavern_does() -> None:
    rx = regex_from_string("/a\\/b/gi")
    assert rx is not None and rx.source == "a\\/b" and rx.flags == "gi"
    literal = regex_from_string("/a/gg")  # repeated flag: the whole string is the pattern
    assert literal is not None and literal.source == "/a/gg" and literal.flags == ""
    assert regex_from_string("/a/x") is None  # ST lets x through, JavaScript throws
    assert regex_from_string("/(a/") is None
    trailing = regex_from_string("/abc/g tail")  # the parse is not anchored at the end
    assert trailing is not None and trailing.source == "abc" and trailing.flags == "g"


def test_utf16_semantics_without_u() -> None:
    assert run("😀😀", findRegex="/./", replaceString="[$0]") == "[\ud83d]\ude00😀"
    assert run("😀😀", findRegex="/./u", replaceString="[$0]") == "[😀]😀"
    assert run("a😀b", findRegex="/\\uD83D\\uDE00/", replaceString="E") == "aEb"
    assert run("é😀x", findRegex="/x/", replaceString="[$1]") == "é😀[3]"  # offset in units


def test_replacement_arguments_and_trim() -> None:
    assert run("ab", findRegex="/(a)(b)/", replaceString="$2$1") == "ba"
    assert run("ab", findRegex="/(?<x>a)b/", replaceString="$<x>|$<y>|$3") == "a||ab"
    assert run("ab", findRegex="/b/", replaceString="$$&$'") == "a$$&$'"
    assert run("um yes", findRegex="/(.*)/", replaceString="<$1>", trimStrings=["um "]) == ("<yes>")


def test_malformed_scripts_raise_as_sillytavern_or_are_skipped() -> None:
    broken = RegexScript.model_validate({"scriptName": "B", "findRegex": "/a/", "placement": [2]})
    views = [script_view(broken), script_view(script(findRegex="/c/", replaceString="C"))]
    with pytest.raises(RegexScriptError, match="reading 'replace'"):
        run_scripts("ac", RegexPlacement.AI_OUTPUT, views, plain_macros())
    relaxed = run_scripts("ac", RegexPlacement.AI_OUTPUT, views, plain_macros(), strict=False)
    assert relaxed == "aC"


def test_a_catastrophic_pattern_is_stopped_and_remembered() -> None:
    guard = ScriptRegexGuard(timeout_s=0.3)
    try:
        evil = script(findRegex="/(a+)+$/", replaceString="X")
        text = "a" * 40 + "!"
        started = time.monotonic()
        assert run_script(evil, text, plain_macros(), guard=guard) == text
        assert time.monotonic() - started < 5
        assert guard.timeouts == 1
        started = time.monotonic()  # skipped at once for texts at least that long
        assert run_script(evil, text + "a", plain_macros(), guard=guard) == text + "a"
        assert time.monotonic() - started < 0.2
        assert run_script(evil, "aaa", plain_macros(), guard=guard) == "X"  # short ones run
    finally:
        guard.close()


def test_long_texts_run_in_the_worker_with_the_same_answer() -> None:
    guard = ScriptRegexGuard(in_process_chars=10)
    try:
        text = "x é😀 " * 10 + "cat"
        out = run_script(
            script(findRegex="/(c)at/g", replaceString="d$1g"), text, plain_macros(), guard=guard
        )
        assert out == "x é😀 " * 10 + "dcg"
    finally:
        guard.close()


def test_scopes_allow_lists_and_the_extension_switch() -> None:
    lists = ScriptLists(
        global_scripts=[script(findRegex="/$/", replaceString="G")],
        preset_scripts=[script(findRegex="/$/", replaceString="P")],
        scoped_scripts=[script(findRegex="/$/", replaceString="C")],
        preset_allowed=True,
        scoped_allowed=False,
    )
    assert lists.active().run("x", 2, plain_macros()) == "xGP"
    off = ScriptLists(global_scripts=lists.global_scripts, enabled=False)
    assert off.active().run("x", 2, plain_macros()) == "x"


def test_command_hooks() -> None:
    lists = ScriptLists(scoped_scripts=[script(scriptName="Café", placement=[])])
    assert regex_command(lists, "cafe", "aa", plain_macros()).output == "bb"
    assert regex_state(lists, "CAFÉ").output == "true"
    toggled = regex_toggle(lists, "café", state="off")
    assert toggled.output == "Café" and toggled.scope == "scoped" and toggled.index == 0
    assert toggled.changed is not None and toggled.changed.disabled is True
    assert toggled.notices[0].message == "Regex script 'Café' has been disabled."
    missing = regex_command(lists, "nope", "aa", plain_macros())
    assert missing.output == "aa" and missing.notices[0].kind == "warning"


def test_settings_json_brings_the_global_scripts_migrated() -> None:
    old = {"scriptName": "Old", "findRegex": "/a/", "placement": [0], "markdownOnly": False}
    send_as = {"scriptName": "SendAs", "findRegex": "/b/", "placement": [4, 2]}
    settings = settings_from_st(
        {
            "power_user": {},
            "extension_settings": {"regex": [old, send_as], "disabledExtensions": ["regex"]},
        }
    )
    migrated = [s.to_wire() for s in settings.regex.scripts]
    assert migrated[0]["placement"] == [1, 2, 3, 5, 6]
    assert migrated[0]["markdownOnly"] is True and migrated[0]["promptOnly"] is True
    assert migrated[1]["placement"] == [3, 2]
    assert settings.regex.enabled is False
