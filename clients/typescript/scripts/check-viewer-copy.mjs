// The viewer (bridge/http/static/) runs on the package's browser build, committed as
// bridge/http/static/bridge-client.js: fails when that copy is not the current build (and puts the
// build there, so `git diff` shows what to commit).
import { copyFileSync, existsSync, mkdirSync, readFileSync } from 'node:fs';

const root = new URL('..', import.meta.url).pathname;
const built = `${root}dist/browser/bridge-client.min.js`;
const copy = `${root}../../bridge/http/static/bridge-client.js`;
const same = existsSync(copy) && readFileSync(copy).equals(readFileSync(built));
if (!same) {
  mkdirSync(`${root}../../bridge/http/static`, { recursive: true });
  copyFileSync(built, copy);
  console.error('bridge/http/static/bridge-client.js was not the current build of clients/typescript; copied, commit it');
  process.exit(1);
}
console.log('the viewer runs on the current build (bridge/http/static/bridge-client.js)');
