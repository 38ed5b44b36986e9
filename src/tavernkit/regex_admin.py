"""Regex scripts as a user manages them: the global list (add, edit, order, toggle, delete,
import, export), the allow lists of cards and presets, and the live test of a script (the
``tavernkit regex`` command, the ``/regex/...`` routes and the web UI's editor).

Everything lives in the owner's settings (:class:`~tavernkit.models.regex_script.
RegexSettings`): the global scripts in their run order, the characters and chat presets
(record ids) whose embedded scripts may run, and the extension's on/off switch. A card's own
scripts stay in the card (``data.extensions.regex_scripts``) and a preset's in the preset
(``extensions.regex_scripts``); allowing one is what SillyTavern's "allow embedded scripts"
popup does. Writes read the settings, change them and write them back under a lock per owner
in this process, so edits sent together do not lose one another.

:meth:`RegexAdmin.command` is what an STscript executor's ``/regex``, ``/regex-state`` and
``/regex-toggle`` call: it runs the hook over the chat's three lists and stores a toggle where
the script lives (the global list, the card or the preset).
"""

from __future__ import annotations

import asyncio
import uuid
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import ValidationError

from tavernkit.errors import FormatError, NotFound
from tavernkit.models.character import Card
from tavernkit.models.preset import ChatCompletionPreset
from tavernkit.models.regex_script import (
    RegexScript,
    RegexSettings,
    embedded_scripts,
    export_filename,
    export_text,
    parse_import,
    script_from_editor,
)
from tavernkit.models.samplers import TextGenSettings
from tavernkit.models.settings import Settings
from tavernkit.models.state import ChatState
from tavernkit.prompt.from_chat_state import main_api_of, script_lists
from tavernkit.prompt.pipeline import begin
from tavernkit.prompt.regex import regex_macros
from tavernkit.store.chat_state import load_chat_state
from tavernkit.store.chat_window import windowed
from tavernkit.store.protocol import Store
from tavernkit.text.regex_scripts import (
    CommandResult,
    RegexMacros,
    plain_macros,
    regex_command,
    regex_from_string,
    regex_state,
    regex_toggle,
    run_scripts,
    script_view,
)

__all__ = ["CardScripts", "RegexAdmin", "TestResult"]

#: owner -> the lock its settings edits take (gone when no edit holds it)
_LOCKS: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()

Command = Literal["regex", "regex-state", "regex-toggle"]

#: the records that hold embedded scripts, by store kind
_MODELS: dict[str, type[Card] | type[ChatCompletionPreset] | type[TextGenSettings]] = {
    "character": Card,
    "chat_preset": ChatCompletionPreset,
    "textgen_preset": TextGenSettings,
}


@dataclass(frozen=True, slots=True)
class CardScripts:
    """A character's embedded scripts and whether the owner allows them."""

    character_id: str
    name: str
    scripts: list[RegexScript]
    allowed: bool


@dataclass(frozen=True, slots=True)
class TestResult:
    """The live test box's answer: the text after the script, and whether its pattern
    compiled (a pattern that does not is a no-op, as in SillyTavern)."""

    output: str
    valid: bool


class RegexAdmin:
    """The owner's regex scripts (see the module docstring)."""

    def __init__(self, store: Store, owner: str) -> None:
        self.store = store
        self.owner = owner

    # -- reading -----------------------------------------------------------------------------

    async def _settings(self) -> Settings:
        stored = await self.store.get_settings(owner=self.owner)
        return stored.model_copy(deep=True) if isinstance(stored, Settings) else Settings()

    async def settings(self) -> RegexSettings:
        return (await self._settings()).regex

    async def scripts(self) -> list[RegexScript]:
        """The global scripts in their run order."""
        return list((await self.settings()).scripts)

    async def get(self, ref: str) -> RegexScript:
        """A global script by id, else by name (case-insensitive)."""
        scripts = await self.scripts()
        return scripts[_index(scripts, ref)]

    # -- writing -----------------------------------------------------------------------------

    def _lock(self) -> asyncio.Lock:
        lock = _LOCKS.get(self.owner)
        if lock is None:
            lock = _LOCKS[self.owner] = asyncio.Lock()
        return lock

    async def _edit(self, change: Any) -> Any:
        async with self._lock():
            settings = await self._settings()
            result = change(settings.regex)
            await self.store.put_settings(settings, owner=self.owner)
            return result

    async def add(
        self, script: RegexScript | Mapping[str, Any], *, position: int | None = None
    ) -> RegexScript:
        """Add a global script (at the end, or before ``position``). A mapping is read as the
        editor's form (its defaults fill what it leaves out) when it has no ``id``, else as a
        script object kept as it is."""
        new = _as_script(script)

        def change(regex: RegexSettings) -> RegexScript:
            at = len(regex.scripts) if position is None else max(0, position)
            regex.scripts.insert(at, new)
            return new

        result: RegexScript = await self._edit(change)
        return result

    async def update(self, ref: str, fields: Mapping[str, Any]) -> RegexScript:
        """Change some of a global script's fields (SillyTavern's key names); its other keys
        and their order stay."""

        def change(regex: RegexSettings) -> RegexScript:
            index = _index(regex.scripts, ref)
            data = regex.scripts[index].to_wire()
            data.update({k: v for k, v in fields.items() if k != "id"})
            regex.scripts[index] = _validated(data)
            return regex.scripts[index]

        result: RegexScript = await self._edit(change)
        return result

    async def set_enabled(self, ref: str, enabled: bool) -> RegexScript:
        return await self.update(ref, {"disabled": not enabled})

    async def delete(self, ref: str) -> None:
        def change(regex: RegexSettings) -> None:
            del regex.scripts[_index(regex.scripts, ref)]

        await self._edit(change)

    async def move(self, ref: str, position: int) -> list[RegexScript]:
        """Move a global script to ``position`` (0 runs first); returns the new order."""

        def change(regex: RegexSettings) -> list[RegexScript]:
            script = regex.scripts.pop(_index(regex.scripts, ref))
            regex.scripts.insert(max(0, min(position, len(regex.scripts))), script)
            return list(regex.scripts)

        result: list[RegexScript] = await self._edit(change)
        return result

    async def import_scripts(
        self, data: Any, *, source: str = "<regex import>"
    ) -> list[RegexScript]:
        """Import one script object or a list of them into the global list, as SillyTavern
        does: each gets a fresh ``id`` and is appended as it is (missing keys stay missing);
        an object without a ``scriptName`` refuses the whole import."""
        scripts = parse_import(data, source=source)

        def change(regex: RegexSettings) -> list[RegexScript]:
            regex.scripts.extend(scripts)
            return scripts

        result: list[RegexScript] = await self._edit(change)
        return result

    async def export(self, ref: str | None = None) -> tuple[str, str]:
        """``(file name, text)`` of one script's export file, or (no ``ref``) of every global
        script as a list."""
        if ref is not None:
            script = await self.get(ref)
            return _filename(script), export_text(script)
        return "regex-scripts.json", export_text(await self.scripts())

    async def set_extension_enabled(self, enabled: bool) -> None:
        """Turn every regex script off (SillyTavern's disabled extension) or on again."""

        def change(regex: RegexSettings) -> None:
            regex.enabled = enabled

        await self._edit(change)

    # -- allow lists ---------------------------------------------------------------------------

    async def character_scripts(self, character: str) -> CardScripts:
        """A character's embedded scripts and whether they are allowed."""
        record = await self.store.get_record("character", character, owner=self.owner)
        card = Card.model_validate(record.data)
        allowed = record.info.id in (await self.settings()).allowed_characters
        return CardScripts(
            record.info.id, card.data.name, embedded_scripts(card.data.extensions), allowed
        )

    async def allow_character(self, character: str, allowed: bool = True) -> CardScripts:
        """Let a character's embedded scripts run (or stop them again)."""
        found = await self.character_scripts(character)
        await self._edit(
            lambda regex: _toggle_in(regex.allowed_characters, found.character_id, allowed)
        )
        return CardScripts(found.character_id, found.name, found.scripts, allowed)

    async def allow_preset(self, preset: str, allowed: bool = True) -> str:
        """Let a chat preset's embedded scripts run (or stop them again); returns its id."""
        record = await self.store.get_record("chat_preset", preset, owner=self.owner)
        preset_id = record.info.id
        await self._edit(lambda regex: _toggle_in(regex.allowed_presets, preset_id, allowed))
        return preset_id

    # -- running ---------------------------------------------------------------------------------

    def test(
        self,
        script: RegexScript | Mapping[str, Any],
        text: str,
        macros: RegexMacros | None = None,
    ) -> TestResult:
        """The editor's test box: ``text`` through this one script, whatever its placement,
        flags and depths (``/regex``'s way); macros as given (none by default)."""
        if isinstance(script, RegexScript):
            candidate = script
        elif script.get("id"):  # a script object: kept as it is (a name is not needed here)
            candidate = RegexScript.model_validate(dict(script))
        else:  # the editor's form
            candidate = script_from_editor(script)
        view = script_view(candidate)
        ran = run_scripts(
            text,
            0,
            [script_view(_any_placement(candidate))],
            macros or plain_macros(),
            strict=False,
        )
        from_string = _compiles(view.get("findRegex"), view.get("substituteRegex"))
        return TestResult(ran, from_string)

    async def command(
        self,
        name: Command,
        *,
        chat_id: str | None = None,
        script: str | None = None,
        text: str = "",
        state: str | None = None,
        quiet: bool = False,
    ) -> CommandResult:
        """``/regex name=<script> <text>``, ``/regex-state <script>`` or ``/regex-toggle
        [state=] [quiet=] <script>`` over the lists of ``chat_id`` (its character and preset;
        the global list alone without a chat). A toggle is stored where the script lives."""

        async def read(window: int) -> tuple[ChatState, RegexMacros]:
            loaded = await load_chat_state(
                self.store, owner=self.owner, chat_id=chat_id, window=window
            )
            return loaded, regex_macros(begin(loaded).substitute)

        if chat_id is not None:
            chat_state, macros = await windowed(chat_id, read)
        else:
            chat_state, macros = await read(0)
        lists = script_lists(chat_state)
        if name == "regex":
            return regex_command(lists, script, text, macros)
        if name == "regex-state":
            return regex_state(lists, script or "")
        result = regex_toggle(lists, script or "", state=state, quiet=quiet)
        if result.changed is not None:
            await self.store_toggle(result, chat_state)
        return result

    async def store_toggle(self, result: CommandResult, state: ChatState) -> None:
        """Store a ``/regex-toggle``'s change where the script lives: the global list, the
        card of ``state``'s character or its current preset (the chat preset on a chat
        completion API, the text-generation preset on a text one)."""
        changed, index = result.changed, result.index
        if changed is None or index is None:
            return
        if result.scope == "global":

            def change(regex: RegexSettings) -> None:
                regex.scripts[index] = changed

            await self._edit(change)
            return
        chat_api = main_api_of(state) == "openai"
        kind, ref = (
            ("character", state.character_id)
            if result.scope == "scoped"
            else ("chat_preset", state.chat_preset_id)
            if chat_api
            else ("textgen_preset", state.textgen_preset_id)
        )
        if ref is None:
            return
        record = await self.store.get_record(kind, ref, owner=self.owner)
        data = dict(record.data)
        holder = data.get("data") if kind == "character" else data
        if not isinstance(holder, dict):
            return
        extensions = dict(holder.get("extensions") or {})
        scripts = list(extensions.get("regex_scripts") or [])
        if index < len(scripts):
            scripts[index] = changed.to_wire()
            extensions["regex_scripts"] = scripts
            holder["extensions"] = extensions
            await self.store.put(
                kind,
                _MODELS[kind].model_validate(data),
                owner=self.owner,
                name=record.info.name,
                id=record.info.id,
            )


def _as_script(script: RegexScript | Mapping[str, Any]) -> RegexScript:
    if isinstance(script, RegexScript):
        return script if script.id else _validated({"id": _new_id(), **script.to_wire()})
    if script.get("id"):
        return _validated(dict(script))
    return script_from_editor(script)


def _new_id() -> str:
    return str(uuid.uuid4())


def _validated(data: Mapping[str, Any]) -> RegexScript:
    if not data.get("scriptName"):
        raise FormatError(
            "a regex script needs a name", source="<regex script>", field="scriptName"
        )
    try:
        return RegexScript.model_validate(dict(data))
    except ValidationError as exc:
        raise FormatError(str(exc), source="<regex script>") from exc


def _index(scripts: Sequence[RegexScript], ref: str) -> int:
    for i, script in enumerate(scripts):
        if script.id == ref:
            return i
    folded = ref.casefold()
    for i, script in enumerate(scripts):
        if script.script_name.casefold() == folded:
            return i
    raise NotFound(f"no regex script {ref!r}")


def _toggle_in(items: list[str], value: str, present: bool) -> None:
    if present and value not in items:
        items.append(value)
    elif not present and value in items:
        items.remove(value)


def _filename(script: RegexScript) -> str:
    return export_filename(script)


def _any_placement(script: RegexScript) -> RegexScript:
    """The script with placement 0 added and its only-flags and depths cleared: run as the
    test box runs it, on any text."""
    data = script.to_wire()
    data.update({"placement": [0], "markdownOnly": False, "promptOnly": False, "disabled": False})
    data.update({"minDepth": None, "maxDepth": None})
    return RegexScript.model_validate(data)


def _compiles(find: Any, mode: Any) -> bool:
    """Whether the find pattern compiles; with macros in it (a substitution mode) that is
    known only when they are evaluated, so it counts as valid."""
    if not isinstance(find, str) or not find:
        return False
    if mode not in (0, None, "0"):
        return True
    return regex_from_string(find) is not None
