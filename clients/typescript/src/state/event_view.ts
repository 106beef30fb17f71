/**
 * What the transcript reads of one `event` frame, whichever runtime wrote it (pure). The frame's `fields`
 * are the same for both runtimes (docs/websocket.md §2.3); the few values the transcript shows verbatim
 * (an error envelope, token counts, a tool's result) sit in `data`, whose shape is the runtime's: a v2
 * event's `data`, or a legacy `message.updated` / `message.part.updated` (`{info}` / `{part, time}`).
 */
import type { EventFrame, Json, JsonObject } from '../frames.js';

const INTERRUPT_MESSAGES = new Set(['Provider turn interrupted', 'Tool execution interrupted']);
const ABORTED_ERROR = 'MessageAbortedError';

export function obj(v: unknown): JsonObject {
  return v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as JsonObject) : {};
}
function isObj(v: unknown): v is JsonObject {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}
const num = (v: unknown): number | null => (typeof v === 'number' && Number.isInteger(v) ? v : null);

export class EventView {
  readonly seq: number;
  readonly kind: string;
  readonly f: EventFrame['fields'];
  readonly data: JsonObject;
  readonly legacy: boolean;
  readonly type: string;

  constructor(frame: EventFrame) {
    this.seq = frame.seq;
    this.kind = frame.kind;
    this.f = frame.fields ?? {};
    this.data = (frame.data ?? {}) as JsonObject;
    this.type = frame.event_type;
    this.legacy = frame.event_type === 'message.updated' || frame.event_type === 'message.part.updated';
  }

  str(name: string): string | null {
    const v = this.f[name];
    return typeof v === 'string' ? v : null;
  }
  get messageId(): string | null { return this.str('message_id'); }
  get assistantMessageId(): string | null { return this.str('assistant_message_id'); }
  get partId(): string | null { return this.str('part_id'); }
  get callId(): string | null { return this.str('call_id'); }
  get toolName(): string | null { return this.str('tool_name'); }
  get text(): string | null { return this.str('text'); }
  get delivery(): string | null { return this.str('delivery'); }
  get agent(): string | null { return this.str('agent'); }
  get finish(): string | null { return this.str('finish'); }
  get timestampMs(): number | null { return num(this.f.timestamp_ms); }

  /** The legacy part of a `message.part.updated` (empty otherwise). */
  private get part(): JsonObject {
    return this.type === 'message.part.updated' ? obj(this.data.part) : {};
  }

  get error(): Json {
    if (!this.legacy) return this.data.error ?? null;
    const t = this.str('error_type'), m = this.str('error_message');
    return t === null && m === null ? null : { type: t, message: m };
  }
  get interrupted(): boolean {
    if (this.legacy) return this.str('error_type') === ABORTED_ERROR;
    const e = this.data.error;
    return isObj(e) && typeof e.message === 'string' && INTERRUPT_MESSAGES.has(e.message);
  }
  get tokens(): Json {
    if (!this.legacy) return this.data.tokens ?? null;
    if (this.kind !== 'step:end') return null;
    const n = (k: string): Json => (this.f[k] as Json | undefined) ?? null;
    return { input: n('tokens_input'), output: n('tokens_output'), reasoning: n('tokens_reasoning'),
      cache: { read: n('tokens_cache_read'), write: n('tokens_cache_write') } };
  }
  get reportedCost(): Json {
    if (!this.legacy) return this.data.cost ?? null;
    return this.kind === 'step:end' ? this.part.cost ?? null : null;
  }
  get model(): Json {
    if (this.legacy) {
      if (this.type !== 'message.updated' || this.assistantMessageId === null) return null;
      return { provider: this.str('provider_id'), id: this.str('model_id') };
    }
    const m = this.data.model;
    return isObj(m) ? { provider: m.providerID ?? null, id: m.id ?? null } : null;
  }
  get switchedModel(): Json { return this.legacy ? null : this.data.model ?? null; }
  /** `tool:*` only: the frame carries the resolved input when the event has it. */
  get toolInput(): Json { return (this.f.input ?? null) as Json; }
  get toolOutputText(): string | null { return this.str('output_text'); }
  get toolContent(): Json { return this.legacy ? null : this.data.content ?? null; }
  get toolStructured(): Json {
    if (!this.legacy) return this.data.structured ?? null;
    const state = obj(this.part.state);
    return isObj(state.metadata) && state.status === 'completed' ? state.metadata : null;
  }
  get toolResult(): Json { return this.legacy ? null : this.data.result ?? null; }
  /** When the tool ran, if the event says so itself (legacy parts do; v2 times each event). */
  get toolSpanMs(): [number | null, number | null] | null {
    if (!this.legacy) return null;
    const part = this.part;
    if (part.type !== 'tool') return null;
    const time = obj(obj(part.state).time);
    if (Object.keys(time).length === 0) return null;
    return [num(time.start), num(time.end)];
  }
  /** The session's `info.revert` on `session:updated` (`undefined`: the event has no `info`). */
  get revert(): Json | undefined {
    if (!isObj(this.data.info)) return undefined;
    return (this.f.revert as Json | undefined) ?? null;
  }
}
