"""Hostile input and resource bounds: each test is one attack, named for what the bridge now does.

Read the files as the list of attacks tried (docs/operations.md, "Limits", has the bounds they rely on):

- `test_ws_attacks.py`: session ids with NUL, lone surrogates, `/`, `..`, `#`, `?`, over-long, wrong
  prefix, on `subscribe` and `unsubscribe` → `bad_message`, nothing created; a well-formed id neither the
  mirror nor the upstream knows → `unknown_session`, no row, no follower; an event larger than the
  client's queue → sent as a reference (`truncated`), not 4429 on every resume; `sessions` → paged.
- `test_http_attacks.py`: the same ids in audit paths → 400 before auth; `?token=` on plain HTTP → 401;
  times whose UTC form leaves years 1..9999, seqs beyond bigint, odd digits, NUL, huge strings → 400;
  DNS rebinding with auth disabled → 403 `bad_host`; security headers on every response; `/readyz?verbose`
  without a token → no hosts or users.
- `test_startup_attacks.py`: auth disabled on a non-loopback host, `inf`/`nan` settings, an empty, short
  or world-readable secret file, racing secret creation, endless token lifetimes, frames that would break
  the driver or the reply (`after` beyond bigint, `NaN`/lone-surrogate ids), the unit's bounds, aiohttp's
  floor.
"""
