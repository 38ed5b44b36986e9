"""The conformance harness finds cases in any folder of the README schema, and fails loudly.

Runs against synthetic folders in tmp_path, so it needs no ../shared.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conformance import cases
from conformance.chatluna_adapter import discover as chatluna_discover

from .synthetic import (
    group_case,
    macro_case,
    prompt_case,
    worldinfo_case,
    write_folder,
    write_json,
)

REPO_ROOT = Path(__file__).resolve().parents[2]
# hypothesis is not used by the conformance modules; not loading it halves each run's start-up.
PYTEST = (sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:hypothesispytest")


def ids(found: list[cases.Case]) -> list[str]:
    return [case.id for case in found]


def test_discovers_every_family_by_case_id(tmp_path: Path) -> None:
    write_folder(tmp_path)
    assert ids(cases.discover_macros(tmp_path)) == ["m_one", "m_two"]
    assert ids(cases.discover_worldinfo(tmp_path)) == ["wi_a"]
    assert ids(cases.discover_prompts(tmp_path)) == ["p_cc", "p_tc"]
    assert ids(cases.discover_groups(tmp_path)) == ["g_cc"]
    assert len(cases.discover_all(tmp_path)) == 6
    for case in cases.discover_all(tmp_path):
        assert case.load()["id"] == case.id


def test_a_folder_without_cases_discovers_nothing(tmp_path: Path) -> None:
    assert cases.discover_all(tmp_path) == []
    assert cases.discover_perf(tmp_path) == []


def test_broken_macro_lines_become_failing_cases(tmp_path: Path) -> None:
    lines = [macro_case("ok"), "{not json", "[1]", {"input": "no id"}, macro_case("ok")]
    write_folder(tmp_path, macros=lines)
    found = cases.discover_macros(tmp_path)
    assert ids(found) == ["ok", "macros.jsonl:2", "macros.jsonl:3", "macros.jsonl:4", "ok@5"]
    assert found[0].load()["id"] == "ok"
    messages = []
    for case in found[1:]:
        with pytest.raises(cases.MalformedCase) as info:
            case.load()
        messages.append(str(info.value))
    assert "invalid JSON" in messages[0]
    assert "not a JSON object" in messages[1]
    assert "missing string 'id'" in messages[2]
    assert "duplicate case id 'ok'" in messages[3]


def test_a_macro_case_missing_a_key_fails_validation(tmp_path: Path) -> None:
    case = macro_case("m")
    del case["output"]
    case["local_vars_after"] = []
    write_folder(tmp_path, macros=[case])
    with pytest.raises(cases.MalformedCase, match="missing key 'output'") as info:
        cases.discover_macros(tmp_path)[0].load()
    assert "'local_vars_after' is not an object" in str(info.value)


def test_worldinfo_schema_checks(tmp_path: Path) -> None:
    write_folder(tmp_path)
    folder = tmp_path / "st-1.18" / "worldinfo"
    broken = worldinfo_case("renamed")
    del broken["turns"][0]["timed_state_after"]
    del broken["turns"][0]["result"]["activated"]
    write_json(folder / "wi_b.json", broken)
    (folder / "wi_c.json").write_text("{", encoding="utf-8")
    found = {case.id: case for case in cases.discover_worldinfo(tmp_path)}
    with pytest.raises(cases.MalformedCase) as info:
        found["wi_b"].load()
    message = str(info.value)
    assert "does not match the file name 'wi_b'" in message
    assert "missing key turns[0].'timed_state_after'" in message
    assert "missing key turns[0].result.'activated'" in message
    with pytest.raises(cases.MalformedCase, match="cannot read JSON"):
        found["wi_c"].load()


def test_prompt_schema_checks(tmp_path: Path) -> None:
    write_folder(tmp_path)
    folder = tmp_path / "st-1.18" / "prompts"
    bad_api = prompt_case("p_x", api="cc")
    bad_api["api"] = "horde"
    write_json(folder / "p_x.json", bad_api)
    no_messages = prompt_case("p_y")
    no_messages["request_body"] = {"model": "gpt-4o"}
    write_json(folder / "p_y.json", no_messages)
    found = {case.id: case for case in cases.discover_prompts(tmp_path)}
    with pytest.raises(cases.MalformedCase, match="'api' is 'horde'"):
        found["p_x"].load()
    with pytest.raises(cases.MalformedCase, match=r"request_body\.messages"):
        found["p_y"].load()


def test_group_schema_checks(tmp_path: Path) -> None:
    write_folder(tmp_path)
    folder = tmp_path / "st-1.18" / "groups"
    broken = group_case("g_bad")
    del broken["inputs"]["group"]
    broken["api"] = "kobold"
    broken["requests"] = [{"drafted_member": {}}]
    write_json(folder / "g_bad.json", broken)
    found = {case.id: case for case in cases.discover_groups(tmp_path)}
    assert found["g_cc"].load()["id"] == "g_cc"
    with pytest.raises(cases.MalformedCase) as info:
        found["g_bad"].load()
    message = str(info.value)
    assert "missing key inputs.'group'" in message
    assert "'api' is 'kobold'" in message
    assert "requests[0] has no 'request_body'" in message


def test_perf_inputs_discovery(tmp_path: Path) -> None:
    perf = tmp_path / "st-1.18-perf"
    perf.mkdir()
    sets = [
        {"id": "a", "kind": "list", "items": [], "local_vars_before": {}, "global_vars_before": {}},
        {
            "id": "b",
            "kind": "single",
            "text": "x",
            "local_vars_before": {},
            "global_vars_before": {},
        },
        {"kind": "single"},
    ]
    write_json(perf / "macro_inputs.json", {"sets": sets})
    write_json(perf / "prompt_build_inputs.json", {"card": {}})
    found = cases.discover_perf(tmp_path)
    assert ids(found) == ["macro-a", "macro-b", "macro-2", "prompt_build"]
    assert found[0].load()["id"] == "a"
    with pytest.raises(cases.MalformedCase, match="set without 'id'"):
        found[2].load()
    with pytest.raises(cases.MalformedCase, match="missing key 'persona'"):
        found[3].load()


def test_chatluna_discovery_splits_on_newlines_only_and_flags_broken_lines(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "chatluna"
    folder.mkdir()
    good = {"id": "c1", "category": "plain", "kind": "template", "expected": {}, "t": "a\u2028b"}
    lines = [
        json.dumps(good, ensure_ascii=False),
        '{"id": "big", "category": "x", "kind": "template", "expected": {}, '
        '"n": 12345678901234567890}',
        "{not json",
        json.dumps({"id": "short", "kind": "template"}),
    ]
    (folder / "cases.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    found = chatluna_discover(tmp_path)
    assert ids(found) == ["c1", "big", "cases.jsonl:3", "short"]
    assert found[0].data is not None and found[0].data["t"] == "a\u2028b"
    assert found[1].data is not None and isinstance(found[1].data["n"], float)
    assert found[2].problem is not None and "invalid JSON" in found[2].problem
    assert found[3].problem is not None and "missing keys" in found[3].problem
    assert chatluna_discover(tmp_path / "elsewhere") == []


def test_configured_root_tells_explicit_from_default(tmp_path: Path) -> None:
    explicit = cases.configured_root({cases.ENV_VAR: str(tmp_path)})
    assert explicit == cases.ConformanceRoot(path=tmp_path, explicit=True)
    default = cases.configured_root({})
    assert not default.explicit
    assert default.path == REPO_ROOT.parent / "shared" / "conformance"


def test_absent_folder_skips_unless_named_explicitly(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere"
    quiet = cases.ConformanceRoot(path=missing, explicit=False)
    loud = cases.ConformanceRoot(path=missing, explicit=True)
    assert "not found" in (quiet.absence_reason() or "")
    assert "does not exist" in (loud.absence_reason() or "")
    assert cases.ConformanceRoot(path=tmp_path, explicit=True).absence_reason() is None
    (param,) = cases.params([], quiet, "macro")
    assert param.id == "no-conformance-data"
    assert param.marks[0].name == "skip"


def test_params_name_each_item_by_case_id(tmp_path: Path) -> None:
    write_folder(tmp_path)
    root = cases.ConformanceRoot(path=tmp_path, explicit=True)
    params = cases.params(cases.discover_prompts(tmp_path), root, "prompt")
    assert [param.id for param in params] == ["p_cc", "p_tc"]
    (empty,) = cases.params([], root, "worldinfo")
    assert empty.id == "no-worldinfo-cases"
    assert "no worldinfo cases" in empty.marks[0].kwargs["reason"]


# --- the suite as CI runs it -------------------------------------------------------------


def run_conformance(folder: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, cases.ENV_VAR: str(folder)}
    return subprocess.run(
        [*PYTEST, "tests/conformance", *extra],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_suite_collects_one_item_per_case(tmp_path: Path) -> None:
    # Collection only: whether an item then passes depends on which engines have landed.
    write_folder(tmp_path)
    run = run_conformance(tmp_path, "--collect-only", "-q")
    assert run.returncode == 0, run.stdout + run.stderr
    items = sorted(line for line in run.stdout.splitlines() if "::" in line)
    assert items == [
        "tests/conformance/test_cases_present.py::test_cases_present",
        "tests/conformance/test_chatluna.py::test_chatluna[no-chatluna-cases]",
        "tests/conformance/test_groups.py::test_group_prompts[g_cc]",
        "tests/conformance/test_groups.py::test_group_speakers[g_cc]",
        "tests/conformance/test_macros.py::test_macro[m_one]",
        "tests/conformance/test_macros.py::test_macro[m_two]",
        # the synthetic folder has no memory cases: one skipped item per test says so
        "tests/conformance/test_memory.py::"
        "test_a_raw_summary_on_text_completion_sends_the_formatted_prompt[chatml]",
        "tests/conformance/test_memory.py::"
        "test_a_raw_summary_on_text_completion_sends_the_formatted_prompt[plain]",
        "tests/conformance/test_memory.py::test_memory_embeddings[no-memory-cases]",
        "tests/conformance/test_memory.py::test_memory_requests[no-memory-cases]",
        "tests/conformance/test_perf_inputs.py::test_perf_output[no-perf-cases]",
        "tests/conformance/test_prompts.py::test_prompt_build[p_cc]",
        "tests/conformance/test_prompts.py::test_prompt_build[p_tc]",
        "tests/conformance/test_prompts.py::test_request_body[p_cc]",
        "tests/conformance/test_prompts.py::test_request_body[p_tc]",
        "tests/conformance/test_regex.py::test_regex[no-regex-cases]",
        "tests/conformance/test_stscript.py::test_stscript[no-stscript-cases]",
        "tests/conformance/test_worldinfo.py::test_worldinfo[wi_a]",
    ]


def test_suite_fails_on_an_explicit_folder_without_cases(tmp_path: Path) -> None:
    (tmp_path / "st-1.18").mkdir()
    run = run_conformance(tmp_path, "-q")
    assert run.returncode == 1, run.stdout + run.stderr
    assert "FAILED tests/conformance/test_cases_present.py::test_cases_present" in run.stdout
    assert "1 failed" in run.stdout


def test_suite_fails_on_malformed_cases(tmp_path: Path) -> None:
    write_folder(tmp_path, macros=["{broken", macro_case("fine")])
    run = run_conformance(tmp_path, "-v", "-k", "jsonl or cases_present")
    assert run.returncode == 1, run.stdout + run.stderr
    assert "test_cases_present.py::test_cases_present PASSED" in run.stdout
    assert "test_macros.py::test_macro[macros.jsonl:1] FAILED" in run.stdout
    assert "invalid JSON" in run.stdout
