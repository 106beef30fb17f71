// A product's backend using the package (run by tests/e2e/test_tsclient_node.py against a real bridge):
// mint a token, create a session, prompt it, read its transcript until the turn is done. Prints JSON.
import { BridgeClient } from '@opencode-bridge/client';
import { mintToken } from '@opencode-bridge/client/server';

const { BRIDGE_URL, BRIDGE_SECRET, BRIDGE_UPSTREAM, PROJECT_DIR } = process.env;
const token = await mintToken({ secret: BRIDGE_SECRET, upstream: BRIDGE_UPSTREAM, subject: 'backend', scope: 'control', ttlS: 600 });
const bridge = new BridgeClient({ baseUrl: BRIDGE_URL, token });

const created = await bridge.createSession({ body: { command_id: 'node-create-1', directory: PROJECT_DIR } });
if (created.error) throw new Error(`create: ${JSON.stringify(created.error)}`);
const session = created.data.session_id;
const sent = await bridge.prompt({ path: { session_id: session }, body: { command_id: 'node-prompt-1', text: 'MOCK:text from node', delivery: 'queue' } });
if (sent.error) throw new Error(`prompt: ${JSON.stringify(sent.error)}`);

const deadline = Date.now() + 90_000;
for (;;) {
  const t = await bridge.getTranscript({ path: { session_id: session } });
  if (t.error) throw new Error(`transcript: ${JSON.stringify(t.error)}`);
  const entries = t.data.data.entries;
  const done = entries.some((e) => e.type === 'assistant' && e.complete && e.finish === 'stop');
  if (done) {
    process.stdout.write(JSON.stringify({ session, prompt: sent.data, entries }));
    break;
  }
  if (Date.now() > deadline) throw new Error(`no finished turn: ${JSON.stringify(entries)}`);
  await new Promise((r) => setTimeout(r, 200));
}
