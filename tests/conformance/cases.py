"""Discovery of the SillyTavern golden cases under ``$TAVERNKIT_CONFORMANCE_DIR``.

The folder layout and the case schema are the ones described in ``st-1.18/README.md`` and
``st-1.18-perf/README.md`` of the conformance folder. Discovery must accept *any* folder with
files of that schema (a quarter of the recorded cases are kept aside and swapped in later), so
nothing here knows a case by name.

Collection happens at import time of each test module (``pytest.mark.parametrize`` needs the
list then). It stays cheap: ``macros.jsonl`` is small and parsed whole, while world-info and
prompt files (up to ~4 MB each) are only listed here; the test item parses and validates its
own file, so a malformed file fails as that one item instead of breaking collection.

A problem found while discovering (bad JSON line, missing id, duplicate id) does not raise:
the case is returned with ``problem`` set, and the test turns it into a failure. Malformed
cases must fail loudly, never disappear or skip.
"""

from __future__ import annotations

import importlib.util
import json
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import pytest

ENV_VAR = "TAVERNKIT_CONFORMANCE_DIR"
ST_DIR = "st-1.18"
PERF_DIR = "st-1.18-perf"

MACROS = "macros"
WORLDINFO = "worldinfo"
PROMPTS = "prompts"
GROUPS = "groups"
REGEX = "regex"
PERF = "perf"

# Keys a case must carry for its comparison to mean anything (README schema). Optional keys
# (note, test_name, timing_ms, ...) are not required, so a folder recorded with fewer
# extras still runs.
MACRO_KEYS = (
    "id",
    "input",
    "local_vars_before",
    "global_vars_before",
    "output",
    "local_vars_after",
    "global_vars_after",
)
WORLDINFO_KEYS = ("id", "settings", "books", "chat", "max_context", "turns")
WORLDINFO_TURN_KEYS = (
    "trigger",
    "global_scan_data",
    "result",
    "random_consumed",
    "timed_state_after",
)
WORLDINFO_RESULT_KEYS = (
    "worldInfoBefore",
    "worldInfoAfter",
    "EMEntries",
    "WIDepthEntries",
    "ANBeforeEntries",
    "ANAfterEntries",
    "outletEntries",
    "activated",
)
PROMPT_KEYS = ("id", "api", "inputs", "effective_settings", "request_body")
PROMPT_APIS = ("cc", "tc", "kobold")
GROUP_KEYS = ("id", "api", "inputs", "effective_settings", "drafted_member", "requests")
PERF_MACRO_SET_KEYS = ("id", "kind", "local_vars_before", "global_vars_before")
REGEX_KEYS = {
    "engine": ("id", "kind", "scripts", "calls", "local_vars_before", "global_vars_before"),
    "request": ("id", "kind", "api", "inputs", "effective", "request_body", "chat_after"),
    "storage": ("id", "kind", "api", "inputs", "effective", "chat_after", "display"),
    "export": ("id", "kind", "editor_input", "stored_script", "export_text", "export_json"),
    "import": ("id", "kind", "files", "imports"),
    "card": ("id", "kind", "card_scripts", "scripts_held_by_st", "outputs_after_allow"),
}


@dataclass(frozen=True)
class ConformanceRoot:
    """Where the cases come from, and whether someone asked for that folder on purpose.

    ``explicit`` matters for the empty-folder rule: a folder named through the environment
    variable that holds no cases is a broken CI set-up and must fail; the default folder
    beside the repository being absent just means a fresh clone, which skips.
    """

    path: Path
    explicit: bool

    @property
    def st_dir(self) -> Path:
        return self.path / ST_DIR

    @property
    def perf_dir(self) -> Path:
        return self.path / PERF_DIR

    def absence_reason(self) -> str | None:
        """Why the conformance data cannot be used at all, or None when the folder exists."""
        if self.path.is_dir():
            return None
        if self.explicit:
            return f"{ENV_VAR}={self.path} does not exist"
        return (
            f"conformance data not found at {self.path} "
            f"(set {ENV_VAR} to a folder holding {ST_DIR}/)"
        )


@dataclass(frozen=True)
class Case:
    """One golden case: its pytest id, where it lives, and (for jsonl lines) its data.

    ``data`` is None for file-backed cases until ``load()`` reads the file in the test item.
    """

    id: str
    family: str
    source: Path
    data: Mapping[str, Any] | None = None
    problem: str | None = None
    line: int | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def where(self) -> str:
        return f"{self.source}:{self.line}" if self.line is not None else str(self.source)

    def load(self) -> dict[str, Any]:
        """The case's data, validated; a malformed case raises ``MalformedCase``."""
        if self.problem is not None:
            raise MalformedCase(f"{self.where}: {self.problem}")
        data = dict(self.data) if self.data is not None else read_json_object(self.source)
        validate(self.family, data, self.where, expected_id=self.id)
        return data


class MalformedCase(AssertionError):
    """A case file that does not follow the README schema: a test failure, never a skip."""


# --- the configured folder -------------------------------------------------------------------


@cache
def _root_conftest() -> Any:
    """tests/conftest.py, loaded by path.

    ``import conftest`` is unreliable: pytest drops ``sys.modules["conftest"]`` each time it
    loads another non-package conftest, so the name may point at a different file by the time
    a test module here is collected.
    """
    path = Path(__file__).resolve().parent.parent / "conftest.py"
    spec = importlib.util.spec_from_file_location("_tavernkit_tests_root_conftest", path)
    if spec is None or spec.loader is None:  # pragma: no cover - the file is in the repo
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def configured_root(environ: Mapping[str, str] | None = None) -> ConformanceRoot:
    """The folder the suite runs against: ``conformance_root()`` of tests/conftest.py."""
    value = (os.environ if environ is None else environ).get(ENV_VAR)
    if value:
        return ConformanceRoot(path=Path(value), explicit=True)
    return ConformanceRoot(path=Path(_root_conftest().conformance_root()), explicit=False)


# --- discovery -------------------------------------------------------------------------------


def discover_macros(root: Path) -> list[Case]:
    """One case per non-blank line of ``st-1.18/macros.jsonl``; id = the line's ``id``."""
    path = root / ST_DIR / "macros.jsonl"
    if not path.is_file():
        return []
    return _flag_duplicates(_discover_lines(path, MACROS))


def _discover_lines(path: Path, family: str) -> list[Case]:
    """One case per non-blank line of a JSON-lines file; id = the line's ``id``."""
    cases: list[Case] = []
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return [Case(id=path.name, family=family, source=path, problem=f"unreadable: {exc}")]
    for number, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        fallback_id = f"{path.name}:{number}"
        try:
            data = json.loads(raw)
        except json.JSONDecodeError as exc:
            cases.append(_broken(family, path, fallback_id, f"invalid JSON: {exc}", number))
            continue
        if not isinstance(data, dict):
            cases.append(_broken(family, path, fallback_id, "line is not a JSON object", number))
            continue
        case_id = data.get("id")
        if not isinstance(case_id, str) or not case_id:
            cases.append(_broken(family, path, fallback_id, "missing string 'id'", number))
            continue
        cases.append(Case(id=case_id, family=family, source=path, data=data, line=number))
    return cases


def discover_worldinfo(root: Path) -> list[Case]:
    """One case per ``st-1.18/worldinfo/<id>.json`` scenario; id = the file name's stem."""
    return _discover_files(root / ST_DIR / "worldinfo", WORLDINFO)


def discover_prompts(root: Path) -> list[Case]:
    """One case per ``st-1.18/prompts/<id>.json`` generation; id = the file name's stem."""
    return _discover_files(root / ST_DIR / "prompts", PROMPTS)


def discover_groups(root: Path) -> list[Case]:
    """One case per ``st-1.18/groups/<id>.json`` group turn; id = the file name's stem."""
    return _discover_files(root / ST_DIR / "groups", GROUPS)


def discover_regex(root: Path) -> list[Case]:
    """The Regex extension's cases (README §7): one per line of ``st-1.18/regex/engine.jsonl``
    (id = the line's ``id``) and one per other ``st-1.18/regex/<id>.json`` file."""
    folder = root / ST_DIR / "regex"
    if not folder.is_dir():
        return []
    cases: list[Case] = []
    engine = folder / "engine.jsonl"
    if engine.is_file():
        cases.extend(_discover_lines(engine, REGEX))
    cases.extend(
        Case(id=path.stem, family=REGEX, source=path)
        for path in sorted(folder.glob("*.json"))
        if path.is_file()
    )
    return _flag_duplicates(cases)


def discover_all(root: Path) -> list[Case]:
    """Every golden case of ``st-1.18/`` (the perf anchors are not golden cases)."""
    return [
        *discover_macros(root),
        *discover_worldinfo(root),
        *discover_prompts(root),
        *discover_groups(root),
        *discover_regex(root),
    ]


def discover_perf(root: Path) -> list[Case]:
    """The benchmark inputs whose expected outputs were recorded.

    One case per macro set of ``macro_inputs.json`` (expected output in ``results.json →
    macro_engine.outputs[set id]``) and one ``prompt_build`` case (inputs
    ``prompt_build_inputs.json``, expected ``prompt_build_output.json``). Each case's ``extra``
    holds the paths the test reads; nothing big is parsed here except the small macro inputs.
    """
    perf = root / PERF_DIR
    cases: list[Case] = []
    macro_inputs = perf / "macro_inputs.json"
    results = perf / "results.json"
    if macro_inputs.is_file():
        try:
            sets = read_json_object(macro_inputs).get("sets")
        except MalformedCase as exc:
            cases.append(_broken(PERF, macro_inputs, "macro_inputs", str(exc)))
            sets = None
        if sets is not None and not isinstance(sets, list):
            cases.append(_broken(PERF, macro_inputs, "macro_inputs", "'sets' is not a list"))
        for index, item in enumerate(sets or []):
            set_id = item.get("id") if isinstance(item, dict) else None
            if not isinstance(set_id, str) or not set_id:
                cases.append(_broken(PERF, macro_inputs, f"macro-{index}", "set without 'id'"))
                continue
            cases.append(
                Case(
                    id=f"macro-{set_id}",
                    family=PERF,
                    source=macro_inputs,
                    data=item,
                    extra={"kind": "macro", "results": results},
                )
            )
    build_inputs = perf / "prompt_build_inputs.json"
    if build_inputs.is_file():
        cases.append(
            Case(
                id="prompt_build",
                family=PERF,
                source=build_inputs,
                extra={"kind": "prompt_build", "output": perf / "prompt_build_output.json"},
            )
        )
    return _flag_duplicates(cases)


def _discover_files(folder: Path, family: str) -> list[Case]:
    if not folder.is_dir():
        return []
    return [
        Case(id=path.stem, family=family, source=path)
        for path in sorted(folder.glob("*.json"))
        if path.is_file()
    ]


def _broken(family: str, path: Path, case_id: str, problem: str, line: int | None = None) -> Case:
    return Case(id=case_id, family=family, source=path, problem=problem, line=line)


def _flag_duplicates(cases: Sequence[Case]) -> list[Case]:
    """Give a repeated id a distinct pytest id and mark it broken.

    pytest would silently suffix duplicates (``e2e_001`` and ``e2e_0010``), so a copy-paste
    error in a case file would run under a misleading name instead of failing.
    """
    seen: dict[str, Case] = {}
    out: list[Case] = []
    for case in cases:
        first = seen.get(case.id)
        if first is None:
            seen[case.id] = case
            out.append(case)
            continue
        out.append(
            Case(
                id=f"{case.id}@{case.line if case.line is not None else len(out)}",
                family=case.family,
                source=case.source,
                line=case.line,
                problem=f"duplicate case id {case.id!r} (first at {first.where})",
            )
        )
    return out


# --- schema checks ---------------------------------------------------------------------------


def validate(family: str, data: Mapping[str, Any], where: str, *, expected_id: str) -> None:
    """Cheap structural checks: the keys each comparison needs exist with the right shape."""
    checks: dict[str, Callable[[Mapping[str, Any], str], list[str]]] = {
        MACROS: _macro_problems,
        WORLDINFO: _worldinfo_problems,
        PROMPTS: _prompt_problems,
        GROUPS: _group_problems,
        REGEX: _regex_problems,
        PERF: _perf_problems,
    }
    problems = checks[family](data, expected_id)
    if problems:
        raise MalformedCase(f"{where}: " + "; ".join(problems))


def _missing(data: Mapping[str, Any], keys: Iterable[str], prefix: str = "") -> list[str]:
    return [f"missing key {prefix}{key!r}" for key in keys if key not in data]


def _id_problems(data: Mapping[str, Any], expected_id: str) -> list[str]:
    if "id" in data and data["id"] != expected_id:
        return [f"case id {data['id']!r} does not match the file name {expected_id!r}"]
    return []


def _macro_problems(data: Mapping[str, Any], expected_id: str) -> list[str]:
    problems = _missing(data, MACRO_KEYS)
    for key in ("input", "output"):
        if key in data and not isinstance(data[key], str):
            problems.append(f"{key!r} is not a string")
    for key in MACRO_KEYS[2:]:
        if key.endswith(("_before", "_after")) and key in data and not isinstance(data[key], dict):
            problems.append(f"{key!r} is not an object")
    return problems


def _worldinfo_problems(data: Mapping[str, Any], expected_id: str) -> list[str]:
    problems = _missing(data, WORLDINFO_KEYS) + _id_problems(data, expected_id)
    if "books" in data and not isinstance(data["books"], list):
        problems.append("'books' is not a list")
    turns = data.get("turns")
    if "turns" in data and (not isinstance(turns, list) or not turns):
        problems.append("'turns' is not a non-empty list")
        return problems
    for index, turn in enumerate(turns or []):
        prefix = f"turns[{index}]."
        if not isinstance(turn, dict):
            problems.append(f"turns[{index}] is not an object")
            continue
        problems += _missing(turn, WORLDINFO_TURN_KEYS, prefix)
        result = turn.get("result")
        if isinstance(result, dict):
            problems += _missing(result, WORLDINFO_RESULT_KEYS, prefix + "result.")
        elif "result" in turn:
            problems.append(f"{prefix}result is not an object")
        if "random_consumed" in turn and not isinstance(turn["random_consumed"], list):
            problems.append(f"{prefix}random_consumed is not a list")
    return problems


def _prompt_problems(data: Mapping[str, Any], expected_id: str) -> list[str]:
    problems = _missing(data, PROMPT_KEYS) + _id_problems(data, expected_id)
    if "api" in data and data["api"] not in PROMPT_APIS:
        problems.append(f"'api' is {data['api']!r}, expected one of {PROMPT_APIS}")
    body = data.get("request_body")
    if "request_body" in data and not isinstance(body, dict):
        problems.append("'request_body' is not an object")
    elif isinstance(body, dict):
        wanted = "messages" if data.get("api") == "cc" else "prompt"
        if wanted not in body:
            problems.append(f"missing key 'request_body.{wanted}'")
    if "inputs" in data and not isinstance(data["inputs"], dict):
        problems.append("'inputs' is not an object")
    return problems


def _group_problems(data: Mapping[str, Any], expected_id: str) -> list[str]:
    problems = _missing(data, GROUP_KEYS) + _id_problems(data, expected_id)
    if "api" in data and data["api"] not in ("cc", "tc"):
        problems.append(f"'api' is {data['api']!r}, expected 'cc' or 'tc'")
    inputs = data.get("inputs")
    if isinstance(inputs, dict):
        problems += _missing(inputs, ("group", "chat", "generate"), "inputs.")
    elif "inputs" in data:
        problems.append("'inputs' is not an object")
    for index, request in enumerate(data.get("requests") or []):
        if not isinstance(request, dict) or "request_body" not in request:
            problems.append(f"requests[{index}] has no 'request_body'")
    return problems


def _regex_problems(data: Mapping[str, Any], expected_id: str) -> list[str]:
    problems = _id_problems(data, expected_id)
    kind = data.get("kind")
    if kind not in REGEX_KEYS:
        return [*problems, f"'kind' is {kind!r}, expected one of {sorted(REGEX_KEYS)}"]
    problems += _missing(data, REGEX_KEYS[kind])
    if kind == "engine" and not isinstance(data.get("calls"), list):
        problems.append("'calls' is not a list")
    return problems


def _perf_problems(data: Mapping[str, Any], expected_id: str) -> list[str]:
    if "sets" in data or "id" not in data:  # the prompt-build inputs: a whole file
        return _missing(data, ("card", "persona", "preset", "chat", "lorebook", "settings"))
    problems = _missing(data, PERF_MACRO_SET_KEYS)
    if data.get("kind") == "list" and not isinstance(data.get("items"), list):
        problems.append("list set without 'items'")
    if data.get("kind") == "single" and not isinstance(data.get("text"), str):
        problems.append("single set without 'text'")
    return problems


def read_json_object(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_bytes().decode("utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise MalformedCase(f"{path}: cannot read JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise MalformedCase(f"{path}: top level is not a JSON object")
    return data


# --- parametrization -------------------------------------------------------------------------


def params(cases: Sequence[Case], root: ConformanceRoot, family_label: str) -> list[Any]:
    """pytest params for one family: one per case, or one skipped placeholder with a reason.

    An empty family skips rather than fails here; ``test_cases_present`` is the one item
    that fails when an explicitly configured folder holds no cases at all.
    """
    reason = root.absence_reason()
    if reason is not None:
        return [pytest.param(None, id="no-conformance-data", marks=pytest.mark.skip(reason=reason))]
    if not cases:
        return [
            pytest.param(
                None,
                id=f"no-{family_label}-cases",
                marks=pytest.mark.skip(reason=f"no {family_label} cases under {root.path}"),
            )
        ]
    return [pytest.param(case, id=case.id) for case in cases]
