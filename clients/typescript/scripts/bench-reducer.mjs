// How fast SessionState folds a long session: 20,000 `event` frames (the captured tool turn and legacy tool
// turn of test/vectors/, repeated with fresh ids and seqs) plus a text delta per text end, then one
// transcript(). `npm run build` first. Usage: node scripts/bench-reducer.mjs [events] [rounds]
import { readFileSync } from 'node:fs';
import { SessionState } from '../dist/index.js';

const events = Number(process.argv[2] ?? 20000);
const rounds = Number(process.argv[3] ?? 7);
const vec = (name) => JSON.parse(readFileSync(new URL(`../test/vectors/${name}`, import.meta.url), 'utf8')).frames;
const base = [...vec('b-tool-turn.json'), ...vec('x1-legacy-tool-turn.legacy.json')];

function frames() {
  const out = [];
  let seq = 0;
  for (let copy = 0; out.length < events * 1.2; copy++) {
    for (const f of base) {
      const text = JSON.stringify(f).replace(/"(msg|prt|call|text)([_-][A-Za-z0-9_]+)"/g, `"$1$2-${copy}"`);
      const ev = { ...JSON.parse(text), seq: ++seq, session: 'ses_bench' };
      if (ev.kind === 'text:end') {
        out.push({ type: 'delta', session: 'ses_bench', kind: 'delta:text', after_seq: seq - 1,
          assistant_message_id: ev.fields.assistant_message_id, part_id: ev.fields.part_id, delta: ev.fields.text });
      }
      out.push(ev);
    }
  }
  let n = 0;
  return out.filter((f) => f.type !== 'event' || ++n <= events);
}

const input = frames();
const count = input.filter((f) => f.type === 'event').length;
const times = [];
let entries = 0;
for (let r = 0; r < rounds; r++) {
  const t0 = performance.now();
  const s = new SessionState('ses_bench');
  for (const f of input) s.apply(f);
  entries = s.transcript().length;
  times.push(performance.now() - t0);
}
times.sort((a, b) => a - b);
const median = times[Math.floor(times.length / 2)];
console.log(`SessionState: ${count} events (+${input.length - count} deltas) → ${entries} entries: median ${median.toFixed(1)} ms ` +
  `of ${rounds} (${Math.round(count / (median / 1000)).toLocaleString('en')} events/s), best ${times[0].toFixed(1)} ms`);
