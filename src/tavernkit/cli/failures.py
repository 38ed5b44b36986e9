"""One line that says why a generation failed, in terms a person can act on.

A turn's :class:`~tavernkit.generation.result.TurnError` carries only the error class and a
safe code (its cause's message may echo prompt text, so it is never shown). The CLI knows more
that is safe to show: the profile in use (which host it calls) and the credential it sent
(a stored key's label and fingerprint, or the environment variable's name, never the value).
:func:`failure_line` joins them: ``cannot connect to 127.0.0.1:9 (profile 'p', openai)
[network]``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from tavernkit.cli.language import say
from tavernkit.errors import GenerateTaskError, ProviderError, ProviderTimeout
from tavernkit.generation.result import TurnError, classify_error
from tavernkit.models.profile import ConnectionProfile
from tavernkit.providers.local_model import find_model_path
from tavernkit.store.protocol import Store

__all__ = ["Where", "failure_line", "host_of", "task_failure_line", "where_for"]


@dataclass(frozen=True)
class Where:
    """What the CLI knows about the connection a failed request went to."""

    profile: str | None = None
    source: str | None = None
    base_url: str | None = None
    #: the credential sent: ``key 'work' (sk-…f00)`` or ``$OPENAI_API_KEY``
    credential: str | None = None
    #: the embedded model's file, when the embedded model was used
    model_file: Path | None = None


def host_of(base_url: str | None) -> str | None:
    """``host:port`` of a base URL (the port only when the URL names one)."""
    if not base_url:
        return None
    parts = urlsplit(base_url if "//" in base_url else f"//{base_url}")
    if not parts.hostname:
        return None
    return f"{parts.hostname}:{parts.port}" if parts.port else parts.hostname


def failure_line(error: TurnError, where: Where) -> str:
    """The cause of ``error`` with what to check, ending in ``[class code]``."""
    cause = error.cause
    provider = where.source or (cause.provider if isinstance(cause, ProviderError) else None)
    model = error.model or (cause.model if isinstance(cause, ProviderError) else None)
    host = host_of(where.base_url) or provider or say("the provider")
    service = provider or host
    key = where.credential or say("the API key")
    via_parts = (
        say("profile {name}", name=repr(where.profile)) if where.profile else "",
        provider or "",
        say("model {model}", model=repr(model)) if model else "",
    )
    via = ", ".join(part for part in via_parts if part)
    via = f" ({via})" if via else ""
    klass = error.error_class
    tag = klass if error.code == klass else f"{klass} {error.code}"
    if where.model_file is not None and klass in ("unknown", "model_unavailable", "protocol"):
        text = say(
            "the embedded model file {file} could not be loaded"
            " (corrupt, or not a GGUF model: 'tavernkit model pull' fetches it again)",
            file=where.model_file,
        )
        return f"{text} [{tag}]"
    phase = cause.phase if isinstance(cause, ProviderTimeout) else "reply"
    wait = (
        say("; retry in {seconds}s", seconds=f"{error.retry_after:.0f}")
        if error.retry_after
        else ""
    )
    names = {"host": host, "via": via, "service": service, "key": key}
    texts = {
        "network": say(
            "cannot connect to {host}{via}: is the server running and the URL right?", **names
        ),
        "timeout": say(
            "{host} did not answer in time ({phase} timeout){via}", phase=phase, **names
        ),
        "auth": say("{service} rejected {key}{via}: check the key", **names),
        "missing_credential": say("no API key is configured{via}", **names),
        "no_credentials": say("no API key is configured{via}", **names),
        "quota": say("{service} says the quota of {key} is used up{via}", **names),
        "rate_limit": say("{service} is rate limiting {key}{via}{wait}", wait=wait, **names),
        "overloaded": say("{host} failed on its side{via}: try again later", **names),
        "model_unavailable": say(
            "{service} does not serve {model}{via}", model=repr(model or "the model"), **names
        ),
        "context_too_long": say("the prompt is longer than the model's context{via}", **names),
        "keys_cooling": say(
            "every key is cooling down after errors{via}: wait, or add a key", **names
        ),
        "content_filter": say(
            "{service}'s safety filter blocked the prompt or the reply{via}", **names
        ),
    }
    return f"{texts.get(klass) or say('generation failed{via}', via=via)} [{tag}]"


async def where_for(
    store: Store, profile: ConnectionProfile | None, key_id: str | None, *, owner: str
) -> Where:
    """What is safe to say about a request through ``profile`` (``None`` or a ``local``
    profile: the embedded model) that sent the stored key ``key_id`` (``None``: the profile's
    first stored key, else its environment variable)."""
    if profile is None or profile.api == "local":
        return Where(source="local", model_file=find_model_path())
    credential = None
    # A profile with one credential sends it without a key pool, so no attempt names it.
    key_id = key_id or next((c.key_id for c in profile.credentials if c.key_id), None)
    if key_id is not None:
        for key in await store.list_api_keys(owner=owner):
            if key.id == key_id:
                credential = f"key {key.label or key.provider!r} ({key.fingerprint})"
    else:
        envs = [c.env for c in profile.credentials if c.env]
        credential = f"the key in ${envs[0]}" if envs else None
    return Where(profile.name, profile.source, profile.base_url, credential)


def task_failure_line(error: GenerateTaskError, where: Where) -> str:
    """:func:`failure_line` for a one-request failure (``profile test``, tasks): classified
    from its cause, so a rejected key says rejected, not ``auth_missing``."""
    cause = error.cause
    if cause is None:
        return f"{error.message} [{error.code}]"
    klass, code = classify_error(cause)
    model = cause.model if isinstance(cause, ProviderError) else None
    return failure_line(TurnError(klass, code, model, cause=cause), where)
