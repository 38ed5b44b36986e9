"""Each adapter's classification table, beyond what the wire corpus happens to contain."""

from __future__ import annotations

import json

import pytest

from tavernkit.errors import (
    AuthError,
    BadRequest,
    ContentFiltered,
    ContextTooLong,
    ModelUnavailable,
    NetworkError,
    Overloaded,
    ProviderError,
    QuotaExhausted,
    RateLimited,
)
from tavernkit.providers.anthropic import AnthropicAdapter
from tavernkit.providers.base import Adapter, ErrorContext
from tavernkit.providers.classify import parse_retry_after, scrub
from tavernkit.providers.gemini import GeminiAdapter
from tavernkit.providers.kobold import KoboldAdapter
from tavernkit.providers.llamacpp import LlamaCppAdapter
from tavernkit.providers.novelai import NovelAIAdapter
from tavernkit.providers.openai_chat import OpenAIChatAdapter

CTX = ErrorContext("prov", "model-x", ("sk-live-SECRET-123456789",))


def classify(
    adapter: Adapter, status: int, body: object, headers: dict | None = None
) -> ProviderError:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return adapter.classify_error(status, raw, headers or {}, CTX)


def oai(code: str | None, message: str = "m", etype: str = "invalid_request_error") -> dict:
    return {"error": {"message": message, "type": etype, "param": None, "code": code}}


@pytest.mark.parametrize(
    ("status", "body", "cls"),
    [
        (401, oai("invalid_api_key"), AuthError),
        (403, oai(None, etype="permission_error"), AuthError),
        (429, oai("insufficient_quota", etype="insufficient_quota"), QuotaExhausted),
        (429, oai("rate_limit_exceeded", etype="requests"), RateLimited),
        (402, {"error": {"message": "Insufficient Balance"}}, QuotaExhausted),
        (400, oai("context_length_exceeded"), ContextTooLong),
        (400, oai("content_filter"), ContentFiltered),
        (404, oai("model_not_found"), ModelUnavailable),
        (400, oai("unsupported_parameter"), BadRequest),
        (500, oai(None, etype="server_error"), Overloaded),
        (503, b"<html>Service Unavailable</html>", Overloaded),
        (408, b"", NetworkError),
        (409, b"", Overloaded),
    ],
)
def test_openai_family_table(status: int, body: object, cls: type) -> None:
    error = classify(OpenAIChatAdapter(), status, body)
    assert type(error) is cls
    assert error.status == status
    assert error.provider == "prov" and error.model == "model-x"


def test_quota_is_not_retryable_but_rate_limit_is() -> None:
    assert not classify(OpenAIChatAdapter(), 429, oai("insufficient_quota")).retryable
    assert classify(OpenAIChatAdapter(), 429, oai("rate_limit_exceeded")).retryable


def test_retry_after_headers() -> None:
    error = classify(OpenAIChatAdapter(), 429, oai(None), {"retry-after-ms": "1500"})
    assert error.retry_after == 1.5
    assert parse_retry_after({"Retry-After": "7"}) == 7.0
    date = "Wed, 21 Oct 2015 07:28:10 GMT"
    assert parse_retry_after({"retry-after": date}, now=lambda: 1445412480.0) == 10.0
    assert parse_retry_after({"retry-after": "soon"}) is None


@pytest.mark.parametrize(
    ("status", "etype", "message", "cls"),
    [
        (401, "authentication_error", "invalid x-api-key", AuthError),
        (403, "permission_error", "no", AuthError),
        (402, "billing_error", "pay", QuotaExhausted),
        (429, "rate_limit_error", "slow down", RateLimited),
        (529, "overloaded_error", "Overloaded", Overloaded),
        (500, "api_error", "oops", Overloaded),
        (
            400,
            "invalid_request_error",
            "prompt is too long: 210000 tokens > 200000",
            ContextTooLong,
        ),
        (413, "request_too_large", "too big", ContextTooLong),
        (404, "not_found_error", "model: x", ModelUnavailable),
        (
            400,
            "invalid_request_error",
            "This model does not support assistant message prefill.",
            BadRequest,
        ),
    ],
)
def test_anthropic_table(status: int, etype: str, message: str, cls: type) -> None:
    body = {"type": "error", "error": {"type": etype, "message": message}, "request_id": "req_1"}
    error = classify(AnthropicAdapter(), status, body)
    assert type(error) is cls
    assert error.request_id == "req_1"


def test_anthropic_spend_limit_is_quota() -> None:
    body = {
        "type": "error",
        "error": {
            "type": "rate_limit_error",
            "message": "x",
            "details": {"error_code": "enforced_spend_limit_reached"},
        },
    }
    assert type(classify(AnthropicAdapter(), 429, body)) is QuotaExhausted


def _gerr(code: int, status: str, message: str = "m", details: list | None = None) -> dict:
    return {"error": {"code": code, "message": message, "status": status, "details": details or []}}


@pytest.mark.parametrize(
    ("status", "body", "cls"),
    [
        (400, _gerr(400, "INVALID_ARGUMENT", details=[{"reason": "API_KEY_INVALID"}]), AuthError),
        (403, _gerr(403, "PERMISSION_DENIED"), AuthError),
        (429, _gerr(429, "RESOURCE_EXHAUSTED", details=[{"retryDelay": "3s"}]), RateLimited),
        (
            429,
            _gerr(
                429,
                "RESOURCE_EXHAUSTED",
                details=[{"violations": [{"quotaId": "GenerateRequestsPerDayPerProject"}]}],
            ),
            QuotaExhausted,
        ),
        (
            400,
            _gerr(
                400,
                "INVALID_ARGUMENT",
                "The input token count (1200000) exceeds the maximum number of tokens",
            ),
            ContextTooLong,
        ),
        (400, _gerr(400, "INVALID_ARGUMENT", "Invalid JSON payload"), BadRequest),
        (404, _gerr(404, "NOT_FOUND"), ModelUnavailable),
        (503, _gerr(503, "UNAVAILABLE"), Overloaded),
        (504, _gerr(504, "DEADLINE_EXCEEDED"), Overloaded),
    ],
)
def test_gemini_table(status: int, body: dict, cls: type) -> None:
    assert type(classify(GeminiAdapter(), status, body)) is cls


def test_gemini_retry_delay_is_read() -> None:
    body = _gerr(429, "RESOURCE_EXHAUSTED", details=[{"retryDelay": "34.4s"}])
    assert classify(GeminiAdapter(), 429, body).retry_after == 34.4


def test_llamacpp_context_overflow_carries_sizes() -> None:
    body = {
        "error": {
            "code": 400,
            "message": "request (900 tokens) exceeds the available context size (512 tokens)",
            "type": "exceed_context_size_error",
            "n_prompt_tokens": 900,
            "n_ctx": 512,
        }
    }
    error = classify(LlamaCppAdapter(), 400, body)
    assert isinstance(error, ContextTooLong) and (error.n_prompt, error.n_ctx) == (900, 512)
    assert (
        type(classify(LlamaCppAdapter(), 503, {"error": {"message": "Loading model"}}))
        is Overloaded
    )


def test_kobold_bad_input_500_is_a_bad_request() -> None:
    error = classify(
        KoboldAdapter(), 500, {"detail": {"msg": "Error parsing input.", "type": "bad_input"}}
    )
    assert type(error) is BadRequest


@pytest.mark.parametrize(
    ("status", "cls"),
    [
        (401, AuthError),
        (402, QuotaExhausted),
        (429, RateLimited),
        (500, Overloaded),
        (400, BadRequest),
    ],
)
def test_novelai_table(status: int, cls: type) -> None:
    error = classify(NovelAIAdapter(), status, {"statusCode": status, "message": "nope"})
    assert type(error) is cls and error.reason == "nope"


def test_keys_are_scrubbed_from_every_error() -> None:
    body = oai(
        "invalid_api_key",
        "Incorrect API key provided: sk-live-SECRET-123456789 and "
        "AIzaSyA-abcdefghijklmnopqrstuvwxyz012 at https://x?key=abc123",
    )
    error = classify(OpenAIChatAdapter(), 401, body)
    for text in (str(error), error.body or "", error.reason):
        assert "SECRET" not in text and "AIzaSy" not in text and "abc123" not in text
    assert scrub("Authorization: Bearer abcdefghijkl1234") == "Authorization: ***"
