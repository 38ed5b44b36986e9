"""The offline embedder (tavernkit.embed.MiniLMEmbedder): load time, passages/s, and the
recall of the small retrieval check in tests/embed/_retrieval.py.

Passages are lorebook-sized (one to three sentences, from the retrieval set, varied so none
repeat); each configuration embeds the same 256 of them, best of 3. The baseline in the same
run is one text per call (what an embedder without a batch API does, e.g. tryaii's own
provider), so the ratio shows what the batch API buys.

    .venv/bin/python benchmarks/embed.py
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from embed._retrieval import PAIRS  # noqa: E402
from tavernkit.embed import MiniLMEmbedder  # noqa: E402


def passages(n: int) -> list[str]:
    base = [p for p, _ in PAIRS]
    return [
        f"{base[i % len(base)]} (Note {i}: {base[(i * 7) % len(base)][:40]}.)" for i in range(n)
    ]


def best_rate(embedder: MiniLMEmbedder, texts: list[str], one_by_one: bool) -> float:
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        if one_by_one:
            for text in texts:
                embedder.embed([text])
        else:
            embedder.embed(texts)
        best = min(best, time.perf_counter() - start)
    return len(texts) / best


def recall(embedder: MiniLMEmbedder, k: int) -> float:
    p = embedder.embed([p for p, _ in PAIRS])
    q = embedder.embed([q for _, q in PAIRS])
    top = (-(q @ p.T)).argsort(axis=1)[:, :k]
    return sum(int(i in row) for i, row in enumerate(top)) / len(PAIRS)


def main() -> None:
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    texts = passages(256)
    start = time.perf_counter()
    embedder = MiniLMEmbedder()
    embedder.load()
    print(
        f"load (tokenizer + ONNX session, {embedder.threads} threads): "
        f"{time.perf_counter() - start:.2f} s"
    )
    single = best_rate(embedder, texts[:64], one_by_one=True)
    print(f"one text per call (baseline): {single:7.1f} passages/s")
    for threads in (1, 2):
        for batch in (8, 32):
            model = MiniLMEmbedder(threads=threads, batch_size=batch)
            model.load()
            rate = best_rate(model, texts, one_by_one=False)
            print(
                f"batch {batch:>2}, {threads} thread(s): {rate:7.1f} passages/s "
                f"({rate / single:.2f}x the baseline)"
            )
    print(
        f"retrieval check ({len(PAIRS)} questions): recall@1 {recall(embedder, 1):.2f}, "
        f"recall@3 {recall(embedder, 3):.2f}"
    )
    print(f"load average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
