// Reads a JSON list of mintToken options on stdin; prints, per case, {token} or {error} (used by
// tests/unit/test_tsclient_mint.py, which checks them with the bridge's own verifier).
import { mintToken } from '@opencode-bridge/client/server';

let input = '';
for await (const chunk of process.stdin) input += chunk;
const out = [];
for (const opts of JSON.parse(input)) {
  try {
    out.push({ token: await mintToken(opts) });
  } catch (e) {
    out.push({ error: String(e.message) });
  }
}
process.stdout.write(JSON.stringify(out));
