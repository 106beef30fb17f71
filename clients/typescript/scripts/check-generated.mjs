// Regenerates src/gen/ from bridge/http/openapi.json and fails when the result differs from what was there
// (the committed output). The tree is left regenerated, so `git diff` shows what to commit.
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';

const root = new URL('..', import.meta.url).pathname;
const gen = join(root, 'src', 'gen');

function snapshot(dir) {
  const out = new Map();
  const walk = (d) => {
    for (const name of readdirSync(d)) {
      const p = join(d, name);
      if (statSync(p).isDirectory()) walk(p);
      else out.set(relative(gen, p), readFileSync(p, 'utf8'));
    }
  };
  try { walk(dir); } catch { /* no committed output yet */ }
  return out;
}

const before = snapshot(gen);
execFileSync(join(root, 'node_modules', '.bin', 'openapi-ts'), ['--silent'], { cwd: root, stdio: 'inherit' });
const after = snapshot(gen);
const differ = [...new Set([...before.keys(), ...after.keys()])].filter((k) => before.get(k) !== after.get(k)).sort();
if (differ.length) {
  console.error(`src/gen/ is not what bridge/http/openapi.json generates; regenerated, commit it:\n  ${differ.join('\n  ')}`);
  process.exit(1);
}
console.log(`src/gen/ matches bridge/http/openapi.json (${after.size} files)`);
