/**
 * `BridgeSocket`: one WebSocket to the bridge (`GET /v1/ws`, docs/websocket.md) kept open across failures.
 * One small state machine owns the connection (connecting → connected → disconnected, or stopped):
 *
 * - `getToken()` is asked before every connection (return a cached token while it is valid): a new one is
 *   asked shortly before the token's `expires_at` (then the socket reconnects with it) and on close `4402`;
 * - every subscription remembers the last durable `seq` it received and is re-subscribed with that `after`
 *   after every reconnect (so events arrive exactly once); on `4429` the `resume` map of the `slow_consumer`
 *   error fills in the sessions that had received nothing;
 * - reconnects wait a full-jitter backoff (`random() × min(max, base × 2^attempt)`), at least the
 *   `retry_after` the bridge gave (`busy`, `too_many_connections`); `4401` (the token is refused) stops;
 * - `command(...)` returns a Promise of its `command_result`; a command not answered yet is sent again with
 *   the same `command_id` after a reconnect, so it lands once (docs/commands.md).
 */
import type { CommandName, CommandResultFrame, ErrorFrame, EventFrame, HelloFrame, ServerFrame } from './frames.js';

/** What the socket needs of a WebSocket (the browser's, Node ≥ 22's global, or the `ws` package's). */
export interface WebSocketLike {
  readonly readyState: number;
  send(data: string): void;
  close(code?: number, reason?: string): void;
  onopen: ((ev: unknown) => void) | null;
  onmessage: ((ev: { data: unknown }) => void) | null;
  onclose: ((ev: { code: number; reason: string }) => void) | null;
  onerror: ((ev: unknown) => void) | null;
}
export type WebSocketFactory = (url: string) => WebSocketLike;

export type SocketState = 'connecting' | 'connected' | 'disconnected' | 'stopped';

export interface BridgeSocketOptions {
  /** `ws://host:8765/v1/ws` (the token is added as `?token=`). */
  url: string;
  getToken: () => string | Promise<string>;
  /** Default: `new WebSocket(url)` of the platform. */
  webSocket?: WebSocketFactory;
  backoff?: { baseMs?: number; maxMs?: number };
  /** How long before `expires_at` a new token is asked for (default 30 s, at most half the lifetime). */
  refreshLeadMs?: number;
  random?: () => number;
  /** A new `command_id` (default: `crypto.randomUUID()`). */
  newCommandId?: () => string;
}

export interface CommandOptions {
  session?: string;
  command_id?: string;
  [field: string]: unknown;
}

type Handler<T> = (frame: T) => void;
type FrameOf<T extends string> = Extract<ServerFrame, { type: T }>;
interface PendingCommand { frame: Record<string, unknown>; resolve: (r: CommandResultFrame) => void; reject: (e: Error) => void }

export class BridgeSocketStopped extends Error {
  constructor(readonly code: number, reason: string) {
    super(`the bridge refused the token (close ${code}${reason ? `: ${reason}` : ''})`);
  }
}

export class BridgeSocket {
  state: SocketState = 'disconnected';
  hello: HelloFrame | null = null;
  private ws: WebSocketLike | null = null;
  private readonly subs = new Map<string, number | null>(); // session → last seq received (null: none yet)
  private readonly commands = new Map<string, PendingCommand>();
  private readonly handlers = new Map<string, Set<Handler<never>>>();
  private attempt = 0;
  private nextId = 0;
  private waitAtLeastMs = 0;
  private resume: Record<string, number> = {};
  private timer: ReturnType<typeof setTimeout> | null = null;
  private refreshTimer: ReturnType<typeof setTimeout> | null = null;
  private readonly opts: Required<Omit<BridgeSocketOptions, 'backoff'>> & { baseMs: number; maxMs: number };

  constructor(options: BridgeSocketOptions) {
    this.opts = {
      url: options.url,
      getToken: options.getToken,
      webSocket: options.webSocket ?? ((url) => new WebSocket(url) as unknown as WebSocketLike),
      refreshLeadMs: options.refreshLeadMs ?? 30_000,
      random: options.random ?? Math.random,
      newCommandId: options.newCommandId ?? (() => crypto.randomUUID()),
      baseMs: options.backoff?.baseMs ?? 500,
      maxMs: options.backoff?.maxMs ?? 30_000,
    };
  }

  /** Listen to one frame type (`'event'`, `'delta'`, …), every frame (`'*'`), or the connection's `'state'`. */
  on<T extends ServerFrame['type']>(type: T, handler: Handler<FrameOf<T>>): () => void;
  on(type: '*', handler: Handler<ServerFrame>): () => void;
  on(type: 'state', handler: Handler<SocketState>): () => void;
  on(type: string, handler: Handler<never>): () => void {
    const set = this.handlers.get(type) ?? new Set();
    set.add(handler);
    this.handlers.set(type, set);
    return () => set.delete(handler);
  }

  /** Opens the connection (and keeps it open until `close()` or a `4401`). */
  connect(): void {
    if (this.state === 'stopped' || this.ws !== null || this.timer !== null) return;
    void this.open();
  }

  close(): void {
    this.stop(1000, 'closed by the client', false);
  }

  /** Subscribe to a session, resumed after every reconnect from the last seq received. `after`: start after
   * this seq; `null`: the whole history again; omitted: where this socket left it (else the whole history). */
  subscribe(session: string, after?: number | null): void {
    this.subs.set(session, after === undefined ? (this.subs.get(session) ?? null) : after);
    if (this.state === 'connected') this.sendSubscribe(session);
  }

  unsubscribe(session: string): void {
    if (this.subs.delete(session) && this.state === 'connected') this.send({ op: 'unsubscribe', session });
  }

  /** Send another op (`ping`, `sessions`, …) now; false when not connected (nothing is queued). */
  sendOp(frame: { op: string; [field: string]: unknown }): boolean {
    if (this.state !== 'connected') return false;
    this.send(frame);
    return true;
  }

  /** The last durable seq received for a session (`null`: none yet). */
  lastSeq(session: string): number | null {
    return this.subs.get(session) ?? null;
  }

  /** Send a command (docs/commands.md); resolves with its `command_result` (an error status included),
   * re-sent with the same `command_id` across reconnects until it is answered. */
  command(command: CommandName, options: CommandOptions = {}): Promise<CommandResultFrame> {
    const id = `cmd-${++this.nextId}`;
    const frame = { ...options, op: 'command', command, command_id: options.command_id ?? this.opts.newCommandId(), id };
    return new Promise((resolve, reject) => {
      if (this.state === 'stopped') {
        reject(new Error('the socket is stopped'));
        return;
      }
      this.commands.set(id, { frame, resolve, reject });
      if (this.state === 'connected') this.send(frame);
    });
  }

  private emit(type: string, value: unknown): void {
    for (const h of this.handlers.get(type) ?? []) (h as Handler<unknown>)(value);
  }

  private setState(s: SocketState): void {
    if (this.state === s) return;
    this.state = s;
    this.emit('state', s);
  }

  private async open(): Promise<void> {
    this.setState('connecting');
    let token: string;
    try {
      token = await this.opts.getToken();
    } catch {
      this.scheduleReconnect();
      return;
    }
    if (this.state === 'stopped') return;
    const sep = this.opts.url.includes('?') ? '&' : '?';
    const ws = this.opts.webSocket(`${this.opts.url}${sep}token=${encodeURIComponent(token)}`);
    this.ws = ws;
    ws.onmessage = (ev) => this.onMessage(ws, ev.data);
    ws.onclose = (ev) => this.onClose(ws, ev.code, ev.reason);
    ws.onerror = () => undefined; // a close follows
  }

  private onMessage(ws: WebSocketLike, data: unknown): void {
    if (ws !== this.ws || typeof data !== 'string') return;
    let frame: ServerFrame;
    try {
      frame = JSON.parse(data) as ServerFrame;
    } catch {
      return;
    }
    switch (frame.type) {
      case 'hello':
        this.onHello(frame);
        break;
      case 'event':
        this.seen(frame.session, (frame as EventFrame).seq);
        break;
      case 'caught_up':
        if (frame.seq >= 0) this.seen(frame.session, frame.seq);
        break;
      case 'command_result':
        this.answered(frame);
        break;
      case 'error':
        this.onError(frame);
        break;
      default:
    }
    this.emit(frame.type, frame);
    this.emit('*', frame);
  }

  private seen(session: string, seq: number): void {
    if (!this.subs.has(session)) return;
    const last = this.subs.get(session);
    if (last === null || last === undefined || seq > last) this.subs.set(session, seq);
  }

  private onHello(hello: HelloFrame): void {
    this.hello = hello;
    this.attempt = 0;
    this.waitAtLeastMs = 0;
    this.setState('connected');
    for (const [session, last] of this.subs) {
      if (last === null && this.resume[session] !== undefined) this.subs.set(session, this.resume[session]!);
      this.sendSubscribe(session);
    }
    this.resume = {};
    for (const c of this.commands.values()) this.send(c.frame);
    this.scheduleRefresh(hello.expires_at);
  }

  private onError(e: ErrorFrame): void {
    // the envelope (docs/errors.md), or the top-level copies of a bridge from before it
    const code = e.error?.code ?? e.code;
    const retryAfter = e.error?.retry_after ?? e.retry_after;
    if (code === 'slow_consumer' && e.resume) this.resume = { ...e.resume };
    if (typeof retryAfter === 'number' && e.session === undefined) this.waitAtLeastMs = Math.max(this.waitAtLeastMs, retryAfter * 1000);
    if (code === 'busy' && e.session !== undefined && this.subs.has(e.session)) {
      // the subscribe was not opened: try again after retry_after, with jitter
      const session = e.session;
      const ms = (retryAfter ?? 1) * 1000 * (1 + this.opts.random());
      setTimeout(() => { if (this.state === 'connected' && this.subs.has(session)) this.sendSubscribe(session); }, ms);
    }
    if (e.id !== undefined && this.commands.has(String(e.id))) {
      // a command frame the bridge could not read (bad_message): answered, not re-sent
      const c = this.commands.get(String(e.id))!;
      this.commands.delete(String(e.id));
      c.reject(new Error(`${code}: ${e.error?.message ?? e.message}`));
    }
  }

  private answered(r: CommandResultFrame): void {
    const c = r.id !== undefined ? this.commands.get(String(r.id)) : undefined;
    if (c === undefined) return;
    this.commands.delete(String(r.id));
    c.resolve(r);
  }

  private onClose(ws: WebSocketLike, code: number, reason: string): void {
    if (ws !== this.ws) return;
    this.ws = null;
    this.clearRefresh();
    if (this.state === 'stopped') return;
    if (code === 4401) {
      this.stop(code, reason, true);
      return;
    }
    this.setState('disconnected');
    if (code === 4402) this.attempt = 0; // expired: a fresh token at once
    this.scheduleReconnect();
  }

  private scheduleReconnect(): void {
    if (this.state === 'stopped') return;
    this.setState('disconnected');
    const cap = Math.min(this.opts.maxMs, this.opts.baseMs * 2 ** this.attempt);
    const delay = Math.max(this.waitAtLeastMs, this.opts.random() * cap);
    this.attempt = Math.min(this.attempt + 1, 30);
    this.waitAtLeastMs = 0;
    this.timer = setTimeout(() => {
      this.timer = null;
      void this.open();
    }, delay);
  }

  private scheduleRefresh(expiresAt: number | null): void {
    this.clearRefresh();
    if (expiresAt === null) return;
    const left = expiresAt * 1000 - Date.now();
    const lead = Math.min(this.opts.refreshLeadMs, left / 2);
    this.refreshTimer = setTimeout(() => {
      this.refreshTimer = null;
      // A new connection with a new token, resumed from each session's last seq.
      const ws = this.ws;
      this.ws = null;
      ws?.close(1000, 'token refresh');
      this.attempt = 0;
      void this.open();
    }, Math.max(0, left - lead));
  }

  private clearRefresh(): void {
    if (this.refreshTimer !== null) clearTimeout(this.refreshTimer);
    this.refreshTimer = null;
  }

  private stop(code: number, reason: string, refused: boolean): void {
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
    this.clearRefresh();
    const ws = this.ws;
    this.ws = null;
    this.setState('stopped');
    ws?.close(1000, reason);
    const err = refused ? new BridgeSocketStopped(code, reason) : new Error('the socket was closed');
    for (const c of this.commands.values()) c.reject(err);
    this.commands.clear();
  }

  private sendSubscribe(session: string): void {
    const after = this.subs.get(session);
    this.send(after === null || after === undefined ? { op: 'subscribe', session } : { op: 'subscribe', session, after });
  }

  private send(frame: Record<string, unknown>): void {
    if (this.ws !== null && this.ws.readyState === 1) this.ws.send(JSON.stringify(frame));
  }
}
