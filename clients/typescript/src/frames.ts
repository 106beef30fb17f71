/**
 * The frames of `GET /v1/ws` (docs/websocket.md §2): the types generated from the bridge's AsyncAPI document
 * (src/gen-ws/frames.gen.ts, `bridge/http/asyncapi.json`) under the names this package uses. Server frames
 * form a discriminated union on `type`; a client must ignore unknown types and fields.
 */
import type * as G from './gen-ws/frames.gen.js';

export type * as AsyncApi from './gen-ws/frames.gen.js';

export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
export type JsonObject = { [key: string]: Json };

export type EventFields = G.EventFields;
export type HelloFrame = G.Hello;
export type SubscribedFrame = G.Subscribed;
export type EventFrame = G.Event;
export type CaughtUpFrame = G.CaughtUp;
export type DeltaFrame = G.Delta;
export type PermissionFrame = G.Permission;
export type QuestionOption = NonNullable<G.QuestionItem['options']>[number];
export type QuestionItem = G.QuestionItem;
export type QuestionFrame = G.Question;
export type StatusFrame = G.StatusFrame;
export type TodoItem = G.TodoItem;
export type DiffItem = G.DiffItem;
export type TodoFrame = G.Todo;
export type DiffFrame = G.Diff;
export type SessionErrorFrame = G.SessionError;
export type SessionListItem = G.SessionEntry;
export type SessionsFrame = G.Sessions;
export type CommandResultFrame = G.CommandResult;
export type CommandStateFrame = G.CommandNotice;
export type ErrorFrame = G.ErrorFrame;
export type ReplyFrame = G.Unsubscribed | G.Pong;
export type CommandName = G.CommandName;
export type ClientOp = G.ClientOp;

export type KnownFrame = G.ServerFrame;
export type ServerFrame = KnownFrame;

/** Frames that belong to one session (what `SessionState.apply` folds). */
export type SessionFrame =
  | SubscribedFrame | EventFrame | CaughtUpFrame | DeltaFrame | PermissionFrame | QuestionFrame | StatusFrame
  | TodoFrame | DiffFrame | SessionErrorFrame | CommandStateFrame;
