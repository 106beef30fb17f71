"""Just enough PNG decoding to check a browser screenshot (8-bit grey/RGB/RGBA, not interlaced), with the
standard library only: size, and how much the pixels vary (a blank or one-colour page has none)."""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

SIGNATURE = b"\x89PNG\r\n\x1a\n"
_CHANNELS = {0: 1, 2: 3, 4: 2, 6: 4}  # colour type -> samples per pixel


@dataclass(frozen=True)
class Image:
    width: int
    height: int
    channels: int
    rows: list[bytes]  # unfiltered scanlines

    def luminance_stddev(self, step: int = 4) -> float:
        """Standard deviation of the pixels' luminance (0..255), sampled every `step` pixels."""
        values = [self._luma(row, x) for row in self.rows[::step] for x in range(0, self.width, step)]
        mean = sum(values) / len(values)
        return float((sum((v - mean) ** 2 for v in values) / len(values)) ** 0.5)

    def distinct_colours(self, step: int = 4) -> int:
        c = self.channels
        return len({row[x * c:(x + 1) * c] for row in self.rows[::step] for x in range(0, self.width, step)})

    def _luma(self, row: bytes, x: int) -> float:
        c = self.channels
        if c < 3:
            return float(row[x * c])
        r, g, b = row[x * c], row[x * c + 1], row[x * c + 2]
        return 0.299 * r + 0.587 * g + 0.114 * b


def decode(data: bytes) -> Image:
    if not data.startswith(SIGNATURE):
        raise ValueError("not a PNG")
    pos, idat, header = len(SIGNATURE), bytearray(), None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if zlib.crc32(kind + body) != struct.unpack(">I", data[pos + 8 + length:pos + 12 + length])[0]:
            raise ValueError(f"bad CRC in {kind!r}")
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        elif kind == b"IEND":
            break
        pos += 12 + length
    if header is None:
        raise ValueError("no IHDR")
    width, height, depth, colour, _, _, interlace = header
    if depth != 8 or colour not in _CHANNELS or interlace:
        raise ValueError(f"unsupported PNG: depth {depth}, colour type {colour}, interlace {interlace}")
    channels = _CHANNELS[colour]
    return Image(width, height, channels, _unfilter(zlib.decompress(bytes(idat)), width * channels, height, channels))


def _unfilter(raw: bytes, stride: int, height: int, bpp: int) -> list[bytes]:
    rows: list[bytes] = []
    prev = bytearray(stride)
    for y in range(height):
        kind = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            left = line[i - bpp] if i >= bpp else 0
            up = prev[i]
            if kind == 1:
                line[i] = (line[i] + left) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + up) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + (left + up) // 2) & 0xFF
            elif kind == 4:
                corner = prev[i - bpp] if i >= bpp else 0
                p = left + up - corner
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                line[i] = (line[i] + (left if pa <= pb and pa <= pc else up if pb <= pc else corner)) & 0xFF
        rows.append(bytes(line))
        prev = line
    return rows
