"""Quick-reply commands: ``/qr``, ``/qr-set*``, ``/qr-chat-set*``, ``/qr-list``, ``/qr-create``,
``/qr-update``, ``/qr-delete``, ``/qr-get``, ``/qr-context*``, ``/qr-arg``, ``/import``.

As in SillyTavern, a failure of a management command (unknown set or reply) is an error toast
and the command returns ``''``: the script goes on.
"""

from __future__ import annotations

from typing import Any

from tavernkit.errors import ScriptError
from tavernkit.jscompat import is_true_boolean, js_json_stringify, js_to_number
from tavernkit.models.quick_reply import QuickReply, QuickReplyContext, QuickReplySet
from tavernkit.stscript.executor import CommandCall
from tavernkit.stscript.host import Toast
from tavernkit.stscript.quick_replies import QuickReplyLibrary
from tavernkit.stscript.registry import CommandRegistry, NamedArgSpec
from tavernkit.stscript.scope import (
    Scope,
    ScriptClosure,
    pipe_text,
)
from tavernkit.stscript.tree import ClosureNode, CommandNode

__all__ = ["register"]


def _library(call: CommandCall) -> QuickReplyLibrary:
    return call.host.quick_replies


def _set(call: CommandCall, name: str) -> QuickReplySet:
    found = _library(call).get(name)
    if found is None:
        raise ScriptError(f'No quick reply set with name "{name}" found.')
    return found


def _reply(call: CommandCall) -> tuple[QuickReplySet, QuickReply]:
    set_name = call.text("set") or ""
    qr_set = _set(call, set_name)
    ident = call.arg("id")
    label: str | int = (
        int(js_to_number(pipe_text(ident))) if ident is not None else (call.text("label") or "")
    )
    reply = qr_set.find(label)
    if reply is None:
        raise ScriptError(f'No quick reply with label "{label}" in set "{set_name}" found.')
    return qr_set, reply


async def _guarded(call: CommandCall, action: Any) -> Any:
    try:
        result = action()
    except ScriptError as exc:
        call.host.toast(Toast("error", str(exc), None, None))
        return ""
    await call.host.save_quick_replies()
    return result


def _flag(call: CommandCall, name: str) -> bool | None:
    value = call.text(name)
    return None if value is None else is_true_boolean(value)


async def _qr(call: CommandCall) -> Any:
    index = js_to_number(call.value_text())
    found = None if index != index else _library(call).by_index(int(index))
    if found is None:
        raise ScriptError(f'No quick reply at index "{call.value_text()}"')
    return await call.runner.run_quick_reply(found[0], found[1], mode="click")


def _binder(which: str, action: str) -> Any:
    async def callback(call: CommandCall) -> Any:
        name = call.value_text()
        library = _library(call)
        links = library.global_links if which == "global" else library.chat_links
        visible = call.text("visible")
        shown = True if visible is None else is_true_boolean(visible)

        def act() -> str:
            _set(call, name)
            if action == "toggle":
                library.toggle(links, name, visible=shown)
            elif action == "on":
                library.bind(links, name, visible=shown)
            else:
                library.unbind(links, name)
            return ""

        return await _guarded(call, act)

    return callback


def _set_list(call: CommandCall) -> Any:
    library = _library(call)
    source = call.value_text() or call.text("source") or "all"
    if source == "global":
        return [link.name for link in library.global_links]
    if source == "chat":
        return [link.name for link in library.chat_links]
    return [s.name for s in library.sets]


async def _qr_list(call: CommandCall) -> Any:
    name = call.value_text()
    found = _library(call).get(name)
    if found is None:
        # SillyTavern's message names an empty set here, whatever was asked for
        call.host.toast(Toast("error", 'No quick reply set with name "" found.', None, None))
        return ""
    return [qr.label for qr in found.qr_list]


async def _qr_create(call: CommandCall) -> Any:
    def act() -> str:
        qr_set = _set(call, call.text("set") or "")
        show_label = _flag(call, "showlabel")
        qr_set.add(
            label=call.text("label") or "",
            icon=call.text("icon") or "",
            show_label=bool(show_label),
            title=call.text("title") or "",
            message=call.value_text(),
            is_hidden=bool(_flag(call, "hidden")),
            execute_on_startup=bool(_flag(call, "startup")),
            execute_on_user=bool(_flag(call, "user")),
            execute_on_ai=bool(_flag(call, "bot")),
            execute_on_chat_change=bool(_flag(call, "load")),
            execute_on_group_member_draft=bool(_flag(call, "group")),
            execute_on_new_chat=bool(_flag(call, "new")),
            execute_before_generation=bool(_flag(call, "generation")),
            automation_id=call.text("automationId") or "",
        )
        return ""

    return await _guarded(call, act)


_UPDATE_FLAGS = (
    ("hidden", "is_hidden"),
    ("startup", "execute_on_startup"),
    ("user", "execute_on_user"),
    ("bot", "execute_on_ai"),
    ("load", "execute_on_chat_change"),
    ("group", "execute_on_group_member_draft"),
    ("new", "execute_on_new_chat"),
    ("generation", "execute_before_generation"),
)


async def _qr_update(call: CommandCall) -> Any:
    def act() -> str:
        _, reply = _reply(call)
        if call.arg("icon") is not None:
            reply.icon = call.text("icon") or ""
        show_label = _flag(call, "showlabel")
        if show_label is not None:
            reply.show_label = show_label
        if call.arg("newlabel") is not None:
            reply.label = call.text("newlabel") or ""
        message = call.value_text()
        if message.strip():
            reply.message = message
        if call.arg("title") is not None:
            reply.title = call.text("title") or ""
        for arg, attr in _UPDATE_FLAGS:
            value = _flag(call, arg)
            if value is not None:
                setattr(reply, attr, value)
        if call.arg("automationId") is not None:
            reply.automation_id = call.text("automationId") or ""
        return ""

    return await _guarded(call, act)


async def _qr_delete(call: CommandCall) -> Any:
    def act() -> str:
        qr_set, reply = _reply(call)
        qr_set.qr_list.remove(reply)
        return ""

    return await _guarded(call, act)


async def _qr_get(call: CommandCall) -> Any:
    try:
        _, reply = _reply(call)
    except ScriptError as exc:
        call.host.toast(Toast("error", str(exc), None, None))
        return ""
    return js_json_stringify(reply.st_json())


def _context(action: str) -> Any:
    async def callback(call: CommandCall) -> Any:
        def act() -> str:
            _, reply = _reply(call)
            name = call.value_text()
            if action == "add":
                chained = is_true_boolean(call.text("chain") or "")
                existing = next((c for c in reply.context_list if c.set == name), None)
                if existing is not None:
                    existing.is_chained = chained
                else:
                    reply.context_list.append(
                        QuickReplyContext.create(set=name, is_chained=chained)
                    )
            elif action == "del":
                reply.context_list = [c for c in reply.context_list if c.set != name]
            else:
                reply.context_list = []
            return ""

        return await _guarded(call, act)

    return callback


def _set_flags(call: CommandCall) -> dict[str, bool]:
    return {
        "disable_send": bool(_flag(call, "nosend")),
        "place_before_input": bool(_flag(call, "before")),
        "inject_input": bool(_flag(call, "inject")),
    }


async def _set_create(call: CommandCall) -> Any:
    name = call.text("name") or call.value_text()
    return await _guarded(
        call, lambda: (_library(call).create_set(name, **_set_flags(call)), "")[1]
    )


async def _set_update(call: CommandCall) -> Any:
    name = call.text("name") or call.value_text()

    def act() -> str:
        qr_set = _set(call, name)
        for attr, value in _set_flags(call).items():
            setattr(qr_set, attr, value)
        return ""

    return await _guarded(call, act)


async def _set_delete(call: CommandCall) -> Any:
    name = call.text("name") or call.value_text()

    def act() -> str:
        _set(call, name)
        _library(call).delete_set(name)
        return ""

    return await _guarded(call, act)


def _qr_arg(call: CommandCall) -> Any:
    values = call.value_list()
    if not values:
        return ""
    key = pipe_text(values[0])
    value = values[1] if len(values) > 1 else ""
    call.scope.set_macro(f"arg::{key}", value, overwrite="*" in key)
    return ""


def _import(call: CommandCall) -> Any:
    source = call.text("from")
    if not source:
        raise ScriptError("/import requires from= to be set.")
    names = [pipe_text(v) for v in call.value_list()]
    if not names:
        raise ScriptError("/import requires what to import.")
    found = _library(call).find_by_name(source)
    if found is None:
        raise ScriptError(f'No Quick Reply found for "{source}".')
    root = call.runner.parse(found[1].message, call.node.flags)
    candidates: list[tuple[str, ClosureNode]] = []
    for executor in root.executors:
        if not isinstance(executor, CommandNode) or executor.name not in ("let", "var"):
            continue
        key = next((a.value for a in executor.named if a.name == "key"), None)
        values = [u.value for u in executor.unnamed]
        if key is None and values:
            key = values.pop(0)
        closure = next((v for v in values if isinstance(v, ClosureNode)), None)
        if isinstance(key, str) and closure is not None:
            candidates.append((key, closure))
    index = 0
    while index < len(names):
        source_name = names[index]
        target = source_name
        if index + 2 < len(names) and names[index + 1] == "as":
            target = names[index + 2]
            index += 2
        pick = next((c for n, c in candidates if n == source_name), None)
        if pick is None:
            raise ScriptError(f'No scoped closure named "{source_name}" found in "{source}"')
        value = ScriptClosure(pick, Scope(call.scope))
        if call.scope.exists_in_scope(target):
            call.scope.set(target, value)
        else:
            call.scope.let(target, value)
        index += 1
    return ""


def register(registry: CommandRegistry) -> None:
    _register_running_and_lists(registry)
    _register_replies(registry)
    _register_sets_and_args(registry)


def _register_running_and_lists(registry: CommandRegistry) -> None:
    """/qr, toggling the global and chat sets, and the lists of sets and replies."""
    reg = registry.register
    reg("qr", _qr, unnamed_types=("number",), help="Runs the N-th quick reply (global, chat).")
    for which, base in (("global", "qr-set"), ("chat", "qr-chat-set")):
        visible = (NamedArgSpec("visible", types=("bool",), default="true"),)
        reg(base, _binder(which, "toggle"), named_args=visible, help=f"Toggles a {which} set.")
        reg(f"{base}-on", _binder(which, "on"), named_args=visible, help=f"Binds a {which} set.")
        reg(f"{base}-off", _binder(which, "off"), help=f"Unbinds a {which} set.")
    reg("qr-set-list", _set_list, named_args=("source",), help="Names of the sets (JSON).")
    reg("qr-list", _qr_list, help="Labels of a set's replies (JSON).")


def _register_replies(registry: CommandRegistry) -> None:
    """Creating, changing and removing one quick reply, and its context menu."""
    reg = registry.register
    reply_args = ("set", "label", "id")
    flag_args = tuple(NamedArgSpec(name, types=("bool",)) for name, _ in _UPDATE_FLAGS)
    reg(
        "qr-create",
        _qr_create,
        named_args=(
            *reply_args,
            "icon",
            NamedArgSpec("showlabel", types=("bool",)),
            "title",
            *flag_args,
            "automationId",
        ),
        help="Adds a quick reply to a set.",
    )
    reg(
        "qr-update",
        _qr_update,
        named_args=(
            *reply_args,
            "newlabel",
            "icon",
            NamedArgSpec("showlabel", types=("bool",)),
            "title",
            *flag_args,
            "automationId",
        ),
        help="Changes a quick reply.",
    )
    reg("qr-delete", _qr_delete, named_args=reply_args, help="Removes a quick reply.")
    reg("qr-get", _qr_get, named_args=reply_args, unnamed_types=(), help="A quick reply (JSON).")
    reg(
        "qr-contextadd",
        _context("add"),
        named_args=(*reply_args, NamedArgSpec("chain", types=("bool",))),
        help="Adds a set to a reply's context menu.",
    )
    reg("qr-contextdel", _context("del"), named_args=reply_args, help="Removes a context set.")
    reg(
        "qr-contextclear",
        _context("clear"),
        named_args=reply_args,
        unnamed_types=(),
        help="Clears a reply's context menu.",
    )


def _register_sets_and_args(registry: CommandRegistry) -> None:
    """The sets themselves, /qr-arg and /import."""
    reg = registry.register
    set_flags = (
        NamedArgSpec("nosend", types=("bool",)),
        NamedArgSpec("before", types=("bool",)),
        NamedArgSpec("inject", types=("bool",)),
    )
    reg(
        "qr-set-create",
        _set_create,
        aliases=("qr-presetadd",),
        named_args=set_flags,
        help="Creates a set (an existing one is replaced).",
    )
    reg(
        "qr-set-update",
        _set_update,
        aliases=("qr-presetupdate",),
        named_args=set_flags,
        help="Changes a set's sending flags.",
    )
    reg("qr-set-delete", _set_delete, aliases=("qr-presetdelete",), help="Deletes a set.")
    reg(
        "qr-arg",
        _qr_arg,
        split=True,
        split_count=2,
        help="A default for {{arg::name}} in the current scope.",
    )
    reg(
        "import",
        _import,
        named_args=("from",),
        split=True,
        help="Copies closures a quick reply declares into this scope.",
    )
