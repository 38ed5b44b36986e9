"""A reachable endpoint: base URL, auth scheme, key source and HTTP client, plus an adapter.

``Provider`` owns the bytes on the wire; the adapter owns their meaning. Many providers share
one adapter (OpenRouter, DeepSeek and a local llama.cpp are all ``OpenAIChatAdapter``).

Errors follow one rule so that retry and fallback can reason about them: a failure *before the
first event* (connection, timeout, HTTP error status, unreadable body) is **raised** — nothing
was delivered, the request may be retried or moved elsewhere. A failure *after* events were
delivered is the stream's last event, a :class:`ProviderErrorEvent` (``StreamInterrupted``
wrapping the cause when the connection broke), so the partial reply is not lost. An abort ends
the stream with ``Finish("aborted")``.

Keys never leave this object except in the auth header: every error body is scrubbed of them.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import Literal

import httpx2

from tavernkit.errors import (
    MissingCredential,
    NetworkError,
    ProviderError,
    ProviderTimeout,
    StreamInterrupted,
)
from tavernkit.providers.accumulator import Completion
from tavernkit.providers.base import Adapter, ErrorContext
from tavernkit.providers.classify import make_error, scrub
from tavernkit.providers.events import Finish, ProviderErrorEvent, StreamEvent
from tavernkit.providers.http import (
    Aborted,
    AbortLike,
    StreamTimeout,
    Timeouts,
    iter_sse,
    read_body,
)
from tavernkit.providers.pool import default_ssl_context
from tavernkit.providers.profiles import ModelProfile
from tavernkit.providers.request import PromptRequest
from tavernkit.providers.retry import RetryPolicy, accumulate
from tavernkit.providers.sse import SSEDecoder

__all__ = ["AuthScheme", "KeySource", "Provider"]

AuthScheme = Literal["bearer", "x-api-key", "x-goog-api-key", "none"]
#: a fixed key, or a callable asked once per request (key pools rotate behind it)
KeySource = str | Callable[[], str | None] | None


@dataclass
class Provider:
    name: str
    base_url: str
    adapter: Adapter
    model: str | None = None
    auth: AuthScheme = "bearer"
    keys: KeySource = None
    #: a hosted API refuses requests without a key; a local server usually does not
    key_required: bool = False
    client: httpx2.AsyncClient | None = None
    timeouts: Timeouts = field(default_factory=Timeouts)
    headers: Mapping[str, str] = field(default_factory=dict)
    profile: ModelProfile | None = None

    def _key(self, model: str | None) -> str | None:
        key = self.keys() if callable(self.keys) else self.keys
        if not key and self.auth != "none" and self.key_required:
            raise MissingCredential("no API key configured", provider=self.name, model=model)
        return key or None

    def _request(
        self,
        client: httpx2.AsyncClient,
        request: PromptRequest,
        model: str | None,
        stream: bool,
        profile: ModelProfile | None,
        key: str | None,
    ) -> tuple[httpx2.Request, bool]:
        wire = self.adapter.build_request(request, model=model, stream=stream, profile=profile)
        headers = {"content-type": "application/json", **self.headers, **wire.headers}
        if stream:
            headers["accept"] = "text/event-stream"
        if key and self.auth == "bearer":
            headers["authorization"] = f"Bearer {key}"
        elif key and self.auth in ("x-api-key", "x-goog-api-key"):
            headers[self.auth] = key
        http_request = client.build_request(
            wire.method,
            _endpoint(self.base_url, wire.path),
            json=wire.body,
            headers=headers,
            params=dict(wire.params) or None,
            timeout=self._timeout(client),
        )
        return http_request, wire.stream

    def _timeout(self, client: httpx2.AsyncClient) -> httpx2.Timeout:
        """This provider's connect/write limits on whatever client carries the request (a
        client is a connection pool, the limits are the profile's); first-byte and idle are
        timed here, per data event, so the read limit stays the client's own (none on ours)."""
        own = self.timeouts.httpx()
        return httpx2.Timeout(
            connect=own.connect, read=client.timeout.read, write=own.write, pool=own.pool
        )

    async def stream(
        self,
        request: PromptRequest,
        *,
        model: str | None = None,
        profile: ModelProfile | None = None,
        stream: bool = True,
        abort: AbortLike | None = None,
    ) -> AsyncIterator[StreamEvent]:
        """Send ``request`` and yield its events (see the module docstring for errors)."""
        model = model or self.model
        profile = profile or self.profile
        key = self._key(model)
        ctx = ErrorContext(self.name, model, (key,) if key else ())
        own = self.client is None
        if self.client is None:
            client = httpx2.AsyncClient(timeout=self.timeouts.httpx(), verify=default_ssl_context())
        else:
            client = self.client
        try:
            http_request, streamed = self._request(client, request, model, stream, profile, key)
            async for event in self._send(client, http_request, streamed, ctx, abort):
                yield event
        finally:
            if own:
                await client.aclose()

    async def _send(
        self,
        client: httpx2.AsyncClient,
        http_request: httpx2.Request,
        streamed: bool,
        ctx: ErrorContext,
        abort: AbortLike | None,
    ) -> AsyncIterator[StreamEvent]:
        loop = asyncio.get_running_loop()
        started = loop.time()
        try:
            async with asyncio.timeout(self.timeouts.first_byte):
                response = await client.send(http_request, stream=True)
        except (TimeoutError, httpx2.TimeoutException) as exc:
            phase = "connect" if isinstance(exc, httpx2.ConnectTimeout) else "first_byte"
            raise ProviderTimeout(
                f"timed out ({phase})", phase=phase, provider=ctx.provider, model=ctx.model
            ) from None
        except httpx2.HTTPError as exc:
            raise make_error(
                NetworkError, scrub(f"{type(exc).__name__}: {exc}", ctx.secrets), ctx
            ) from None
        delivered = False
        try:
            if not 200 <= response.status_code < 300:
                body = await self._read(response, ctx, abort)
                error = self.adapter.classify_error(
                    response.status_code, body, response.headers, ctx
                )
                verdict = response.headers.get("x-should-retry")
                if verdict in ("true", "false"):
                    error.should_retry = verdict == "true"
                raise error
            content_type = response.headers.get("content-type", "")
            if not streamed or "json" in content_type:
                body = await self._read(response, ctx, abort)
                for event in self.adapter.parse_response(body, ctx):
                    yield event
                return
            parser = self.adapter.stream_parser(ctx)
            decoder = SSEDecoder(source=ctx.provider)
            async for sse in iter_sse(
                response, decoder, self.timeouts, abort=abort, started=started
            ):
                for event in parser.feed(sse):
                    delivered = True
                    yield event
            for event in parser.finish():
                yield event
        except Aborted:
            yield Finish("aborted", None)
        except (StreamTimeout, httpx2.TimeoutException) as exc:
            # ours, or an injected client's own read limit: a timeout either way (no rotation,
            # no cooldown), never a network error that would bench the key
            if isinstance(exc, StreamTimeout):
                phase, message = exc.phase, str(exc)
            else:
                phase = "idle" if delivered else "first_byte"
                message = f"timed out ({phase})"
            error = ProviderTimeout(message, phase=phase, provider=ctx.provider, model=ctx.model)
            if not delivered:
                raise error from None
            yield ProviderErrorEvent(_interrupted(error, ctx))
        except httpx2.HTTPError as exc:
            error = make_error(
                NetworkError, scrub(f"{type(exc).__name__}: {exc}", ctx.secrets), ctx
            )
            if not delivered:
                raise error from None
            yield ProviderErrorEvent(_interrupted(error, ctx))
        except ProviderError as error:
            if not delivered:
                raise
            yield ProviderErrorEvent(_interrupted(error, ctx))
        finally:
            await response.aclose()

    async def _read(
        self, response: httpx2.Response, ctx: ErrorContext, abort: AbortLike | None
    ) -> bytes:
        try:
            return await read_body(response, self.timeouts, abort=abort)
        except StreamTimeout as exc:
            raise ProviderTimeout(
                str(exc), phase=exc.phase, provider=ctx.provider, model=ctx.model
            ) from None

    async def complete(
        self,
        request: PromptRequest,
        *,
        model: str | None = None,
        profile: ModelProfile | None = None,
        stream: bool = False,
        abort: AbortLike | None = None,
        retry: RetryPolicy | None = None,
    ) -> Completion:
        """The accumulated result; with ``retry``, failures before any event are retried."""
        return await accumulate(
            lambda: self.stream(request, model=model, profile=profile, stream=stream, abort=abort),
            retry,
        )


@functools.lru_cache(maxsize=512)
def _endpoint(base_url: str, path: str) -> httpx2.URL:
    """``path`` under ``base_url``, parsed once: httpx2 parses a URL given as text on every
    request (a third of building one), and an API's few endpoints are asked again and again.
    A ``URL`` is immutable, so every request can share it."""
    return httpx2.URL(base_url.rstrip("/") + path)


def _interrupted(cause: ProviderError, ctx: ErrorContext) -> StreamInterrupted:
    if isinstance(cause, StreamInterrupted):
        return cause
    return StreamInterrupted(
        f"stream broke after output began: {cause.reason}",
        cause=cause,
        status=cause.status,
        provider=ctx.provider,
        model=ctx.model,
    )
