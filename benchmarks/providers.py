"""Parsing + accumulation overhead per streamed event, over every stream in the wire corpus.

For each ``.sse`` fixture: SSE decoding, the adapter's stream parser and the accumulator run
over the whole body (fed in 1 KiB network-sized chunks), best of several repeats; the cost per
SSE event is the time divided by the number of data events. Prints each file, then the median
over all fixtures against the 20 µs target. No HTTP is involved: this is our code's overhead.

    .venv/bin/python benchmarks/providers.py [--repeat N]

``--local`` measures instead tokens/s through ``LocalLlamaProvider`` against raw
llama-cpp-python on the same prompt and seed: 5 paired runs alternating A/B in one process,
both printed, and the median ratio against the 0.95 target (needs the ``local`` extra).

    .venv/bin/python benchmarks/providers.py --local [--pairs 5] [--tokens 128]
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
    args.add_argument("--pairs", type=int, default=5)
    args.add_argument("--tokens", type=int, default=128)
    opts = args.parse_args()
    if opts.local:
        local_main(opts.pairs, opts.tokens)
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
    """Tokens/s, raw ``create_chat_completion`` (A) vs ``LocalLlamaProvider.stream`` (B).

    Both stream the same prompt with the same seed from one loaded ``Llama`` (so neither pays
    a load); tokens are the reply re-tokenized, identical for both when the text is. Pairs
    alternate which side runs first, so warm-up and thermal drift fall on both equally.
    """
    import asyncio

    from tavernkit.providers.events import TextDelta
    from tavernkit.providers.local_llama import LocalLlamaProvider, build_call
    from tavernkit.providers.local_model import require_model_path
    from tavernkit.providers.request import ChatMessage, ChatPrompt, Sampling

    seed = 1234
    provider = LocalLlamaProvider(model_path=require_model_path(), n_ctx=2048, seed=seed)
    llama = provider.load()
    request = ChatPrompt(
        tuple(ChatMessage(m["role"], m["content"]) for m in LOCAL_MESSAGES),
        sampling=Sampling(max_tokens=max_tokens, temperature=0.8, seed=seed),
    )

    def tokens(text: str) -> int:
        return len(llama.tokenize(text.encode(), add_bos=False, special=True))

    # The raw side gets exactly the arguments our provider passes (samplers and the small-model
    # defaults included), so the two sides generate the same text and only the overhead differs.
    raw_kwargs = {k: v for k, v in build_call(request).kwargs.items() if k != "stream"}
    raw_kwargs.setdefault("seed", seed)

    def raw() -> tuple[float, str]:
        start = time.perf_counter()
        parts = []
        for chunk in llama.create_chat_completion(**raw_kwargs, stream=True):
            piece = chunk["choices"][0]["delta"].get("content")
            if piece:
                parts.append(piece)
        return time.perf_counter() - start, "".join(parts)

    async def ours() -> tuple[float, str]:
        start = time.perf_counter()
        parts = [e.text async for e in provider.stream(request) if isinstance(e, TextDelta)]
        return time.perf_counter() - start, "".join(parts)

    async def run_pairs() -> list[float]:
        raw()  # warm-up: first evaluation of the prompt, page cache
        await ours()
        ratios: list[float] = []
        for i in range(pairs):
            order = ("A", "B") if i % 2 == 0 else ("B", "A")
            rates: dict[str, float] = {}
            texts: dict[str, str] = {}
            for side in order:
                seconds, text = raw() if side == "A" else await ours()
                rates[side] = tokens(text) / seconds
                texts[side] = text
            same = "same text" if texts["A"] == texts["B"] else "TEXT DIFFERS"
            ratios.append(rates["B"] / rates["A"])
            print(
                f"pair {i + 1} ({order[0]} first): raw {rates['A']:7.1f} tok/s   "
                f"tavernkit {rates['B']:7.1f} tok/s   ratio {ratios[-1]:.3f}  {same}"
            )
        return ratios

    median = statistics.median(asyncio.run(run_pairs()))
    verdict = "OK" if median >= LOCAL_TARGET else "UNDER TARGET"
    print(
        f"\nmedian ratio tavernkit/raw over {pairs} pairs: {median:.3f} "
        f"(target >= {LOCAL_TARGET}) {verdict}"
    )


if __name__ == "__main__":
    main()
