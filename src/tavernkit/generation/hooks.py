"""Plugin request hooks as the turn runner and the chat service call them.

``request_scope`` says whose request it is: ``"main"`` (a chat turn) or
``"extension_internal"`` (``generate_task``, a plugin's own background call). Every request of
either scope passes the ``before_request`` hooks; the main chat's hooks
(``before_chat_turn`` / ``after_chat_turn``) are skipped for ``extension_internal``, so a
plugin that reacts to chat turns is never triggered by its own background requests.

pluggy calls every implementation with the same arguments; a request hook must instead see
the previous hook's replacement, so the implementations are chained here one by one, in
pluggy's own call order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import pluggy

from tavernkit.generation.attempt.sending import BeforeRequest
from tavernkit.generation.result import TurnResult
from tavernkit.providers.request import ChatPrompt, PromptRequest, TextPrompt

__all__ = [
    "REQUEST_SCOPES",
    "ChatTurnHooks",
    "RequestScope",
    "before_request_hook",
    "chat_turn_hooks",
]

RequestScope = Literal["main", "extension_internal"]
REQUEST_SCOPES: tuple[RequestScope, ...] = ("main", "extension_internal")


def _impls(pm: pluggy.PluginManager | None, name: str) -> list[Any]:
    caller = getattr(pm.hook, name, None) if pm is not None else None
    if caller is None:
        return []
    # get_hookimpls() is in registration order (trylast first); pluggy calls the reverse
    return list(reversed(caller.get_hookimpls()))


def _call(impl: Any, values: dict[str, Any]) -> Any:
    return impl.function(**{k: values[k] for k in impl.argnames if k in values})


def _is_request(value: object) -> bool:
    return isinstance(value, ChatPrompt | TextPrompt)


def before_request_hook(
    pm: pluggy.PluginManager | None,
    scope: RequestScope,
    *,
    own: BeforeRequest | None = None,
) -> BeforeRequest | None:
    """The ``before_request`` of a generation: ``own`` (a caller's hook) first, then every
    plugin's, each seeing the previous result; ``None`` when there is nothing to call."""
    impls = _impls(pm, "before_request")
    if not impls and own is None:
        return None

    def apply(request: PromptRequest, stream: bool) -> PromptRequest:
        if own is not None:
            changed = own(request, stream)
            if changed is not None:
                request = changed
        for impl in impls:
            changed = _call(impl, {"request": request, "stream": stream, "scope": scope})
            if changed is not None:
                if not _is_request(changed):
                    raise TypeError(
                        f"plugin {impl.plugin_name!r}: before_request returned "
                        f"{type(changed).__name__}, not a request"
                    )
                request = changed
        return request

    return apply


@dataclass(frozen=True)
class ChatTurnHooks:
    """The main chat's hooks for one turn (no-ops for ``extension_internal``)."""

    impls_before: Sequence[Any] = ()
    impls_after: Sequence[Any] = ()

    def before(self, chat_id: str | None, kind: str, request: PromptRequest) -> PromptRequest:
        for impl in self.impls_before:
            changed = _call(impl, {"chat_id": chat_id, "kind": kind, "request": request})
            if changed is not None and _is_request(changed):
                request = changed
        return request

    def after(self, chat_id: str | None, kind: str, result: TurnResult) -> None:
        for impl in self.impls_after:
            _call(impl, {"chat_id": chat_id, "kind": kind, "result": result})


def chat_turn_hooks(pm: pluggy.PluginManager | None, scope: RequestScope) -> ChatTurnHooks:
    """The main-chat hooks a generation of ``scope`` runs (none for ``extension_internal``)."""
    if scope == "extension_internal":
        return ChatTurnHooks()
    return ChatTurnHooks(_impls(pm, "before_chat_turn"), _impls(pm, "after_chat_turn"))
