"""The written truth table of can_perform_tool_calls, and mode resolution."""

from __future__ import annotations

import itertools

import pytest

from tavernkit.errors import GenerateTaskError
from tavernkit.tools import (
    FunctionCallOptions,
    ToolCapabilities,
    can_perform_tool_calls,
    is_tool_calling_supported,
    make_trigger_signal,
    resolve_function_call_mode,
)

KINDS = ["normal", "continue", "impersonate", "swipe", "regenerate", "quiet"]
MODES = ["auto", "native", "prompt_xml", "prompt_json"]

# The module docstring's table, row by row: (enabled, kinds, resolved modes, native ok, result);
# None is "any".
TABLE = [
    (False, None, None, None, False),
    (True, {"impersonate", "quiet", "continue"}, None, None, False),
    (True, {"normal", "swipe", "regenerate"}, {"native"}, True, True),
    (True, {"normal", "swipe", "regenerate"}, {"native"}, False, False),
    (True, {"normal", "swipe", "regenerate"}, {"prompt_xml", "prompt_json"}, None, True),
]


def expected(enabled: bool, kind: str, resolved: str, native_ok: bool) -> bool:
    matches = [
        row
        for row in TABLE
        if row[0] == enabled
        and (row[1] is None or kind in row[1])
        and (row[2] is None or resolved in row[2])
        and (row[3] is None or row[3] == native_ok)
    ]
    assert matches, (enabled, kind, resolved, native_ok)
    return matches[0][4]


CASES = list(
    itertools.product(
        [True, False],  # enabled
        KINDS,
        MODES,
        [True, False, None],  # supports_tools
        ["chat", "text"],  # api family
        [False, True],  # force plain text
    )
)


@pytest.mark.parametrize(("enabled", "kind", "mode", "supports", "family", "plain"), CASES)
def test_truth_table(
    enabled: bool, kind: str, mode: str, supports: bool | None, family: str, plain: bool
) -> None:
    caps = ToolCapabilities(
        supports_tools=supports, api_family=family, force_plain_text=plain, enabled=enabled
    )
    native_ok = enabled and family == "chat" and supports is True
    assert is_tool_calling_supported(caps) is native_ok
    resolved = resolve_function_call_mode(mode, native_supported=native_ok, force_plain_text=plain)
    assert can_perform_tool_calls(kind, caps, mode) is expected(enabled, kind, resolved, native_ok)


@pytest.mark.parametrize(
    ("kind", "caps", "mode", "result"),
    [
        # one readable example per row
        ("normal", ToolCapabilities(supports_tools=True, enabled=False), "auto", False),
        ("quiet", ToolCapabilities(supports_tools=True), "auto", False),
        ("impersonate", ToolCapabilities(supports_tools=True), "prompt_xml", False),
        ("continue", ToolCapabilities(supports_tools=True), "native", False),
        ("swipe", ToolCapabilities(supports_tools=True), "auto", True),
        ("regenerate", ToolCapabilities(supports_tools=False), "native", False),
        ("normal", ToolCapabilities(supports_tools=None), "native", False),
        ("normal", ToolCapabilities(supports_tools=False), "auto", True),  # auto -> prompt_xml
        ("normal", ToolCapabilities(api_family="text", supports_tools=True), "prompt_json", True),
    ],
)
def test_rows(kind: str, caps: ToolCapabilities, mode: str, result: bool) -> None:
    assert can_perform_tool_calls(kind, caps, mode) is result


def test_unknown_kind_and_mode() -> None:
    with pytest.raises(GenerateTaskError) as info:
        can_perform_tool_calls("dream", ToolCapabilities())
    assert info.value.code == "invalid_input"
    with pytest.raises(GenerateTaskError) as info:
        can_perform_tool_calls("normal", ToolCapabilities(), "xml")
    assert info.value.details["field"] == "function_call_mode"


@pytest.mark.parametrize(
    ("requested", "native", "plain", "resolved"),
    [
        ("auto", True, False, "native"),
        ("auto", True, True, "prompt_xml"),
        ("auto", False, False, "prompt_xml"),
        (None, True, False, "native"),
        ("", False, False, "prompt_xml"),
        ("  AUTO ", True, False, "native"),
        ("native", False, False, "native"),
        ("prompt_xml", True, False, "prompt_xml"),
        ("Prompt_JSON", True, False, "prompt_json"),
    ],
)
def test_mode_resolution(requested: str | None, native: bool, plain: bool, resolved: str) -> None:
    assert (
        resolve_function_call_mode(requested, native_supported=native, force_plain_text=plain)
        == resolved
    )


def test_options_from_mapping() -> None:
    opts = FunctionCallOptions.from_mapping(
        {"protocolStyle": "TABLE", "requiredFunctionName": " f ", "triggerSignal": "<T/>"}
    )
    assert opts == FunctionCallOptions("table", "<T/>", "f", 2)
    assert FunctionCallOptions.from_mapping(None) == FunctionCallOptions()
    assert FunctionCallOptions.from_mapping({"max_retries": 0}).max_retries == 0
    for bad in (
        {"protocol_style": "yaml"},
        {"trigger_signal": "two\nlines"},
        {"max_retries": 11},
        {"max_retries": "3"},
        {"required_function_name": 5},
        "nope",
    ):
        with pytest.raises(GenerateTaskError) as info:
            FunctionCallOptions.from_mapping(bad)  # type: ignore[arg-type]
        assert info.value.code == "invalid_input"


def test_trigger_signal_is_seeded() -> None:
    import random

    a = make_trigger_signal(random.Random(7))
    assert a == make_trigger_signal(random.Random(7))
    assert (
        a.startswith("<Function_")
        and a.endswith("_Start/>")
        and len(a) == len("<Function_XXXX_Start/>")
    )
