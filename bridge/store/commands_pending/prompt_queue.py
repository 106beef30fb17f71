"""SQL of prompts on both runtimes (docs/commands.md, "Runtime affinity", "The legacy queue"): the
runtimes of a session's stored turns, the state changes of a prompt row, its send claim (one sender at a
time, bridge.commands.legacy_delivery), and the queued legacy prompts in order."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import and_, func, not_, or_, select
from sqlalchemy.dialects.postgresql import distinct_on
from sqlalchemy.ext.asyncio import AsyncEngine

from bridge.commands.affinity import TurnHistory, runtime_of_type
from bridge.commands.legacy_delivery import DROPPED, QUEUED, SENDING, ClaimAction, claim_action, holds_claim
from bridge.store.commands_pending.command_store import CommandKey
from bridge.store.notices import notify_command
from bridge.store.ports.prompt_queue import PromptRow as PromptRow  # re-exported: the record is the port's
from bridge.store.schema import chat_commands, chat_session_events, chat_sessions, session_day_of, session_key

C = chat_commands.c
E = chat_session_events.c
S = chat_sessions.c

# The kinds that begin a turn, in either runtime (docs/legacy.md, "Kind table").
_TURN_KINDS = ("prompt:admitted",)


def _in_queue() -> Any:
    """Rows of the legacy queue: `queued`, or `sending` after having been queued. A row left `sending` by a
    steer whose send failed is the client's to retry (like a v2 `pending` row), not the queue's."""
    return or_(C.state == QUEUED, and_(C.state == SENDING, C.result["state"].astext == QUEUED))


def _prompt_row(r: Any) -> PromptRow:
    return PromptRow(command_id=r.command_id, subject=r.subject, target_session=r.target_session,
                     session_id=r.session_id, state=r.state, runtime=r.runtime,
                     upstream_id=r.upstream_id, body=r.body, http_status=r.http_status, result=r.result,
                     created_at=r.created_at)


class PromptQueueStore:
    def __init__(self, engine: AsyncEngine, upstream: str) -> None:
        self._engine = engine
        self.upstream = upstream

    def _key(self, key: CommandKey) -> Any:
        """A command row: its id is the caller's, per subject and target session (docs/security.md)."""
        return and_(C.upstream == self.upstream, C.subject == key.subject, C.target_session == key.target_session,
                    C.command_id == key.command_id)

    async def turn_history(self, session_id: str) -> TurnHistory:
        """The runtime of the session's latest stored turn and every runtime its turns ran in."""
        where = and_(E.upstream == self.upstream, E.session_id == session_id,
                     E.session_day == session_day_of(self.upstream, session_id), E.kind.in_(_TURN_KINDS))
        is_v2 = E.type.like("session.next.%")
        async with self._engine.connect() as conn:
            latest = (await conn.execute(select(E.type).where(where).order_by(E.seq.desc()).limit(1))).scalar()
            kinds = (await conn.execute(select(func.bool_or(is_v2), func.bool_or(~is_v2)).where(where))).one()
        seen = {rt for rt, present in zip(("v2", "legacy"), kinds, strict=True) if present}
        return TurnHistory(latest=None if latest is None else runtime_of_type(latest), seen=frozenset(seen))

    async def session_deleted(self, session_id: str) -> bool:
        """Whether the mirror has recorded the session's deletion."""
        q = select(S.deleted).where(session_key(self.upstream, session_id))
        async with self._engine.connect() as conn:
            return bool((await conn.execute(q)).scalar())

    async def row(self, key: CommandKey) -> PromptRow | None:
        async with self._engine.connect() as conn:
            r = (await conn.execute(select(chat_commands).where(self._key(key)))).first()
        return None if r is None else _prompt_row(r)

    async def move(self, key: CommandKey, from_states: Iterable[str], to_state: str, *, announce: str | None = None,
                   **values: Any) -> bool:
        """`state` from one of `from_states` to `to_state` (with `values`); False if the row was elsewhere.
        `announce`: a state to tell the session's WebSocket subscribers, if the row moved."""
        stmt = (chat_commands.update()
                .where(self._key(key), C.state.in_(list(from_states)))
                .values(state=to_state, **values).returning(C.session_id))
        async with self._engine.begin() as conn:
            moved = (await conn.execute(stmt)).first()
            if moved is not None and announce is not None and moved.session_id is not None:
                await conn.execute(notify_command(self.upstream, moved.session_id, key.command_id, announce))
            return moved is not None

    async def queued_ahead(self, session_id: str, key: CommandKey) -> int:
        """Prompts of the session still waiting in the queue, this one left out."""
        q = select(func.count()).where(C.upstream == self.upstream, C.session_id == session_id, _in_queue(),
                                       not_(self._key(key)))
        async with self._engine.connect() as conn:
            return int((await conn.execute(q)).scalar_one())

    async def heads(self, limit: int = 200) -> list[PromptRow]:
        """The oldest waiting prompt of every session that has one (FIFO per session)."""
        q = (select(chat_commands).ext(distinct_on(C.session_id))
             .where(C.upstream == self.upstream, C.command == "prompt", _in_queue())
             .order_by(C.session_id, C.created_at, C.command_id).limit(limit))
        async with self._engine.connect() as conn:
            return [_prompt_row(r) for r in (await conn.execute(q)).all()]

    async def drop_queued(self, session_id: str, reason: str) -> list[str]:
        """Every queued prompt of the session → `dropped` (never sent); their command ids."""
        pick = (select(C.subject, C.target_session, C.command_id)
                .where(C.upstream == self.upstream, C.session_id == session_id, C.state == "queued")
                .with_for_update())
        async with self._engine.begin() as conn:
            keys = [CommandKey(r.subject, r.target_session, r.command_id) for r in (await conn.execute(pick)).all()]
            for key in keys:
                cid = key.command_id
                await conn.execute(chat_commands.update().where(self._key(key)).values(
                    state=DROPPED, http_status=200, completed_at=func.now(),
                    result={"command_id": cid, "state": DROPPED, "reason": reason}))
                await conn.execute(notify_command(self.upstream, session_id, cid, DROPPED))
        return [key.command_id for key in keys]

    async def claim(self, key: CommandKey, token: str) -> tuple[ClaimAction, PromptRow | None]:
        """Take the row's send claim for `token` if `claim_action` allows it (compare-and-set under the row
        lock, the claim time from the database's clock): the action and the row as it was before."""
        return await self._under_row_lock(key, token, renew=False)

    async def renew(self, key: CommandKey, token: str) -> bool:
        """Right before the upstream call: whether `token` still holds the claim (`holds_claim`); if so the
        claim time becomes now, the start of a full window for the call."""
        action, _ = await self._under_row_lock(key, token, renew=True)
        return action is ClaimAction.TAKE

    async def release(self, key: CommandKey, token: str) -> None:
        """An attempt that sent nothing lets its claim go (the row stays `sending`: the next sender looks
        before it sends), so that the next one need not wait the claim out."""
        stmt = (chat_commands.update().where(self._key(key), C.state == SENDING, C.send_token == token)
                .values(send_token=None))
        async with self._engine.begin() as conn:
            await conn.execute(stmt)

    async def _under_row_lock(self, key: CommandKey, token: str, *,
                              renew: bool) -> tuple[ClaimAction, PromptRow | None]:
        # clock_timestamp(), not now(): the time once the row lock is ours, not when the transaction began
        age = func.extract("epoch", func.clock_timestamp() - C.send_claimed_at).label("claim_age_s")
        q = select(chat_commands, age).where(self._key(key)).with_for_update()
        async with self._engine.begin() as conn:
            r = (await conn.execute(q)).first()
            if r is None:
                return ClaimAction.HELD, None
            row, claim_age = _prompt_row(r), None if r.claim_age_s is None else float(r.claim_age_s)
            if renew:
                ok = holds_claim(row.state, r.send_token, token, claim_age)
                action = ClaimAction.TAKE if ok else ClaimAction.HELD
            else:
                action = claim_action(row.state, r.send_token, token, claim_age)
            if action is ClaimAction.TAKE:
                await conn.execute(chat_commands.update().where(self._key(key)).values(
                    state=SENDING, runtime="legacy", send_token=token, send_claimed_at=func.clock_timestamp()))
            return action, row
