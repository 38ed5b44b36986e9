"""Parsing + accumulation overhead per streamed event, over every stream in the wire corpus.

For each ``.sse`` fixture: SSE decoding, the adapter's stream parser and the accumulator run
over the whole body (fed in 1 KiB network-sized chunks), best of several repeats; the cost per
SSE event is the time divided by the number of data events. Prints each file, then the median
over all fixtures against the 20 µs target. No HTTP is involved: this is our code's overhead.

    .venv/bin/python benchmarks/providers.py [--repeat N]
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
    opts = args.parse_args()
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


if __name__ == "__main__":
    main()
