"""Macro-engine benchmark against SillyTavern 1.18's recorded timings.

Runs the exact inputs of ``st-1.18-perf/macro_inputs.json`` (folder from
``TAVERNKIT_CONFORMANCE_DIR``, default ``../shared/conformance``) the way SillyTavern's timed
run did (per run: reset the variables, apply ``chat_metadata_set``, build the env and evaluate
each string), checks the output against ``results.json`` (``«R..»``/``«D..»`` random markers
masked), and prints our medians beside SillyTavern's:

- warm: parsed templates cached (the real case: the same preset and card render every turn);
- cold: every cache cleared before every run: the parse cache, the memo of template hashes
  that seed ``{{pick}}`` and the memo of pick draws;
- cold-h (with ``--split-cold``): the parse cache cleared, the template-hash memo kept. The
  hash is a pure function of the template text (cyrb53 over its UTF-16 units, a pure-Python
  loop of about 0.2 µs per character), so this row shows how much of "cold" is that loop.

Each row prints the median and the minimum of the timed runs (the minimum is the steadier
figure on a shared machine) beside SillyTavern's median.

Usage: ``python benchmarks/macros.py [--runs 200] [--warmup 50] [--split-cold]``
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from tavernkit.text.macros import MacroEnv, default_registry, substitute_macros
from tavernkit.text.macros.builtins import core
from tavernkit.text.macros.seeding import content_hash
from tavernkit.text.variables import InMemoryVariables

REPO = Path(__file__).resolve().parents[1]
_MARKER = re.compile(r"«([RD]\d+):[^»]*»")


def perf_dir() -> Path:
    root = os.environ.get("TAVERNKIT_CONFORMANCE_DIR")
    base = Path(root) if root else REPO.parent / "shared" / "conformance"
    return base / "st-1.18-perf"


def texts_of(macro_set: dict[str, Any]) -> list[tuple[str | None, str]]:
    if macro_set["kind"] == "list":
        return [(item["id"], item["text"]) for item in macro_set["items"]]
    return [(None, macro_set["text"])]


def run_once(macro_set: dict[str, Any]) -> tuple[float, Any, InMemoryVariables]:
    variables = InMemoryVariables(macro_set["local_vars_before"], macro_set["global_vars_before"])
    metadata = macro_set.get("chat_metadata_set") or {}
    outputs: dict[str, str] = {}
    last = ""
    elapsed = 0.0
    for item_id, text in texts_of(macro_set):
        start = time.perf_counter()
        env = MacroEnv(
            user="User",
            char="Character",
            variables=variables,
            chat_id_hash=metadata.get("chat_id_hash"),
            compat="st-1.18",
        )
        last = substitute_macros(text, env)
        elapsed += time.perf_counter() - start
        if item_id is not None:
            outputs[item_id] = last
    return elapsed, (outputs if macro_set["kind"] == "list" else last), variables


def expected_output(results: dict[str, Any], set_id: str) -> Any:
    return results["macro_engine"]["outputs"][set_id]["output"]


def mask(value: Any) -> Any:
    if isinstance(value, str):
        return _MARKER.sub(lambda m: f"«{m.group(1)}:*»", value)
    return {k: mask(v) for k, v in value.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--split-cold", action="store_true", help="also time cold-h")
    options = parser.parse_args()
    folder = perf_dir()
    inputs_path, results_path = folder / "macro_inputs.json", folder / "results.json"
    if not inputs_path.is_file() or not results_path.is_file():
        print(f"benchmark inputs not found in {folder} (set TAVERNKIT_CONFORMANCE_DIR)")
        return 2
    inputs = json.loads(inputs_path.read_text(encoding="utf-8"))
    results = json.loads(results_path.read_text(encoding="utf-8"))
    registry = default_registry()
    print(f"{'set':24} {'mode':6} {'ours µs':>9} {'min µs':>8} {'ST µs':>8} {'ratio':>8}  output")
    modes = ("warm", "cold", "cold-h") if options.split_cold else ("warm", "cold")
    failed = False
    for macro_set in inputs["sets"]:
        set_id = macro_set["id"]
        st_median = results["macro_engine"]["summary_us"][set_id]["back_to_back"][
            "pooled_total_us"
        ]["median"]
        _, output, variables = run_once(macro_set)
        expected = expected_output(results, set_id)
        same = mask(output) == mask(expected)
        vars_after = results["macro_engine"]["outputs"][set_id].get("vars_after")
        failed = failed or not same
        for mode in modes:
            samples = []
            for index in range(options.warmup + options.runs):
                if mode != "warm":
                    registry.clear_cache()
                if mode == "cold":
                    content_hash.cache_clear()
                    core._seed_draw.cache_clear()
                elapsed, _, _ = run_once(macro_set)
                if index >= options.warmup:
                    samples.append(elapsed * 1e6)
            median = statistics.median(samples)
            ratio = st_median / median
            verdict = "equal" if same else "DIFFERENT"
            print(
                f"{set_id:24} {mode:6} {median:9.1f} {min(samples):8.1f} {st_median:8.0f} "
                f"{ratio:7.1f}x  {verdict}"
            )
        if vars_after and not same:
            print(f"  variables after: {variables.local_vars}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
