"""Heavy audit readers in a process of their own (the load test's clients must not share the bridge's
event loop, or their own decoding would be measured as ingest lag).

    python -m tests.hostile._readers BASE_URL TOKEN N URL...

Runs N concurrent clients cycling through the URLs; prints `started` once every client has had an
answer, and when stdin closes prints the status counts as one JSON line and exits."""

from __future__ import annotations

import asyncio
import json
import sys

import aiohttp


async def main(base: str, token: str, n: int, urls: list[str]) -> None:
    counts: dict[int, int] = {}
    answered: set[int] = set()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)

    async def client(i: int, http: aiohttp.ClientSession) -> None:
        while not stop.is_set():
            async with http.get(base + urls[i % len(urls)], headers={"Authorization": f"Bearer {token}"}) as r:
                await r.read()
            counts[r.status] = counts.get(r.status, 0) + 1
            if len(answered) < n:
                answered.add(i)
                if len(answered) == n:
                    print("started", flush=True)
            if r.status == 503:  # told to back off (Retry-After): a client's pace, not a wait for a condition
                await asyncio.sleep(float(r.headers.get("Retry-After", "1")))

    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as http:
        tasks = [asyncio.create_task(client(i, http)) for i in range(n)]
        await reader.read()  # EOF on stdin: the test is done
        stop.set()
        await asyncio.gather(*tasks)
    print(json.dumps(counts), flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:]))
