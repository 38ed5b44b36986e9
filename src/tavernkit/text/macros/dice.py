"""Dice for ``{{roll}}``: SillyTavern's formula grammar, an injected RNG and a hard cap.

The accepted formulas are droll's: ``[N]dS[+M|-M]`` (case-insensitive, N and S positive
without leading zeros), and a bare number ``S`` means ``1dS``. Anything else is not a roll.
Unlike SillyTavern (which has no cap, issue #5266), an absurd dice count is refused up front
instead of looping a million times.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tavernkit.errors import DiceError as DiceError
from tavernkit.text.macros.env import RandomSource

__all__ = ["MAX_DICE", "MAX_SIDES", "DiceError", "DiceFormula", "parse_dice", "roll_dice"]

MAX_DICE = 1000
MAX_SIDES = 1_000_000_000
_FORMULA = re.compile(r"([1-9]\d*)?[dD]([1-9]\d*)([+-]\d+)?", re.ASCII)
_DIGITS = re.compile(r"\d+", re.ASCII)


@dataclass(frozen=True, slots=True)
class DiceFormula:
    count: int
    sides: int
    modifier: int


def parse_dice(formula: str) -> DiceFormula:
    if _DIGITS.fullmatch(formula):
        formula = f"1d{formula}"
    m = _FORMULA.fullmatch(formula)
    if m is None:
        raise DiceError(f"invalid roll formula: {formula!r}")
    count_text, sides_text, mod_text = m.groups()
    if count_text is not None and len(count_text) > 7:
        raise DiceError(f"too many dice in {formula!r} (at most {MAX_DICE})")
    count = int(count_text) if count_text else 1
    if count > MAX_DICE:
        raise DiceError(f"too many dice in {formula!r} (at most {MAX_DICE})")
    if len(sides_text) > 10 or int(sides_text) > MAX_SIDES:
        raise DiceError(f"too many sides in {formula!r} (at most {MAX_SIDES})")
    modifier = int(mod_text) if mod_text else 0
    return DiceFormula(count, int(sides_text), modifier)


def roll_dice(formula: str, rng: RandomSource) -> int:
    """Total of the roll: each die is ``1 + floor(random() * sides)``, plus the modifier."""
    dice = parse_dice(formula)
    total = 0
    for _ in range(dice.count):
        total += 1 + int(rng.random() * dice.sides)
    return total + dice.modifier
