"""Readers and writers of SillyTavern's formats (and import-only foreign ones).

Every reader raises :class:`~tavernkit.errors.FormatError` naming the file and the field; every
writer writes atomically. ``tavernkit.formats.handlers`` exposes them to the format registry.
"""

from tavernkit.formats.cards import (
    ImportedCard,
    card_to_charx,
    card_to_json,
    card_to_png,
    read_card,
    read_card_file,
    write_card_charx,
    write_card_json,
    write_card_png,
)
from tavernkit.formats.chats import (
    chat_to_jsonl,
    parse_send_date,
    read_chat_file,
    read_chat_jsonl,
    write_chat_jsonl,
)
from tavernkit.formats.file_io import DEFAULT_LIMITS, FormatLimits
from tavernkit.formats.lorebooks import (
    character_book_to_lorebook,
    lorebook_to_character_book,
    lorebook_to_json,
    read_lorebook,
    read_lorebook_file,
    write_lorebook,
)
from tavernkit.formats.presets import preset_to_json, read_preset, read_preset_file, write_preset
from tavernkit.formats.settings import ImportedSettings, read_st_settings

__all__ = [
    "DEFAULT_LIMITS",
    "FormatLimits",
    "ImportedCard",
    "ImportedSettings",
    "card_to_charx",
    "card_to_json",
    "card_to_png",
    "character_book_to_lorebook",
    "chat_to_jsonl",
    "lorebook_to_character_book",
    "lorebook_to_json",
    "parse_send_date",
    "preset_to_json",
    "read_card",
    "read_card_file",
    "read_chat_file",
    "read_chat_jsonl",
    "read_lorebook",
    "read_lorebook_file",
    "read_preset",
    "read_preset_file",
    "read_st_settings",
    "write_card_charx",
    "write_card_json",
    "write_card_png",
    "write_chat_jsonl",
    "write_lorebook",
    "write_preset",
]
