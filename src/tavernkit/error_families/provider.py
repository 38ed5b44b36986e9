"""The provider family: :class:`ProviderError`, the class each failure is sorted into (policy
switches on it), the turn runner's own :class:`TurnFailure`, the embedded model's errors and
the providers' internal timeouts.

Import these from :mod:`tavernkit.errors` (or ``tavernkit``), which re-exports every one."""

from __future__ import annotations

from typing import Any, Literal

from tavernkit.error_families.base import TavernKitError


class ProviderError(TavernKitError):
    """A model provider failed. Adapters classify every failure into one subclass (from the
    status, the error body, or an error inside a 200 stream), so fallback, key rotation and
    retry policy switch on the class and never on message text.

    ``body`` is the provider's error body with secrets scrubbed; no attribute and no message
    ever carries an API key. ``retryable`` says whether the same request may succeed later.
    """

    retryable: bool = False
    #: the provider's own ``x-should-retry`` verdict, which overrides ``retryable`` when set
    should_retry: bool | None = None

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        body: str | None = None,
        code: str | None = None,
        request_id: str | None = None,
        retry_after: float | None = None,
        provider: str | None = None,
        model: str | None = None,
    ):
        self.reason = message
        self.status = status
        self.body = body
        self.code = code
        self.request_id = request_id
        self.retry_after = retry_after
        self.provider = provider
        self.model = model
        where = " ".join(
            part
            for part in (
                provider or "",
                f"model {model!r}" if model else "",
                f"HTTP {status}" if status else "",
            )
            if part
        )
        super().__init__(f"{where}: {message}" if where else message)


class AuthError(ProviderError):
    """The key was rejected or lacks permission (Gemini reports this as HTTP 400)."""


class MissingCredential(AuthError):
    """No key is configured for a provider that needs one."""


class QuotaExhausted(ProviderError):
    """Billing or quota is used up: a retry cannot help, another key might."""


class RateLimited(ProviderError):
    """Too many requests for now; ``retry_after`` (seconds) when the provider said."""

    retryable = True


class Overloaded(ProviderError):
    """The service is overloaded or failing on its side (5xx, Anthropic 529)."""

    retryable = True


class ContextTooLong(ProviderError):
    """The prompt does not fit; ``n_prompt`` / ``n_ctx`` when the provider reported them."""

    def __init__(
        self,
        message: str,
        *,
        n_prompt: int | None = None,
        n_ctx: int | None = None,
        **kwargs: Any,
    ):
        super().__init__(message, **kwargs)
        self.n_prompt = n_prompt
        self.n_ctx = n_ctx


class ContentFiltered(ProviderError):
    """A safety filter blocked the prompt or the reply."""


class BadRequest(ProviderError):
    """The request is malformed or uses an unsupported parameter."""


class ModelUnavailable(BadRequest):
    """The model is unknown, deprecated, unavailable or does not support the request."""


class NetworkError(ProviderError):
    """The connection failed before a usable answer arrived."""

    retryable = True


class ProviderTimeout(NetworkError):
    """A timeout fired; ``phase`` is ``"connect"``, ``"first_byte"`` or ``"idle"``."""

    def __init__(self, message: str, *, phase: str, **kwargs: Any):
        super().__init__(message, **kwargs)
        self.phase = phase


class StreamInterrupted(ProviderError):
    """The stream ended early (no terminator, dropped connection, idle timeout after text,
    or an error event mid-stream); ``delivered_text`` is what had arrived, so the turn can be
    continued rather than lost. ``cause_class`` is the classified cause when there was one."""

    def __init__(
        self,
        message: str,
        *,
        delivered_text: str = "",
        cause: ProviderError | None = None,
        **kwargs: Any,
    ):
        super().__init__(message, **kwargs)
        self.delivered_text = delivered_text
        self.cause = cause

    @property
    def retryable(self) -> bool:  # type: ignore[override]
        return self.cause.retryable if self.cause is not None else True


class ProtocolError(ProviderError):
    """The provider sent bytes we cannot understand (bad JSON, bad UTF-8, unknown shape)."""


ErrorClass = Literal[
    "auth",
    "missing_credential",
    "quota",
    "rate_limit",
    "overloaded",
    "context_too_long",
    "content_filter",
    "model_unavailable",
    "bad_request",
    "egress_refused",
    "timeout",
    "network",
    "interrupted",
    "protocol",
    "empty_response",
    "length_cap",
    "speaker_guard",
    "keys_cooling",
    "not_admitted",
    "no_credentials",
    "unknown",
]


class TurnFailure(ProviderError):
    """A failure the runner decides itself (empty reply, speaker guard, all keys cooling,
    admission refused): not from a provider, but policy switches on it the same way."""

    def __init__(self, error_class: ErrorClass, message: str, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.error_class: ErrorClass = error_class


class StreamTimeout(Exception):
    """A first-byte or idle timeout fired (internal; ``phase`` says which)."""

    def __init__(self, phase: str, seconds: float) -> None:
        super().__init__(f"no data for {seconds:g} s ({phase})")
        self.phase = phase
        self.seconds = seconds


class LocalModelMissing(ModelUnavailable):
    """No GGUF file for the local model was found."""


class MissingDependency(ModelUnavailable):
    """The local model needs an optional dependency that is not installed."""

    def __init__(self, module: str, *, extra: str = "local", model: str | None = None) -> None:
        super().__init__(
            f"the local model needs {module!r}: pip install 'tavernkit[{extra}]'",
            provider="local",
            model=model,
        )
        self.module = module
        self.extra = extra


class PullError(LocalModelMissing):
    """``pull_model`` could not fetch or unpack the model."""


class Unusable(Exception):
    """The resolver cannot use an entry (no credentials, unknown model...): skip it."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
