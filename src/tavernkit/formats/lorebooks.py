"""Lorebook files: SillyTavern world info (read and write), card ``character_book`` in both
directions, and the foreign books SillyTavern imports (NovelAI, Agnai, Risu; import only).

Foreign books and card books are converted the way SillyTavern's importers convert them, key
order included: their entries start from the new-entry template and the converter's fields are
assigned over it, so the keys the template lacks (``uid``, ``displayIndex``, ``extensions``) come
last. A value the source lacks is left out, as ``JSON.stringify`` drops ``undefined``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Final

from pydantic import ValidationError
from pydantic_core import PydanticSerializationError

from tavernkit.errors import FormatError, LimitExceeded
from tavernkit.formats.file_io import (
    DEFAULT_LIMITS,
    FormatLimits,
    atomic_write_bytes,
    check_text_sizes,
    dump_json,
    load_json,
    read_limited,
    validation_error,
)
from tavernkit.jscompat import js_key_order, js_trim, js_truthy
from tavernkit.models.character_book import CharacterBook
from tavernkit.models.lorebook import (
    DEFAULT_DEPTH,
    DEFAULT_WEIGHT,
    Lorebook,
    entry_template,
)

__all__ = [
    "character_book_to_lorebook",
    "detect_lorebook_format",
    "is_lorebook",
    "lorebook_to_bytes",
    "lorebook_to_character_book",
    "lorebook_to_json",
    "read_lorebook",
    "read_lorebook_file",
    "write_lorebook",
]


class _JsUndefined:
    """JavaScript's ``undefined``: a converted key holding it is left out of the entry (and,
    being falsy, it reads as false to ``js_truthy``)."""

    def __repr__(self) -> str:
        return "undefined"

    def __bool__(self) -> bool:
        return False


_UNDEF: Final = _JsUndefined()


def _nullish(value: Any, default: Any) -> Any:
    """``value ?? default``."""
    return default if value is None or value is _UNDEF else value


def _finish(entry: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in entry.items() if v is not _UNDEF}


# --------------------------------------------------------------------------- detection


def detect_lorebook_format(data: Any) -> str | None:
    """Which lorebook format ``data`` (parsed JSON) is, checked in SillyTavern's order:
    ``"novelai"``, ``"agnai"``, ``"risu"``, ``"sillytavern"`` (entries keyed by uid, or a list
    of world-info entries), ``"character_book"`` (a card's book given on its own),
    ``"lorebook_v3"`` (CCv3's standalone book: a card book under ``data``); else None."""
    if not isinstance(data, Mapping):
        return None
    if "lorebookVersion" in data:
        return "novelai"
    if data.get("kind") == "memory":
        return "agnai"
    if data.get("type") == "risu":
        return "risu"
    if "spec" in data:
        # A character card's book is read with the card; CCv3's standalone lorebook wraps a
        # card book.
        inner = data.get("data")
        if data["spec"] == "lorebook_v3" and isinstance(inner, Mapping) and "entries" in inner:
            return "lorebook_v3"
        return None
    entries = data.get("entries")
    if isinstance(entries, Mapping):
        return "sillytavern"
    if isinstance(entries, list):
        items = [e for e in entries if isinstance(e, Mapping)]
        if items and not any("keys" in e for e in items) and any("key" in e for e in items):
            return "sillytavern"
        return "character_book"
    return None


def is_lorebook(data: Any) -> bool:
    """Whether ``data`` (parsed JSON, or JSON bytes/text) looks like a lorebook of any format."""
    if isinstance(data, bytes | str):
        try:
            data = load_json(data)
        except FormatError:
            return False
    return detect_lorebook_format(data) is not None


# --------------------------------------------------------------------------- errors


class _Fields:
    """Typed reads from one object of a foreign file, failing with the field's path."""

    def __init__(self, obj: Any, path: str, source: str) -> None:
        if not isinstance(obj, Mapping):
            raise FormatError("expected an object", source=source, field=path)
        self.obj = obj
        self.path = path
        self.source = source

    def _fail(self, key: str, what: str) -> FormatError:
        return FormatError(f"expected {what}", source=self.source, field=f"{self.path}.{key}")

    def get(self, key: str) -> Any:
        return self.obj.get(key, _UNDEF)

    def text(self, key: str, *, required: bool = False) -> Any:
        value = self.get(key)
        if value is _UNDEF and not required:
            return value
        if not isinstance(value, str):
            raise self._fail(key, "a string")
        return value

    def opt_text(self, key: str) -> Any:
        value = self.get(key)
        if value is None or value is _UNDEF or isinstance(value, str):
            return value
        raise self._fail(key, "a string")

    def number(self, key: str) -> Any:
        value = self.get(key)
        if value is None or value is _UNDEF:
            return value
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self._fail(key, "a number")
        return value

    def flag(self, key: str) -> Any:
        value = self.get(key)
        if value is None or value is _UNDEF or isinstance(value, bool):
            return value
        raise self._fail(key, "true or false")

    def strings(self, key: str) -> Any:
        value = self.get(key)
        if value is _UNDEF:
            return value
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self._fail(key, "a list of strings")
        return value


def _list_of_objects(data: Mapping[str, Any], key: str, source: str) -> list[Any]:
    value = data.get(key)
    if not isinstance(value, list):
        raise FormatError(f"expected a list of entries under {key!r}", source=source, field=key)
    return value


# --------------------------------------------------------------------------- foreign books


def _from_template(fields: dict[str, Any]) -> dict[str, Any]:
    """An entry built as ``{...newWorldInfoEntryTemplate, ...fields}``: template keys keep their
    place, keys new to the template are appended in the order given."""
    entry = entry_template()
    entry.update(fields)
    return _finish(entry)


def _imported_defaults(index: int) -> dict[str, Any]:
    """The fields every foreign importer of SillyTavern sets the same way, in its literal order
    (``uid`` and ``displayIndex`` are the ones new to the template)."""
    return {
        "uid": index,
        "vectorized": False,
        "selectiveLogic": 0,
        "position": 0,
        "excludeRecursion": False,
        "delayUntilRecursion": False,
        "displayIndex": index,
        "probability": 100,
        "useProbability": True,
        "outletName": "",
        "group": "",
        "groupOverride": False,
        "groupWeight": DEFAULT_WEIGHT,
        "scanDepth": None,
        "caseSensitive": None,
        "matchWholeWords": None,
        "useGroupScoring": None,
        "automationId": "",
        "role": 0,
        "sticky": None,
        "cooldown": None,
        "delay": None,
        "triggers": [],
        "ignoreBudget": False,
    }


def _novelai_entry(src: _Fields, index: int) -> dict[str, Any]:
    display_name = src.opt_text("displayName")
    config = src.get("contextConfig")
    priority: Any = _UNDEF
    if isinstance(config, Mapping):
        priority = _Fields(config, f"{src.path}.contextConfig", src.source).number("budgetPriority")
    elif config is not _UNDEF and config is not None:
        raise src._fail("contextConfig", "an object")
    fields = _imported_defaults(index)
    fields.update(
        key=src.strings("keys"),
        keysecondary=[],
        comment=display_name or "",
        content=src.text("text"),
        constant=False,
        selective=False,
        order=_nullish(priority, 0),
        disable=not js_truthy(src.get("enabled")),
        addMemo=isinstance(display_name, str) and js_trim(display_name) != "",
    )
    return fields


def _agnai_entry(src: _Fields, index: int) -> dict[str, Any]:
    name = src.opt_text("name")
    fields = _imported_defaults(index)
    fields.update(
        key=src.strings("keywords"),
        keysecondary=[],
        comment=name,
        content=src.text("entry"),
        constant=False,
        selective=False,
        order=src.number("weight"),
        disable=not js_truthy(src.get("enabled")),
        addMemo=js_truthy(name),
    )
    return fields


def _risu_entry(src: _Fields, index: int) -> dict[str, Any]:
    keys = [js_trim(k) for k in src.text("key", required=True).split(",")]
    second = src.opt_text("secondkey")
    percent = src.number("activationPercent")
    fields = _imported_defaults(index)
    fields.update(
        key=keys,
        keysecondary=[js_trim(k) for k in second.split(",")] if js_truthy(second) else [],
        comment=src.opt_text("comment"),
        content=src.text("content"),
        constant=src.flag("alwaysActive"),
        selective=src.flag("selective"),
        order=src.number("insertorder"),
        disable=False,
        addMemo=True,
        probability=_nullish(percent, 100),
        # SillyTavern stores ``activationPercent ?? true`` here; only its truthiness is ever
        # read, so the bool keeps the behaviour and the field's type.
        useProbability=True if percent is None or percent is _UNDEF else js_truthy(percent),
    )
    return fields


_FOREIGN: dict[str, tuple[str, Callable[[_Fields, int], dict[str, Any]]]] = {
    "novelai": ("entries", _novelai_entry),
    "agnai": ("entries", _agnai_entry),
    "risu": ("data", _risu_entry),
}


def _convert_foreign(kind: str, data: Mapping[str, Any], source: str) -> dict[str, Any]:
    key, convert = _FOREIGN[kind]
    entries = {
        str(i): _from_template(convert(_Fields(item, f"{key}.{i}", source), i))
        for i, item in enumerate(_list_of_objects(data, key, source))
    }
    return {"entries": entries}


def _world_info_list(data: Mapping[str, Any], source: str) -> dict[str, Any]:
    """Entries exported as a list: keyed by their uid (or position) the way SillyTavern keys
    them, in the order JavaScript would hold them."""
    keyed: dict[str, Any] = {}
    for i, item in enumerate(data["entries"]):
        if not isinstance(item, Mapping):
            raise FormatError("expected an object", source=source, field=f"entries.{i}")
        uid = item.get("uid")
        keyed[str(i if uid is None else uid)] = item
    out = dict(data)
    out["entries"] = {k: keyed[k] for k in js_key_order(keyed)}
    return out


# --------------------------------------------------------------------------- reading


def _named(book: Lorebook, name: str | None) -> Lorebook:
    """Give ``book`` a name that is not written back: SillyTavern names a book by its file name,
    and writing a ``name`` key into a file that had none would change it."""
    if name is not None and book.name is None:
        book.name = name
        book.__pydantic_fields_set__.discard("name")
    return book


def read_lorebook(
    data: bytes | str | Mapping[str, Any],
    *,
    source: str = "<bytes>",
    name: str | None = None,
    limits: FormatLimits = DEFAULT_LIMITS,
) -> Lorebook:
    """Read a lorebook in any supported format (see :func:`detect_lorebook_format`).

    A SillyTavern world-info book is kept exactly as it is (values, key order, unknown keys);
    other formats are converted as SillyTavern imports them. ``name`` (usually the file name
    without extension) names a book that carries no name of its own. Bad input raises
    :class:`FormatError` naming ``source`` and the field.
    """
    if isinstance(data, bytes | str):
        size = len(data.encode("utf-8")) if isinstance(data, str) else len(data)
        if size > limits.lorebook_json_bytes:
            raise LimitExceeded(
                f"lorebook is {size} bytes, over the limit of {limits.lorebook_json_bytes}",
                source=source,
            )
        data = load_json(data, source=source)
    if not isinstance(data, Mapping):
        raise FormatError("a lorebook must be a JSON object", source=source)
    check_text_sizes(data, limits.text_field_chars, source=source, dotted_indexes=True)

    kind = detect_lorebook_format(data)
    if kind is None:
        if "entries" not in data:
            raise FormatError("not a lorebook: no 'entries'", source=source, field="entries")
        raise FormatError(
            "expected an object of entries keyed by uid", source=source, field="entries"
        )
    if kind in ("character_book", "lorebook_v3"):
        inner = data if kind == "character_book" else data["data"]
        try:
            card_book = CharacterBook.model_validate(inner)
        except ValidationError as exc:
            prefix = "" if kind == "character_book" else "data"
            raise validation_error(
                exc, inner, source=source, prefix=prefix, dotted_indexes=True
            ) from None
        return _named(_convert_character_book(card_book, source=source), card_book.name or name)

    raw: Mapping[str, Any]
    if kind in _FOREIGN:
        raw = _convert_foreign(kind, data, source)
        own_name = data.get("name") if kind == "agnai" else None
        name = name or (own_name if isinstance(own_name, str) else None)
    elif isinstance(data["entries"], list):
        raw = _world_info_list(data, source)
    else:
        raw = data
    try:
        book = Lorebook.model_validate(raw, by_name=False)
    except ValidationError as exc:
        raise validation_error(exc, raw, source=source, dotted_indexes=True) from None
    return _named(book, name)


def read_lorebook_file(
    path: str | Path, *, name: str | None = None, limits: FormatLimits = DEFAULT_LIMITS
) -> Lorebook:
    """Read a lorebook file; the book is named after the file unless it names itself."""
    path = Path(path)
    data = read_limited(path, limits.lorebook_json_bytes, what="lorebook")
    return read_lorebook(data, source=str(path), name=name or path.stem, limits=limits)


# --------------------------------------------------------------------------- writing


def lorebook_to_json(book: Lorebook) -> dict[str, Any]:
    """The world-info JSON of ``book``, as SillyTavern saves it under ``worlds/``. A book made
    in code gets ``entries`` even when empty: SillyTavern refuses a file without it."""
    try:
        data = book.to_wire()
    except PydanticSerializationError as exc:
        raise FormatError(f"cannot write the lorebook as JSON: {exc}", source=book.name) from None
    if "entries" not in data:
        data = {"entries": {}, **data}
    return data


def lorebook_to_bytes(book: Lorebook) -> bytes:
    """``JSON.stringify(data, null, 4)`` of the book, UTF-8."""
    return dump_json(lorebook_to_json(book)).encode("utf-8")


def write_lorebook(book: Lorebook, path: str | Path) -> None:
    """Write ``book`` as a SillyTavern world-info file, atomically."""
    atomic_write_bytes(Path(path), lorebook_to_bytes(book))


# --------------------------------------------------------------------------- card books


def _convert_character_book(book: CharacterBook, *, source: str) -> Lorebook:
    """SillyTavern's ``convertCharacterBook`` (card -> world info), with the original kept."""
    original = CharacterBook.model_validate(book.to_wire())
    entries: dict[str, Any] = {}
    for index, item in enumerate(original.entries):
        if "id" not in item.model_fields_set:
            # SillyTavern writes the index into the kept original so the editor can find the
            # entry again when it syncs edits back into the card book.
            item.id = index
        # Read what the card holds, not the model's defaults: a missing value stays missing.
        src = item.to_wire()
        ext = item.extensions

        def opt(key: str, default: Any, ext: dict[str, Any] = ext) -> Any:
            return _nullish(ext.get(key), default)

        def get(key: str, src: dict[str, Any] = src) -> Any:
            return src.get(key, _UNDEF)

        uid = item.id
        entries[str(uid)] = _from_template(
            {
                "uid": uid,
                "key": get("keys"),
                "keysecondary": get("secondary_keys") or [],
                "comment": get("comment") or "",
                "content": get("content"),
                "constant": get("constant") or False,
                "selective": get("selective") or False,
                "order": get("insertion_order"),
                "position": opt("position", 0 if get("position") == "before_char" else 1),
                "excludeRecursion": opt("exclude_recursion", False),
                "preventRecursion": opt("prevent_recursion", False),
                "delayUntilRecursion": opt("delay_until_recursion", False),
                "disable": not js_truthy(get("enabled")),
                "addMemo": js_truthy(get("comment")),
                "displayIndex": opt("display_index", index),
                "probability": opt("probability", 100),
                "useProbability": opt("useProbability", True),
                "depth": opt("depth", DEFAULT_DEPTH),
                "selectiveLogic": opt("selectiveLogic", 0),
                "outletName": opt("outlet_name", ""),
                "group": opt("group", ""),
                "groupOverride": opt("group_override", False),
                "groupWeight": opt("group_weight", DEFAULT_WEIGHT),
                "scanDepth": opt("scan_depth", None),
                "caseSensitive": opt("case_sensitive", None),
                "matchWholeWords": opt("match_whole_words", None),
                "useGroupScoring": opt("use_group_scoring", None),
                "automationId": opt("automation_id", ""),
                "role": opt("role", 0),
                "vectorized": opt("vectorized", False),
                "sticky": opt("sticky", None),
                "cooldown": opt("cooldown", None),
                "delay": opt("delay", None),
                "matchPersonaDescription": opt("match_persona_description", False),
                "matchCharacterDescription": opt("match_character_description", False),
                "matchCharacterPersonality": opt("match_character_personality", False),
                "matchCharacterDepthPrompt": opt("match_character_depth_prompt", False),
                "matchScenario": opt("match_scenario", False),
                "matchCreatorNotes": opt("match_creator_notes", False),
                "extensions": ext,
                "triggers": ext.get("triggers") if js_truthy(ext.get("triggers")) else [],
                "ignoreBudget": opt("ignore_budget", False),
            }
        )
    raw = {"entries": {k: entries[k] for k in js_key_order(entries)}}
    try:
        book_out = Lorebook.model_validate(raw, by_name=False)
    except ValidationError as exc:
        raise validation_error(
            exc, raw, source=source, prefix="character_book", dotted_indexes=True
        ) from None
    book_out.original_data = original
    return book_out


def character_book_to_lorebook(book: CharacterBook, *, character_name: str) -> Lorebook:
    """A card's embedded ``character_book`` as a world-info book, converted as SillyTavern's
    "import embedded lorebook" does: uid = ``entry.id`` (else its index), the card-only fields
    read from each entry's ``extensions``, the card book kept as ``originalData``, and the book
    named ``book.name`` or "<character>'s Lorebook"."""
    converted = _convert_character_book(book, source=f"{character_name} (character_book)")
    return _named(converted, book.name or f"{character_name}'s Lorebook")


#: ``extensions`` keys of a card entry made from a world-info entry, in SillyTavern's order:
#: (card key, world-info key, the default its exporter writes for a null/missing value, or
#: ``_RAW`` where it copies the value as is; ``()`` stands for a fresh ``[]``).
_RAW: Final = object()
_TO_CARD: Final[tuple[tuple[str, str, Any], ...]] = (
    ("position", "position", _RAW),
    ("exclude_recursion", "excludeRecursion", _RAW),
    ("display_index", "displayIndex", _RAW),
    ("probability", "probability", None),
    ("useProbability", "useProbability", False),
    ("depth", "depth", DEFAULT_DEPTH),
    ("selectiveLogic", "selectiveLogic", 0),
    ("outlet_name", "outletName", ""),
    ("group", "group", ""),
    ("group_override", "groupOverride", False),
    ("group_weight", "groupWeight", None),
    ("prevent_recursion", "preventRecursion", False),
    ("delay_until_recursion", "delayUntilRecursion", False),
    ("scan_depth", "scanDepth", None),
    ("match_whole_words", "matchWholeWords", None),
    ("use_group_scoring", "useGroupScoring", False),
    ("case_sensitive", "caseSensitive", None),
    ("automation_id", "automationId", ""),
    ("role", "role", 0),
    ("vectorized", "vectorized", False),
    ("sticky", "sticky", None),
    ("cooldown", "cooldown", None),
    ("delay", "delay", None),
    ("match_persona_description", "matchPersonaDescription", False),
    ("match_character_description", "matchCharacterDescription", False),
    ("match_character_personality", "matchCharacterPersonality", False),
    ("match_character_depth_prompt", "matchCharacterDepthPrompt", False),
    ("match_scenario", "matchScenario", False),
    ("match_creator_notes", "matchCreatorNotes", False),
    ("triggers", "triggers", ()),
    ("ignore_budget", "ignoreBudget", False),
)


def lorebook_to_character_book(book: Lorebook, *, name: str | None = None) -> CharacterBook:
    """The card ``character_book`` SillyTavern embeds for a character linked to ``book``
    (``convertWorldInfoToCharacterBook``): entries in JavaScript key order, the world-info-only
    fields under each entry's ``extensions`` in snake_case. Fields the entry lacks are left out
    at the top level and take SillyTavern's defaults under ``extensions``, as it does with the
    raw file. ``name`` defaults to the book's name."""
    out_entries: list[dict[str, Any]] = []
    for key in js_key_order(book.entries):
        w = book.entries[key].to_wire()

        def get(field: str, w: dict[str, Any] = w) -> Any:
            return w.get(field, _UNDEF)

        ext_in = get("extensions")
        extensions: dict[str, Any] = dict(ext_in) if isinstance(ext_in, dict) else {}
        for card_key, wi_key, default in _TO_CARD:
            value = get(wi_key)
            if default is not _RAW:
                value = _nullish(value, list(default) if isinstance(default, tuple) else default)
            if value is not _UNDEF:
                extensions[card_key] = value
        out_entries.append(
            _finish(
                {
                    "id": get("uid"),
                    "keys": get("key"),
                    "secondary_keys": get("keysecondary"),
                    "comment": get("comment"),
                    "content": get("content"),
                    "constant": get("constant"),
                    "selective": get("selective"),
                    "insertion_order": get("order"),
                    "enabled": not js_truthy(_nullish(get("disable"), False)),
                    "position": "before_char" if get("position") == 0 else "after_char",
                    "use_regex": True,
                    "extensions": extensions,
                }
            )
        )
    result: dict[str, Any] = {"entries": out_entries}
    book_name = name if name is not None else book.name
    if book_name is not None:
        result["name"] = book_name
    return CharacterBook.model_validate(result)
