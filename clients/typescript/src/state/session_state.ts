/**
 * `SessionState`: one session as a page shows it, folded from the frames of `GET /v1/ws` (pure: no I/O, no
 * timers). It applies the merge rules of docs/websocket.md §3:
 *
 * - durable `event`s in `seq` order, each once (a replayed or repeated seq is ignored), into the transcript
 *   the bridge's `GET /v1/sessions/{id}/transcript` gives for the same events (`TranscriptBuilder`);
 * - `delta`s appended to their part (keyed by part id, a tool's input by call id) until the durable end
 *   (`text:end`, `reasoning:end`, `tool:input-end`) replaces the text; a delta for an ended part is
 *   ignored; a new subscription drops half-streamed texts (what streamed before it is only in the end);
 * - `permission` and `question` frames by `request_id`, the latest state over the earlier ones (fields of
 *   the `asked` frame kept), a question also shown on its tool call;
 * - the last `status` (and `waiting`), the latest `todo` list and `diff` summary, `session_error`s, the
 *   bridge's legacy queue (`command` frames), the title (subscribed, `session:updated`).
 */
import type {
  CommandStateFrame, DiffItem, EventFrame, PermissionFrame, QuestionFrame, SessionErrorFrame, SessionFrame,
  TodoItem,
} from '../frames.js';
import { TranscriptBuilder, type Entry } from './transcript.js';

type Part = Record<string, unknown>;

export interface PendingRequests {
  permissions: PermissionFrame[];
  questions: QuestionFrame[];
}

export class SessionState {
  readonly session: string;
  /** The last durable seq applied (-1: none): subscribe with `after: lastSeq` to resume. */
  lastSeq = -1;
  status: string | null = null;
  statusReason: string | null = null;
  waiting: { for: string; since: string } | null = null;
  title: string | null = null;
  parentId: string | null = null;
  /** `false` when the bridge said its copy of the session has a hole (`subscribed.complete`). */
  complete = true;
  caughtUp = false;
  todos: TodoItem[] = [];
  diff: DiffItem[] = [];
  readonly errors: SessionErrorFrame[] = [];
  readonly commands = new Map<string, CommandStateFrame['state']>();
  readonly permissions = new Map<string, PermissionFrame>();
  readonly questions = new Map<string, QuestionFrame>();
  private builder = new TranscriptBuilder();
  /** Streamed text not yet ended: `t|r <part id>` or `i <call id>` → text so far. */
  private live = new Map<string, { text: string; message: string | null; kind: 'text' | 'reasoning' }>();
  private liveInput = new Map<string, string>();
  private ended = new Set<string>();
  private version = 0;

  constructor(session: string) {
    this.session = session;
  }

  /** Incremented by every frame that changed something (a page re-renders when it moves). */
  get revision(): number {
    return this.version;
  }

  /** Apply one frame of this session; returns whether anything changed. Frames of other sessions and
   * types without state are ignored. */
  apply(frame: SessionFrame | { type: string; session?: string }): boolean {
    if ('session' in frame && frame.session !== undefined && frame.session !== this.session) return false;
    const changed = this.fold(frame as SessionFrame);
    if (changed) this.version += 1;
    return changed;
  }

  private fold(f: SessionFrame): boolean {
    switch (f.type) {
      case 'subscribed':
        if (f.after === null) this.reset(); // the whole history is replayed: start over
        this.status = f.status;
        if (f.title !== undefined) this.title = f.title;
        if (f.parent_id !== undefined) this.parentId = f.parent_id;
        this.complete = f.complete;
        this.caughtUp = false;
        this.live.clear();
        this.liveInput.clear();
        return true;
      case 'caught_up':
        this.caughtUp = true;
        return true;
      case 'event':
        return this.event(f);
      case 'delta':
        return this.delta(f);
      case 'permission': {
        const prev = this.permissions.get(f.request_id);
        this.permissions.set(f.request_id, { ...prev, ...f });
        return true;
      }
      case 'question': {
        const prev = this.questions.get(f.request_id);
        this.questions.set(f.request_id, { ...prev, ...dropUndefined(f) } as QuestionFrame);
        return true;
      }
      case 'status':
        this.status = f.status;
        this.statusReason = f.reason;
        this.waiting = f.waiting ?? null;
        return true;
      case 'todo':
        this.todos = f.todos;
        return true;
      case 'diff':
        this.diff = f.diff;
        return true;
      case 'session_error':
        this.errors.push(f);
        return true;
      case 'command':
        this.commands.set(f.command_id, f.state);
        return true;
      default:
        return false;
    }
  }

  private reset(): void {
    this.builder = new TranscriptBuilder();
    this.ended.clear();
    this.lastSeq = -1;
  }

  private event(f: EventFrame): boolean {
    if (f.seq <= this.lastSeq) return false; // replayed again, or a seam: once
    this.lastSeq = f.seq;
    this.builder.add(f);
    const fl = f.fields ?? {};
    switch (f.kind) {
      case 'text:end':
      case 'reasoning:end':
        if (typeof fl.part_id === 'string') {
          this.live.delete(fl.part_id);
          this.ended.add(fl.part_id);
        }
        break;
      case 'tool:input-end':
      case 'tool:start':
        if (typeof fl.call_id === 'string') {
          this.liveInput.delete(fl.call_id);
          this.ended.add(`call ${fl.call_id}`);
        }
        break;
      case 'session:created':
      case 'session:updated':
        if (typeof fl.title === 'string') this.title = fl.title;
        if (typeof fl.parent_id === 'string') this.parentId = fl.parent_id;
        break;
      default:
    }
    return true;
  }

  private delta(f: Extract<SessionFrame, { type: 'delta' }>): boolean {
    if (f.kind === 'delta:tool-input') {
      if (!f.call_id || this.ended.has(`call ${f.call_id}`)) return false;
      this.liveInput.set(f.call_id, (this.liveInput.get(f.call_id) ?? '') + f.delta);
      return true;
    }
    if (!f.part_id || this.ended.has(f.part_id)) return false; // stale: the durable text is in
    const kind = f.kind === 'delta:reasoning' ? 'reasoning' : 'text';
    const cur = this.live.get(f.part_id);
    this.live.set(f.part_id, { text: (cur?.text ?? '') + f.delta, message: f.assistant_message_id ?? null, kind });
    return true;
  }

  /** The requests waiting for a person, oldest first. */
  pending(): PendingRequests {
    return {
      permissions: [...this.permissions.values()].filter((p) => p.state === 'asked'),
      questions: [...this.questions.values()].filter((q) => q.state === 'asked'),
    };
  }

  /**
   * The transcript a page renders: the bridge's entries for the durable events applied so far, questions on
   * their tool calls, and the texts still streaming in their parts (`complete: false`). Once every part has
   * ended it equals `GET /v1/sessions/{id}/transcript`. The entries are fresh objects only where a
   * streaming text is overlaid; treat them as read-only.
   */
  transcript(): Entry[] {
    for (const q of this.questions.values()) this.builder.addQuestion(q);
    const entries = this.builder.result();
    if (this.live.size === 0 && this.liveInput.size === 0) return entries;
    return this.overlay(entries);
  }

  private overlay(entries: Entry[]): Entry[] {
    const out = entries.map((e) => (e.type === 'assistant' ? { ...e, parts: [...(e.parts as Part[])] } : e));
    const steps = new Map(out.filter((e) => e.type === 'assistant').map((e) => [e.message_id ?? null, e]));
    for (const [partId, live] of this.live) {
      let step = steps.get(live.message);
      if (step === undefined) {
        step = { type: 'assistant', message_id: live.message, seq: this.lastSeq, agent: null, model: null, parts: [],
          finish: null, tokens: null, cost: null, error: null, interrupted: false, complete: false };
        steps.set(live.message, step);
        out.push(step);
      }
      const parts = step.parts as Part[];
      const i = parts.findIndex((p) => p.type === live.kind && p.id === partId);
      if (i >= 0) parts[i] = { ...parts[i], text: live.text };
      else parts.push({ type: live.kind, id: partId, text: live.text, complete: false });
    }
    for (const [callId, text] of this.liveInput) {
      for (const step of steps.values()) {
        const parts = step.parts as Part[];
        const i = parts.findIndex((p) => p.type === 'tool' && p.call_id === callId);
        if (i >= 0) parts[i] = { ...parts[i], input_text: text };
      }
    }
    return out;
  }
}

function dropUndefined<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}

/** Fold frames into a new state (convenience for tests and one-shot renders). */
export function reduce(session: string, frames: Iterable<SessionFrame>): SessionState {
  const s = new SessionState(session);
  for (const f of frames) s.apply(f);
  return s;
}
