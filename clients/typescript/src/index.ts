export { BridgeClient } from './client.js';
export type { BridgeApi, BridgeClientOptions, RouteName, RouteResult } from './client.js';
export * as api from './gen/sdk.gen.js';
export type * from './gen/types.gen.js';
