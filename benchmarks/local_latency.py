"""What a person feels with the embedded model (SmolLM2-135M through xllamacpp), offline.

1. Cold ``tavernkit chat --once`` in a fresh process and data dir: time to the first byte of
   the reply on stdout, the whole command, and, in another cold process, the part spent
   importing xllamacpp and loading the GGUF.
2. The demo chat (Wren) in one process with the model loaded: time to the first streamed text
   of each of ``--turns`` turns (turn 1 is the first turn of a fresh chat), with the prompt
   tokens, those llama.cpp reused from the KV cache, and those it evaluated (and how long
   that took: on a busy machine the steadier measure of the reuse).
3. Stop: a turn aborted while llama.cpp is still evaluating its prompt, and one aborted after
   its first text; the time from the abort to ``send`` returning.

Targets (issue 13, an idle machine): turn 5 first token < 3 s, a fresh chat's first turn
< 8 s, stop -> prompt back < 0.5 s. The load average is printed: on a shared box the figures
are what that load allows.

    .venv/bin/python benchmarks/local_latency.py [--turns 5] [--max-tokens 80]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from turn import NullSink  # benchmarks/turn.py: the sink that ignores everything

from tavernkit.facade import Tavern
from tavernkit.generation.abort import AbortController
from tavernkit.generation.sink import SinkEvent
from tavernkit.providers.events import TextDelta

USER_TURNS = (
    "Hello! Who are you?",
    "What is it like living in a lighthouse?",
    "Have you ever seen a shipwreck?",
    "What do you do when a storm comes?",
    "Tell me about the strangest night you remember.",
    "Do you ever get lonely out here?",
    "Goodbye for now, Wren.",
)
TARGETS = {"turn5": 3.0, "fresh": 8.0, "stop": 0.5}


class FirstText(NullSink):
    """A sink that notes when the first text arrives."""

    def __init__(self) -> None:
        self.first: float | None = None

    def emit_nowait(self, event: SinkEvent) -> None:
        if self.first is None and isinstance(event, TextDelta) and event.text:
            self.first = time.perf_counter()

    async def emit(self, event: SinkEvent) -> None:
        self.emit_nowait(event)


def verdict(value: float, target: float) -> str:
    return f"(target < {target:g} s) {'OK' if value < target else 'OVER TARGET'}"


def cold_cli() -> None:
    env = {**os.environ, "TAVERNKIT_HOME": tempfile.mkdtemp(prefix="tk-bench-")}
    command = [str(Path(sys.executable).with_name("tavernkit")), "chat", "--once", USER_TURNS[0]]
    start = time.perf_counter()
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    assert proc.stdout is not None
    first_byte = proc.stdout.read(1)
    first = time.perf_counter() - start
    rest = proc.stdout.read()
    proc.wait()
    total = time.perf_counter() - start
    proc.stdout.close()
    load_script = (
        "import time; t = time.perf_counter()\n"
        "from tavernkit.providers.local_engine import LocalEngine\n"
        "LocalEngine().server(); print(time.perf_counter() - t)\n"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", load_script], capture_output=True, text=True, check=True, env=env
    )
    load = float(loaded.stdout.strip().splitlines()[-1])
    reply = (first_byte + rest).decode(errors="replace").strip().replace("\n", " ")
    print(f"cold chat --once: first output {first:.2f} s, whole command {total:.2f} s")
    print(f"  of which importing xllamacpp + loading the GGUF (cold process): {load:.2f} s")
    print(f"  reply: {reply[:100]}")


async def demo_chat(turns: int, max_tokens: int) -> None:
    from tavernkit.cli.chat import ensure_character
    from tavernkit.generation.profiles import EMBEDDED_PROFILE
    from tavernkit.providers.profiles import resolve_model

    overrides: dict[str, Any] = {"max_tokens": max_tokens}
    with tempfile.TemporaryDirectory(prefix="tk-bench-") as home:
        async with Tavern(Path(home), load_plugins=False) as tk:
            provider: Any = tk.local_provider(
                EMBEDDED_PROFILE, resolve_model("local", "smollm2-135m-instruct")
            )
            await asyncio.to_thread(provider.load)
            character = await ensure_character(tk, None)
            info = await tk.chats.new_chat(character)
            firsts: list[float] = []
            for n, text in enumerate(USER_TURNS[:turns], 1):
                sink = FirstText()
                start = time.perf_counter()
                out = await tk.chats.send(info.id, text, overrides=overrides, sink=sink)
                took = time.perf_counter() - start
                first = (sink.first or time.perf_counter()) - start
                firsts.append(first)
                usage = out.result.usage if out.result is not None else None
                prompt = usage.input_tokens if usage else None
                cached = usage.cached_input_tokens if usage else None
                timings = (usage.raw or {}).get("timings") or {} if usage else {}
                print(
                    f"turn {n}: first text {first:5.2f} s, whole turn {took:5.2f} s, "
                    f"prompt {prompt} tokens, {cached} reused from the KV cache, "
                    f"{timings.get('prompt_n')} evaluated in "
                    f"{timings.get('prompt_ms', 0) / 1000:.2f} s  [{out.status}]"
                )
            print(f"first turn of a fresh chat: {firsts[0]:.2f} s {verdict(firsts[0], 8.0)}")
            if len(firsts) >= 5:
                print(f"turn 5 first text: {firsts[4]:.2f} s {verdict(firsts[4], 3.0)}")
            await stops(tk, info.id, overrides)


async def stops(tk: Tavern, chat_id: str, overrides: dict[str, Any]) -> None:
    # a brand-new message early in a long prompt is never in the cache: evaluation takes time
    long_text = "Tell me everything about the lighthouse. " * 60

    for label, after_first in (("during prompt evaluation", False), ("while streaming", True)):
        controller = AbortController()
        sink = FirstText()

        async def fire(
            sink: FirstText = sink,
            controller: AbortController = controller,
            late: bool = after_first,
        ) -> float:
            if late:
                while sink.first is None:
                    await asyncio.sleep(0.005)
            else:
                await asyncio.sleep(0.3)
            controller.abort("user stop")
            return time.perf_counter()

        timer = asyncio.ensure_future(fire())
        out = await tk.chats.send(
            chat_id, long_text, overrides=overrides, sink=sink, abort=controller.signal
        )
        back = time.perf_counter()
        if not timer.done():
            timer.cancel()
            print(f"stop {label}: the turn ended before the stop ({out.status})")
            continue
        took = back - timer.result()
        print(f"stop {label}: prompt back {took * 1000:.0f} ms [{out.status}] {verdict(took, 0.5)}")


def main() -> None:
    args = argparse.ArgumentParser()
    args.add_argument("--turns", type=int, default=5)
    args.add_argument("--max-tokens", type=int, default=80)
    args.add_argument("--skip-cold", action="store_true")
    opts = args.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    if not opts.skip_cold:
        cold_cli()
    asyncio.run(demo_chat(opts.turns, opts.max_tokens))
    print(f"load average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
