import { describe, expect, it } from 'vitest';
import { BridgeClient } from '../src/client.js';
import * as sdk from '../src/gen/sdk.gen.js';

function fakeFetch(seen: Request[], body: unknown, status = 200): typeof fetch {
  return async (input: RequestInfo | URL, init?: RequestInit) => {
    const req = input instanceof Request ? input : new Request(input, init);
    seen.push(req);
    return new Response(JSON.stringify(body), { status, headers: { 'Content-Type': 'application/json' } });
  };
}

describe('BridgeClient', () => {
  it('binds every generated route', () => {
    const c = new BridgeClient({ baseUrl: 'http://127.0.0.1:1' });
    const routes = Object.entries(sdk).filter(([, f]) => typeof f === 'function').map(([n]) => n);
    expect(routes.length).toBeGreaterThanOrEqual(23);
    for (const name of routes) expect(typeof (c as unknown as Record<string, unknown>)[name]).toBe('function');
  });

  it('sends the token from getToken, the path and the JSON body', async () => {
    const seen: Request[] = [];
    let n = 0;
    const c = new BridgeClient({
      baseUrl: 'http://127.0.0.1:8765/',
      token: async () => `tok-${++n}`,
      fetch: fakeFetch(seen, { command_id: 'c1', message_id: 'msg_1', admitted_seq: 3, delivery: 'queue' }),
    });
    const r = await c.prompt({ path: { session_id: 'ses_A' }, body: { text: 'hi', command_id: 'c1', delivery: 'queue' } });
    expect(r.error).toBeUndefined();
    expect(r.data?.command_id).toBe('c1');
    const req = seen[0]!;
    expect(req.method).toBe('POST');
    expect(req.url).toBe('http://127.0.0.1:8765/v1/sessions/ses_A/prompt');
    expect(req.headers.get('authorization')).toBe('Bearer tok-1');
    expect(req.headers.get('content-type')).toBe('application/json');
    expect(await req.json()).toEqual({ text: 'hi', command_id: 'c1', delivery: 'queue' });
    await c.listSessions();
    expect(seen[1]!.headers.get('authorization')).toBe('Bearer tok-2');
  });

  it('gives the error envelope instead of throwing', async () => {
    const seen: Request[] = [];
    const c = new BridgeClient({
      baseUrl: 'http://127.0.0.1:8765',
      token: 't',
      fetch: fakeFetch(seen, { error: { code: 'not_found', message: 'no such session' } }, 404),
    });
    const r = await c.getSession({ path: { session_id: 'ses_X' } });
    expect(r.data).toBeUndefined();
    expect(r.response?.status).toBe(404);
    expect(r.error).toEqual({ error: { code: 'not_found', message: 'no such session' } });
  });
});
