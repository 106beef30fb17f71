/**
 * `@opencode-bridge/client/server`: minting the bridge's tokens on a backend (never in a page: the secret
 * signs every token). The claim rules are the bridge's (docs/security.md, "Tokens"), checked here before
 * signing so a token this mints is one the bridge accepts: HS256, issuer `opencode-bridge`, one upstream,
 * `exp - iat` at most 30 days, a subject for `prompt`/`control`, `approve` only with a scope above `read`,
 * `approve: always` only for a token not limited to sessions. `approve` defaults as the CLI's does (`once`
 * for `prompt`/`control`, `none` for `read`) and is always written into the token.
 * Runs wherever WebCrypto does (Node ≥ 20, Deno, workers).
 */

export type Scope = 'read' | 'prompt' | 'control';
export type Approve = 'none' | 'once' | 'always';

export interface MintOptions {
  /** `BRIDGE_AUTH_SECRET` (or the bridge's `<state dir>/auth_secret`). */
  secret: string;
  /** `BRIDGE_UPSTREAM_NAME` of the bridge the token is for. */
  upstream: string;
  /** Who sends the commands (kept in every command row); required for `prompt` and `control`. */
  subject?: string;
  scope?: Scope;
  /** Default: `once` for `prompt`/`control`, `none` for `read`. */
  approve?: Approve;
  /** The sessions the token grants (omitted: every session of the upstream). */
  sessions?: readonly string[];
  /** Lifetime in seconds (default 3600, at most 30 days). */
  ttlS?: number;
  /** The clock, Unix seconds (default: now). */
  now?: number;
  /** The token id the revocation list names (default: a random one). */
  jti?: string;
}

export const SCOPES: readonly Scope[] = ['read', 'prompt', 'control'];
export const APPROVALS: readonly Approve[] = ['none', 'once', 'always'];
export const MAX_TTL_S = 30 * 86400;
const MAX_SUBJECT_CHARS = 200;
const MAX_JTI_CHARS = 64;
const SESSION_ID = /^ses_[A-Za-z0-9_]{1,60}$/;
// Python's str.isprintable(): letters, marks, numbers, punctuation, symbols and the ASCII space.
const PRINTABLE = /^(?:[\p{L}\p{M}\p{N}\p{P}\p{S}]| )+$/u;

export class TokenClaimError extends Error {}

export function defaultApprove(scope: Scope): Approve {
  return scope === 'read' ? 'none' : 'once';
}

function printableId(value: string, maxChars: number): boolean {
  const n = [...value].length;
  return n > 0 && n <= maxChars && PRINTABLE.test(value) && value.trim() === value;
}

/** What is wrong with this combination of claims, or null (the bridge's `claim_problem`). */
export function claimProblem(scope: string, subject: string, approve: string, limited: boolean): string | null {
  if (subject && !printableId(subject, MAX_SUBJECT_CHARS)) return `subject must be 1 to ${MAX_SUBJECT_CHARS} printable characters`;
  if (scope !== 'read' && !subject) return `a ${scope} token needs a subject (who sends the commands, kept in every command row)`;
  if (!(APPROVALS as readonly string[]).includes(approve)) return `approve must be one of ${APPROVALS.join(', ')}`;
  if (approve !== 'none' && scope === 'read') return 'a read token cannot approve';
  if (approve === 'always' && limited) return 'approve always needs a token not limited to sessions (it allows the whole directory)';
  return null;
}

function b64url(bytes: Uint8Array): string {
  let s = '';
  for (const b of bytes) s += String.fromCharCode(b);
  return btoa(s).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

function newJti(): string {
  return `j${b64url(crypto.getRandomValues(new Uint8Array(12))).slice(0, 15)}`;
}

/** A signed token for the bridge; throws `TokenClaimError` for a combination the bridge would refuse. */
export async function mintToken(o: MintOptions): Promise<string> {
  const ttl = o.ttlS ?? 3600;
  if (!(ttl > 0 && ttl <= MAX_TTL_S)) throw new TokenClaimError(`ttl must be more than 0 and at most ${MAX_TTL_S} seconds`);
  const scope = o.scope ?? 'read';
  if (!SCOPES.includes(scope)) throw new TokenClaimError(`scope must be one of ${SCOPES.join(', ')}`);
  if (!o.secret) throw new TokenClaimError('secret must not be empty');
  if (!o.upstream) throw new TokenClaimError('upstream must not be empty');
  const subject = o.subject ?? '';
  const approve = o.approve ?? defaultApprove(scope);
  const problem = claimProblem(scope, subject, approve, o.sessions !== undefined);
  if (problem !== null) throw new TokenClaimError(problem);
  const bad = (o.sessions ?? []).filter((s) => !SESSION_ID.test(s));
  if (bad.length) throw new TokenClaimError(`not a session id: ${bad.slice(0, 3).join(', ')}`);
  const jti = o.jti ?? newJti();
  if (!printableId(jti, MAX_JTI_CHARS)) throw new TokenClaimError(`jti must be 1 to ${MAX_JTI_CHARS} printable characters`);
  const now = o.now ?? Date.now() / 1000;
  const payload: Record<string, unknown> = {
    iss: 'opencode-bridge', upstream: o.upstream, iat: Math.floor(now), exp: Math.floor(now + ttl), jti, scope, approve,
  };
  if (o.sessions !== undefined) payload.sessions = [...new Set(o.sessions)].sort();
  if (subject) payload.sub = subject;
  if (payload.exp === payload.iat) throw new TokenClaimError('ttl must leave at least one whole second');
  const enc = new TextEncoder();
  const part = (v: unknown): string => b64url(enc.encode(JSON.stringify(v)));
  const signing = `${part({ alg: 'HS256', typ: 'JWT' })}.${part(payload)}`;
  const key = await crypto.subtle.importKey('raw', enc.encode(o.secret), { name: 'HMAC', hash: 'SHA-256' }, false, ['sign']);
  const sig = new Uint8Array(await crypto.subtle.sign('HMAC', key, enc.encode(signing)));
  return `${signing}.${b64url(sig)}`;
}
