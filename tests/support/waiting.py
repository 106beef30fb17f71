"""Wait for a condition with a deadline instead of sleeping for a guessed amount of time.

    value = await wait_until(lambda: mock.requests_for("text"), timeout=10, message="no provider call")

The predicate may be a plain function or a coroutine function. ``wait_until`` returns the first
*truthy* value it produces, so the predicate can hand back what the caller wants to look at next.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, overload

T = TypeVar("T")

__all__ = ["WaitTimeout", "wait_until", "wait_until_sync"]


class WaitTimeout(TimeoutError):
    """The condition did not become true before the deadline."""

    def __init__(self, message: str, *, last_value: object = None, last_error: BaseException | None = None):
        detail = f"{message} (last value: {last_value!r}"
        if last_error is not None:
            detail += f"; last error: {type(last_error).__name__}: {last_error}"
        super().__init__(detail + ")")
        self.last_value = last_value
        self.last_error = last_error


async def _evaluate(predicate: Callable[[], Any]) -> Any:
    result = predicate()
    return await result if inspect.isawaitable(result) else result


def _describe(predicate: object, timeout: float, message: str | None) -> str:
    what = message or getattr(predicate, "__qualname__", repr(predicate))
    return f"condition not met within {timeout:g} s: {what}"


class _Polls:
    """What both waits keep between polls: the deadline, the last falsy value or ignored error, the verdict."""

    def __init__(self, predicate: object, timeout: float, message: str | None, now: Callable[[], float]) -> None:
        self._predicate, self._timeout, self._message, self._now = predicate, timeout, message, now
        self._deadline = now() + timeout
        self.last_value: object = None
        self.last_error: BaseException | None = None

    def final(self) -> bool:
        return self._now() >= self._deadline

    def met(self, value: object, error: BaseException | None, final: bool) -> bool:
        """Whether this poll's `value` ends the wait; a miss at the final poll raises `WaitTimeout`."""
        if error is not None:
            self.last_error = error
        elif value:
            return True
        else:
            self.last_value, self.last_error = value, None
        if final:
            raise WaitTimeout(_describe(self._predicate, self._timeout, self._message), last_value=self.last_value,
                              last_error=self.last_error)
        return False

    def pause(self, interval: float) -> float:
        return min(interval, max(0.0, self._deadline - self._now()))


@overload
async def wait_until(
    predicate: Callable[[], Awaitable[T]],
    timeout: float,
    interval: float = ...,
    *,
    message: str | None = ...,
    ignore: tuple[type[BaseException], ...] = ...,
) -> T: ...


@overload
async def wait_until(
    predicate: Callable[[], T],
    timeout: float,
    interval: float = ...,
    *,
    message: str | None = ...,
    ignore: tuple[type[BaseException], ...] = ...,
) -> T: ...


async def wait_until(
    predicate: Callable[[], Any],
    timeout: float,
    interval: float = 0.1,
    *,
    message: str | None = None,
    ignore: tuple[type[BaseException], ...] = (),
) -> Any:
    """Poll ``predicate`` until it returns a truthy value; return that value.

    ``interval`` is the pause between polls (the poll itself is not counted). Exceptions of the types
    in ``ignore`` count as "not yet" (e.g. ``aiohttp.ClientConnectionError`` while a server starts);
    any other exception propagates at once. The predicate is always evaluated at least once and once
    more at the deadline, so a slow event loop cannot make a met condition time out.
    """
    polls = _Polls(predicate, timeout, message, asyncio.get_running_loop().time)
    while True:
        final = polls.final()
        try:
            value, error = await _evaluate(predicate), None
        except ignore as exc:
            value, error = None, exc
        if polls.met(value, error, final):
            return value
        await asyncio.sleep(polls.pause(interval))


def wait_until_sync(
    predicate: Callable[[], T],
    timeout: float,
    interval: float = 0.1,
    *,
    message: str | None = None,
    ignore: tuple[type[BaseException], ...] = (),
) -> T:
    """Blocking twin of :func:`wait_until` for synchronous code (never call it on an event loop)."""
    polls = _Polls(predicate, timeout, message, time.monotonic)
    while True:
        final = polls.final()
        try:
            value, error = predicate(), None
        except ignore as exc:
            value, error = None, exc
        if polls.met(value, error, final):
            return value  # type: ignore[return-value]
        time.sleep(polls.pause(interval))
