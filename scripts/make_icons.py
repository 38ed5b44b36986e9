"""Draw the web app's icons (``src/tavernkit/server/web/icons/*.png``) with Pillow.

The UI has no build step, so the PNGs are committed; run this again after changing the
drawing (``python scripts/make_icons.py``). The mark is a tankard: a violet field, an amber
mug with a handle and white foam. ``icon-maskable-512.png`` keeps the mark inside the central
80 % circle a launcher may crop to; the others are rounded squares.
"""

from __future__ import annotations

from pathlib import Path

from PIL import Image, ImageDraw

ICONS = Path(__file__).resolve().parents[1] / "src" / "tavernkit" / "server" / "web" / "icons"
FIELD = (43, 33, 64, 255)
AMBER = (242, 184, 75, 255)
FOAM = (250, 247, 240, 255)
CLEAR = (0, 0, 0, 0)
SUPERSAMPLE = 4


def _mark(draw: ImageDraw.ImageDraw, size: int, scale: float) -> None:
    """The tankard, centred, ``scale`` of the icon's width wide (its handle included)."""
    unit = size * scale / 10
    left = (size - 10 * unit) / 2
    top = (size - 10 * unit) / 2
    # the handle: a thick ring on the right, half hidden by the mug
    draw.ellipse(
        (left + 5.2 * unit, top + 3.2 * unit, left + 10 * unit, top + 8 * unit),
        outline=AMBER,
        width=round(1.1 * unit),
    )
    # the mug
    draw.rounded_rectangle(
        (left + 0.6 * unit, top + 2.4 * unit, left + 7.2 * unit, top + 10 * unit),
        radius=round(0.9 * unit),
        fill=AMBER,
    )
    # the foam over its rim
    for cx, r in ((1.6, 1.3), (3.4, 1.6), (5.4, 1.4), (6.6, 1.0)):
        draw.ellipse(
            (
                left + (cx - r) * unit,
                top + (2.6 - r) * unit,
                left + (cx + r) * unit,
                top + (2.6 + r) * unit,
            ),
            fill=FOAM,
        )
    # two staves on the mug
    for x in (2.8, 5.0):
        draw.rounded_rectangle(
            (left + x * unit, top + 4.6 * unit, left + (x + 0.5) * unit, top + 8.8 * unit),
            radius=round(0.25 * unit),
            fill=FIELD,
        )


def icon(size: int, *, maskable: bool) -> Image.Image:
    big = size * SUPERSAMPLE
    image = Image.new("RGBA", (big, big), CLEAR)
    draw = ImageDraw.Draw(image)
    if maskable:
        draw.rectangle((0, 0, big, big), fill=FIELD)  # full bleed: the launcher crops it
        _mark(draw, big, 0.56)
    else:
        draw.rounded_rectangle((0, 0, big - 1, big - 1), radius=big // 5, fill=FIELD)
        _mark(draw, big, 0.7)
    return image.resize((size, size), Image.Resampling.LANCZOS)


def main() -> None:
    ICONS.mkdir(parents=True, exist_ok=True)
    for name, size, maskable in (
        ("icon-192.png", 192, False),
        ("icon-512.png", 512, False),
        ("icon-maskable-512.png", 512, True),
    ):
        icon(size, maskable=maskable).save(ICONS / name, optimize=True)
        print(ICONS / name)


if __name__ == "__main__":
    main()
