"""Character cards: read JSON (V1, V2, V3, Pygmalion/Gradio), YAML, PNG and CHARX cards; write
JSON, PNG and CHARX the way SillyTavern does (minus its image re-encoding).

Strictness, decided against SillyTavern's reader and validator: a wrong ``spec``, a
``spec_version`` outside the spec's major version, a ``data`` that is not an object, a missing
``data.name`` or a field of the wrong type is an error naming the field; missing optional V2
fields are tolerated on read (and filled in on write, so what we write passes SillyTavern's
validator). A card read from a file and written back keeps every field and the key order.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import ValidationError

from tavernkit.errors import FormatError, LimitExceeded
from tavernkit.formats.charx import (
    asset_member_path,
    embedded_path,
    is_zip,
    read_charx,
    safe_member_name,
    write_charx,
)
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
from tavernkit.formats.png import (
    TextChunk,
    decode_base64_text,
    is_png,
    placeholder_png,
    read_text_chunks,
    replace_text_chunks,
)
from tavernkit.models.character import DEFAULT_TALKATIVENESS, Card, Character

__all__ = [
    "SPEC_V2",
    "SPEC_V3",
    "CardSpec",
    "ImportedCard",
    "card_to_charx",
    "card_to_json",
    "card_to_png",
    "is_card",
    "read_card",
    "read_card_file",
    "write_card_charx",
    "write_card_json",
    "write_card_png",
]

SPEC_V2 = "chara_card_v2"
SPEC_V3 = "chara_card_v3"
CardSpec = Literal["v2", "v3"]
CARD_CHUNKS = ("chara", "ccv3")

_V1_FIELDS = ("name", "description", "personality", "scenario", "first_mes", "mes_example")
#: The ``data`` fields SillyTavern's validator requires of a V2 card (V3 adds one).
_V2_REQUIRED = (
    *_V1_FIELDS,
    "creator_notes",
    "system_prompt",
    "post_history_instructions",
    "alternate_greetings",
    "tags",
    "creator",
    "character_version",
    "extensions",
)
#: The top level of the JSON SillyTavern writes, in its order (V1 duplicates of ``data``).
_ST_TOP_ORDER = (
    "name",
    "description",
    "personality",
    "first_mes",
    "avatar",
    "chat",
    "mes_example",
    "scenario",
    "create_date",
    "talkativeness",
    "fav",
    "creatorcomment",
    "spec",
    "spec_version",
    "data",
    "tags",
)


@dataclass(slots=True)
class ImportedCard:
    """A card read from a file.

    ``spec_found`` names what was read (``png``, ``charx``, ``v1``, ``v2``, ``v3``,
    ``pygmalion``, ``yaml``) and ``card_spec`` the card inside (``v1``, ``v2``, ``v3``);
    ``avatar`` is the PNG file as it was (card chunks included) or a CHARX's main icon;
    ``assets`` are a CHARX's embedded assets by their URI in ``data.assets``, and
    ``extra_files`` its other members by path, so writing a CHARX back loses nothing.
    """

    card: Card
    spec_found: str
    card_spec: str
    avatar: bytes | None = None
    assets: dict[str, bytes] = field(default_factory=dict)
    extra_files: dict[str, bytes] = field(default_factory=dict)

    @property
    def character(self) -> Character:
        return self.card.data


# --- reading ---------------------------------------------------------------------------------


def is_card(data: bytes, *, limits: FormatLimits = DEFAULT_LIMITS) -> bool:
    """Whether ``data`` reads as a character card in any supported format."""
    try:
        read_card(data, limits=limits)
    except FormatError:
        return False
    return True


def read_card_file(path: Path | str, *, limits: FormatLimits = DEFAULT_LIMITS) -> ImportedCard:
    """Read a card file of any supported format (detected by content, not by extension)."""
    path = Path(path)
    cap = max(limits.image_bytes, limits.card_json_bytes, limits.archive_unpacked_bytes)
    return read_card(read_limited(path, cap, what="card"), source=str(path), limits=limits)


def read_card(
    data: bytes, *, source: str = "<bytes>", limits: FormatLimits = DEFAULT_LIMITS
) -> ImportedCard:
    """Read a card, detecting the format by content; bad input raises :class:`FormatError`."""
    if is_png(data):
        return _read_png(data, source=source, limits=limits)
    if is_zip(data):
        return _read_charx(data, source=source, limits=limits)
    if len(data) > limits.card_json_bytes:
        raise LimitExceeded(
            f"card is {len(data)} bytes, over the limit of {limits.card_json_bytes}",
            source=source,
        )
    head = data[:64].lstrip(b"\xef\xbb\xbf \t\r\n")
    if head.startswith((b"{", b"[")):
        obj = load_json(data, source=source)
        return _read_json_object(obj, source=source, limits=limits)
    return _read_yaml(data, source=source, limits=limits)


def _read_png(data: bytes, *, source: str, limits: FormatLimits) -> ImportedCard:
    chunks = read_text_chunks(data, keywords=CARD_CHUNKS, source=source, limits=limits)
    by_key: dict[str, TextChunk] = {}
    for chunk in chunks:
        by_key.setdefault(chunk.keyword.lower(), chunk)
    chosen = by_key.get("ccv3") or by_key.get("chara")
    if chosen is None:
        raise FormatError(
            "PNG carries no character card (no chara or ccv3 text chunk)",
            source=source,
            field="chunk chara",
        )
    where = f"{chosen.chunk_type} {chosen.keyword!r}"
    raw = decode_base64_text(chosen.text, source=source, field=where, limit=limits.card_json_bytes)
    obj = load_json(raw, source=source, field=where)
    if not isinstance(obj, dict):
        raise FormatError("card chunk holds no JSON object", source=source, field=where)
    card, spec = _card_from_object(obj, source=source, limits=limits, prefix=f"{where}: ")
    return ImportedCard(card, "png", spec, avatar=data)


def _read_charx(data: bytes, *, source: str, limits: FormatLimits) -> ImportedCard:
    if len(data) > limits.archive_unpacked_bytes:
        raise LimitExceeded(
            f"archive is {len(data)} bytes, over the limit of {limits.archive_unpacked_bytes}",
            source=source,
        )
    archive = read_charx(data, source=source, limits=limits)
    card, spec = _card_from_object(
        archive.card_json, source=source, limits=limits, prefix="card.json: "
    )
    if spec == "v1":
        raise FormatError("card.json must be a V2 or V3 card", source=source, field="spec")
    files = dict(archive.files)
    assets: dict[str, bytes] = {}
    used: set[str] = set()
    for asset in card.data.assets or []:
        path = embedded_path(asset.uri)
        if path is None:
            continue
        member = path.replace("\\", "/")
        if member in files:
            assets[asset.uri] = files[member]
            used.add(member)
    main = _main_icon_uri(card.data)
    avatar = assets.get(main) if main is not None else None
    extra = {k: v for k, v in files.items() if k not in used}
    return ImportedCard(card, "charx", spec, avatar=avatar, assets=assets, extra_files=extra)


def _main_icon_uri(character: Character) -> str | None:
    """The V3 main icon: the ``icon`` asset named ``main``, else the first ``icon``."""
    icons = [a for a in character.assets or [] if a.type == "icon"]
    for asset in icons:
        if asset.name == "main":
            return asset.uri
    return icons[0].uri if icons else None


def _read_json_object(obj: Any, *, source: str, limits: FormatLimits) -> ImportedCard:
    if not isinstance(obj, dict):
        raise FormatError("a card must be a JSON object", source=source)
    card, spec = _card_from_object(obj, source=source, limits=limits)
    found = "pygmalion" if "spec" not in obj and "char_name" in obj else spec
    return ImportedCard(card, found, spec)


def _card_from_object(
    obj: dict[str, Any], *, source: str, limits: FormatLimits, prefix: str = ""
) -> tuple[Card, str]:
    """A :class:`Card` from a parsed card object, and the spec it was (v1/v2/v3)."""
    check_text_sizes(obj, limits.text_field_chars, source=source, prefix=prefix)
    if "spec" in obj:
        return _card_v2_v3(obj, source=source, prefix=prefix)
    if "char_name" in obj:
        return _card_pygmalion(obj, source=source, prefix=prefix), "v1"
    if _looks_v1(obj):
        return _card_v1(obj, source=source, prefix=prefix), "v1"
    raise FormatError(
        "not a character card (no spec, name or char_name)", source=source, field=prefix or None
    )


def _looks_v1(obj: Mapping[str, Any]) -> bool:
    """A V1 card has a name and at least one other V1 field; a lorebook or a template that
    merely has a ``name`` is not a card."""
    return (
        isinstance(obj.get("name"), str)
        and "entries" not in obj
        and any(k in obj for k in _V1_FIELDS[1:])
    )


def _spec_version(value: Any, major: int, *, source: str, field: str) -> None:
    if value is None:
        return
    try:
        number = float(value) if isinstance(value, str | int | float) else None
    except ValueError:
        number = None
    if number is None or isinstance(value, bool) or not major <= number < major + 1:
        raise FormatError(
            f"spec_version {value!r} is not a {major}.x version", source=source, field=field
        )


def _card_v2_v3(obj: dict[str, Any], *, source: str, prefix: str) -> tuple[Card, str]:
    spec = obj["spec"]
    norm = spec.strip().lower() if isinstance(spec, str) else None
    if norm == SPEC_V2:
        kind, major = "v2", 2
    elif norm == SPEC_V3:
        kind, major = "v3", 3
    else:
        raise FormatError(
            f"unknown card spec {spec!r} (expected {SPEC_V2} or {SPEC_V3})",
            source=source,
            field=f"{prefix}spec",
        )
    _spec_version(obj.get("spec_version"), major, source=source, field=f"{prefix}spec_version")
    data = obj.get("data")
    if not isinstance(data, dict):
        raise FormatError("must be an object", source=source, field=f"{prefix}data")
    if not isinstance(data.get("name"), str):
        raise FormatError("a card needs a name", source=source, field=f"{prefix}data.name")
    return _validate(Card, obj, source=source, prefix=prefix), kind


def _text(obj: Mapping[str, Any], key: str, *, source: str, prefix: str) -> str:
    value = obj.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise FormatError("must be a string", source=source, field=f"{prefix}{key}")
    return value


def _card_v1(obj: dict[str, Any], *, source: str, prefix: str) -> Card:
    """A V1 card: ``data`` is built from the top-level fields, which stay as envelope extras."""
    fields: dict[str, Any] = {k: _text(obj, k, source=source, prefix=prefix) for k in _V1_FIELDS}
    fields["creator_notes"] = _text(obj, "creatorcomment", source=source, prefix=prefix)
    tags = obj.get("tags")
    fields["tags"] = tags if isinstance(tags, list) else []
    fields["extensions"] = {
        "talkativeness": obj.get("talkativeness", DEFAULT_TALKATIVENESS),
        "fav": obj.get("fav", False),
    }
    character = _create_character(fields, source=source, prefix=prefix)
    envelope = {k: v for k, v in obj.items() if k not in ("data", "spec", "spec_version")}
    card = _validate(Card, envelope, source=source, prefix=prefix)
    card.data = character
    return card


def _card_pygmalion(obj: dict[str, Any], *, source: str, prefix: str) -> Card:
    """Pygmalion/Gradio JSON (import only: its own keys are not kept)."""
    pick = {
        "name": "char_name",
        "description": "char_persona",
        "scenario": "world_scenario",
        "first_mes": "char_greeting",
        "mes_example": "example_dialogue",
    }
    fields = {
        ours: _text(obj, theirs, source=source, prefix=prefix) for ours, theirs in pick.items()
    }
    return Card.create(data=_create_character(fields, source=source, prefix=prefix))


def _read_yaml(data: bytes, *, source: str, limits: FormatLimits) -> ImportedCard:
    """A YAML card (``name``, ``context``, ``greeting``; import only)."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise FormatError(
            f"not a character card (not UTF-8 text at byte {exc.start})", source=source
        ) from exc
    try:
        obj = yaml.safe_load(text)
    except (yaml.YAMLError, RecursionError) as exc:
        raise FormatError(f"not a character card (invalid YAML: {exc})", source=source) from exc
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
        raise FormatError("not a character card (unknown format)", source=source)
    if "context" not in obj and "greeting" not in obj:
        raise FormatError("not a character card (YAML without context or greeting)", source=source)
    fields = {
        "name": obj["name"],
        "description": _text(obj, "context", source=source, prefix=""),
        "first_mes": _text(obj, "greeting", source=source, prefix=""),
        "mes_example": _text(obj, "example_dialogue", source=source, prefix=""),
    }
    check_text_sizes(fields, limits.text_field_chars, source=source)
    card = Card.create(data=_create_character(fields, source=source, prefix=""))
    return ImportedCard(card, "yaml", "v1")


def _create_character(fields: dict[str, Any], *, source: str, prefix: str) -> Character:
    try:
        return Character.create(**fields)
    except ValidationError as exc:
        raise validation_error(exc, fields, source=source, prefix=prefix) from exc


def _validate(model: type[Card], obj: dict[str, Any], *, source: str, prefix: str) -> Card:
    try:
        return model.model_validate(obj)
    except ValidationError as exc:
        raise validation_error(exc, obj, source=source, prefix=prefix) from exc


# --- writing ---------------------------------------------------------------------------------


def _empty(value: Any) -> bool:
    return value is None or value == "" or value == []


def card_to_json(card: Card | Character, *, spec: CardSpec = "v2") -> dict[str, Any]:
    """The card as SillyTavern stores it: ``data`` plus the V1 top-level copies of its main
    fields, ``spec`` set to V2 (``2.0``) or V3 (``3.0``). A card that was read keeps its key
    order and every other field; new keys go where SillyTavern puts them."""
    if isinstance(card, Character):
        card = Card.create(data=card)
    if spec not in ("v2", "v3"):
        raise FormatError(f"cannot write card spec {spec!r}", field="spec")
    wire = card.to_wire()
    data = _complete_data(card.data, v3=spec == "v3")
    ext = data.get("extensions")
    ext = ext if isinstance(ext, dict) else {}
    derived: dict[str, Any] = {k: data[k] for k in _V1_FIELDS}
    derived["avatar"] = wire.get("avatar", "none")
    for private in ("chat", "create_date"):
        if private in wire:
            derived[private] = wire[private]
    derived["talkativeness"] = ext.get(
        "talkativeness", wire.get("talkativeness", DEFAULT_TALKATIVENESS)
    )
    derived["fav"] = ext.get("fav", wire.get("fav", False))
    derived["creatorcomment"] = data.get("creator_notes") or ""
    derived["spec"] = SPEC_V2 if spec == "v2" else SPEC_V3
    derived["spec_version"] = "2.0" if spec == "v2" else "3.0"
    derived["data"] = data
    derived["tags"] = data["tags"]
    for key in ("tags", "creatorcomment"):
        # A read card's empty V1 copy keeps its own spelling of "empty" (SillyTavern's own
        # Flux the Cat card has ``"tags": ""``): the value is the same, only its type differs.
        if key in wire and _empty(wire[key]) and _empty(derived[key]):
            derived[key] = wire[key]
    # A card that was read keeps its own order (WireModel remembers it); a new one gets ST's.
    if card._key_order:
        out = dict(wire)
        out.update(derived)
        return out
    out = {k: derived[k] for k in _ST_TOP_ORDER if k in derived}
    for k, v in wire.items():
        out.setdefault(k, v)
    return out


def _complete_data(character: Character, *, v3: bool) -> dict[str, Any]:
    """``data`` as read, plus any field the V2 (or V3) validator requires that was missing."""
    data = character.to_wire()
    required = (*_V2_REQUIRED, "group_only_greetings") if v3 else _V2_REQUIRED
    missing = [k for k in required if k not in data]
    if missing:
        full = character.model_dump(mode="json", by_alias=True, include=set(missing))
        data.update((k, full[k]) for k in missing)
    return data


def _encode_chunk(value: dict[str, Any]) -> str:
    compact = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return base64.b64encode(compact.encode("utf-8")).decode("ascii")


def card_to_png(
    card: Card | Character,
    image: bytes | None = None,
    *,
    limits: FormatLimits = DEFAULT_LIMITS,
) -> bytes:
    """``image`` (a PNG; a placeholder when ``None``) carrying the card in a ``chara`` (V2)
    and a ``ccv3`` (V3) chunk before IEND; its old card chunks are dropped and every other
    byte is kept, so the picture is never re-encoded. A non-PNG image is a FormatError."""
    png = placeholder_png() if image is None else image
    chunks = [
        ("chara", _encode_chunk(card_to_json(card, spec="v2"))),
        ("ccv3", _encode_chunk(card_to_json(card, spec="v3"))),
    ]
    return replace_text_chunks(png, chunks, remove=CARD_CHUNKS, source="<image>", limits=limits)


def _image_ext(data: bytes) -> str:
    if is_png(data):
        return "png"
    if data.startswith(b"\xff\xd8\xff"):
        return "jpeg"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "webp"
    if data.startswith((b"GIF87a", b"GIF89a")):
        return "gif"
    return "png"


def card_to_charx(
    card: Card | Character,
    avatar: bytes | None = None,
    assets: Mapping[str, bytes] | None = None,
    *,
    extra_files: Mapping[str, bytes] | None = None,
) -> bytes:
    """A CHARX archive of the card (V3 ``card.json``).

    ``assets`` maps an asset's URI in ``data.assets`` to its bytes; each becomes a member and
    its URI ``embeded://<path>`` (an asset already at a safe embedded path keeps it, so a CHARX
    read and written back is unchanged). ``avatar`` becomes the main icon, added as an
    ``icon``/``main`` asset when the card has none. ``extra_files`` are written as they are.
    """
    out = card_to_json(card, spec="v3")
    data = out["data"]
    given = dict(assets or {})
    files: dict[str, bytes] = {}
    main_uri = _main_icon_uri(card.data if isinstance(card, Card) else card)
    entries = data.get("assets")
    rewritten: list[Any] = []
    avatar_placed = False
    for entry in entries if isinstance(entries, list) else []:
        uri = entry.get("uri", "")
        content = given.get(uri)
        if avatar is not None and uri == main_uri and not avatar_placed:
            content, avatar_placed = avatar, True
        if content is None:
            rewritten.append(entry)
            continue
        path = _member_for(entry, uri, files)
        files[path] = content
        if embedded_path(uri) != path:
            entry = {**entry, "uri": f"embeded://{path}"}
        rewritten.append(entry)
    if avatar is not None and not avatar_placed:
        ext = _image_ext(avatar)
        icon = {"type": "icon", "name": "main", "ext": ext}
        path = _member_for(icon, "", files)
        files = {path: avatar, **files}  # members in the order of data.assets
        rewritten.insert(0, {"type": "icon", "uri": f"embeded://{path}", **icon})
    if rewritten or isinstance(entries, list):
        data["assets"] = rewritten
    for name, content in (extra_files or {}).items():
        files.setdefault(safe_member_name(name), content)
    return write_charx(out, files)


def _member_for(entry: Mapping[str, Any], uri: str, taken: Mapping[str, bytes]) -> str:
    """The archive path of an asset: its own embedded path when safe and free, else a new
    path in the usual layout, numbered when the name is taken."""
    path = embedded_path(uri)
    if path is not None:
        try:
            path = safe_member_name(path)
        except FormatError:
            path = None
    if path is not None and path not in taken and path != "card.json":
        return path
    base = asset_member_path(
        str(entry.get("type") or "other"), str(entry.get("name") or ""), str(entry.get("ext") or "")
    )
    stem, dot, ext = base.rpartition(".")
    candidate, n = base, 1
    while candidate in taken:
        n += 1
        candidate = f"{stem}_{n}{dot}{ext}"
    return candidate


def write_card_json(card: Card | Character, path: Path | str, *, spec: CardSpec = "v2") -> None:
    """Write the card as 4-space JSON (SillyTavern's export), atomically."""
    text = dump_json(card_to_json(card, spec=spec))
    atomic_write_bytes(Path(path), text.encode("utf-8"))


def write_card_png(card: Card | Character, path: Path | str, image: bytes | None = None) -> None:
    """Write the card as a PNG (see :func:`card_to_png`), atomically."""
    atomic_write_bytes(Path(path), card_to_png(card, image))


def write_card_charx(
    card: Card | Character,
    path: Path | str,
    avatar: bytes | None = None,
    assets: Mapping[str, bytes] | None = None,
    *,
    extra_files: Mapping[str, bytes] | None = None,
) -> None:
    """Write the card as a CHARX archive (see :func:`card_to_charx`), atomically."""
    atomic_write_bytes(Path(path), card_to_charx(card, avatar, assets, extra_files=extra_files))
