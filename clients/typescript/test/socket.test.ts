import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { BridgeSocket, BridgeSocketStopped, type WebSocketLike } from '../src/socket.js';

/** A WebSocket stand-in: records what the client sends; the test plays the bridge. */
class FakeSocket implements WebSocketLike {
  readyState = 0;
  sent: Record<string, unknown>[] = [];
  closedWith: number | null = null;
  onopen: WebSocketLike['onopen'] = null;
  onmessage: WebSocketLike['onmessage'] = null;
  onclose: WebSocketLike['onclose'] = null;
  onerror: WebSocketLike['onerror'] = null;
  constructor(readonly url: string) {}
  send(data: string): void { this.sent.push(JSON.parse(data) as Record<string, unknown>); }
  close(code = 1000): void { this.closedWith = code; this.readyState = 3; }
  // the bridge's side
  open(hello: Record<string, unknown> = {}): void {
    this.readyState = 1;
    this.onopen?.({});
    this.frame({ type: 'hello', upstream: 'u', sessions: null, expires_at: null, max_subscriptions: 100,
      max_message_bytes: 65536, ...hello });
  }
  frame(f: Record<string, unknown>): void { this.onmessage?.({ data: JSON.stringify(f) }); }
  drop(code: number, reason = ''): void { this.readyState = 3; this.onclose?.({ code, reason }); }
  ops(op: string): Record<string, unknown>[] { return this.sent.filter((f) => f.op === op); }
}

let sockets: FakeSocket[];
let tokens: number;
function client(extra: Partial<ConstructorParameters<typeof BridgeSocket>[0]> = {}): BridgeSocket {
  let n = 0;
  return new BridgeSocket({
    url: 'ws://127.0.0.1:8765/v1/ws',
    getToken: async () => `tok${++tokens}`,
    webSocket: (url) => { const s = new FakeSocket(url); sockets.push(s); return s; },
    random: () => 0.5,
    newCommandId: () => `cid-${++n}`,
    backoff: { baseMs: 100, maxMs: 1000 },
    ...extra,
  });
}
const last = (): FakeSocket => sockets.at(-1)!;
const event = (session: string, seq: number) => ({ type: 'event', session, seq, event_id: `e${seq}`,
  event_type: 'session.next.text.started', kind: 'text:start', fields: {}, data: {} });

beforeEach(() => { vi.useFakeTimers(); sockets = []; tokens = 0; });
afterEach(() => { vi.useRealTimers(); });

describe('BridgeSocket', () => {
  it('connects with the token, subscribes after hello, resubscribes with after = last seq', async () => {
    const s = client();
    s.subscribe('ses_A');
    s.subscribe('ses_B', 7);
    s.connect();
    await vi.advanceTimersByTimeAsync(0);
    expect(last().url).toBe('ws://127.0.0.1:8765/v1/ws?token=tok1');
    expect(last().ops('subscribe')).toEqual([]);
    last().open();
    expect(s.state).toBe('connected');
    expect(last().ops('subscribe')).toEqual([{ op: 'subscribe', session: 'ses_A' }, { op: 'subscribe', session: 'ses_B', after: 7 }]);
    last().frame(event('ses_A', 3));
    last().frame(event('ses_A', 5));
    last().frame({ type: 'caught_up', session: 'ses_B', seq: 9 });
    last().drop(1006);
    expect(s.state).toBe('disconnected');
    await vi.advanceTimersByTimeAsync(49); // full jitter: random 0.5 × min(1000, 100 × 2^0)
    expect(sockets).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(1);
    expect(sockets).toHaveLength(2);
    last().open();
    expect(last().ops('subscribe')).toEqual([{ op: 'subscribe', session: 'ses_A', after: 5 }, { op: 'subscribe', session: 'ses_B', after: 9 }]);
    expect(s.lastSeq('ses_A')).toBe(5);
  });

  it('backs off with full jitter, growing to the cap, and resets after a hello', async () => {
    const delays: number[] = [];
    const s = client({ random: () => 1 });
    s.connect();
    await vi.advanceTimersByTimeAsync(0);
    for (let i = 0; i < 6; i++) {
      const before = Date.now();
      last().drop(1006);
      const n = sockets.length;
      while (sockets.length === n) await vi.advanceTimersByTimeAsync(10);
      delays.push(Date.now() - before);
    }
    expect(delays).toEqual([100, 200, 400, 800, 1000, 1000]);
    last().open();
    const before = Date.now();
    last().drop(1001);
    const n = sockets.length;
    while (sockets.length === n) await vi.advanceTimersByTimeAsync(10);
    expect(Date.now() - before).toBe(100);
  });

  it('honours retry_after before reconnecting', async () => {
    const s = client();
    s.connect();
    await vi.advanceTimersByTimeAsync(0);
    last().open();
    last().frame({ type: 'error', error: { code: 'too_many_connections', message: 'm', retry_after: 5 } });
    last().drop(1013);
    await vi.advanceTimersByTimeAsync(4999);
    expect(sockets).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(1);
    expect(sockets).toHaveLength(2);
  });

  it('stops on 4401 and rejects what is pending', async () => {
    const s = client();
    s.connect();
    await vi.advanceTimersByTimeAsync(0);
    const p = s.command('prompt', { session: 'ses_A', text: 'hi', delivery: 'queue' });
    last().drop(4401, 'bad token');
    await expect(p).rejects.toBeInstanceOf(BridgeSocketStopped);
    expect(s.state).toBe('stopped');
    await vi.advanceTimersByTimeAsync(60_000);
    expect(sockets).toHaveLength(1);
  });

  it('asks getToken again on 4402 and reconnects at once, resuming', async () => {
    const s = client({ random: () => 0 });
    s.subscribe('ses_A');
    s.connect();
    await vi.advanceTimersByTimeAsync(0);
    last().open();
    last().frame(event('ses_A', 4));
    last().frame({ type: 'error', code: 'token_expired', message: 'expired' });
    last().drop(4402);
    await vi.advanceTimersByTimeAsync(0);
    expect(last().url).toBe('ws://127.0.0.1:8765/v1/ws?token=tok2');
    last().open();
    expect(last().ops('subscribe')).toEqual([{ op: 'subscribe', session: 'ses_A', after: 4 }]);
  });

  it('asks for a new token before expires_at and moves to a new connection', async () => {
    const s = client();
    s.subscribe('ses_A');
    s.connect();
    await vi.advanceTimersByTimeAsync(0);
    last().open({ expires_at: Date.now() / 1000 + 120 });
    last().frame(event('ses_A', 2));
    await vi.advanceTimersByTimeAsync(89_999);
    expect(sockets).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(1); // 30 s before expiry
    expect(sockets[0]!.closedWith).toBe(1000);
    expect(last().url).toContain('token=tok2');
    last().open();
    expect(last().ops('subscribe')).toEqual([{ op: 'subscribe', session: 'ses_A', after: 2 }]);
    expect(s.state).toBe('connected');
  });

  it('fills sessions that had nothing from the resume map of a 4429', async () => {
    const s = client({ random: () => 0 });
    s.subscribe('ses_A');
    s.subscribe('ses_B');
    s.connect();
    await vi.advanceTimersByTimeAsync(0);
    last().open();
    last().frame(event('ses_A', 8));
    last().frame({ type: 'error', error: { code: 'slow_consumer', message: 'behind' }, resume: { ses_A: 6, ses_B: 11 } });
    last().drop(4429);
    await vi.advanceTimersByTimeAsync(0);
    last().open();
    expect(last().ops('subscribe')).toEqual([{ op: 'subscribe', session: 'ses_A', after: 8 }, { op: 'subscribe', session: 'ses_B', after: 11 }]);
  });

  it('re-sends an unanswered command with the same command_id until answered', async () => {
    const s = client({ random: () => 0 });
    s.connect();
    await vi.advanceTimersByTimeAsync(0);
    const p = s.command('prompt', { session: 'ses_A', text: 'hi', delivery: 'queue' });
    expect(last().ops('command')).toEqual([]); // not before hello
    last().open();
    const [first] = last().ops('command');
    expect(first).toMatchObject({ command: 'prompt', session: 'ses_A', command_id: 'cid-1', text: 'hi' });
    last().drop(1006);
    await vi.advanceTimersByTimeAsync(0);
    last().open();
    const [again] = last().ops('command');
    expect(again).toEqual(first);
    last().frame({ type: 'command_result', id: first!.id, command: 'prompt', status: 200, result: { command_id: 'cid-1' } });
    await expect(p).resolves.toMatchObject({ status: 200, result: { command_id: 'cid-1' } });
    last().drop(1006);
    await vi.advanceTimersByTimeAsync(0);
    last().open();
    expect(last().ops('command')).toEqual([]); // answered: never again
  });

  it('delivers frames as a discriminated union and ignores unknown types', async () => {
    const s = client();
    const kinds: string[] = [];
    s.on('event', (f) => kinds.push(f.kind));
    s.on('*', (f) => kinds.push(`*${f.type}`));
    s.connect();
    await vi.advanceTimersByTimeAsync(0);
    last().open();
    last().frame(event('ses_A', 1));
    last().frame({ type: 'from_the_future', x: 1 });
    last().onmessage?.({ data: 'not json' });
    expect(kinds).toEqual(['*hello', 'text:start', '*event', '*from_the_future']);
  });

  it('retries a busy subscribe after retry_after', async () => {
    const s = client({ random: () => 0 });
    s.subscribe('ses_A');
    s.connect();
    await vi.advanceTimersByTimeAsync(0);
    last().open();
    last().frame({ type: 'error', error: { code: 'busy', message: 'full', retry_after: 2 }, session: 'ses_A' });
    await vi.advanceTimersByTimeAsync(1999);
    expect(last().ops('subscribe')).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(1);
    expect(last().ops('subscribe')).toHaveLength(2);
  });
});
