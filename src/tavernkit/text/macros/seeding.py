"""The hashing and seeded generator behind ``{{pick}}``, bit-compatible with SillyTavern.

SillyTavern seeds ``{{pick}}`` with ``getStringHash`` (the public-domain cyrb53 hash over
UTF-16 code units) and draws one number from the ``seedrandom`` package's default generator
(ARC4 keyed by the seed string, 256 bytes discarded, 52-bit doubles built from 6-byte chunks).
Both are re-implemented from their published descriptions (the hash in ``tavernkit.jscompat``,
where world info's entry hashes use it too) so picks made in SillyTavern stay the same in
tavernkit.
"""

from __future__ import annotations

from functools import lru_cache

from tavernkit.jscompat import cyrb53, utf16_units

__all__ = ["Arc4Random", "content_hash", "seeded_random", "string_hash"]


def string_hash(text: str | None, seed: int = 0) -> int:
    """cyrb53 of ``text`` (0 for a missing value, as SillyTavern returns for non-strings)."""
    return cyrb53(text, seed) if isinstance(text, str) else 0


class Arc4Random:
    """``seedrandom(seed)()`` for a string seed: ARC4 with seedrandom's key mixing."""

    __slots__ = ("_i", "_j", "_s")

    def __init__(self, seed: str) -> None:
        key = [0] * 256
        smear = 0
        units = utf16_units(seed)
        for j, unit in enumerate(units):
            smear ^= key[j & 255] * 19
            key[j & 255] = (smear + unit) & 255
        key_len = min(len(units), 256)
        # seedrandom keys ARC4 with the mixed key (one entry per seed character, at most 256).
        mixed = key[:key_len] if key_len else [0]
        s = list(range(256))
        j = 0
        length = len(mixed)
        for i in range(256):
            t = s[i]
            j = (j + mixed[i % length] + t) & 255
            s[i] = s[j]
            s[j] = t
        self._s = s
        self._i = 0
        self._j = 0
        self._bytes(256)

    def _bytes(self, count: int) -> int:
        s, i, j = self._s, self._i, self._j
        r = 0
        for _ in range(count):
            i = (i + 1) & 255
            t = s[i]
            j = (j + t) & 255
            s[i] = s[j]
            s[j] = t
            r = r * 256 + s[(s[i] + s[j]) & 255]
        self._i, self._j = i, j
        return r

    def random(self) -> float:
        n = self._bytes(6)
        d = float(256**6)
        x = 0
        while n < 2**52:
            n = (n + x) * 256
            d *= 256
            x = self._bytes(1)
        while n >= 2**53:
            n //= 2
            d /= 2
            x >>= 1
        return (n + x) / d


@lru_cache(maxsize=4096)
def seeded_random(seed: str) -> float:
    """The first draw of ``seedrandom(seed)`` (a pure function of the seed, so memoised)."""
    return Arc4Random(seed).random()


@lru_cache(maxsize=1024)
def content_hash(text: str) -> int:
    """``string_hash`` of a whole template, memoised: ``{{pick}}`` seeds with it every render."""
    return string_hash(text)
