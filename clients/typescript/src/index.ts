export { BridgeClient } from './client.js';
export type { BridgeApi, BridgeClientOptions, RouteName, RouteResult } from './client.js';
export * as api from './gen/sdk.gen.js';
export type * as RestTypes from './gen/types.gen.js'; // the REST bodies, by the OpenAPI document's names
export type * from './frames.js';
export { SessionState, reduce } from './state/session_state.js';
export type { PendingRequests } from './state/session_state.js';
export { TranscriptBuilder, buildTranscript } from './state/transcript.js';
export type { Entry } from './state/transcript.js';
export { BridgeSocket, BridgeSocketStopped } from './socket.js';
export type { BridgeSocketOptions, CommandOptions, SocketState, WebSocketFactory, WebSocketLike } from './socket.js';
