"""GenerateTaskError and the provider-error -> task-code table."""

from __future__ import annotations

import asyncio

import pytest

from tavernkit.errors import (
    AuthError,
    BadRequest,
    ContentFiltered,
    ContextTooLong,
    FormatError,
    GenerateTaskError,
    MissingCredential,
    ModelUnavailable,
    NetworkError,
    Overloaded,
    ProtocolError,
    ProviderError,
    ProviderTimeout,
    QuotaExhausted,
    RateLimited,
    StreamInterrupted,
    TavernKitError,
)
from tavernkit.generation.abort import AbortError
from tavernkit.providers.http import Aborted as ProviderAborted
from tavernkit.task_errors import task_error_from


def test_fields_and_defaults() -> None:
    err = GenerateTaskError("invalid_input", "tools and json_schema are mutually exclusive")
    assert err.code == "invalid_input"
    assert err.message == "tools and json_schema are mutually exclusive"
    assert err.cause is None
    assert err.details == {}
    assert isinstance(err, TavernKitError)
    assert "invalid_input" in str(err)


def test_unknown_code_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown GenerateTaskError code"):
        GenerateTaskError("oops", "x")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("exc", "code"),
    [
        (MissingCredential("no key"), "auth_missing"),
        (AuthError("bad key", status=401), "auth_missing"),
        (QuotaExhausted("billing", status=429), "rate_limit"),
        (RateLimited("slow down", status=429, retry_after=7.5), "rate_limit"),
        (ContextTooLong("too long", n_prompt=9000, n_ctx=8192), "context_budget"),
        (ModelUnavailable("no such model", status=404), "unsupported_api"),
        (BadRequest("bad param", status=400), "invalid_input"),
        (ContentFiltered("blocked"), "no_response"),
        (ProviderTimeout("idle", phase="idle"), "network"),
        (NetworkError("refused"), "network"),
        (Overloaded("529", status=529), "network"),
        (ProtocolError("garbage"), "unknown"),
        (ProviderError("something"), "unknown"),
    ],
)
def test_provider_table(exc: ProviderError, code: str) -> None:
    err = task_error_from(exc)
    assert err.code == code
    assert err.cause is exc
    assert err.__cause__ is exc


def test_rate_limit_details() -> None:
    err = task_error_from(RateLimited("x", status=429, retry_after=3.0, provider="openai"))
    assert err.details["retry_after"] == 3.0
    assert err.details["quota"] is False
    assert err.details["status"] == 429
    assert err.details["provider"] == "openai"
    quota = task_error_from(QuotaExhausted("x"))
    assert quota.details["quota"] is True
    assert quota.details["retry_after"] is None


def test_context_details() -> None:
    err = task_error_from(ContextTooLong("x", n_prompt=10, n_ctx=5))
    assert (err.details["n_prompt"], err.details["n_ctx"]) == (10, 5)


def test_message_text_is_never_inspected() -> None:
    # a message that mentions 401 and rate limits must not change the class-based code
    err = task_error_from(BadRequest("401 unauthorized rate limit network api key"))
    assert err.code == "invalid_input"
    assert task_error_from(RuntimeError("429 rate limit")).code == "unknown"


def test_stream_interrupted_keeps_delivered_text() -> None:
    bare = task_error_from(StreamInterrupted("cut", delivered_text="Hello, wor"))
    assert bare.code == "network"
    assert bare.details["delivered_text"] == "Hello, wor"
    inner = RateLimited("slow", retry_after=2.0)
    caused = task_error_from(StreamInterrupted("cut", delivered_text="Hi", cause=inner))
    assert caused.code == "rate_limit"
    assert caused.details["retry_after"] == 2.0
    assert caused.details["delivered_text"] == "Hi"


def test_aborts_and_other_exceptions() -> None:
    assert task_error_from(asyncio.CancelledError()).code == "aborted"

    class SubAbort(AbortError):
        pass

    assert task_error_from(SubAbort()).code == "aborted"
    assert task_error_from(ProviderAborted()).code == "aborted"

    # Matched by type, not by name: an unrelated class that happens to be called
    # ``AbortError`` or ``Aborted`` is no abort.
    class Aborted(Exception):
        pass

    namesake = type("AbortError", (Exception,), {})
    assert task_error_from(Aborted()).code == "unknown"
    assert task_error_from(namesake()).code == "unknown"
    assert task_error_from(TimeoutError()).code == "network"
    fmt = task_error_from(FormatError("bad", source="x.json", field="a.b"))
    assert fmt.code == "invalid_input"
    assert fmt.details == {"source": "x.json", "field": "a.b"}
    assert task_error_from(KeyError("k")).code == "unknown"


def test_passthrough_is_not_wrapped() -> None:
    original = GenerateTaskError("tool_call_parse", "x", details={"raw_arguments": "{"})
    assert task_error_from(original) is original
    assert original.cause is None
