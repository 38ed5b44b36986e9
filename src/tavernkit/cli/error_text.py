"""A tavernkit error as the CLI says it, in the CLI's language (:mod:`.language`): worded from
the error's stable code and named parameters (:mod:`tavernkit.error_params`, what the server's
answers carry too) when the catalogue has words for them, else the error's own English message.
In English the message is the error's own: it is the most specific."""

from __future__ import annotations

from collections.abc import Callable

from tavernkit.cli.language import current_language, say
from tavernkit.error_params import Params, error_code, error_params
from tavernkit.errors import TavernKitError

__all__ = ["error_text"]

#: record kinds a "not found" or "name taken" names
_KINDS: dict[str, Callable[[], str]] = {
    "character": lambda: say("character"),
    "chat": lambda: say("chat"),
    "message": lambda: say("message"),
    "lorebook": lambda: say("lorebook"),
    "persona": lambda: say("persona"),
    "group": lambda: say("group"),
    "connection_profile": lambda: say("connection profile"),
    "profile": lambda: say("connection profile"),
    "chat_preset": lambda: say("chat-completion preset"),
    "textgen_preset": lambda: say("text-completion preset"),
    "preset": lambda: say("preset"),
    "regex_script": lambda: say("regex script"),
    "branch": lambda: say("branch"),
}


def error_text(exc: BaseException) -> str:
    """What the CLI prints for ``exc`` (after ``error:``)."""
    said = str(exc)
    if current_language() == "en" or not isinstance(exc, TavernKitError):
        return said
    word = _CODES.get(error_code(exc))
    worded = word(error_params(exc, said)) if word is not None else None
    return worded or said


def _kind(params: Params) -> str:
    kind = str(params.get("kind", ""))
    known = _KINDS.get(kind)
    return known() if known is not None else kind.replace("_", " ")


def _not_found(p: Params) -> str | None:
    if "name" not in p:
        return None
    if "kind" not in p:
        return say("nothing named {name} was found", name=repr(p["name"]))
    return say("no {kind} {name} was found", kind=_kind(p), name=repr(p["name"]))


def _name_taken(p: Params) -> str:
    return say(
        "a {kind} named {name} exists already and differs", kind=_kind(p), name=repr(p["name"])
    )


def _invalid(p: Params) -> str | None:
    if "line" not in p:
        return None
    where = {"line": p["line"], "column": p["column"]}
    if "source" in p:
        return say(
            "{source} is not valid: line {line}, column {column}", source=p["source"], **where
        )
    return say("not valid: line {line}, column {column}", **where)


def _too_large(p: Params) -> str:
    limit = p.get("limit_bytes")
    if isinstance(limit, int):
        return say("this is larger than the limit of {size} bytes", size=limit)
    return say("this is too large")


def _invalid_input(p: Params) -> str | None:
    field = str(p.get("field", ""))
    if field.startswith("data.extensions.tavernkit.writer"):
        return say(
            "the writer of {character} names {value}, which cannot be used: choose another one",
            character=repr(p.get("character", "")),
            value=repr(p.get("value", "")),
        )
    if field == "profile":
        return say("no connection profile named {value}", value=repr(p.get("value", "")))
    if field == "persona":
        return say("no persona named {value}", value=repr(p.get("value", "")))
    return None


_CODES: dict[str, Callable[[Params], str | None]] = {
    "not_found": _not_found,
    "name_taken": _name_taken,
    "invalid": _invalid,
    "too_large": _too_large,
    "stale_revision": lambda p: say("it was changed elsewhere since it was read; read it again"),
    "chat_busy": lambda p: say("the chat is still writing a reply; wait for it or stop it"),
    "invalid_input": _invalid_input,
}
