"""Regex extension goldens (``st-1.18/regex/``, README §7).

One item per case, by kind:

- ``engine``: every call's output (or the ``TypeError`` SillyTavern threw) and the toasts of
  the ``/regex*`` commands, then both variable scopes and the global list after the calls;
- ``request``: the request body's prompt part (as ``test_prompts.py`` compares it), the
  messages stored afterwards and what each shows;
- ``storage``: what is stored after a send, a reply, an impersonation or slash commands, and
  what each message shows;
- ``export`` / ``import`` / ``card``: the editor's script, the export file, imported lists,
  and a card's scoped scripts before and after they are allowed.
"""

from __future__ import annotations

from typing import Any

import pytest

from . import adapters, cases, compare, regex_adapter

ROOT = cases.configured_root()
CASES = cases.discover_regex(ROOT.path)
PARAMS = cases.params(CASES, ROOT, "regex")


@pytest.mark.parametrize("case", PARAMS)
def test_regex(case: cases.Case) -> None:
    data = case.load()
    try:
        adapters.REGEX_ENGINE.load()
    except adapters.EngineMissing as exc:
        pytest.skip(str(exc))
    check = {
        "engine": _check_engine,
        "request": regex_adapter.check_generation_case,
        "storage": regex_adapter.check_generation_case,
        "export": regex_adapter.check_export_case,
        "import": regex_adapter.check_import_case,
        "card": regex_adapter.check_card_case,
    }[data["kind"]]
    check(data)


def _check_engine(data: dict[str, Any]) -> None:
    outcome = regex_adapter.run_engine_case(data)
    assert len(outcome.calls) == len(data["calls"])
    for index, (got, want) in enumerate(zip(outcome.calls, data["calls"], strict=True)):
        where = f"call {index} ({want.get('script') or repr(want.get('input'))[:40]})"
        if want.get("error"):
            assert got.error is not None, f"{where}: SillyTavern threw {want['error']['message']}"
            assert got.error["name"] == want["error"]["name"], where
            assert got.error["message"] == want["error"]["message"], where
            continue
        assert got.error is None, f"{where}: raised {got.error}"
        compare.assert_json_equal(got.output, want["output"], f"{where} output")
        compare.assert_json_equal(got.toasts, want.get("toasts") or [], f"{where} toasts")
    compare.assert_json_equal(outcome.local_vars, data["local_vars_after"], "local variables")
    compare.assert_json_equal(outcome.global_vars, data["global_vars_after"], "global variables")
    after = data.get("scripts_after")
    if after is not None and "global" in after:
        compare.assert_json_equal(outcome.global_scripts, after["global"], "global scripts")
