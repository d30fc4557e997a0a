"""PNG encoding with the standard library (zlib): 8-bit RGB or RGBA, filter type 0 on every row,
fixed compression level, no timestamp chunk, so the same pixels always give the same bytes."""
from __future__ import annotations

import struct
import zlib

_COLOR_TYPE = {3: 2, 4: 6}  # channels -> PNG colour type (truecolour, truecolour with alpha)


def _chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF)


def encode(width: int, height: int, channels: int, pixels: bytes) -> bytes:
    if channels not in _COLOR_TYPE:
        raise ValueError(f"PNG: {channels} channels per pixel, expected 3 (RGB) or 4 (RGBA)")
    stride = width * channels
    if len(pixels) != stride * height:
        raise ValueError(f"PNG: {len(pixels)} bytes of pixels for {width}x{height}x{channels}")
    raw = b"".join(b"\x00" + pixels[y * stride:(y + 1) * stride] for y in range(height))
    ihdr = struct.pack(">IIBBBBB", width, height, 8, _COLOR_TYPE[channels], 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", ihdr) + _chunk(b"IDAT", zlib.compress(raw, 6)) + _chunk(b"IEND", b"")


def center_crop(width: int, height: int, channels: int, pixels: bytes, w: int, h: int) -> bytes:
    """The w x h centre of a width x height image (stable-diffusion.cpp aligns sizes up to its
    model's spatial multiple, 64 for UNet models, and returns the larger image)."""
    x0, y0 = (width - w) // 2, (height - h) // 2
    stride = width * channels
    return b"".join(pixels[(y0 + y) * stride + x0 * channels:(y0 + y) * stride + (x0 + w) * channels] for y in range(h))
