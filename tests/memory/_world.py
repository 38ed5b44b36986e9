"""A chat whose old messages hold facts the tests ask about."""

from __future__ import annotations

OLD_CHAT: list[tuple[bool, str]] = [
    (True, "We hid the silver key under the blue stone by the well."),
    (False, "Good. Nobody will look there."),
    (True, "The ferry leaves at nine tomorrow."),
    (False, "I will have the tickets ready."),
    (True, "My cousin sells apples at the harbour market."),
    (False, "Then we can buy some on the way."),
]
