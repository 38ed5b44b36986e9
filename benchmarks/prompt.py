"""Chat-completion prompt-build benchmark on SillyTavern's own perf inputs.

Run: ``.venv/bin/python benchmarks/prompt.py [--runs 20]``.

Inputs: ``st-1.18-perf/prompt_build_inputs.json`` under ``$TAVERNKIT_CONFORMANCE_DIR`` (or
``../shared/conformance``): a 1,000-message chat, the Default preset plus 28 custom prompts, a
500-entry global lorebook, 32k context, gpt-4o token counts. The timed unit is what SillyTavern's
``Generate('normal', {}, dryRun=true)`` timed: the world-info scan plus the prompt build, from a
chat already in memory (state parsing is outside the timing).

- warm: the per-text token cache is kept between runs (SillyTavern's warm protocol: 190 ms);
- cold: a fresh token cache each run, vocabulary already loaded (SillyTavern: 1,591 ms with 203
  tokenizer HTTP calls).

The first run's messages are checked against ``prompt_build_output.json`` (165 messages).

Medians and minimums are printed, of wall time and of this thread's CPU time: on a shared
machine the wall-time median mostly measures the neighbours, while the minimum and the CPU time
show what a build costs. ``--profile`` adds a cProfile breakdown of the warm builds.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from tavernkit.prompt.assembled import AssembledChat
from tavernkit.prompt.st_replay import perf_case_inputs, prepare_replay
from tavernkit.text.tokens import CachedTokenizer, QuicktokTokenizer, encoding_for_model

REPO = Path(__file__).resolve().parent.parent
ST_WARM_MS = 190.0
ST_COLD_MS = 1591.0
TARGET_WARM_MS = 10.0
TARGET_COLD_MS = 100.0


def conformance_dir() -> Path:
    env = os.environ.get("TAVERNKIT_CONFORMANCE_DIR")
    return Path(env) if env else REPO.parent / "shared" / "conformance"


def median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20, help="timed runs per phase (default 20)")
    parser.add_argument(
        "--profile", action="store_true", help="print a cProfile breakdown of the warm builds"
    )
    args = parser.parse_args()

    folder = conformance_dir() / "st-1.18-perf"
    inputs_path = folder / "prompt_build_inputs.json"
    if not inputs_path.is_file():
        print(f"no perf inputs at {inputs_path}; set TAVERNKIT_CONFORMANCE_DIR")
        return 2
    raw = json.loads(inputs_path.read_text(encoding="utf-8"))
    expected = json.loads((folder / "prompt_build_output.json").read_text(encoding="utf-8"))

    t0 = time.perf_counter()
    replay = prepare_replay(perf_case_inputs(raw), {})
    parse_ms = (time.perf_counter() - t0) * 1000
    encoding = encoding_for_model(replay.state.model)
    inner = QuicktokTokenizer(encoding)
    t0 = time.perf_counter()
    inner.count("warm up the vocabulary")
    vocab_ms = (time.perf_counter() - t0) * 1000

    def build(tokenizer: CachedTokenizer) -> AssembledChat:
        result = replay.run(kind="normal", tokenizer=tokenizer)
        assert isinstance(result, AssembledChat)
        return result

    # First build (compiles the lorebook, fills the caches), also the correctness check.
    shared = CachedTokenizer(inner)
    t0 = time.perf_counter()
    first = build(shared)
    first_ms = (time.perf_counter() - t0) * 1000
    messages: list[dict[str, Any]] = first.messages
    same = messages == expected["messages"]

    gc.collect()
    warm: list[float] = []
    warm_cpu: list[float] = []
    for _ in range(args.runs):
        cpu, start = time.thread_time(), time.perf_counter()
        build(shared)
        warm.append(time.perf_counter() - start)
        warm_cpu.append(time.thread_time() - cpu)
    cold: list[float] = []
    cold_cpu: list[float] = []
    for _ in range(args.runs):
        fresh = CachedTokenizer(inner)
        cpu, start = time.thread_time(), time.perf_counter()
        build(fresh)
        cold.append(time.perf_counter() - start)
        cold_cpu.append(time.thread_time() - cpu)

    warm_ms, cold_ms = median_ms(warm), median_ms(cold)
    print("Prompt build: 1,000 messages, 40 prompts, 500-entry lorebook, 32k context (gpt-4o)")
    print(f"  state parse (not timed by ST): {parse_ms:8.1f} ms")
    print(f"  {encoding} vocabulary load:     {vocab_ms:8.1f} ms (once per process)")
    print(f"  first build (compile + count): {first_ms:8.1f} ms")
    print(
        f"  output equals SillyTavern's:   {same} ({len(messages)} messages, "
        f"{first.token_count} tokens; ST {len(expected['messages'])}, "
        f"{expected.get('st_token_total')})"
    )
    print()
    header = (
        f"{'phase':6} {'ST 1.18 ms':>11} {'ours ms':>9} {'min':>6} {'p10':>6} {'p90':>6} "
        f"{'cpu med':>8} {'cpu min':>8} {'ratio':>7} {'target':>11}"
    )
    print(header)
    print("-" * len(header))
    for name, st, ours, samples, cpu_samples, target in (
        ("warm", ST_WARM_MS, warm_ms, warm, warm_cpu, TARGET_WARM_MS),
        ("cold", ST_COLD_MS, cold_ms, cold, cold_cpu, TARGET_COLD_MS),
    ):
        qs = statistics.quantiles([s * 1000 for s in samples], n=10)
        verdict = "met" if ours < target else "MISSED"
        print(
            f"{name:6} {st:11.0f} {ours:9.1f} {min(samples) * 1000:6.1f} {qs[0]:6.1f} "
            f"{qs[-1]:6.1f} {median_ms(cpu_samples):8.1f} {min(cpu_samples) * 1000:8.1f} "
            f"{st / ours:6.1f}x {f'<{target:.0f} ' + verdict:>11}"
        )
    print(
        f"(medians of {args.runs} runs; cpu = this thread's CPU time; "
        "ratio = SillyTavern / tavernkit median)"
    )
    if args.profile:
        profile_warm(build, shared, args.runs)
    return 0 if same else 1


def profile_warm(build: Any, tokenizer: CachedTokenizer, runs: int) -> None:
    """cProfile of ``runs`` warm builds: where a build's time goes, by function."""
    import cProfile
    import pstats

    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(runs):
        build(tokenizer)
    profiler.disable()
    print(f"\ncProfile of {runs} warm builds (the profiler slows calls; compare shares):")
    pstats.Stats(profiler, stream=sys.stdout).sort_stats("tottime").print_stats(25)


if __name__ == "__main__":
    raise SystemExit(main())
