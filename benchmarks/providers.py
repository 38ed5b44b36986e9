"""Parsing + accumulation overhead per streamed event, over every stream in the wire corpus.

For each ``.sse`` fixture: SSE decoding, the adapter's stream parser and the accumulator run
over the whole body (fed in 1 KiB network-sized chunks), best of several repeats; the cost per
SSE event is the time divided by the number of data events. Prints each file, then the median
over all fixtures against the 20 µs target. No HTTP is involved: this is our code's overhead.

    .venv/bin/python benchmarks/providers.py [--repeat N]

``--local`` measures instead tokens/s through ``LocalLlamaProvider`` against the raw
xllamacpp binding (``Server.handle_chat_completions`` with a callback) on the same loaded model,
prompt, body and seed: paired runs alternating A/B in one process, both printed, and the median
ratio against the 0.95 target (needs the ``local`` extra). ``--threads`` compares generation
thread counts on the raw binding instead (llama.cpp's spin-wait off, as the provider runs it).

    .venv/bin/python benchmarks/providers.py --local [--pairs 5] [--tokens 128]
    .venv/bin/python benchmarks/providers.py --threads [--tokens 64]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "providers"))

from tavernkit.providers.accumulator import Accumulator  # noqa: E402
from tavernkit.providers.base import ErrorContext  # noqa: E402
from tavernkit.providers.sse import SSEDecoder  # noqa: E402

TARGET_US = 20.0


def wire_root() -> Path:
    env = os.environ.get("TAVERNKIT_WIRE_FIXTURES")
    return Path(env) if env else ROOT.parent / "shared" / "fixtures" / "wire"


def run_once(adapter: object, body: bytes, chunk: int) -> int:
    decoder = SSEDecoder()
    parser = adapter.stream_parser(ErrorContext())  # type: ignore[attr-defined]
    acc = Accumulator()
    feed = acc.feed
    for start in range(0, len(body), chunk):
        for sse in decoder.feed(body[start : start + chunk]):
            for event in parser.feed(sse):
                feed(event)
    for sse in decoder.flush():
        for event in parser.feed(sse):
            feed(event)
    for event in parser.finish():
        feed(event)
    acc.result()
    return decoder.events


def main() -> None:
    args = argparse.ArgumentParser()
    args.add_argument("--repeat", type=int, default=7)
    args.add_argument("--chunk", type=int, default=1024)
    args.add_argument("--local", action="store_true", help="local model tokens/s instead")
    args.add_argument("--threads", action="store_true", help="local thread counts instead")
    args.add_argument("--pairs", type=int, default=5)
    args.add_argument("--tokens", type=int, default=128)
    opts = args.parse_args()
    if opts.local:
        local_main(opts.pairs, opts.tokens)
        return
    if opts.threads:
        threads_main(opts.tokens)
        return
    from _replay import adapter_for  # the same fixture -> adapter table the tests use

    manifest = wire_root() / "MANIFEST.json"
    if not manifest.is_file():
        sys.exit(f"wire corpus not found at {wire_root()}")
    per_event: list[float] = []
    for entry in json.loads(manifest.read_text())["entries"]:
        if not entry["path"].endswith(".sse") or entry["http_status"] != 200:
            continue
        adapter = adapter_for(entry)
        if adapter is None:
            continue
        body = (wire_root() / entry["path"]).read_bytes()
        best = float("inf")
        events = 0
        for _ in range(opts.repeat):
            start = time.perf_counter()
            events = run_once(adapter, body, opts.chunk)
            best = min(best, time.perf_counter() - start)
        if events:
            us = best / events * 1e6
            per_event.append(us)
            print(f"{entry['path']:<70} {events:>5} events {us:7.2f} µs/event")
    median = statistics.median(per_event)
    verdict = "OK" if median < TARGET_US else "OVER TARGET"
    print(
        f"\nmedian over {len(per_event)} streams: {median:.2f} µs/event "
        f"(target < {TARGET_US:g} µs) {verdict}"
    )


LOCAL_TARGET = 0.95
LOCAL_MESSAGES = [
    {"role": "system", "content": "You are Mira, a cheerful tavern keeper."},
    {"role": "user", "content": "Describe the tavern and tonight's menu in detail."},
]


def local_main(pairs: int, max_tokens: int) -> None:
    """Tokens/s, raw ``Server.handle_chat_completions`` (A) vs ``LocalLlamaProvider.stream`` (B).

    Both stream the same body with the same seed through one loaded ``Server`` (so neither
    pays a load); the rate is llama.cpp's own completion count over the time from the first
    text to the end (prompt evaluation, the same work on both sides, left out). The prompt
    differs per run by its first line, so neither side finds it in the KV cache. Pairs
    alternate which side runs first, so warm-up and drift fall on both equally.
    """
    import asyncio

    from tavernkit.providers.events import TextDelta, Usage
    from tavernkit.providers.local_call import build_call
    from tavernkit.providers.local_llama import LocalLlamaProvider
    from tavernkit.providers.request import ChatMessage, ChatPrompt, Sampling

    seed = 1234
    provider = LocalLlamaProvider(n_ctx=2048, seed=seed)
    server = provider.load()
    runs = iter(range(1_000_000))

    def request() -> ChatPrompt:
        first = {
            **LOCAL_MESSAGES[0],
            "content": f"Run {next(runs)}. {LOCAL_MESSAGES[0]['content']}",
        }
        messages = (first, *LOCAL_MESSAGES[1:])
        return ChatPrompt(
            tuple(ChatMessage(m["role"], m["content"]) for m in messages),
            sampling=Sampling(max_tokens=max_tokens, temperature=0.8, seed=seed),
        )

    def raw() -> tuple[float, int, str]:
        # exactly the body the provider sends (samplers, the small-model defaults, stream flags)
        body = {
            **build_call(request()).body,
            "stream": True,
            "stream_options": {"include_usage": True},
            "cache_prompt": True,
            "return_progress": True,
        }
        parts: list[str] = []
        tokens = 0
        first = 0.0

        def on_chunk(chunk: dict[str, object]) -> bool:
            nonlocal tokens, first
            for choice in chunk.get("choices") or ():  # type: ignore[attr-defined]
                piece = (choice.get("delta") or {}).get("content")
                if piece:
                    first = first or time.perf_counter()
                    parts.append(piece)
            usage = chunk.get("usage")
            if isinstance(usage, dict):
                tokens = int(usage["completion_tokens"])
            return False

        server.handle_chat_completions(body, on_chunk)
        return time.perf_counter() - first, tokens, "".join(parts)

    async def ours() -> tuple[float, int, str]:
        first = 0.0
        parts: list[str] = []
        tokens = 0
        async for event in provider.stream(request()):
            if isinstance(event, TextDelta):
                first = first or time.perf_counter()
                parts.append(event.text)
            elif isinstance(event, Usage) and event.output_tokens:
                tokens = event.output_tokens
        return time.perf_counter() - first, tokens, "".join(parts)

    async def run_pairs() -> list[float]:
        raw()  # warm-up: page cache, first allocations
        await ours()
        ratios: list[float] = []
        for i in range(pairs):
            order = ("A", "B") if i % 2 == 0 else ("B", "A")
            rates: dict[str, float] = {}
            for side in order:
                seconds, tokens, _ = raw() if side == "A" else await ours()
                rates[side] = tokens / seconds
            ratios.append(rates["B"] / rates["A"])
            print(
                f"pair {i + 1} ({order[0]} first): raw {rates['A']:7.1f} tok/s   "
                f"tavernkit {rates['B']:7.1f} tok/s   ratio {ratios[-1]:.3f}"
            )
        return ratios

    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    median = statistics.median(asyncio.run(run_pairs()))
    verdict = "OK" if median >= LOCAL_TARGET else "UNDER TARGET"
    print(
        f"\nmedian ratio tavernkit/raw over {pairs} pairs: {median:.3f} "
        f"(target >= {LOCAL_TARGET}) {verdict}"
    )


def threads_main(max_tokens: int) -> None:
    """Generation and prompt-evaluation tokens/s of the raw binding for 1 and 2 generation
    threads (prompt evaluation on 2), llama.cpp's own timings, median of 3 runs each."""
    import xllamacpp

    from tavernkit.providers.local_engine import LocalEngine

    long = "The old lighthouse stood on the cliff above the harbour. " * 90
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    for generation in (1, 2):
        engine = LocalEngine(n_ctx=2048, slots=1, n_threads=generation, n_threads_batch=2)
        server = engine.server()
        prompt: list[float] = []
        gen: list[float] = []
        for run in range(3):
            body = {
                "messages": [
                    {"role": "system", "content": f"Run {run}. {long}"},
                    {"role": "user", "content": "Tell me more."},
                ],
                "max_tokens": max_tokens,
                "seed": run,
                "ignore_eos": True,
            }
            timings = server.handle_chat_completions(body)["timings"]
            prompt.append(timings["prompt_per_second"])
            gen.append(timings["predicted_per_second"])
        print(
            f"{generation} generation thread(s): prompt {statistics.median(prompt):6.1f} tok/s, "
            f"generation {statistics.median(gen):6.1f} tok/s"
        )
        del server
        engine.loaded = None
    print(f"load average {os.getloadavg()[0]:.2f} at the end (xllamacpp {xllamacpp.__version__})")


if __name__ == "__main__":
    main()
