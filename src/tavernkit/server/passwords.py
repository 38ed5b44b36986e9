"""argon2id password hashes, computed off the event loop.

One argon2 check of the default profile (RFC 9106 low-memory) is ~0.2 s of CPU and 64 MiB;
run on the event loop, a handful of logins at once stalled every other request of the server
(48 concurrent failed logins: ``GET /health`` from 6 ms to 2.9 s). Here hashes run in a small
thread pool of their own (argon2-cffi releases the GIL while it hashes) at a lower CPU
priority than the event loop (Linux; :data:`NICENESS`), and a process admits
only so many logins at once (:meth:`Passwords.admit`): hashing or waiting for a thread. A
login past that is refused at once, before any hashing or store read: a storm of logins meets
429s, never a slower server.

:meth:`Passwords.verify` of ``None`` (a user name that does not exist) checks the password
against a hash of a random secret made at start, with the same parameters, in the same pool:
a failed login costs the same whether or not the name exists.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import sys
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import TypeVar

import argon2
import argon2.profiles
from argon2.exceptions import InvalidHashError, VerificationError

from tavernkit.errors import TooManyAttempts

__all__ = ["NICENESS", "THREAD_NAME", "Passwords", "default_workers"]

_T = TypeVar("_T")

#: the name the pool's threads start with
THREAD_NAME = "tavernkit-password"


#: how much less CPU a password thread gets than the event loop when both want it (Linux: the
#: thread's nice value; 10 against 0 is about a tenth)
NICENESS = 10


def default_workers() -> int:
    """Password threads when the settings leave it open: two, and never every CPU this
    process may run on (one CPU: one thread; the loop still comes first, see
    :data:`NICENESS`)."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, min(2, (cpus or 1) - 1))


def _lower_priority() -> None:
    # Linux gives each thread its own nice value (setpriority on its thread id): a storm of
    # logins then hashes on what CPU the event loop leaves, and the loop answers as before.
    # Elsewhere the call fails or moves the whole process: it is made only on Linux.
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError):
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), NICENESS)


def busy_refusal() -> TooManyAttempts:
    return TooManyAttempts(
        "the server is checking too many logins at once; try again in a moment",
        retry_after_s=1.0,
        refusal="logins",
    )


class Passwords:
    """Hash and check passwords with the argon2 parameter set ``profile`` (a name in
    ``argon2.profiles``) on ``workers`` threads (0: :func:`default_workers`), admitting
    ``pending`` logins at once."""

    def __init__(self, profile: str, *, workers: int, pending: int) -> None:
        self._hasher = argon2.PasswordHasher.from_parameters(getattr(argon2.profiles, profile))
        self._pool = ThreadPoolExecutor(
            max_workers=workers or default_workers(),
            thread_name_prefix=THREAD_NAME,
            initializer=_lower_priority,
        )
        self._pending = pending
        self._admitted = 0
        #: hashes submitted and not finished (one whose login was cancelled still runs)
        self._running = 0
        # checked when the user does not exist, so both paths cost one argon2 check
        self._dummy = self._hasher.hash(secrets.token_urlsafe(16))

    @property
    def busy(self) -> bool:
        """Whether a login now would be refused by :meth:`admit`."""
        return self._admitted >= self._pending or self._running >= self._pending

    @contextmanager
    def admit(self) -> Iterator[None]:
        """One login's place for the block; raises
        :class:`~tavernkit.errors.TooManyAttempts` at once when ``pending`` logins hold one
        (nothing is hashed for it)."""
        if self.busy:
            raise busy_refusal()
        self._admitted += 1
        try:
            yield
        finally:
            self._admitted -= 1

    async def hash(self, password: str) -> str:
        return await self._submit(self._hasher.hash, password)

    async def verify(self, stored: str | None, password: str) -> bool:
        """Whether ``password`` matches the hash ``stored``; ``None`` (no such user) checks it
        against the start's dummy hash at the same cost and answers false."""
        ok = await self._submit(self._check, stored or self._dummy, password)
        return ok and stored is not None

    def needs_rehash(self, stored: str) -> bool:
        """Whether ``stored`` was made with other parameters than the current ones (cheap:
        it reads the hash's header)."""
        return self._hasher.check_needs_rehash(stored)

    def close(self) -> None:
        """Stop the threads; checks still queued are cancelled."""
        self._pool.shutdown(wait=False, cancel_futures=True)

    def _submit(self, fn: Callable[..., _T], *args: str) -> asyncio.Future[_T]:
        loop = asyncio.get_running_loop()
        job = self._pool.submit(fn, *args)
        self._running += 1
        # counted until the thread is done with it, even when the awaiting login was cancelled
        job.add_done_callback(lambda _: self._finished(loop))
        return asyncio.wrap_future(job, loop=loop)

    def _finished(self, loop: asyncio.AbstractEventLoop) -> None:
        # in the pool's thread: the count is the loop's
        with contextlib.suppress(RuntimeError):  # the loop has closed: nothing counts now
            loop.call_soon_threadsafe(self._release_thread)

    def _release_thread(self) -> None:
        self._running -= 1

    def _check(self, stored: str, password: str) -> bool:
        try:
            return self._hasher.verify(stored, password)
        except (VerificationError, InvalidHashError):
            return False
