"""Chat commands: ``/send``, ``/sendas``, ``/sys``, ``/comment``, ``/messages``, ``/hide``,
``/unhide``, ``/del``, ``/cut``, ``/setinput``, ``/inject``, ``/listinjects``, ``/flushinject``.

Messages are built in SillyTavern's shape (the keys, their order, ``extra`` with
``api: "manual"`` and ``model: "slash command"``), with its text rules: ``/send`` runs the
user-input regex scripts and macros again, ``/sendas`` the slash-command scripts, ``/sys`` and
``/comment`` only macros. A character message that is not compact gets its swipe list when it
is shown, as SillyTavern's renderer adds it.
"""

from __future__ import annotations

import math
import re
import uuid
from datetime import UTC
from typing import Any

from tavernkit.errors import ScriptError
from tavernkit.jscompat import is_false_boolean, is_true_boolean, js_to_number, js_trim
from tavernkit.stscript.commands.returns import RETURN_TYPES, do_return
from tavernkit.stscript.executor import CommandCall
from tavernkit.stscript.host import RegexPlacement, Toast
from tavernkit.stscript.registry import CommandRegistry, NamedArgSpec
from tavernkit.stscript.scope import js_parse_int, pipe_text

__all__ = [
    "COMMENT_AVATAR",
    "DEFAULT_AVATAR",
    "NARRATOR_AVATAR",
    "NARRATOR_NAME",
    "add_swipes",
    "register",
    "string_to_range",
    "user_message",
]

NARRATOR_NAME = "System"
NARRATOR_AVATAR = "img/five.png"
COMMENT_NAME = "Note"
COMMENT_AVATAR = "img/quill.png"
DEFAULT_AVATAR = "img/ai4.png"
_BIAS = re.compile(r"\{\{bias\s+(\"[^\"]*\"|'[^']*')\s*\}\}")
_MACRO = re.compile(r"\{\{[^}]*\}\}")


def extract_bias(text: str) -> str:
    """``extractMessageBias``: the text of ``{{bias "…"}}`` helpers, space-prefixed."""
    found = [m.group(1)[1:-1] for m in _BIAS.finditer(text)]
    return " " + " ".join(found) if found else ""


def add_swipes(message: dict[str, Any]) -> dict[str, Any]:
    """What rendering a character message adds: ``swipes``, ``swipe_id``, ``swipe_info``."""
    extra = message.get("extra") or {}
    if message.get("is_user") or extra.get("isSmallSys") or "swipes" in message:
        return message
    message["swipes"] = [message.get("mes", "")]
    message["swipe_id"] = 0
    info: dict[str, Any] = {}
    if "send_date" in message:
        info["send_date"] = message["send_date"]
        info["gen_started"] = None
        info["gen_finished"] = None
    info["extra"] = dict(extra)
    message["swipe_info"] = [info]
    return message


def string_to_range(value: Any, low: int, high: int) -> tuple[int, int] | None:
    """``stringToRange``: ``"3"`` or ``"1-4"`` within ``[low, high]``, else None."""
    text = pipe_text(value)
    if "-" in text:
        first, _, rest = text.partition("-")
        second = rest.split("-", 1)[0]
        start = js_parse_int(first) if first else math.nan
        end = js_parse_int(second) if second else math.nan
    else:
        start = end = js_parse_int(text)
    if math.isnan(start) or math.isnan(end) or start > end or start < low or end > high:
        return None
    return int(start), int(end)


def _insert_at(call: CommandCall) -> int | None:
    at = js_to_number(call.text("at") or "NaN") if call.arg("at") is not None else math.nan
    if math.isnan(at):
        return None
    position = int(at)
    if position < 0:
        position += len(call.host.chat)
    return position if 0 <= position <= len(call.host.chat) else None


def _timestamp(call: CommandCall) -> str:
    moment = call.host.clock().astimezone(UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def user_message(
    call: CommandCall, text: str, name: str | None, avatar: str | None, compact: bool
) -> dict[str, Any]:
    """``sendMessageAsUser``'s message (before it is added)."""
    host = call.host
    text = host.regex.apply(text, RegexPlacement.USER_INPUT, env=host.macro_env())
    message: dict[str, Any] = {
        "name": host.user_name if name is None else name,
        "is_user": True,
        "is_system": False,
        "send_date": _timestamp(call),
        "mes": host_substitute(call, text),
        "extra": {"isSmallSys": compact},
    }
    persona_avatar = avatar if avatar is not None else host.user_avatar
    if persona_avatar:
        message["force_avatar"] = f"/thumbnail?type=persona&file={persona_avatar}"
    bias = extract_bias(text)
    if bias:
        message["extra"]["bias"] = bias
    return message


def host_substitute(call: CommandCall, text: str) -> str:
    """``substituteParams``: the chat's macros, without the script's own."""
    return call.runner.substitute_plain(text)


async def _add(call: CommandCall, message: dict[str, Any], at: int | None) -> None:
    add_swipes(message)
    await call.host.insert_message(message, at)


def _return(call: CommandCall, message: dict[str, Any]) -> Any:
    kind = call.text("return") or "none"
    if kind not in RETURN_TYPES:
        kind = "none"
    return do_return(call, kind, message, str(message.get("mes", "")))


async def _send(call: CommandCall) -> Any:
    text = js_trim(call.value_text())
    compact = is_true_boolean(call.text("compact") or "")
    name: str | None = None
    avatar: str | None = None
    if "name" in call.args:
        name = call.text("name") or ""
        avatar = call.host.find_persona(name) or call.host.user_avatar
    message = user_message(call, text, name, avatar, compact)
    await call.host.insert_message(message, _insert_at(call))
    return _return(call, message)


def _manual_extra(bias: str, compact: bool, call: CommandCall, kind: str | None) -> dict[str, Any]:
    extra: dict[str, Any] = {}
    if kind is not None:
        extra["type"] = kind
    if kind != "comment":
        extra["bias"] = bias if js_trim(bias) else None
    extra["gen_id"] = call.host.now_ms()
    extra["isSmallSys"] = compact
    extra["api"] = "manual"
    extra["model"] = "slash command"
    return extra


async def _sendas(call: CommandCall) -> Any:
    text = call.value_text()
    if not text:
        return ""
    host = call.host
    name = js_trim(call.text("name") or "")
    if not name:
        if "sendas" not in host.warned:
            host.warned.add("sendas")
            host.toast(
                Toast(
                    "warning",
                    'To avoid confusion, please use /sendas name="Character Name"',
                    None,
                    None,
                )
            )
        name = host.char_name
    bias = extract_bias(text)
    is_system: Any = bias and not js_trim(_MACRO.sub("", text))
    compact = is_true_boolean(call.text("compact") or "")
    character = host.find_character(name)
    avatar_name = call.text("avatar")
    avatar_character = host.find_character(avatar_name) if avatar_name else character
    if avatar_name and avatar_character is None:
        host.toast(Toast("warning", f"Character for avatar {avatar_name} not found", None, None))
        return ""
    message: dict[str, Any] = {
        "name": name,
        "is_user": False,
        "is_system": is_system,
        "send_date": _timestamp(call),
        "mes": host.regex.apply(
            text, RegexPlacement.SLASH_COMMAND, character_override=name, env=host.macro_env()
        ),
    }
    current = (
        host.char_name and avatar_character is not None and avatar_character.name == host.char_name
    )
    if not current:
        if avatar_character is not None and avatar_character.avatar not in ("", "none"):
            message["force_avatar"] = f"/thumbnail?type=avatar&file={avatar_character.avatar}"
            message["original_avatar"] = avatar_character.avatar
        else:
            message["force_avatar"] = DEFAULT_AVATAR
            message["original_avatar"] = DEFAULT_AVATAR
    extra = _manual_extra(bias, compact, call, None)
    message["extra"] = extra
    message["swipe_id"] = 0
    message["swipes"] = [message["mes"]]
    message["swipe_info"] = [
        {
            "send_date": message["send_date"],
            "gen_started": None,
            "gen_finished": None,
            "extra": dict(extra),
        }
    ]
    await call.host.insert_message(message, _insert_at(call))
    return _return(call, message)


async def _sys(call: CommandCall) -> Any:
    text = call.value_text()
    host = call.host
    name = call.text("name")
    if name is None:
        name = str(host.metadata.get("narrator_name") or NARRATOR_NAME)
    bias = extract_bias(text)
    is_system: Any = bias and not js_trim(_MACRO.sub("", text))
    compact = is_true_boolean(call.text("compact") or "")
    message: dict[str, Any] = {
        "name": name,
        "is_user": False,
        "is_system": is_system,
        "send_date": _timestamp(call),
        "mes": host_substitute(call, js_trim(text)),
        "force_avatar": NARRATOR_AVATAR,
        "extra": _manual_extra(bias, compact, call, "narrator"),
    }
    await _add(call, message, _insert_at(call))
    return _return(call, message)


async def _comment(call: CommandCall) -> Any:
    text = call.value_text()
    compact = is_true_boolean(call.text("compact") or "")
    message: dict[str, Any] = {
        "name": COMMENT_NAME,
        "is_user": False,
        "is_system": True,
        "send_date": _timestamp(call),
        "mes": host_substitute(call, js_trim(text)),
        "force_avatar": COMMENT_AVATAR,
        "extra": _manual_extra("", compact, call, "comment"),
    }
    await _add(call, message, _insert_at(call))
    return _return(call, message)


async def _messages(call: CommandCall) -> Any:
    chat = call.host.chat
    names = not is_false_boolean(call.text("names") or "")
    hidden = is_true_boolean(call.text("hidden") or "")
    role = call.text("role")
    bounds = string_to_range(call.value_text(), 0, len(chat) - 1)
    if bounds is None:
        return ""
    await call.host.load_messages(bounds[0], bounds[1] + 1)
    out: list[str] = []
    for index in range(bounds[0], bounds[1] + 1):
        message = chat[index]
        narrator = (message.get("extra") or {}).get("type") == "narrator"
        if role:
            if role == "system":
                keep = narrator and not message.get("is_user")
            elif role == "assistant":
                keep = not narrator and not message.get("is_user")
            elif role == "user":
                keep = not narrator and bool(message.get("is_user"))
            else:
                raise ScriptError(
                    f"Invalid role provided. Expected one of: system, assistant, user. Got: {role}"
                )
            if not keep:
                continue
        if not hidden and message.get("is_system"):
            continue
        text = str(message.get("mes", ""))
        out.append(f"{message.get('name', '')}: {text}" if names else text)
    return "\n\n".join(out)


async def _set_hidden(call: CommandCall, hidden: bool) -> Any:
    chat = call.host.chat
    text = call.value_text()
    if text:
        bounds = string_to_range(text, 0, len(chat) - 1)
    else:
        bounds = (len(chat) - 1, len(chat) - 1) if chat else None
    if bounds is None:
        return ""
    await call.host.load_messages(bounds[0], bounds[1] + 1)
    name = js_trim(call.text("name") or "")
    for index in range(bounds[0], bounds[1] + 1):
        message = dict(chat[index])
        if name and message.get("name") != name:
            continue
        message["is_system"] = hidden
        await call.host.update_message(index, message)
    return ""


async def _hide(call: CommandCall) -> Any:
    return await _set_hidden(call, True)


async def _unhide(call: CommandCall) -> Any:
    return await _set_hidden(call, False)


async def _delete(call: CommandCall) -> Any:
    count = js_parse_int(call.value_text())
    chat = call.host.chat
    if math.isnan(count) or count <= 0:
        call.host.toast(
            Toast("warning", "Must provide a positive number of messages to delete", None, None)
        )
        return ""
    count = min(int(count), len(chat))
    indices = list(range(len(chat) - count, len(chat)))
    removed = await call.host.delete_messages(indices)
    return "".join(f"{m.get('mes', '')}\n" for m in removed)


async def _cut(call: CommandCall) -> Any:
    text = call.value_text()
    chat = call.host.chat
    if not text:
        call.host.toast(Toast("warning", "No range provided", None, None))
        return ""
    bounds = string_to_range(text, 0, len(chat) - 1)
    if bounds is None:
        call.host.toast(Toast("warning", f"Invalid range provided: {text}", None, None))
        return ""
    removed = await call.host.delete_messages(list(range(bounds[0], bounds[1] + 1)))
    return "".join(f"{m.get('mes', '')}\n" for m in removed)


def _setinput(call: CommandCall) -> Any:
    text = call.value_text()
    call.host.input_text = text
    return text


_POSITIONS = {"before": 2, "after": 0, "chat": 1, "none": -1}
_ROLES = {"system": 0, "user": 1, "assistant": 2}


async def _inject(call: CommandCall) -> Any:
    host = call.host
    ident = call.text("id")
    if not ident:
        ident = str(uuid.UUID(int=int(call.runner.random() * 2**122) << 6, version=4))
    position = _POSITIONS.get(call.text("position") or "after", 0)
    depth_value = js_to_number(call.text("depth") or "4")
    depth = 4 if math.isnan(depth_value) else depth_value
    role_text = call.text("role")
    role = _ROLES.get(js_trim(role_text).lower(), 0) if role_text is not None else 0
    scan = is_true_boolean(call.text("scan") or "")
    value = call.value_text()
    injects = host.metadata.get("script_injects")
    if not isinstance(injects, dict):
        injects = host.metadata["script_injects"] = {}
    if value:
        injects[ident] = {
            "value": value,
            "position": position,
            "depth": int(depth) if float(depth).is_integer() else depth,
            "scan": scan,
            "role": role,
            "filter": call.arg("filter") if isinstance(call.arg("filter"), str) else None,
        }
    else:
        injects.pop(ident, None)
    await host.save_metadata()
    return ident


def _listinjects(call: CommandCall) -> Any:
    injects = call.host.metadata.get("script_injects") or {}
    kind = call.text("return") or call.text("format") or "popup-html"
    lines = "\n".join(f"{k}: {v.get('value', '')}" for k, v in injects.items())
    return do_return(call, kind, injects, lines)


async def _flushinject(call: CommandCall) -> Any:
    host = call.host
    injects = host.metadata.get("script_injects")
    if not isinstance(injects, dict):
        return ""
    ident = call.value_text()
    if ident:
        injects.pop(ident, None)
    else:
        injects.clear()
    await host.save_metadata()
    return ""


def register(registry: CommandRegistry) -> None:
    reg = registry.register
    returns = NamedArgSpec("return", enum=RETURN_TYPES, default="none")
    placing = (NamedArgSpec("compact", types=("bool",)), NamedArgSpec("at", types=("number",)))
    reg(
        "send",
        _send,
        raw_quotes=True,
        named_args=(*placing, "name", returns, NamedArgSpec("raw", types=("bool",))),
        help="Adds a message as the user.",
    )
    reg(
        "sendas",
        _sendas,
        raw_quotes=True,
        named_args=("name", "avatar", *placing, returns, NamedArgSpec("raw", types=("bool",))),
        help="Adds a message as a character.",
    )
    reg(
        "sys",
        _sys,
        aliases=("nar",),
        raw_quotes=True,
        named_args=("name", *placing, returns, NamedArgSpec("raw", types=("bool",))),
        help="Adds a narrator message.",
    )
    reg(
        "comment",
        _comment,
        raw_quotes=True,
        named_args=(*placing, returns, NamedArgSpec("raw", types=("bool",))),
        help="Adds a hidden comment.",
    )
    reg(
        "messages",
        _messages,
        aliases=("message",),
        named_args=(
            NamedArgSpec("names", types=("bool",), default="on"),
            NamedArgSpec("hidden", types=("bool",), default="off"),
            NamedArgSpec("role", enum=("system", "assistant", "user")),
        ),
        help="Texts of the messages at an index or range.",
    )
    reg("hide", _hide, named_args=("name",), help="Hides messages from the prompt.")
    reg("unhide", _unhide, named_args=("name",), help="Shows hidden messages again.")
    reg("del", _delete, aliases=("delete",), help="Deletes the last N messages.")
    reg("cut", _cut, help="Deletes the messages at an index or range; returns their texts.")
    reg("setinput", _setinput, help="Puts the text in the input box.")
    reg(
        "inject",
        _inject,
        named_args=(
            "id",
            NamedArgSpec("position", enum=tuple(_POSITIONS), default="after"),
            NamedArgSpec("depth", types=("number",), default="4"),
            NamedArgSpec("role", enum=tuple(_ROLES)),
            NamedArgSpec("scan", types=("bool",)),
            NamedArgSpec("ephemeral", types=("bool",)),
            "filter",
        ),
        help="A prompt injection kept in the chat (chat_metadata.script_injects).",
    )
    reg(
        "listinjects",
        _listinjects,
        named_args=(returns,),
        unnamed_types=(),
        help="The chat's script injections.",
    )
    reg("flushinject", _flushinject, aliases=("flushinjects",), help="Removes injections.")
