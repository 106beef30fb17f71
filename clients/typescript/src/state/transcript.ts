/**
 * The conversation of a session folded from its `event` frames (pure): the same entries, field for field,
 * as the bridge's `GET /v1/sessions/{id}/transcript` (docs/audit.md) for the same events — user prompts,
 * assistant steps with their parts (text, reasoning, tool calls), agent/model switches, the session's
 * content (attachments, synthetic text, patches, subtasks, shell runs), removal and undo marks. Checked
 * against the bridge's own builder on the captures (test/vectors/, made by tests/support/ts_vectors.py).
 */
import type { EventFrame, Json } from '../frames.js';
import { EventView } from './event_view.js';

export type Entry = { type: string; seq?: number; message_id?: string | null; [key: string]: unknown };
type Part = Record<string, unknown>;

/** A map key for an id that may be missing (the bridge keys such parts under one "None"). */
const key = (id: string | null): string => (id === null ? '\u0000none' : id);

/** The content fields each content kind carries in `fields` (docs/websocket.md §2.3.1). */
const CONTENT_KEYS: Record<string, readonly string[]> = {
  'file:attached': ['filename', 'mime', 'url', 'url_scheme', 'inline_bytes', 'source'],
  patch: ['hash', 'files'],
  subtask: ['prompt', 'description', 'agent', 'command'],
  compaction: ['auto', 'reason', 'summary'],
  'compaction:start': ['auto', 'reason', 'summary'],
  'compaction:end': ['auto', 'reason', 'summary'],
  retry: ['attempt', 'retry_error'],
  'shell:start': ['command', 'output'],
  'shell:end': ['command', 'output'],
};

function contentFields(ev: EventView): Part {
  const out: Part = {};
  for (const k of CONTENT_KEYS[ev.kind] ?? []) {
    const v = ev.f[k];
    if (v !== undefined && v !== null) out[k] = v;
  }
  return out;
}

function sameJson(a: unknown, b: unknown): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

export class TranscriptBuilder {
  readonly entries: Entry[] = [];
  readonly prompts = new Map<string, Entry>();
  readonly steps = new Map<string, Entry>();
  readonly tools = new Map<string, Part>();
  readonly texts = new Map<string, Part>();
  private readonly removedMessages = new Map<string, number>();
  private readonly removedParts = new Map<string, number>();
  private revert: Json = null;
  private readonly contentParts = new Map<string, Part>();

  add(frame: EventFrame): void {
    const ev = new EventView(frame);
    const handler = HANDLERS[ev.kind];
    if (handler) handler(this, ev.seq, ev);
    if (ev.kind === 'tool:start' || ev.kind === 'tool:success' || ev.kind === 'tool:fail') toolChild(this, ev);
  }

  /** A `question` frame put on its tool call, as the bridge's transcript does (docs/audit.md). */
  addQuestion(q: { call_id?: string | null }): void {
    const tool = this.tools.get(key(q.call_id ?? null));
    if (tool === undefined) return;
    const pick = (k: string): unknown => (q as Record<string, unknown>)[k] ?? null;
    tool.question = Object.fromEntries(
      ['request_id', 'state', 'answers', 'answered_by', 'asked_at', 'answered_at'].map((k) => [k, pick(k)]),
    );
  }

  step(messageId: string | null, seq: number): Entry {
    let entry = this.steps.get(key(messageId));
    if (entry === undefined) {
      entry = { type: 'assistant', message_id: messageId, seq, agent: null, model: null, parts: [], finish: null,
        tokens: null, cost: null, error: null, interrupted: false, complete: false };
      this.steps.set(key(messageId), entry);
      this.entries.push(entry);
    }
    return entry;
  }

  prompt(messageId: string | null, seq: number): Entry {
    let entry = this.prompts.get(key(messageId));
    if (entry === undefined) {
      entry = { type: 'user', message_id: messageId, seq, text: null, delivery: null, started_seq: null, time_ms: null };
      this.prompts.set(key(messageId), entry);
      this.entries.push(entry);
    }
    return entry;
  }

  part(kind: string, seq: number, ev: EventView): Part {
    const k = `${kind}\u0000${key(ev.partId)}`;
    let part = this.texts.get(k);
    if (part === undefined) {
      part = { type: kind, id: ev.partId, text: null, complete: false };
      this.texts.set(k, part);
      (this.step(ev.assistantMessageId, seq).parts as Part[]).push(part);
    }
    return part;
  }

  tool(seq: number, ev: EventView): Part {
    let tool = this.tools.get(key(ev.callId));
    if (tool === undefined) {
      tool = { type: 'tool', call_id: ev.callId, tool: ev.toolName, input: null, input_text: null, status: 'pending',
        output: null, output_text: null, structured: null, error: null, interrupted: false, started_ms: null,
        ended_ms: null, duration_ms: null };
      this.tools.set(key(ev.callId), tool);
      (this.step(ev.assistantMessageId, seq).parts as Part[]).push(tool);
    }
    return tool;
  }

  markRemovedMessage(id: string, seq: number): void {
    if (!this.removedMessages.has(id)) this.removedMessages.set(id, seq);
  }
  markRemovedPart(id: string, seq: number): void {
    if (!this.removedParts.has(id)) this.removedParts.set(id, seq);
  }
  setRevert(revert: Json): void {
    if (!sameJson(revert, this.revert)) this.revert = revert;
  }
  keepContentPart(id: string | null, part: Part): void {
    if (id !== null) this.contentParts.set(id, part);
  }

  /** The entries with removal and undo marked (idempotent). Shares its objects with the builder. */
  result(): Entry[] {
    for (const [id, seq] of this.removedParts) {
      const part = this.contentParts.get(id);
      if (part !== undefined) Object.assign(part, { removed: true, removed_seq: seq });
    }
    const from = this.revert !== null && typeof this.revert === 'object' && !Array.isArray(this.revert)
      ? ((this.revert as Record<string, Json>).message_id ?? null) : null;
    let after = false;
    for (const entry of this.entries) {
      delete entry.reverted;
      const mid = entry.message_id;
      const removed = mid !== undefined && mid !== null ? this.removedMessages.get(mid) : undefined;
      if (removed !== undefined) Object.assign(entry, { removed: true, removed_seq: removed });
      if (from !== null && mid === from && !after) {
        after = true;
        entry.reverted = 'from_here';
      } else if (after) {
        entry.reverted = true;
      }
    }
    return this.entries;
  }
}

type Handler = (b: TranscriptBuilder, seq: number, ev: EventView) => void;

function timed(tool: Part, ev: EventView, start: boolean): void {
  const span = ev.toolSpanMs;
  if (span !== null) {
    if (span[0] !== null) tool.started_ms = span[0];
    if (span[1] !== null) tool.ended_ms = span[1];
  } else if (start) {
    tool.started_ms = ev.timestampMs;
  } else {
    tool.ended_ms = ev.timestampMs;
  }
  const begun = tool.started_ms as number | null, ended = tool.ended_ms as number | null;
  tool.duration_ms = begun !== null && ended !== null && ended >= begun ? ended - begun : null;
}

function promptAdmitted(b: TranscriptBuilder, seq: number, ev: EventView): void {
  const placeholder = b.prompts.get(key(ev.messageId));
  if (placeholder !== undefined && placeholder.text === null) { // its attachments came first
    Object.assign(placeholder, { text: ev.text, delivery: ev.delivery, time_ms: ev.timestampMs });
    return;
  }
  const entry: Entry = { type: 'user', message_id: ev.messageId, seq, text: ev.text, delivery: ev.delivery,
    started_seq: null, time_ms: ev.timestampMs };
  b.prompts.set(key(ev.messageId), entry);
  b.entries.push(entry);
}

function toolEnd(b: TranscriptBuilder, seq: number, ev: EventView): Part {
  const tool = b.tool(seq, ev);
  if (tool.input === null) tool.input = ev.toolInput; // a call first seen ended (legacy) still shows its input
  tool.tool = tool.tool || ev.toolName;
  timed(tool, ev, false);
  return tool;
}

function ownerId(ev: EventView): string | null {
  return ev.messageId ?? ev.assistantMessageId;
}

function contentPart(b: TranscriptBuilder, seq: number, ev: EventView): void {
  const owner = ownerId(ev);
  const part: Part = { type: ev.kind, id: ev.partId, seq, ...contentFields(ev) };
  const prompt = b.prompts.get(key(owner));
  if (prompt !== undefined && !b.steps.has(key(owner))) {
    ((prompt.parts ??= []) as Part[]).push(part);
  } else {
    (b.step(owner, seq).parts as Part[]).push(part);
  }
  b.keepContentPart(ev.partId, part);
}

function toolChild(b: TranscriptBuilder, ev: EventView): void {
  const child = ev.str('child_session_id');
  const tool = b.tools.get(key(ev.callId));
  if (child !== null && tool !== undefined) tool.child_session_id = child;
}

const HANDLERS: Record<string, Handler> = {
  'prompt:admitted': promptAdmitted,
  'prompt:started': (b, seq, ev) => {
    if (!b.prompts.has(key(ev.messageId))) promptAdmitted(b, seq, ev);
    b.prompts.get(key(ev.messageId))!.started_seq = seq;
  },
  'step:start': (b, seq, ev) => {
    Object.assign(b.step(ev.assistantMessageId, seq), { agent: ev.agent, model: ev.model, time_ms: ev.timestampMs });
    const prompt = ev.messageId !== null ? b.prompts.get(ev.messageId) : undefined;
    if (prompt !== undefined && prompt.started_seq === null) prompt.started_seq = seq; // legacy: no prompt:started
  },
  'step:end': (b, seq, ev) => {
    Object.assign(b.step(ev.assistantMessageId, seq), { finish: ev.finish, tokens: ev.tokens, cost: ev.reportedCost,
      complete: true, end_seq: seq });
  },
  'step:fail': (b, seq, ev) => {
    const entry = b.step(ev.assistantMessageId, seq);
    Object.assign(entry, { finish: 'error', error: ev.error, complete: true, end_seq: seq });
    entry.interrupted = Boolean(entry.interrupted) || ev.interrupted;
  },
  'text:start': (b, seq, ev) => { b.part('text', seq, ev); },
  'text:end': (b, seq, ev) => { Object.assign(b.part('text', seq, ev), { text: ev.text, complete: true }); },
  'reasoning:start': (b, seq, ev) => { b.part('reasoning', seq, ev); },
  'reasoning:end': (b, seq, ev) => { Object.assign(b.part('reasoning', seq, ev), { text: ev.text, complete: true }); },
  'tool:input-start': (b, seq, ev) => { b.tool(seq, ev); },
  'tool:input-end': (b, seq, ev) => { b.tool(seq, ev).input_text = ev.text; },
  'tool:start': (b, seq, ev) => {
    const tool = b.tool(seq, ev);
    Object.assign(tool, { tool: ev.toolName || tool.tool, input: ev.toolInput, status: 'running' });
    timed(tool, ev, true);
  },
  'tool:success': (b, seq, ev) => {
    Object.assign(toolEnd(b, seq, ev), { status: 'success', output: ev.toolContent, output_text: ev.toolOutputText,
      structured: ev.toolStructured });
  },
  'tool:fail': (b, seq, ev) => {
    Object.assign(toolEnd(b, seq, ev), { status: 'failed', error: ev.error, interrupted: ev.interrupted,
      output: ev.toolResult });
    if (ev.interrupted) b.step(ev.assistantMessageId, seq).interrupted = true;
  },
  'agent:switch': (b, seq, ev) => { b.entries.push({ type: 'agent_switch', seq, agent: ev.agent }); },
  'model:switch': (b, seq, ev) => { b.entries.push({ type: 'model_switch', seq, model: ev.switchedModel }); },
  'prompt:synthetic': (b, seq, ev) => {
    const part: Part = { id: ev.partId, seq, text: ev.text };
    ((b.prompt(ownerId(ev), seq).synthetic ??= []) as Part[]).push(part);
    b.keepContentPart(ev.partId, part);
  },
  'file:attached': (b, seq, ev) => {
    const owner = ownerId(ev);
    if (b.steps.has(key(owner))) { contentPart(b, seq, ev); return; } // a file a tool or the model produced
    const part: Part = { id: ev.partId, seq, ...contentFields(ev) };
    ((b.prompt(owner, seq).attachments ??= []) as Part[]).push(part);
    b.keepContentPart(ev.partId, part);
  },
  patch: contentPart,
  subtask: contentPart,
  compaction: contentPart,
  retry: contentPart,
  'shell:start': (b, seq, ev) => { b.entries.push({ type: ev.kind, seq, ...contentFields(ev) }); },
  'shell:end': (b, seq, ev) => { b.entries.push({ type: ev.kind, seq, ...contentFields(ev) }); },
  'compaction:end': (b, seq, ev) => { b.entries.push({ type: ev.kind, seq, ...contentFields(ev) }); },
  'message:removed': (b, seq, ev) => { if (ev.messageId !== null) b.markRemovedMessage(ev.messageId, seq); },
  'part:removed': (b, seq, ev) => { if (ev.partId !== null) b.markRemovedPart(ev.partId, seq); },
  'session:updated': (b, _seq, ev) => {
    const revert = ev.revert;
    if (revert !== undefined) b.setRevert(revert);
  },
  'legacy:part-updated': (b, _seq, ev) => { toolChild(b, ev); },
};

/** The transcript of a session's `event` frames (any order; folded in seq order), and its `question`
 * frames on their tool calls. */
export function buildTranscript(frames: readonly EventFrame[], questions: readonly { call_id?: string | null }[] = []): Entry[] {
  const b = new TranscriptBuilder();
  for (const f of [...frames].sort((x, y) => x.seq - y.seq)) b.add(f);
  for (const q of questions) b.addQuestion(q);
  return b.result();
}
