"""A loopback TCP proxy that can drop connections: put it between the bridge and `opencode serve` to cut
one kind of stream mid-body (e.g. every connection whose request starts with `GET /global/event`) without
restarting either side."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field

_METHODS = (b"GET ", b"POST ", b"PUT ", b"DELETE ", b"PATCH ", b"HEAD ", b"OPTIONS ")


@dataclass(eq=False)  # identity: kept in a set
class _Conn:
    head: bytearray = field(default_factory=bytearray)  # the start of the latest request the client sent
    writers: list[asyncio.StreamWriter] = field(default_factory=list)
    blocked: set[bytes] = field(default_factory=set)  # the proxy's: requests starting so are reset


class TcpProxy:
    def __init__(self, target_host: str, target_port: int) -> None:
        self._target = (target_host, target_port)
        self._server: asyncio.Server | None = None
        self._conns: set[_Conn] = set()
        self.port = 0
        self.cuts = 0
        self.blocked: set[bytes] = set()  # `block()`: such requests are reset as soon as they are sent

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            self.cut(b"")
            await self._server.wait_closed()

    def open_matching(self, prefix: bytes) -> int:
        return sum(1 for c in self._conns if bytes(c.head).startswith(prefix))

    def cut(self, prefix: bytes) -> int:
        """Abort every connection whose request starts with `prefix` (both sides, no FIN: a reset)."""
        n = 0
        for c in list(self._conns):
            if bytes(c.head).startswith(prefix):
                for w in c.writers:
                    w.transport.abort()
                n += 1
        self.cuts += n
        return n

    def block(self, prefix: bytes) -> int:
        """Cut every connection whose request starts with `prefix`, and every new one until `unblock`."""
        self.blocked.add(prefix)
        return self.cut(prefix)

    def unblock(self, prefix: bytes) -> None:
        self.blocked.discard(prefix)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = _Conn(writers=[writer], blocked=self.blocked)
        try:
            up_reader, up_writer = await asyncio.open_connection(*self._target)
        except OSError:
            writer.transport.abort()
            return
        conn.writers.append(up_writer)
        self._conns.add(conn)
        try:
            await asyncio.gather(self._pipe(reader, up_writer, conn), self._pipe(up_reader, writer, None))
        finally:
            self._conns.discard(conn)
            for w in conn.writers:
                with contextlib.suppress(Exception):
                    w.transport.abort()

    @staticmethod
    async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, conn: _Conn | None) -> None:
        try:
            while data := await reader.read(65536):
                if conn is not None and data.startswith(_METHODS):
                    conn.head[:] = data[:64]  # the latest request on this (kept-alive) connection
                    if any(data.startswith(p) for p in conn.blocked):
                        break
                writer.write(data)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            with contextlib.suppress(Exception):
                writer.transport.abort()
