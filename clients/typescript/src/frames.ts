/**
 * The frames of `GET /v1/ws` (docs/websocket.md §2), typed by hand from the documentation. Server frames
 * form a discriminated union on `type`; a client must ignore unknown types and fields, so `UnknownFrame`
 * is part of the union and every object is open.
 */

export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
export type JsonObject = { [key: string]: Json };

/** The normalized fields of an `event` (docs/websocket.md §2.2), only those present. */
export interface EventFields {
  timestamp_ms?: number;
  message_id?: string;
  assistant_message_id?: string;
  part_id?: string;
  call_id?: string;
  tool_name?: string;
  error_type?: string;
  error_message?: string;
  finish?: string;
  tokens_input?: number;
  tokens_output?: number;
  tokens_reasoning?: number;
  tokens_cache_read?: number;
  tokens_cache_write?: number;
  cost?: number;
  text?: string;
  delivery?: string;
  agent?: string;
  model_id?: string;
  provider_id?: string;
  input?: Json;
  output_text?: string;
  duration_ms?: number;
  child_session_id?: string;
  [key: string]: Json | undefined;
}

export interface HelloFrame {
  type: 'hello';
  upstream: string;
  sessions: string[] | null;
  expires_at: number | null;
  max_subscriptions: number;
  max_message_bytes: number;
  scope?: 'read' | 'prompt' | 'control';
  approve?: 'none' | 'once' | 'always';
}
export interface SubscribedFrame {
  type: 'subscribed';
  session: string;
  after: number | null;
  head: number;
  complete: boolean;
  status: string | null;
  title?: string | null;
  parent_id?: string | null;
  id?: string | number;
}
export interface EventFrame {
  type: 'event';
  session: string;
  seq: number;
  event_id: string;
  event_type: string;
  kind: string;
  fields: EventFields;
  data: JsonObject;
  truncated?: { bytes: number };
}
export interface CaughtUpFrame { type: 'caught_up'; session: string; seq: number }
export interface DeltaFrame {
  type: 'delta';
  session: string;
  kind: 'delta:text' | 'delta:reasoning' | 'delta:tool-input';
  after_seq: number;
  assistant_message_id?: string | null;
  part_id?: string | null;
  call_id?: string | null;
  delta: string;
}
export interface PermissionFrame {
  type: 'permission';
  session: string;
  state: 'asked' | 'replied';
  request_id: string;
  runtime: 'v2' | 'legacy';
  action?: string | null;
  assistant_message_id?: string | null;
  call_id?: string | null;
  resources?: string[];
  reply?: 'once' | 'always' | 'reject' | 'unknown';
  data?: JsonObject;
}
export interface QuestionOption { label: string; description?: string }
export interface QuestionItem {
  question: string;
  header?: string;
  multiple?: boolean;
  custom?: boolean;
  options?: QuestionOption[];
}
export interface QuestionFrame {
  type: 'question';
  session: string;
  request_id: string;
  state: 'asked' | 'answered' | 'rejected' | 'unknown';
  runtime: 'v2' | 'legacy';
  questions?: QuestionItem[] | null;
  call_id?: string | null;
  assistant_message_id?: string | null;
  asked_at?: string | null;
  answers?: string[][];
  answered_at?: string | null;
  answered_by?: string | null;
}
export interface StatusFrame {
  type: 'status';
  session: string;
  status: string;
  reason: string | null;
  waiting?: { for: 'permission' | 'question'; since: string };
}
export interface TodoItem { content?: string; status?: string; priority?: string; id?: string }
export interface DiffItem { file?: string; additions?: number; deletions?: number; status?: string }
export interface TodoFrame { type: 'todo'; session: string; todos: TodoItem[] }
export interface DiffFrame { type: 'diff'; session: string; diff: DiffItem[] }
export interface SessionErrorFrame { type: 'session_error'; session: string; error_type: string | null; error_message: string }
export interface SessionListItem {
  session: string;
  head: number;
  status: string | null;
  title: string | null;
  parent_id: string | null;
  last_event_at: string | null;
}
export interface SessionsFrame { type: 'sessions'; sessions: SessionListItem[]; next: string | null; id?: string | number }
export interface CommandResultFrame {
  type: 'command_result';
  id?: string | number;
  command: string;
  status: number;
  result?: JsonObject;
  error?: string | { code: string; message: string; [key: string]: Json };
  message?: string;
  retry_after?: number;
}
export interface CommandStateFrame {
  type: 'command';
  session: string;
  command: string;
  command_id: string;
  state: 'queued' | 'sent' | 'dropped';
}
export interface ErrorFrame {
  type: 'error';
  code: string;
  message: string;
  session?: string;
  id?: string | number;
  retry_after?: number;
  resume?: Record<string, number>;
  seq?: number;
}
export interface ReplyFrame { type: 'unsubscribed' | 'pong'; id?: string | number; session?: string }
/** A frame of a type this version does not know (clients ignore them; docs/websocket.md §2). */
export interface UnknownFrame { type: string & {}; [key: string]: unknown }

export type KnownFrame =
  | HelloFrame | SubscribedFrame | EventFrame | CaughtUpFrame | DeltaFrame | PermissionFrame | QuestionFrame
  | StatusFrame | TodoFrame | DiffFrame | SessionErrorFrame | SessionsFrame | CommandResultFrame
  | CommandStateFrame | ErrorFrame | ReplyFrame;
export type ServerFrame = KnownFrame;

/** Frames that belong to one session (what `SessionState.apply` folds). */
export type SessionFrame =
  | SubscribedFrame | EventFrame | CaughtUpFrame | DeltaFrame | PermissionFrame | QuestionFrame | StatusFrame
  | TodoFrame | DiffFrame | SessionErrorFrame | CommandStateFrame;

/** WebSocket command names of the `command` op (docs/commands.md). */
export type CommandName =
  | 'prompt' | 'interrupt' | 'model' | 'agent' | 'permission_reply' | 'create_session' | 'question_reply'
  | 'question_reject' | 'title' | 'revert' | 'unrevert' | 'fork' | 'slash_command';
