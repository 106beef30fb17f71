/* Generated from bridge/http/asyncapi.json (AsyncAPI 3.0.0, opencode-bridge WebSocket 1) by scripts/generate-frames.mjs: do not edit. */

/**
 * an upstream session id: `ses_` and 1 to 60 letters, digits or underscores
 *
 * This interface was referenced by `AsyncApiSchemas`'s JSON-Schema
 * via the `definition` "SessionId".
 */
export type SessionId = string;
/**
 * the client's `id`, echoed on the direct reply: a string of at most 100 characters or a finite number
 *
 * This interface was referenced by `AsyncApiSchemas`'s JSON-Schema
 * via the `definition` "Ref".
 */
export type Ref = string | number;
/**
 * The codes the bridge sends today, each explained once in docs/errors.md. Clients must accept codes not in this list and show the message.
 *
 * This interface was referenced by `AsyncApiSchemas`'s JSON-Schema
 * via the `definition` "ErrorCode".
 */
export type ErrorCode =
  | "bad_file"
  | "bad_host"
  | "bad_message"
  | "bad_origin"
  | "bad_request"
  | "busy"
  | "conflict"
  | "forbidden"
  | "internal"
  | "method_not_allowed"
  | "model_unavailable"
  | "not_found"
  | "not_subscribed"
  | "rate_limited"
  | "slow_consumer"
  | "token_expired"
  | "token_revoked"
  | "too_large"
  | "too_many_connections"
  | "too_many_subscriptions"
  | "unauthorized"
  | "unavailable"
  | "unknown_session"
  | "unsupported_media_type"
  | "upstream_unavailable";
/**
 * docs/lifecycle.md
 *
 * This interface was referenced by `AsyncApiSchemas`'s JSON-Schema
 * via the `definition` "Status".
 */
export type Status = "idle" | "running" | "retrying" | "stalled" | "interrupted" | "deleted" | "parked" | "waiting";
/**
 * the normalized kind (docs/websocket.md §2.2); clients must accept kinds not listed
 *
 * This interface was referenced by `AsyncApiSchemas`'s JSON-Schema
 * via the `definition` "Kind".
 */
export type Kind =
  | "agent:switch"
  | "command:executed"
  | "compaction"
  | "compaction:end"
  | "compaction:start"
  | "context:updated"
  | "delta:compaction"
  | "delta:reasoning"
  | "delta:text"
  | "delta:tool-input"
  | "file:attached"
  | "file:edited"
  | "legacy:message-updated"
  | "legacy:part-delta"
  | "legacy:part-updated"
  | "legacy:session-diff"
  | "legacy:session-error"
  | "legacy:session-idle"
  | "legacy:session-status"
  | "message:removed"
  | "model:switch"
  | "noise"
  | "part:removed"
  | "patch"
  | "permission:asked"
  | "permission:replied"
  | "prompt:admitted"
  | "prompt:started"
  | "prompt:synthetic"
  | "question:asked"
  | "question:rejected"
  | "question:replied"
  | "reasoning:end"
  | "reasoning:start"
  | "retry"
  | "revert:cleared"
  | "revert:committed"
  | "revert:staged"
  | "server:connected"
  | "server:heartbeat"
  | "session:compacted"
  | "session:created"
  | "session:deleted"
  | "session:moved"
  | "session:updated"
  | "shell:end"
  | "shell:start"
  | "step:end"
  | "step:fail"
  | "step:start"
  | "subtask"
  | "text:end"
  | "text:start"
  | "todo:updated"
  | "tool:fail"
  | "tool:input-end"
  | "tool:input-start"
  | "tool:start"
  | "tool:success"
  | "unknown";
/**
 * This interface was referenced by `AsyncApiSchemas`'s JSON-Schema
 * via the `definition` "Scope".
 */
export type Scope = "read" | "prompt" | "control";
/**
 * This interface was referenced by `AsyncApiSchemas`'s JSON-Schema
 * via the `definition` "Approve".
 */
export type Approve = "none" | "once" | "always";
/**
 * This interface was referenced by `AsyncApiSchemas`'s JSON-Schema
 * via the `definition` "Runtime".
 */
export type Runtime = "v2" | "legacy";
/**
 * chosen by the client: 1 to 100 printable ASCII characters, no leading or trailing space; the same id again returns the first result (docs/commands.md, "Exactly once")
 *
 * This interface was referenced by `AsyncApiSchemas`'s JSON-Schema
 * via the `definition` "CommandId".
 */
export type CommandId = string;
/**
 * printable ASCII without spaces, `/`, `?`, `#`, `%` or `\` (it ends up in upstream paths and logs)
 *
 * This interface was referenced by `AsyncApiSchemas`'s JSON-Schema
 * via the `definition` "Name".
 */
export type Name = string;
/**
 * an absolute, normalised path (no `.`/`..` segments, no `//`, no trailing `/`, no control or invisible format characters) at or under a root of BRIDGE_ALLOWED_DIRECTORIES
 *
 * This interface was referenced by `AsyncApiSchemas`'s JSON-Schema
 * via the `definition` "Directory".
 */
export type Directory = string;
/**
 * This interface was referenced by `AsyncApiSchemas`'s JSON-Schema
 * via the `definition` "CommandName".
 */
export type CommandName =
  | "prompt"
  | "interrupt"
  | "model"
  | "agent"
  | "permission_reply"
  | "question_reply"
  | "question_reject"
  | "create_session"
  | "title"
  | "revert"
  | "unrevert"
  | "fork"
  | "slash_command"
  | "erase";
/**
 * printable ASCII without spaces, `/`, `?`, `#`, `%` or `\` (it ends up in upstream paths and logs)
 */
export type Name1 = string;
/**
 * any frame the bridge sends, by its `type`
 *
 * This interface was referenced by `AsyncApiSchemas`'s JSON-Schema
 * via the `definition` "ServerFrame".
 */
export type ServerFrame =
  | Hello
  | Subscribed
  | Event
  | CaughtUp
  | Delta
  | Permission
  | Question
  | StatusFrame
  | Sessions
  | Unsubscribed
  | Pong
  | CommandResult
  | CommandNotice
  | ErrorFrame
  | Todo
  | Diff
  | SessionError
  | ErasedFrame;
/**
 * any frame a client sends, by its `op` (and `command`)
 *
 * This interface was referenced by `AsyncApiSchemas`'s JSON-Schema
 * via the `definition` "ClientOp".
 */
export type ClientOp =
  | SubscribeOp
  | UnsubscribeOp
  | PingOp
  | SessionsOp
  | CommandPromptOp
  | CommandInterruptOp
  | CommandModelOp
  | CommandAgentOp
  | CommandPermissionReplyOp
  | CommandQuestionReplyOp
  | CommandQuestionRejectOp
  | CommandCreateSessionOp
  | CommandTitleOp
  | CommandRevertOp
  | CommandUnrevertOp
  | CommandForkOp
  | CommandSlashCommandOp
  | CommandEraseOp;

export interface AsyncApiSchemas {
  SessionId?: SessionId;
  Ref?: Ref;
  ErrorCode?: ErrorCode;
  ErrorObject?: ErrorObject;
  Status?: Status;
  Kind?: Kind;
  Scope?: Scope;
  Approve?: Approve;
  Runtime?: Runtime;
  Hello?: Hello;
  Subscribed?: Subscribed;
  EventFields?: EventFields;
  Event?: Event;
  CaughtUp?: CaughtUp;
  Delta?: Delta;
  Permission?: Permission;
  QuestionItem?: QuestionItem;
  Question?: Question;
  StatusFrame?: StatusFrame;
  SessionEntry?: SessionEntry;
  Sessions?: Sessions;
  Unsubscribed?: Unsubscribed;
  Pong?: Pong;
  CommandId?: CommandId;
  Name?: Name;
  Directory?: Directory;
  SessionCreated?: SessionCreated;
  PromptAdmitted?: PromptAdmitted;
  Interrupted?: Interrupted;
  CommandDone?: CommandDone;
  PermissionReplied?: PermissionReplied;
  QuestionAnswered?: QuestionAnswered;
  CommandName?: CommandName;
  CommandResult?: CommandResult;
  CommandNotice?: CommandNotice;
  ErrorFrame?: ErrorFrame;
  TodoItem?: TodoItem;
  DiffItem?: DiffItem;
  Todo?: Todo;
  Diff?: Diff;
  SessionError?: SessionError;
  SubscribeOp?: SubscribeOp;
  UnsubscribeOp?: UnsubscribeOp;
  PingOp?: PingOp;
  SessionsOp?: SessionsOp;
  CommandPromptOp?: CommandPromptOp;
  CommandInterruptOp?: CommandInterruptOp;
  CommandModelOp?: CommandModelOp;
  CommandAgentOp?: CommandAgentOp;
  CommandPermissionReplyOp?: CommandPermissionReplyOp;
  CommandQuestionReplyOp?: CommandQuestionReplyOp;
  CommandQuestionRejectOp?: CommandQuestionRejectOp;
  CommandCreateSessionOp?: CommandCreateSessionOp;
  CommandTitleOp?: CommandTitleOp;
  CommandRevertOp?: CommandRevertOp;
  CommandUnrevertOp?: CommandUnrevertOp;
  CommandForkOp?: CommandForkOp;
  CommandSlashCommandOp?: CommandSlashCommandOp;
  ServerFrame?: ServerFrame;
  ClientOp?: ClientOp;
  CommandEraseOp?: CommandEraseOp;
  Erased?: Erased;
  ErasedFrame?: ErasedFrame;
}
/**
 * The one error envelope (docs/errors.md): the same object as `error` of a /v1 HTTP error answer.
 *
 * This interface was referenced by `AsyncApiSchemas`'s JSON-Schema
 * via the `definition` "ErrorObject".
 */
export interface ErrorObject {
  /**
   * stable, machine-readable; open
   */
  code: ErrorCode | string;
  /**
   * for people; never parsed
   */
  message: string;
  /**
   * the log line with the details carries the same id
   */
  correlation_id?: string;
  /**
   * seconds to wait before retrying
   */
  retry_after?: number;
  [k: string]: unknown;
}
/**
 * the first frame of every connection
 *
 * This interface was referenced by `AsyncApiSchemas`'s JSON-Schema
 * via the `definition` "Hello".
 */
export interface Hello {
  type: "hello";
  upstream: string;
  sessions: SessionId[] | null;
  expires_at: number | null;
  max_subscriptions: number;
  max_message_bytes: number;
  scope: Scope;
  approve: Approve;
}
/**
 * This interface was referenced by `AsyncApiSchemas`'s JSON-Schema
 * via the `definition` "Subscribed".
 */
export interface Subscribed {
  type: "subscribed";
  session: SessionId;
  after: number | null;
  head: number;
  complete: boolean;
  status: Status | null;
  title: string | null;
  parent_id: SessionId | null;
  id?: Ref;
}
/**
 * the normalized fields the kind carries (only present ones); the same for both runtimes. Open: new fields may be added.
 *
 * This interface was referenced by `AsyncApiSchemas`'s JSON-Schema
 * via the `definition` "EventFields".
 */
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
  output_text?: string;
  duration_ms?: number;
  title?: string;
  parent_id?: string;
  child_session_id?: string;
  filename?: string;
  mime?: string;
  url?: string;
  url_scheme?: string;
  hash?: string;
  files?: string[];
  [k: string]: unknown;
}
/**
 * one durable event, committed before it is sent
 *
 * This interface was referenced by `AsyncApiSchemas`'s JSON-Schema
 * via the `definition` "Event".
 */
export interface Event {
  type: "event";
  session: SessionId;
  seq: number;
  event_id: string;
  event_type: string;
  kind: Kind | string;
  fields: EventFields;
  /**
   * the upstream's data object (its shape is the upstream's, by event_type), less a text already in fields.text
   */
  data: {
    [k: string]: unknown;
  };
  truncated?: {
    bytes: number;
    [k: string]: unknown;
  };
}
/**
 * This interface was referenced by `AsyncApiSchemas`'s JSON-Schema
 * via the `definition` "CaughtUp".
 */
export interface CaughtUp {
  type: "caught_up";
  session: SessionId;
  seq: number;
}
/**
 * ephemeral: never stored, never replayed
 *
 * This interface was referenced by `AsyncApiSchemas`'s JSON-Schema
 * via the `definition` "Delta".
 */
export interface Delta {
  type: "delta";
  session: SessionId;
  kind: "delta:text" | "delta:reasoning" | "delta:tool-input";
  after_seq: number;
  assistant_message_id: string | null;
  part_id?: string | null;
  call_id?: string | null;
  delta: string;
}
/**
 * This interface was referenced by `AsyncApiSchemas`'s JSON-Schema
 * via the `definition` "Permission".
 */
export interface Permission {
  type: "permission";
  session: SessionId;
  state: "asked" | "replied";
  request_id: string;
  runtime: Runtime;
  data: {
    [k: string]: unknown;
  };
  reply?: "once" | "always" | "reject" | "unknown";
  action?: string | null;
  assistant_message_id?: string | null;
  call_id?: string | null;
  resources?: string[] | null;
}
/**
 * This interface was referenced by `AsyncApiSchemas`'s JSON-Schema
 * via the `definition` "QuestionItem".
 */
export interface QuestionItem {
  question: string;
  header?: string;
  multiple?: boolean;
  custom?: boolean;
  options?: {
    label: string;
    description?: string;
    [k: string]: unknown;
  }[];
  [k: string]: unknown;
}
/**
 * This interface was referenced by `AsyncApiSchemas`'s JSON-Schema
 * via the `definition` "Question".
 */
export interface Question {
  type: "question";
  session: SessionId;
  request_id: string;
  state: "asked" | "answered" | "rejected" | "unknown";
  runtime: Runtime;
  questions?: QuestionItem[] | null;
  call_id?: string | null;
  assistant_message_id?: string | null;
  asked_at?: string | null;
  answers?: string[][] | null;
  answered_at?: string | null;
  answered_by?: string | null;
}
/**
 * This interface was referenced by `AsyncApiSchemas`'s JSON-Schema
 * via the `definition` "StatusFrame".
 */
export interface StatusFrame {
  type: "status";
  session: SessionId;
  status: Status | string;
  reason: string | null;
  waiting?: {
    for: "permission" | "question";
    since: string;
    [k: string]: unknown;
  } | null;
}
/**
 * This interface was referenced by `AsyncApiSchemas`'s JSON-Schema
 * via the `definition` "SessionEntry".
 */
export interface SessionEntry {
  session: SessionId;
  head: number;
  status: string | null;
  title: string | null;
  parent_id: SessionId | null;
  last_event_at: string | null;
}
/**
 * This interface was referenced by `AsyncApiSchemas`'s JSON-Schema
 * via the `definition` "Sessions".
 */
export interface Sessions {
  type: "sessions";
  sessions: SessionEntry[];
  next: string | null;
  id?: Ref;
}
/**
 * This interface was referenced by `AsyncApiSchemas`'s JSON-Schema
 * via the `definition` "Unsubscribed".
 */
export interface Unsubscribed {
  type: "unsubscribed";
  session: SessionId;
  id?: Ref;
}
/**
 * This interface was referenced by `AsyncApiSchemas`'s JSON-Schema
 * via the `definition` "Pong".
 */
export interface Pong {
  type: "pong";
  id?: Ref;
}
/**
 * This interface was referenced by `AsyncApiSchemas`'s JSON-Schema
 * via the `definition` "SessionCreated".
 */
export interface SessionCreated {
  command_id: string;
  session_id: string;
  directory: string;
  [k: string]: unknown;
}
/**
 * This interface was referenced by `AsyncApiSchemas`'s JSON-Schema
 * via the `definition` "PromptAdmitted".
 */
export interface PromptAdmitted {
  command_id: string;
  /**
   * the upstream message id, derived from the command id
   */
  message_id: string;
  /**
   * seq of the session's `prompt.admitted` event (v2); null on the legacy runtime, which has no admission event
   */
  admitted_seq: number | null;
  delivery: "steer" | "queue";
  /**
   * the runtime that holds the session's conversation and took the prompt (docs/commands.md, "Runtime affinity")
   */
  runtime?: "legacy" | "v2";
  /**
   * why that runtime: the session's turns, its latest turn of a mixed history, or none yet (the serve's own clients' runtime, or BRIDGE_PROMPT_RUNTIME)
   */
  runtime_basis?: "history" | "mixed_history" | "no_turn";
  /**
   * present for a mixed history: which turns the model does not see
   */
  runtime_note?: string;
  /**
   * legacy runtime: `queued` in the bridge's own queue behind the running turn, sent when it ends (then `sent` on a retry, in the command list and as a WebSocket `command` frame)
   */
  state?: "sent" | "queued";
  [k: string]: unknown;
}
/**
 * This interface was referenced by `AsyncApiSchemas`'s JSON-Schema
 * via the `definition` "Interrupted".
 */
export interface Interrupted {
  command_id: string;
  session_id: string;
  /**
   * a legacy-driven (TUI) turn was running and was aborted with the legacy API
   */
  legacy_aborted: boolean;
  /**
   * with `drop_queued: true`: the command ids of the queued legacy prompts dropped (never sent)
   */
  dropped?: string[];
  [k: string]: unknown;
}
/**
 * model, agent and the session commands: the ids the client needs, never the upstream's whole answer (docs/commands.md, "Session commands")
 *
 * This interface was referenced by `AsyncApiSchemas`'s JSON-Schema
 * via the `definition` "CommandDone".
 */
export interface CommandDone {
  command_id: string;
  session_id: string;
  provider_id?: string;
  model_id?: string;
  agent?: string;
  /**
   * title: the new title
   */
  title?: string;
  /**
   * revert / unrevert: the session's revert mark afterwards (null: none)
   */
  revert?: {
    message_id: string | null;
    part_id: string | null;
    [k: string]: unknown;
  } | null;
  /**
   * fork: the new session's id
   */
  forked_session_id?: string | null;
  /**
   * slash_command: the slash command run
   */
  command?: string;
  /**
   * slash_command: the upstream message id of the turn it started (derived from the command id)
   */
  message_id?: string;
  [k: string]: unknown;
}
/**
 * This interface was referenced by `AsyncApiSchemas`'s JSON-Schema
 * via the `definition` "PermissionReplied".
 */
export interface PermissionReplied {
  command_id: string;
  session_id: string;
  request_id: string;
  reply: string;
  /**
   * which runtime took the reply; absent when it was answered before
   */
  runtime?: "v2" | "legacy";
  /**
   * false: the request was already answered (`reply` is the recorded one)
   */
  applied: boolean;
  [k: string]: unknown;
}
/**
 * This interface was referenced by `AsyncApiSchemas`'s JSON-Schema
 * via the `definition` "QuestionAnswered".
 */
export interface QuestionAnswered {
  command_id: string;
  session_id: string;
  request_id: string;
  /**
   * the runtime where the question was pending (its routes answered it)
   */
  runtime?: "v2" | "legacy";
  state: "answered" | "rejected" | "unknown";
  /**
   * as sent upstream (free-text entries as their text)
   */
  answers?: string[][];
  /**
   * false: the question was no longer pending (settled before; `state` says how)
   */
  applied: boolean;
  [k: string]: unknown;
}
/**
 * the answer to a `command` op: `result` (status < 300) or `error`
 *
 * This interface was referenced by `AsyncApiSchemas`'s JSON-Schema
 * via the `definition` "CommandResult".
 */
export interface CommandResult {
  type: "command_result";
  command: CommandName | string;
  status: number;
  /**
   * status < 300: the HTTP route's body (docs/commands.md)
   */
  result?: SessionCreated | PromptAdmitted | Interrupted | CommandDone | PermissionReplied | QuestionAnswered | Erased;
  error?: ErrorObject;
  id?: Ref;
}
/**
 * This interface was referenced by `AsyncApiSchemas`'s JSON-Schema
 * via the `definition` "Erased".
 */
export interface Erased {
  command_id: string;
  session_id: string;
  /**
   * the session and its subagents' sessions, each tombstoned
   */
  sessions: string[];
  /**
   * rows deleted from every table by this erasure
   */
  rows: number;
  already_erased: boolean;
  /**
   * null: not asked; false: the serve had no such session
   */
  upstream_deleted: boolean | null;
  [k: string]: unknown;
}
/**
 * a prompt in the bridge's legacy queue changed state (docs/commands.md)
 *
 * This interface was referenced by `AsyncApiSchemas`'s JSON-Schema
 * via the `definition` "CommandNotice".
 */
export interface CommandNotice {
  type: "command";
  session: SessionId;
  command: "prompt";
  command_id: string;
  state: "queued" | "sent" | "dropped";
}
/**
 * This interface was referenced by `AsyncApiSchemas`'s JSON-Schema
 * via the `definition` "ErrorFrame".
 */
export interface ErrorFrame {
  type: "error";
  error: ErrorObject;
  session?: SessionId;
  /**
   * @deprecated
   * deprecated: error.code
   */
  code: ErrorCode | string;
  /**
   * @deprecated
   * deprecated: error.message
   */
  message: string;
  /**
   * @deprecated
   * deprecated: error.retry_after
   */
  retry_after?: number;
  /**
   * slow_consumer: session → the last seq sent
   */
  resume?: {
    [k: string]: number;
  };
  id?: Ref;
}
/**
 * This interface was referenced by `AsyncApiSchemas`'s JSON-Schema
 * via the `definition` "TodoItem".
 */
export interface TodoItem {
  content?: string;
  status?: string;
  priority?: string;
  [k: string]: unknown;
}
/**
 * This interface was referenced by `AsyncApiSchemas`'s JSON-Schema
 * via the `definition` "DiffItem".
 */
export interface DiffItem {
  file?: string;
  additions?: number;
  deletions?: number;
  status?: string;
  [k: string]: unknown;
}
/**
 * This interface was referenced by `AsyncApiSchemas`'s JSON-Schema
 * via the `definition` "Todo".
 */
export interface Todo {
  type: "todo";
  session: SessionId;
  todos: TodoItem[];
}
/**
 * This interface was referenced by `AsyncApiSchemas`'s JSON-Schema
 * via the `definition` "Diff".
 */
export interface Diff {
  type: "diff";
  session: SessionId;
  diff: DiffItem[];
}
/**
 * This interface was referenced by `AsyncApiSchemas`'s JSON-Schema
 * via the `definition` "SessionError".
 */
export interface SessionError {
  type: "session_error";
  session: SessionId;
  error_type: string | null;
  error_message: string | null;
}
/**
 * replay after `after` (omitted: everything), then live
 *
 * This interface was referenced by `AsyncApiSchemas`'s JSON-Schema
 * via the `definition` "SubscribeOp".
 */
export interface SubscribeOp {
  op: "subscribe";
  id?: Ref;
  session: SessionId;
  after?: number;
  [k: string]: unknown;
}
/**
 * stop a subscription
 *
 * This interface was referenced by `AsyncApiSchemas`'s JSON-Schema
 * via the `definition` "UnsubscribeOp".
 */
export interface UnsubscribeOp {
  op: "unsubscribe";
  id?: Ref;
  session: SessionId;
  [k: string]: unknown;
}
/**
 * application-level check; answered by pong
 *
 * This interface was referenced by `AsyncApiSchemas`'s JSON-Schema
 * via the `definition` "PingOp".
 */
export interface PingOp {
  op: "ping";
  id?: Ref;
  [k: string]: unknown;
}
/**
 * a page of the stored sessions the token grants
 *
 * This interface was referenced by `AsyncApiSchemas`'s JSON-Schema
 * via the `definition` "SessionsOp".
 */
export interface SessionsOp {
  op: "sessions";
  id?: Ref;
  limit?: number;
  next?: string;
  parent?: SessionId | null;
  [k: string]: unknown;
}
/**
 * the command `prompt`: the body of POST /v1/sessions/{session_id}/prompt in the frame itself (docs/commands.md)
 *
 * This interface was referenced by `AsyncApiSchemas`'s JSON-Schema
 * via the `definition` "CommandPromptOp".
 */
export interface CommandPromptOp {
  op: "command";
  id?: Ref;
  command: "prompt";
  session: SessionId;
  command_id: CommandId;
  text: string;
  /**
   * required: the bridge never defaults to steer
   */
  delivery: "steer" | "queue";
  /**
   * attachments, images and text, at most 10 MiB in all (docs/commands.md, "Attachments")
   *
   * @maxItems 10
   */
  files?:
    | []
    | [
        | {
            [k: string]: unknown;
          }
        | {
            [k: string]: unknown;
          }
      ]
    | [
        (
          | {
              [k: string]: unknown;
            }
          | {
              [k: string]: unknown;
            }
        ),
        (
          | {
              [k: string]: unknown;
            }
          | {
              [k: string]: unknown;
            }
        )
      ]
    | [
        (
          | {
              [k: string]: unknown;
            }
          | {
              [k: string]: unknown;
            }
        ),
        (
          | {
              [k: string]: unknown;
            }
          | {
              [k: string]: unknown;
            }
        ),
        (
          | {
              [k: string]: unknown;
            }
          | {
              [k: string]: unknown;
            }
        )
      ]
    | [
        (
          | {
              [k: string]: unknown;
            }
          | {
              [k: string]: unknown;
            }
        ),
        (
          | {
              [k: string]: unknown;
            }
          | {
              [k: string]: unknown;
            }
        ),
        (
          | {
              [k: string]: unknown;
            }
          | {
              [k: string]: unknown;
            }
        ),
        (
          | {
              [k: string]: unknown;
            }
          | {
              [k: string]: unknown;
            }
        )
      ]
    | [
        (
          | {
              [k: string]: unknown;
            }
          | {
              [k: string]: unknown;
            }
        ),
        (
          | {
              [k: string]: unknown;
            }
          | {
              [k: string]: unknown;
            }
        ),
        (
          | {
              [k: string]: unknown;
            }
          | {
              [k: string]: unknown;
            }
        ),
        (
          | {
              [k: string]: unknown;
            }
          | {
              [k: string]: unknown;
            }
        ),
        (
          | {
              [k: string]: unknown;
            }
          | {
              [k: string]: unknown;
            }
        )
      ]
    | [
        (
          | {
              [k: string]: unknown;
            }
          | {
              [k: string]: unknown;
            }
        ),
        (
          | {
              [k: string]: unknown;
            }
          | {
              [k: string]: unknown;
            }
        ),
        (
          | {
              [k: string]: unknown;
            }
          | {
              [k: string]: unknown;
            }
        ),
        (
          | {
              [k: string]: unknown;
            }
          | {
              [k: string]: unknown;
            }
        ),
        (
          | {
              [k: string]: unknown;
            }
          | {
              [k: string]: unknown;
            }
        ),
        (
          | {
              [k: string]: unknown;
            }
          | {
              [k: string]: unknown;
            }
        )
      ]
    | [
        (
          | {
              [k: string]: unknown;
            }
          | {
              [k: string]: unknown;
            }
        ),
        (
          | {
              [k: string]: unknown;
            }
          | {
              [k: string]: unknown;
            }
        ),
        (
          | {
              [k: string]: unknown;
            }
          | {
              [k: string]: unknown;
            }
        ),
        (
          | {
              [k: string]: unknown;
            }
          | {
              [k: string]: unknown;
            }
        ),
        (
          | {
              [k: string]: unknown;
            }
          | {
              [k: string]: unknown;
            }
        ),
        (
          | {
              [k: string]: unknown;
            }
          | {
              [k: string]: unknown;
            }
        ),
        (
          | {
              [k: string]: unknown;
            }
          | {
              [k: string]: unknown;
            }
        )
      ]
    | [
        (
          | {
              [k: string]: unknown;
            }
          | {
              [k: string]: unknown;
            }
        ),
        (
          | {
              [k: string]: unknown;
            }
          | {
              [k: string]: unknown;
            }
        ),
        (
          | {
              [k: string]: unknown;
            }
          | {
              [k: string]: unknown;
            }
        ),
        (
          | {
              [k: string]: unknown;
            }
          | {
              [k: string]: unknown;
            }
        ),
        (
          | {
              [k: string]: unknown;
            }
          | {
              [k: string]: unknown;
            }
        ),
        (
          | {
              [k: string]: unknown;
            }
          | {
              [k: string]: unknown;
            }
        ),
        (
          | {
              [k: string]: unknown;
            }
          | {
              [k: string]: unknown;
            }
        ),
        (
          | {
              [k: string]: unknown;
            }
          | {
              [k: string]: unknown;
            }
        )
      ]
    | [
        (
          | {
              [k: string]: unknown;
            }
          | {
              [k: string]: unknown;
            }
        ),
        (
          | {
              [k: string]: unknown;
            }
          | {
              [k: string]: unknown;
            }
        ),
        (
          | {
              [k: string]: unknown;
            }
          | {
              [k: string]: unknown;
            }
        ),
        (
          | {
              [k: string]: unknown;
            }
          | {
              [k: string]: unknown;
            }
        ),
        (
          | {
              [k: string]: unknown;
            }
          | {
              [k: string]: unknown;
            }
        ),
        (
          | {
              [k: string]: unknown;
            }
          | {
              [k: string]: unknown;
            }
        ),
        (
          | {
              [k: string]: unknown;
            }
          | {
              [k: string]: unknown;
            }
        ),
        (
          | {
              [k: string]: unknown;
            }
          | {
              [k: string]: unknown;
            }
        ),
        (
          | {
              [k: string]: unknown;
            }
          | {
              [k: string]: unknown;
            }
        )
      ]
    | [
        (
          | {
              [k: string]: unknown;
            }
          | {
              [k: string]: unknown;
            }
        ),
        (
          | {
              [k: string]: unknown;
            }
          | {
              [k: string]: unknown;
            }
        ),
        (
          | {
              [k: string]: unknown;
            }
          | {
              [k: string]: unknown;
            }
        ),
        (
          | {
              [k: string]: unknown;
            }
          | {
              [k: string]: unknown;
            }
        ),
        (
          | {
              [k: string]: unknown;
            }
          | {
              [k: string]: unknown;
            }
        ),
        (
          | {
              [k: string]: unknown;
            }
          | {
              [k: string]: unknown;
            }
        ),
        (
          | {
              [k: string]: unknown;
            }
          | {
              [k: string]: unknown;
            }
        ),
        (
          | {
              [k: string]: unknown;
            }
          | {
              [k: string]: unknown;
            }
        ),
        (
          | {
              [k: string]: unknown;
            }
          | {
              [k: string]: unknown;
            }
        ),
        (
          | {
              [k: string]: unknown;
            }
          | {
              [k: string]: unknown;
            }
        )
      ];
  [k: string]: unknown;
}
/**
 * the command `interrupt`: the body of POST /v1/sessions/{session_id}/interrupt in the frame itself (docs/commands.md)
 *
 * This interface was referenced by `AsyncApiSchemas`'s JSON-Schema
 * via the `definition` "CommandInterruptOp".
 */
export interface CommandInterruptOp {
  op: "command";
  id?: Ref;
  command: "interrupt";
  session: SessionId;
  command_id: CommandId;
  /**
   * also drop the prompts waiting in the bridge's legacy queue (kept otherwise)
   */
  drop_queued?: boolean;
  [k: string]: unknown;
}
/**
 * the command `model`: the body of POST /v1/sessions/{session_id}/model in the frame itself (docs/commands.md)
 *
 * This interface was referenced by `AsyncApiSchemas`'s JSON-Schema
 * via the `definition` "CommandModelOp".
 */
export interface CommandModelOp {
  op: "command";
  id?: Ref;
  command: "model";
  session: SessionId;
  command_id: CommandId;
  provider_id: Name;
  model_id: Name;
  [k: string]: unknown;
}
/**
 * the command `agent`: the body of POST /v1/sessions/{session_id}/agent in the frame itself (docs/commands.md)
 *
 * This interface was referenced by `AsyncApiSchemas`'s JSON-Schema
 * via the `definition` "CommandAgentOp".
 */
export interface CommandAgentOp {
  op: "command";
  id?: Ref;
  command: "agent";
  session: SessionId;
  command_id: CommandId;
  agent: Name;
  [k: string]: unknown;
}
/**
 * the command `permission_reply`: the body of POST /v1/sessions/{session_id}/permissions/{request_id}/reply in the frame itself (docs/commands.md)
 *
 * This interface was referenced by `AsyncApiSchemas`'s JSON-Schema
 * via the `definition` "CommandPermissionReplyOp".
 */
export interface CommandPermissionReplyOp {
  op: "command";
  id?: Ref;
  command: "permission_reply";
  session: SessionId;
  request_id: string;
  command_id: CommandId;
  reply: "once" | "always" | "reject";
  [k: string]: unknown;
}
/**
 * the command `question_reply`: the body of POST /v1/sessions/{session_id}/questions/{request_id}/reply in the frame itself (docs/commands.md)
 *
 * This interface was referenced by `AsyncApiSchemas`'s JSON-Schema
 * via the `definition` "CommandQuestionReplyOp".
 */
export interface CommandQuestionReplyOp {
  op: "command";
  id?: Ref;
  command: "question_reply";
  session: SessionId;
  request_id: string;
  command_id: CommandId;
  /**
   * one list per question, in order: exactly one entry for a single-choice question, at least one (no repeats) for a `multiple` one. An entry is the `label` of one of the question's options, or `{"text": "..."}` (free text) where the question's `custom` is not false; a string naming no option is a 400 (docs/commands.md, "Questions")
   *
   * @minItems 1
   * @maxItems 50
   */
  answers: [
    (
      | string
      | {
          text: string;
        }
    )[],
    ...(
      | string
      | {
          text: string;
        }
    )[][]
  ];
  [k: string]: unknown;
}
/**
 * the command `question_reject`: the body of POST /v1/sessions/{session_id}/questions/{request_id}/reject in the frame itself (docs/commands.md)
 *
 * This interface was referenced by `AsyncApiSchemas`'s JSON-Schema
 * via the `definition` "CommandQuestionRejectOp".
 */
export interface CommandQuestionRejectOp {
  op: "command";
  id?: Ref;
  command: "question_reject";
  session: SessionId;
  request_id: string;
  command_id: CommandId;
  [k: string]: unknown;
}
/**
 * the command `create_session`: the body of POST /v1/sessions in the frame itself (docs/commands.md)
 *
 * This interface was referenced by `AsyncApiSchemas`'s JSON-Schema
 * via the `definition` "CommandCreateSessionOp".
 */
export interface CommandCreateSessionOp {
  op: "command";
  id?: Ref;
  command: "create_session";
  command_id: CommandId;
  directory: Directory;
  provider_id?: Name;
  model_id?: Name;
  agent?: Name;
  /**
   * the session's model: `"provider/model"` or `{provider_id, model_id}` (or `provider_id` + `model_id` at the top level)
   */
  model?:
    | string
    | {
        provider_id?: Name;
        model_id?: Name;
        [k: string]: unknown;
      }
    | null;
  [k: string]: unknown;
}
/**
 * the command `title`: the body of POST /v1/sessions/{session_id}/title in the frame itself (docs/commands.md)
 *
 * This interface was referenced by `AsyncApiSchemas`'s JSON-Schema
 * via the `definition` "CommandTitleOp".
 */
export interface CommandTitleOp {
  op: "command";
  id?: Ref;
  command: "title";
  session: SessionId;
  command_id: CommandId;
  title: string;
  [k: string]: unknown;
}
/**
 * the command `revert`: the body of POST /v1/sessions/{session_id}/revert in the frame itself (docs/commands.md)
 *
 * This interface was referenced by `AsyncApiSchemas`'s JSON-Schema
 * via the `definition` "CommandRevertOp".
 */
export interface CommandRevertOp {
  op: "command";
  id?: Ref;
  command: "revert";
  session: SessionId;
  command_id: CommandId;
  message_id: Name;
  [k: string]: unknown;
}
/**
 * the command `unrevert`: the body of POST /v1/sessions/{session_id}/unrevert in the frame itself (docs/commands.md)
 *
 * This interface was referenced by `AsyncApiSchemas`'s JSON-Schema
 * via the `definition` "CommandUnrevertOp".
 */
export interface CommandUnrevertOp {
  op: "command";
  id?: Ref;
  command: "unrevert";
  session: SessionId;
  command_id: CommandId;
  [k: string]: unknown;
}
/**
 * the command `fork`: the body of POST /v1/sessions/{session_id}/fork in the frame itself (docs/commands.md)
 *
 * This interface was referenced by `AsyncApiSchemas`'s JSON-Schema
 * via the `definition` "CommandForkOp".
 */
export interface CommandForkOp {
  op: "command";
  id?: Ref;
  command: "fork";
  session: SessionId;
  command_id: CommandId;
  message_id?: Name;
  [k: string]: unknown;
}
/**
 * the command `slash_command`: the body of POST /v1/sessions/{session_id}/command in the frame itself (docs/commands.md)
 *
 * This interface was referenced by `AsyncApiSchemas`'s JSON-Schema
 * via the `definition` "CommandSlashCommandOp".
 */
export interface CommandSlashCommandOp {
  op: "command";
  id?: Ref;
  command: "slash_command";
  session: SessionId;
  command_id: CommandId;
  arguments?: string;
  name: Name1;
  [k: string]: unknown;
}
/**
 * the session was erased from the mirror (docs/lifecycle.md "Erasure"): the subscription's last frame; a later subscribe is answered with it too
 *
 * This interface was referenced by `AsyncApiSchemas`'s JSON-Schema
 * via the `definition` "ErasedFrame".
 */
export interface ErasedFrame {
  type: "erased";
  session: SessionId;
  id?: Ref;
}
/**
 * the command `erase`: the body of DELETE /v1/sessions/{session_id}/mirror in the frame itself (docs/lifecycle.md "Erasure")
 *
 * This interface was referenced by `AsyncApiSchemas`'s JSON-Schema
 * via the `definition` "CommandEraseOp".
 */
export interface CommandEraseOp {
  op: "command";
  id?: Ref;
  command: "erase";
  session: SessionId;
  command_id: CommandId;
  /**
   * why (kept in the tombstone and the command row)
   */
  reason: string;
  /**
   * also delete the session on the serve (`DELETE /session/{id}`)
   */
  upstream?: boolean;
  [k: string]: unknown;
}
