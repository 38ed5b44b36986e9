"""Regex scripts: SillyTavern's Regex extension's find/replace rules, and where a user keeps them.

A script is SillyTavern's JSON object, read and written back losslessly (:class:`RegexScript`,
a :class:`~tavernkit.models.base.WireModel`): every key in its order, unknown keys kept, and
the loosely typed values real files carry (``"disabled": "false"``, ``"minDepth": "2"``,
``NaN`` written as ``null``) left as they are, since the engine reads them with JavaScript's
coercions (:mod:`tavernkit.text.regex_scripts`). A script imported without some key keeps
that key missing, as SillyTavern does.

Scripts live in three places: the owner's settings (global scripts, :class:`RegexSettings`),
a character card (``data.extensions.regex_scripts``, "scoped" scripts, off until the owner
allows that card) and a chat-completion preset (``extensions.regex_scripts``, off until the
owner allows that preset).
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterable, Mapping
from typing import Any, Final

from pydantic import Field, ValidationError

from tavernkit.errors import FormatError
from tavernkit.models.base import ValueModel, WireModel

__all__ = [
    "ALLOW_QUESTION",
    "EDITOR_DEFAULTS",
    "SCRIPT_KEYS",
    "RegexScript",
    "RegexSettings",
    "embedded_scripts",
    "export_filename",
    "export_text",
    "migrate_script",
    "parse_import",
    "script_from_editor",
]

#: What SillyTavern asks when a card with scripts is opened (its popup's first sentences).
ALLOW_QUESTION: Final = (
    "This character has embedded regex script(s). Would you like to allow using them?"
)

#: The keys SillyTavern's editor saves, in its order (``JSON.stringify`` of a saved script).
SCRIPT_KEYS: Final = (
    "id",
    "scriptName",
    "findRegex",
    "replaceString",
    "trimStrings",
    "placement",
    "disabled",
    "markdownOnly",
    "promptOnly",
    "runOnEdit",
    "substituteRegex",
    "minDepth",
    "maxDepth",
)

#: What the editor shows for a new script: user input only, display only, runs on edit.
EDITOR_DEFAULTS: Final[Mapping[str, Any]] = {
    "scriptName": "",
    "findRegex": "",
    "replaceString": "",
    "trimStrings": [],
    "placement": [1],
    "disabled": False,
    "markdownOnly": True,
    "promptOnly": False,
    "runOnEdit": True,
    "substituteRegex": 0,
    "minDepth": None,
    "maxDepth": None,
}


class RegexScript(WireModel):
    """One regex script (SillyTavern's JSON shape; see the module docstring).

    The flags, depths and placement are typed loosely on purpose: the engine tests them with
    JavaScript's truthiness and coercions, and a file that holds ``"false"`` or ``"2"`` must
    behave (and write back) as SillyTavern's would.
    """

    id: str = ""
    script_name: str = Field(default="", alias="scriptName")
    find_regex: Any = Field(default="", alias="findRegex")
    replace_string: Any = Field(default="", alias="replaceString")
    trim_strings: Any = Field(default_factory=list, alias="trimStrings")
    placement: Any = Field(default_factory=list)
    disabled: Any = False
    markdown_only: Any = Field(default=False, alias="markdownOnly")
    prompt_only: Any = Field(default=False, alias="promptOnly")
    run_on_edit: Any = Field(default=False, alias="runOnEdit")
    substitute_regex: Any = Field(default=0, alias="substituteRegex")
    min_depth: Any = Field(default=None, alias="minDepth")
    max_depth: Any = Field(default=None, alias="maxDepth")

    @property
    def name(self) -> str:
        return self.script_name

    @property
    def enabled(self) -> bool:
        """Whether the script runs (SillyTavern: ``disabled`` is tested for truthiness)."""
        return not _truthy(self.disabled)


def _truthy(value: Any) -> bool:
    # the one JS rule needed here (jscompat would do too; models stay import-light)
    if isinstance(value, float):
        return value == value and value != 0.0
    if isinstance(value, list | dict):
        return True
    return bool(value)


class RegexSettings(ValueModel):
    """The owner's Regex extension settings.

    ``scripts`` are the global scripts in their run order. ``allowed_characters`` lists the
    characters (record ids) whose card scripts may run, ``allowed_presets`` the chat presets
    (record ids) whose scripts may run: SillyTavern's ``character_allowed_regex`` and
    ``preset_allowed_regex``. ``enabled`` off is SillyTavern's "regex" in
    ``disabledExtensions``: no script runs anywhere.
    """

    enabled: bool = True
    scripts: list[RegexScript] = Field(default_factory=list)
    allowed_characters: list[str] = Field(default_factory=list)
    allowed_presets: list[str] = Field(default_factory=list)


def embedded_scripts(extensions: Mapping[str, Any] | None) -> list[RegexScript]:
    """The scripts a card's ``data.extensions`` or a preset's ``extensions`` carry (items that
    are not objects are skipped, as SillyTavern's list would fail on them anyway)."""
    if not isinstance(extensions, Mapping):
        return []
    raw = extensions.get("regex_scripts")
    if not isinstance(raw, list):
        return []
    out = []
    for item in raw:
        if isinstance(item, Mapping):
            try:
                out.append(RegexScript.model_validate(dict(item)))
            except ValidationError:
                continue
    return out


#: every placement a migrated "markdown display" script gets (SillyTavern's values less 0 and 4)
_ALL_PLACEMENTS: Final = (1, 2, 3, 5, 6)


def migrate_script(data: Mapping[str, Any]) -> dict[str, Any]:
    """SillyTavern's start-up migration of a stored global script: the old placement 0
    ("markdown display") becomes every placement with ``markdownOnly`` and ``promptOnly``
    on (or is dropped from a list that has others), the old 4 ("sendAs") becomes 3."""
    out = dict(data)
    placement = out.get("placement")
    if not isinstance(placement, list):
        return out
    if 0 in placement:
        rest = [p for p in placement if p != 0]
        out["placement"] = rest if rest else list(_ALL_PLACEMENTS)
        out["markdownOnly"] = True
        out["promptOnly"] = True
        placement = out["placement"]
    if 4 in placement:
        out["placement"] = [3 if p == 4 else p for p in placement]
    return out


def _new_id() -> str:
    return str(uuid.uuid4())


def script_from_editor(fields: Mapping[str, Any], *, script_id: str | None = None) -> RegexScript:
    """A script as SillyTavern's editor saves it from its form: every key in the editor's
    order, the trim strings one per line (empty lines dropped), the substitution mode through
    ``Number()``, the depths through ``parseInt`` (an empty field is ``null``). Fields not
    given take the editor's defaults (:data:`EDITOR_DEFAULTS`)."""
    values = {**EDITOR_DEFAULTS, **{k: v for k, v in fields.items() if k in EDITOR_DEFAULTS}}
    trims = values["trimStrings"]
    if isinstance(trims, str):
        trims = [line for line in trims.split("\n") if line]
    values["trimStrings"] = list(trims or [])
    values["placement"] = [int(p) for p in values["placement"] or []]
    values["substituteRegex"] = _parse_number(values["substituteRegex"], default=0)
    values["minDepth"] = _parse_int(values["minDepth"])
    values["maxDepth"] = _parse_int(values["maxDepth"])
    for key in ("disabled", "markdownOnly", "promptOnly", "runOnEdit"):
        values[key] = bool(values[key])
    for key in ("scriptName", "findRegex", "replaceString"):
        values[key] = "" if values[key] is None else str(values[key])
    ordered = {"id": script_id or _new_id(), **{k: values[k] for k in SCRIPT_KEYS[1:]}}
    return RegexScript.model_validate(ordered)


_INT_PREFIX = re.compile(r"\s*([+-]?\d+)")


def _parse_int(value: Any) -> int | None:
    """``parseInt(value)`` with ``NaN`` as ``None`` (what JSON writes for it)."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value) if value == value and abs(value) != float("inf") else None
    match = _INT_PREFIX.match(str(value))
    return int(match.group(1)) if match else None


def _parse_number(value: Any, *, default: int) -> Any:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return value
    try:
        number = float(str(value).strip() or "0")
    except ValueError:
        return default
    return int(number) if number.is_integer() else number


def export_text(script: RegexScript | Iterable[RegexScript]) -> str:
    """The file SillyTavern's export button writes: ``JSON.stringify(script, null, 4)`` (a
    list for a bulk export)."""
    if isinstance(script, RegexScript):
        data: Any = script.to_wire()
    else:
        data = [s.to_wire() for s in script]
    return json.dumps(data, indent=4, ensure_ascii=False)


_UNSAFE_NAME = re.compile(r'[\s<>:"/\\|?*\x00-\x1f\x7f]')


def export_filename(script: RegexScript) -> str:
    """``regex-<name>.json``, the name lowercased with spaces and unsafe characters as ``_``."""
    return f"regex-{_UNSAFE_NAME.sub('_', script.script_name).lower()}.json"


def parse_import(data: Any, *, source: str = "<regex import>") -> list[RegexScript]:
    """The scripts of an imported file (one object or a list of them), each given a fresh
    ``id`` and otherwise kept as is (missing keys stay missing), as SillyTavern imports them.
    An object without a non-empty ``scriptName`` is SillyTavern's "Invalid regex object."."""
    items = data if isinstance(data, list) else [data]
    out: list[RegexScript] = []
    for index, item in enumerate(items):
        field = f"[{index}]" if isinstance(data, list) else ""
        if not isinstance(item, Mapping) or not item.get("scriptName"):
            raise FormatError("Invalid regex object.", source=source, field=field or None)
        raw = dict(item)
        raw["id"] = _new_id()  # in place; a file without one gets it last, as in JavaScript
        try:
            out.append(RegexScript.model_validate(raw))
        except ValidationError as exc:
            raise FormatError(str(exc), source=source, field=field or None) from exc
    return out
