"""No secret and no chat text in any log line, at any level: with the root logger and every
logger at DEBUG, a full chat turn on a stored key (key added, turn streamed, reply stored), a
``generate_task`` call and a turn whose upstream error echoes the key log neither the key nor
the user's text nor the reply's, from our loggers or the libraries' (the SQLite driver, the
HTTP client and its transport)."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from ._server import Reply
from .conftest import World, use_profile

KEY = "sk-Zq8WxLeakCanaryKey4471"
USER_TEXT = "Purple giraffes whisper at the harbour gate"
REPLY_TEXT = "Lanterns hum over the violet tide tonight."
TASK_TEXT = "Summarise the otter ledger in one line"
TASK_REPLY = "The heron counts every ledger twice."
CANARIES = (KEY, "Zq8WxLeakCanary", "giraffes whisper", "violet tide", "otter ledger", "heron")


class Capture(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []
        self.setFormatter(logging.Formatter("%(name)s %(levelname)s %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))


@pytest.fixture
def all_logs() -> Iterator[Capture]:
    """Everything logged, at every level, by every logger (those that exist now and those
    made later: they inherit the root's level)."""
    capture = Capture()
    root = logging.getLogger()
    loggers = [root] + [
        logger
        for logger in logging.Logger.manager.loggerDict.values()
        if isinstance(logger, logging.Logger)
    ]
    levels = [(logger, logger.level, logger.disabled) for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.DEBUG)
        logger.disabled = False
    root.addHandler(capture)
    try:
        yield capture
    finally:
        root.removeHandler(capture)
        for logger, level, disabled in levels:
            logger.setLevel(level)
            logger.disabled = disabled


async def test_no_key_and_no_chat_text_in_any_log_line(world: World, all_logs: Capture) -> None:
    tk = world.tk
    key_id = await tk.store.add_api_key("openai", KEY, owner=tk.owner, label="main")
    await use_profile(world, "keyed", model="m1", credentials=[{"key_id": key_id}])
    # an upstream that echoes the key and the user's text in its error, as some do
    echo = {"error": {"message": f"Incorrect API key provided: {KEY} ({USER_TEXT})"}}
    world.server.script(
        Reply(text=REPLY_TEXT), Reply(text=TASK_REPLY), Reply(status=401, error=echo)
    )

    info = await world.chats.new_chat("Mira")
    out = await world.chats.send(info.id, USER_TEXT)
    assert out.status == "completed" and out.text == REPLY_TEXT
    task = await tk.context(info.id).generate_task([{"role": "user", "content": TASK_TEXT}])
    assert task.assistant_text == TASK_REPLY
    failed = await world.chats.send(info.id, USER_TEXT)
    assert failed.status == "failed"
    # the key really travelled, and the libraries really logged
    assert all(r.headers.get("authorization") == f"Bearer {KEY}" for r in world.server.requests)
    names = {line.split(" ", 1)[0] for line in all_logs.lines}
    assert "httpx2" in names and any(n.startswith("httpcore2") for n in names)

    leaks = [line for line in all_logs.lines if any(c in line for c in CANARIES)]
    assert leaks == []
