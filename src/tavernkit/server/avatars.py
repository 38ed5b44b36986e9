"""A character's avatar from an uploaded image: PNG, JPEG or WebP, at most
:data:`AVATAR_MAX_BYTES` and :data:`AVATAR_MAX_PIXELS`, stored as a PNG (a PNG card carries its
card in the avatar's chunks, so a JPEG or WebP is re-encoded once here, and whatever chunks an
uploaded PNG had, a card of another character among them, are not kept).

``crop`` cuts the largest centred 2:3 (portrait, a card's shape) rectangle out of the image;
the web UI crops in the browser and sends the result, so it leaves this off. An image larger
than :data:`AVATAR_MAX_SIDE` on a side is scaled down. Anything Pillow cannot decode is a
:class:`~tavernkit.errors.FormatError` naming ``avatar`` (422), never a server error."""

from __future__ import annotations

import io

from PIL import Image

from tavernkit.errors import FormatError, LimitExceeded

__all__ = [
    "AVATAR_FORMATS",
    "AVATAR_MAX_BYTES",
    "AVATAR_MAX_PIXELS",
    "AVATAR_MAX_SIDE",
    "avatar_png",
]

AVATAR_MAX_BYTES = 10 * 1024 * 1024
#: a decompression bomb guard: an image over this many pixels is refused before decoding
AVATAR_MAX_PIXELS = 40_000_000
#: the stored avatar's longest side, at most (SillyTavern's own avatars are 512x768)
AVATAR_MAX_SIDE = 1536
AVATAR_FORMATS = frozenset({"PNG", "JPEG", "WEBP"})
_FIELD = "avatar"


def avatar_png(image: bytes, *, crop: bool = False) -> bytes:
    """``image`` checked and re-encoded as a PNG (RGBA or RGB), cropped to 2:3 if ``crop``."""
    if not image:
        raise FormatError("the image is empty", field=_FIELD)
    if len(image) > AVATAR_MAX_BYTES:
        raise LimitExceeded(
            f"the image is larger than {AVATAR_MAX_BYTES // (1024 * 1024)} MiB", field=_FIELD
        )
    try:
        with Image.open(io.BytesIO(image), formats=sorted(AVATAR_FORMATS)) as img:
            if img.width * img.height > AVATAR_MAX_PIXELS:
                raise LimitExceeded(
                    f"the image is too large ({img.width}x{img.height} pixels)", field=_FIELD
                )
            img.load()
            picture = img.convert("RGBA" if _has_alpha(img) else "RGB")
    except FormatError:
        raise
    except Image.DecompressionBombError:
        raise LimitExceeded("the image has too many pixels", field=_FIELD) from None
    except Exception as exc:  # Pillow raises many types for a broken file; each is the input's
        raise FormatError(
            f"not a PNG, JPEG or WebP image Pillow can read ({type(exc).__name__})", field=_FIELD
        ) from None
    if crop:
        picture = _centre_crop(picture)
    if max(picture.size) > AVATAR_MAX_SIDE:
        picture.thumbnail((AVATAR_MAX_SIDE, AVATAR_MAX_SIDE), Image.Resampling.LANCZOS)
    out = io.BytesIO()
    picture.save(out, format="PNG", optimize=False)
    return out.getvalue()


def _has_alpha(img: Image.Image) -> bool:
    return img.mode in ("RGBA", "LA", "PA") or (img.mode == "P" and "transparency" in img.info)


def _centre_crop(img: Image.Image) -> Image.Image:
    """The largest centred rectangle of ``img`` that is 2 wide to 3 high."""
    width, height = img.size
    if width * 3 > height * 2:  # too wide: keep the full height
        new_w, new_h = max(1, height * 2 // 3), height
    else:
        new_w, new_h = width, max(1, width * 3 // 2)
    left, top = (width - new_w) // 2, (height - new_h) // 2
    return img.crop((left, top, left + new_w, top + new_h))
