"""A character's avatar from an uploaded image: PNG, JPEG or WebP, at most
:data:`AVATAR_MAX_BYTES` and :data:`AVATAR_MAX_PIXELS`, stored as a PNG (a PNG card carries its
card in the avatar's chunks, so a JPEG or WebP is re-encoded once here, and whatever chunks an
uploaded PNG had, a card of another character among them, are not kept).

``crop`` cuts the largest centred 2:3 (portrait, a card's shape) rectangle out of the image;
the web UI crops in the browser and sends the result, so it leaves this off. An image larger
than :data:`AVATAR_MAX_SIDE` on a side is scaled down. Anything Pillow cannot decode is a
:class:`~tavernkit.errors.FormatError` naming ``avatar`` (422), never a server error.

An imported card's avatar (a PNG card's image, a CHARX's main icon) goes through
:func:`import_avatar`: kept as it is when small, re-encoded when large, refused when its
header declares more pixels than :data:`AVATAR_MAX_PIXELS` (a decompression bomb)."""

from __future__ import annotations

import io
import struct

from PIL import Image

from tavernkit.errors import FormatError, LimitExceeded

__all__ = [
    "AVATAR_FORMATS",
    "AVATAR_MAX_BYTES",
    "AVATAR_MAX_PIXELS",
    "AVATAR_MAX_SIDE",
    "IMPORT_FORMATS",
    "avatar_png",
    "import_avatar",
    "open_bounded",
]

AVATAR_MAX_BYTES = 10 * 1024 * 1024
#: a decompression bomb guard: an image over this many pixels is refused before decoding
AVATAR_MAX_PIXELS = 40_000_000
#: the stored avatar's longest side, at most (SillyTavern's own avatars are 512x768)
AVATAR_MAX_SIDE = 1536
AVATAR_FORMATS = frozenset({"PNG", "JPEG", "WEBP"})
#: what an imported card's avatar may be (a CHARX's icon is sometimes a GIF)
IMPORT_FORMATS = frozenset({"PNG", "JPEG", "WEBP", "GIF"})
_FIELD = "avatar"


def _declared_size(image: bytes) -> str | None:
    """``WxH`` as a PNG's header declares it (read without decoding anything)."""
    if image.startswith(b"\x89PNG\r\n\x1a\n") and image[12:16] == b"IHDR":
        width, height = struct.unpack(">II", image[16:24])
        return f"{width}x{height}"
    return None


def _too_many_pixels(size: str | None) -> LimitExceeded:
    shown = f"{size} pixels" if size else "too many pixels"
    return LimitExceeded(
        f"the image is {shown}, over the limit of {AVATAR_MAX_PIXELS} pixels", field=_FIELD
    )


def open_bounded(image: bytes, formats: frozenset[str] = AVATAR_FORMATS) -> Image.Image:
    """``image`` opened by Pillow (its header read, nothing decoded yet), or a typed error:
    :class:`LimitExceeded` (413) with its size when it has more than
    :data:`AVATAR_MAX_PIXELS` pixels (Pillow's own bomb guard, at twice its
    ``MAX_IMAGE_PIXELS``, answers the same), :class:`FormatError` (422) when it is not an
    image of ``formats``."""
    try:
        img = Image.open(io.BytesIO(image), formats=sorted(formats))
    except (Image.DecompressionBombError, Image.DecompressionBombWarning):
        raise _too_many_pixels(_declared_size(image)) from None
    except Exception as exc:  # Pillow raises many types for a broken file; each is the input's
        names = ", ".join(sorted(formats))
        raise FormatError(
            f"not an image Pillow can read as {names} ({type(exc).__name__})", field=_FIELD
        ) from None
    if img.width * img.height > AVATAR_MAX_PIXELS:
        img.close()
        raise _too_many_pixels(f"{img.width}x{img.height}")
    return img


def _decoded(img: Image.Image) -> Image.Image:
    """The picture of an image :func:`open_bounded` opened, as RGB or RGBA."""
    try:
        img.load()
        return img.convert("RGBA" if _has_alpha(img) else "RGB")
    except (Image.DecompressionBombError, Image.DecompressionBombWarning):
        raise _too_many_pixels(f"{img.width}x{img.height}") from None
    except Exception as exc:  # a truncated or corrupt file
        raise FormatError(
            f"the image cannot be decoded ({type(exc).__name__})", field=_FIELD
        ) from None


def _png(picture: Image.Image) -> bytes:
    if max(picture.size) > AVATAR_MAX_SIDE:
        picture.thumbnail((AVATAR_MAX_SIDE, AVATAR_MAX_SIDE), Image.Resampling.LANCZOS)
    out = io.BytesIO()
    picture.save(out, format="PNG", optimize=False)
    return out.getvalue()


def avatar_png(image: bytes, *, crop: bool = False) -> bytes:
    """``image`` checked and re-encoded as a PNG (RGBA or RGB), cropped to 2:3 if ``crop``."""
    if not image:
        raise FormatError("the image is empty", field=_FIELD)
    if len(image) > AVATAR_MAX_BYTES:
        raise LimitExceeded(
            f"the image is larger than {AVATAR_MAX_BYTES // (1024 * 1024)} MiB", field=_FIELD
        )
    with open_bounded(image) as img:
        picture = _decoded(img)
    if crop:
        picture = _centre_crop(picture)
    return _png(picture)


def import_avatar(image: bytes) -> bytes:
    """An imported card's avatar, bounded. Kept byte for byte (a PNG card's chunks and all)
    when it is a PNG, JPEG, WebP or GIF of at most :data:`AVATAR_MAX_SIDE` pixels a side and
    :data:`AVATAR_MAX_BYTES`; otherwise decoded (at most :data:`AVATAR_MAX_PIXELS` pixels),
    scaled down to :data:`AVATAR_MAX_SIDE` and stored as a PNG. One over the pixel limit is a
    :class:`LimitExceeded` naming its size, one Pillow cannot read a :class:`FormatError`:
    either refuses the import before anything is stored."""
    with open_bounded(image, IMPORT_FORMATS) as img:
        small = max(img.size) <= AVATAR_MAX_SIDE and len(image) <= AVATAR_MAX_BYTES
        if small and img.format in IMPORT_FORMATS:
            return image
        if img.format == "JPEG":  # decode at the smallest scale that is still big enough
            img.draft("RGB", (AVATAR_MAX_SIDE, AVATAR_MAX_SIDE))
        picture = _decoded(img)
    return _png(picture)


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
