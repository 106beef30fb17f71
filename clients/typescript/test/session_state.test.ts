import { readdirSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import type { DeltaFrame, EventFrame, QuestionFrame, SessionFrame } from '../src/frames.js';
import { SessionState, reduce } from '../src/state/session_state.js';

type Vector = { session: string; frames: EventFrame[]; questions: QuestionFrame[]; transcript: unknown };
const dir = new URL('./vectors/', import.meta.url);
const vectors = readdirSync(dir).filter((n) => n.endsWith('.json')).sort()
  .map((n) => [n, JSON.parse(readFileSync(new URL(n, dir), 'utf8')) as Vector] as const);

/** A small seeded PRNG (mulberry32): the runs are random but repeatable. */
function rng(seed: number): () => number {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** The live traffic of a subscription: the events with deltas before each text end (split at random,
 * some arriving before their `text:start`), events replayed twice across a reconnect, the questions
 * after `caught_up`. */
function live(v: Vector, seed: number): SessionFrame[] {
  const r = rng(seed);
  const out: SessionFrame[] = [{ type: 'subscribed', session: v.session, after: null, head: 0, complete: true, status: 'idle', title: null, parent_id: null }];
  for (const ev of v.frames) {
    const text = ev.fields.text;
    const part = ev.fields.part_id ?? ev.fields.call_id;
    const kind = ev.kind === 'text:end' ? 'delta:text' : ev.kind === 'reasoning:end' ? 'delta:reasoning'
      : ev.kind === 'tool:input-end' ? 'delta:tool-input' : null;
    if (kind !== null && typeof text === 'string' && typeof part === 'string' && r() < 0.9) {
      let rest = r() < 0.2 ? text.slice(0, Math.floor(text.length / 2)) : text; // a dropped delta: the end repairs it
      while (rest.length > 0) {
        const n = 1 + Math.floor(r() * 8);
        const d: DeltaFrame = { type: 'delta', session: v.session, kind: kind as DeltaFrame['kind'], after_seq: ev.seq - 1,
          assistant_message_id: ev.fields.assistant_message_id ?? null, delta: rest.slice(0, n),
          ...(kind === 'delta:tool-input' ? { call_id: part } : { part_id: part }) };
        out.push(d);
        rest = rest.slice(n);
      }
    }
    out.push(ev);
    if (r() < 0.1) out.push(ev); // the same event again (replay seam)
    if (kind === 'delta:text' && typeof part === 'string') // stale: after the end, ignored
      out.push({ type: 'delta', session: v.session, kind: 'delta:text', after_seq: ev.seq, assistant_message_id: null, part_id: part, delta: 'STALE' });
  }
  out.push({ type: 'caught_up', session: v.session, seq: v.frames.at(-1)?.seq ?? -1 });
  out.push(...v.questions);
  return out;
}

describe('SessionState', () => {
  for (const [name, v] of vectors) {
    it(`folds ${name} into the bridge's transcript, whatever the deltas`, () => {
      for (let seed = 1; seed <= 5; seed++) {
        const s = reduce(v.session, live(v, seed));
        expect(s.transcript()).toStrictEqual(v.transcript);
        expect(s.lastSeq).toBe(v.frames.at(-1)?.seq ?? -1);
      }
    });
  }

  it('shows a streaming text before its end, and the durable text after it', () => {
    const s = new SessionState('ses_A');
    const base = { session: 'ses_A', event_id: 'e', data: {} };
    s.apply({ type: 'subscribed', session: 'ses_A', after: null, head: 0, complete: true, status: 'running', title: null, parent_id: null });
    s.apply({ ...base, type: 'event', seq: 1, event_type: 'session.next.step.started', kind: 'step:start',
      fields: { assistant_message_id: 'msg_M', agent: 'build' } });
    s.apply({ type: 'delta', session: 'ses_A', kind: 'delta:text', after_seq: 1, assistant_message_id: 'msg_M', part_id: 't0', delta: 'Hel' });
    s.apply({ type: 'delta', session: 'ses_A', kind: 'delta:text', after_seq: 1, assistant_message_id: 'msg_M', part_id: 't0', delta: 'lo' });
    const parts = () => (s.transcript()[0]!.parts as Array<Record<string, unknown>>);
    expect(parts()).toEqual([{ type: 'text', id: 't0', text: 'Hello', complete: false }]);
    s.apply({ ...base, type: 'event', seq: 2, event_type: 'session.next.text.started', kind: 'text:start',
      fields: { assistant_message_id: 'msg_M', part_id: 't0' } });
    expect(parts()).toEqual([{ type: 'text', id: 't0', text: 'Hello', complete: false }]);
    s.apply({ ...base, type: 'event', seq: 3, event_type: 'session.next.text.ended', kind: 'text:end',
      fields: { assistant_message_id: 'msg_M', part_id: 't0', text: 'Hello!' } });
    expect(parts()).toEqual([{ type: 'text', id: 't0', text: 'Hello!', complete: true }]);
    expect(s.apply({ type: 'delta', session: 'ses_A', kind: 'delta:text', after_seq: 3, assistant_message_id: 'msg_M', part_id: 't0', delta: 'x' })).toBe(false);
    expect(s.apply({ ...base, type: 'event', seq: 3, event_type: 'x', kind: 'unknown', fields: {} })).toBe(false);
  });

  it('keeps the latest state of permissions and questions by request id', () => {
    const s = new SessionState('ses_A');
    s.apply({ type: 'permission', session: 'ses_A', state: 'asked', request_id: 'per_1', runtime: 'v2', action: 'bash', resources: ['ls'] });
    s.apply({ type: 'permission', session: 'ses_A', state: 'asked', request_id: 'per_1', runtime: 'v2', action: 'bash', resources: ['ls'] });
    s.apply({ type: 'question', session: 'ses_A', state: 'asked', request_id: 'que_1', runtime: 'v2',
      questions: [{ question: 'Color?', options: [{ label: 'Red' }] }], call_id: 'call_q' });
    expect(s.pending().permissions.map((p) => p.request_id)).toEqual(['per_1']);
    expect(s.pending().questions.map((q) => q.request_id)).toEqual(['que_1']);
    s.apply({ type: 'permission', session: 'ses_A', state: 'replied', request_id: 'per_1', runtime: 'v2', reply: 'once' });
    s.apply({ type: 'question', session: 'ses_A', state: 'answered', request_id: 'que_1', runtime: 'v2', answers: [['Red']] });
    expect(s.pending()).toEqual({ permissions: [], questions: [] });
    expect(s.permissions.get('per_1')).toMatchObject({ action: 'bash', reply: 'once', resources: ['ls'] });
    expect(s.questions.get('que_1')).toMatchObject({ state: 'answered', answers: [['Red']], call_id: 'call_q' });
  });

  it('keeps the last status, todo, diff and ignores other sessions', () => {
    const s = new SessionState('ses_A');
    s.apply({ type: 'status', session: 'ses_A', status: 'waiting', reason: 'question', waiting: { for: 'question', since: 't' } });
    s.apply({ type: 'todo', session: 'ses_A', todos: [{ content: 'Ship', status: 'pending' }] });
    s.apply({ type: 'diff', session: 'ses_A', diff: [{ file: 'a.txt', additions: 1 }] });
    expect(s.apply({ type: 'status', session: 'ses_B', status: 'idle', reason: null })).toBe(false);
    expect([s.status, s.waiting?.for, s.todos.length, s.diff[0]?.file]).toEqual(['waiting', 'question', 1, 'a.txt']);
    s.apply({ type: 'status', session: 'ses_A', status: 'idle', reason: null });
    expect([s.status, s.waiting]).toEqual(['idle', null]);
  });

  it('resumes after a reconnect without repeating what it had', () => {
    const [, v] = vectors.find(([n]) => n === 'b-tool-turn.json')!;
    const s = new SessionState(v.session);
    const half = Math.floor(v.frames.length / 2);
    s.apply({ type: 'subscribed', session: v.session, after: null, head: 0, complete: true, status: 'idle', title: null, parent_id: null });
    v.frames.slice(0, half).forEach((f) => s.apply(f));
    const after = s.lastSeq;
    s.apply({ type: 'subscribed', session: v.session, after, head: 99, complete: true, status: 'idle', title: null, parent_id: null });
    v.frames.forEach((f) => s.apply(f)); // a replay overlapping what it had: each once
    expect(s.transcript()).toStrictEqual(v.transcript);
  });
});
