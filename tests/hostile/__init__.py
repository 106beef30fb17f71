"""Hostile input and resource bounds: each test is one attack, named for what the bridge now does.

Read the files as the list of attacks tried (docs/operations.md, "Limits", has the bounds they rely on):

- `test_ws_attacks.py`: session ids with NUL, lone surrogates, `/`, `..`, `#`, `?`, over-long, wrong
  prefix, on `subscribe` and `unsubscribe` → `bad_message`, nothing created; a well-formed id neither the
  mirror nor the upstream knows → `unknown_session`, no row, no follower; an event larger than the
  client's queue → sent as a reference (`truncated`), not 4429 on every resume; `sessions` → paged.
- `test_http_attacks.py`: the same ids in audit paths → 400 before auth; `?token=` on plain HTTP → 401;
  times whose UTC form leaves years 1..9999, seqs beyond bigint, odd digits, NUL, huge strings → 400;
  DNS rebinding (in every mode) → 403 `bad_host`; security headers on every response; `/readyz?verbose`
  without a token → no hosts or users.
- `test_startup_attacks.py`: auth disabled on a non-loopback host, `inf`/`nan` settings, an empty, short
  or world-readable secret file, racing secret creation, endless token lifetimes, frames that would break
  the driver or the reply (`after` beyond bigint, `NaN`/lone-surrogate ids), `token --session` with a
  hostile id, the unit's bounds, aiohttp's floor.
- `test_limits.py`: busy connections beyond the cap → bare 503 and closed; idle ones → the oldest gives
  way; an idle socket → closed after the keep-alive timeout; a handler whose client left → cancelled;
  heavy reads beyond a route's limit → 503 `busy` at once; a read over the statement timeout or with the
  read pool taken → 503 `unavailable`; writes through the read pool → refused (read-only); the tool-call
  outcome lookup → the call_id index.
- `test_load.py`: 50 clients (another process) hammering transcript, events and tool calls while ingest
  commits → p99 commit latency bounded (numbers in BENCHMARKS.md).
- `test_security_commands.py` (docs/security.md): directories outside `BRIDGE_ALLOWED_DIRECTORIES`, with
  `..`, `//`, a trailing `/`, control characters, NUL or a symlink out → 400/403, nothing upstream; the
  allow-list unset → 403 naming it; the permission-reply matrix of scope, approve and session limit; a cross-site
  POST, `Origin: null`, a no-cors `text/plain` body → 403 `bad_origin` / 415; a rebound `Host` → 403 on
  `/metrics`, `/readyz`; another subject's command ids → invisible, not squattable, a pending row never
  re-sent for someone else; CR/LF/ESC in `command_id` → 400; upstream details → only in the log.
- `test_security_tokens.py`: one forged token per claim rule (NaN/Infinity/10-year `exp`, no `iat`, no
  `jti`, prompt without `sub`, `always` with `sessions`, …) → refused by the verifier, 401 on a command
  route, 4401 on the WebSocket; a revoked token → 401 and its open socket closed; `token --revoke`; the
  per-start token of auth-disabled mode.
- `test_security_floods.py`: a 5,000-op WebSocket burst → throttled on its own connection while another
  client's ping answers within 100 ms; slots after auth, per token and per address; 1,001 unauthenticated
  sockets (silent and slowloris) → `/readyz` still 200.
- `test_fuzz.py`: hypothesis — any JSON / non-JSON / binary WebSocket frame → a documented message on a
  connection that stays open, no row, no follower; any audit path and query, raw percent-escapes
  included → 200/4xx, never a 500 or a traceback.
"""
