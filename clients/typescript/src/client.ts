/**
 * `BridgeClient`: every REST route of the bridge, from the client generated out of its OpenAPI document
 * (src/gen/, `npm run generate`; never edited by hand). This file only binds the generated functions to
 * one configured client: base URL, a token (or a `getToken` callback, asked before each request), and an
 * optional `fetch`.
 */
import { createClient, createConfig, type Client } from './gen/client/index.js';
import * as sdk from './gen/sdk.gen.js';

type Sdk = typeof sdk;
type Fn = (options: never) => unknown;
/** The generated route functions (every operation of the OpenAPI document). */
export type RouteName = { [K in keyof Sdk]: Sdk[K] extends Fn ? K : never }[keyof Sdk];
type Opts<K extends RouteName> = Omit<NonNullable<Parameters<Sdk[K]>[0]>, 'client' | 'throwOnError'>;
/** What a route resolves to: `{data, error: undefined}` or `{data: undefined, error}` (the error envelope),
 * with the `response` (status, headers) beside it. Never throws for an HTTP error status. */
export type RouteResult<K extends RouteName> = Extract<Awaited<ReturnType<Sdk[K]>>, { error: unknown }>;
export type BridgeApi = {
  [K in RouteName]: undefined extends Parameters<Sdk[K]>[0]
    ? (options?: Opts<K>) => Promise<RouteResult<K>>
    : (options: Opts<K>) => Promise<RouteResult<K>>;
};

export interface BridgeClientOptions {
  /** e.g. `http://127.0.0.1:8765` (no trailing `/v1`: the routes carry it). */
  baseUrl: string;
  /** A token, or a callback returning one (called before every request, so it may refresh). */
  token?: string | (() => string | Promise<string>);
  fetch?: typeof globalThis.fetch;
}

export interface BridgeClient extends BridgeApi {}

export class BridgeClient {
  /** The configured generated client, for the generated functions' `client` option. */
  readonly client: Client;

  constructor(options: BridgeClientOptions) {
    const { token } = options;
    this.client = createClient(
      createConfig({
        baseUrl: options.baseUrl.replace(/\/+$/, ''),
        ...(options.fetch ? { fetch: options.fetch } : {}),
        auth: typeof token === 'function' ? () => token() : token,
      }),
    );
    for (const [name, fn] of Object.entries(sdk)) {
      if (typeof fn !== 'function') continue;
      const route = fn as (o: Record<string, unknown>) => Promise<unknown>;
      (this as unknown as Record<string, unknown>)[name] = (opts?: Record<string, unknown>) =>
        route({ ...opts, client: this.client, throwOnError: false });
    }
  }
}
