// Regenerates src/gen/ from bridge/http/openapi.json (@hey-api/openapi-ts) and src/gen-ws/ from
// bridge/http/asyncapi.json (scripts/generate-frames.mjs), and fails when the result differs from what was
// there (the committed output). The tree is left regenerated, so `git diff` shows what to commit.
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';

const root = new URL('..', import.meta.url).pathname;
const src = join(root, 'src');

function snapshot(dir) {
  const out = new Map();
  const walk = (d) => {
    for (const name of readdirSync(d)) {
      const p = join(d, name);
      if (statSync(p).isDirectory()) walk(p);
      else out.set(relative(src, p), readFileSync(p, 'utf8'));
    }
  };
  try { walk(dir); } catch { /* no committed output yet */ }
  return out;
}

const both = () => new Map([...snapshot(join(src, 'gen')), ...snapshot(join(src, 'gen-ws'))]);
const before = both();
execFileSync(join(root, 'node_modules', '.bin', 'openapi-ts'), ['--silent'], { cwd: root, stdio: 'inherit' });
execFileSync(process.execPath, [join(root, 'scripts', 'generate-frames.mjs')], { cwd: root, stdio: 'ignore' });
const after = both();
const differ = [...new Set([...before.keys(), ...after.keys()])].filter((k) => before.get(k) !== after.get(k)).sort();
if (differ.length) {
  console.error(`generated code is not what the bridge's documents give; regenerated, commit it:\n  ${differ.join('\n  ')}`);
  process.exit(1);
}
console.log(`src/gen/ and src/gen-ws/ match bridge/http/openapi.json and asyncapi.json (${after.size} files)`);
