// The browser build: one minified ESM file of the package (dist/browser/bridge-client.min.js), what a page
// loads (the viewer at bridge/http/static/ uses a committed copy). Prints its size, minified and gzipped.
import { build } from 'esbuild';
import { mkdirSync, readFileSync } from 'node:fs';
import { gzipSync } from 'node:zlib';

const root = new URL('..', import.meta.url).pathname;
const outfile = `${root}dist/browser/bridge-client.min.js`;
mkdirSync(`${root}dist/browser`, { recursive: true });
await build({
  entryPoints: [`${root}src/index.ts`],
  bundle: true,
  format: 'esm',
  platform: 'browser',
  target: ['es2022'],
  minify: true,
  legalComments: 'none',
  outfile,
  logLevel: 'warning',
});
const bytes = readFileSync(outfile);
console.log(`dist/browser/bridge-client.min.js: ${bytes.length} bytes minified, ${gzipSync(bytes, { level: 9 }).length} gzipped`);
