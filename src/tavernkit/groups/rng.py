"""Random sources for group selection: SillyTavern's recordings replace ``Math.random`` with
mulberry32, so the same generator here reproduces a recorded turn's draws bit for bit."""

from __future__ import annotations

__all__ = ["Mulberry32"]

_MASK = 0xFFFFFFFF


class Mulberry32:
    """The mulberry32 generator (32-bit state), as JavaScript computes it: ``rng()`` returns
    the next float in ``[0, 1)``; ``drawn`` counts the values handed out."""

    __slots__ = ("_state", "drawn")

    def __init__(self, seed: int) -> None:
        self._state = seed & _MASK
        self.drawn = 0

    def __call__(self) -> float:
        self._state = (self._state + 0x6D2B79F5) & _MASK
        t = self._state
        t = ((t ^ (t >> 15)) * (t | 1)) & _MASK
        t = ((t + (((t ^ (t >> 7)) * (t | 61)) & _MASK)) & _MASK) ^ t
        self.drawn += 1
        return ((t ^ (t >> 14)) & _MASK) / 4294967296
