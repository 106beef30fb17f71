// The frame types of /v1/ws, generated from the bridge's AsyncAPI document (bridge/http/asyncapi.json,
// components.schemas) with json-schema-to-typescript into src/gen-ws/frames.gen.ts. Never edited by hand;
// `make test` regenerates it (scripts/check-generated.mjs) and fails when the committed file differs.
import { compile } from 'json-schema-to-typescript';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';

const root = new URL('..', import.meta.url).pathname;
const doc = JSON.parse(readFileSync(`${root}../../bridge/http/asyncapi.json`, 'utf8'));
const schemas = JSON.parse(JSON.stringify(doc.components.schemas).replaceAll('#/components/schemas/', '#/definitions/'));
const names = Object.keys(schemas);
const rootSchema = {
  title: 'AsyncApiSchemas',
  type: 'object',
  definitions: Object.fromEntries(names.map((n) => [n, { ...schemas[n], title: n }])),
  properties: Object.fromEntries(names.map((n) => [n, { $ref: `#/definitions/${n}` }])),
  additionalProperties: false,
};
const ts = await compile(rootSchema, 'AsyncApiSchemas', {
  bannerComment: `/* Generated from bridge/http/asyncapi.json (AsyncAPI ${doc.asyncapi}, ${doc.info?.title ?? ''} ${doc.info?.version ?? ''}) by scripts/generate-frames.mjs: do not edit. */`,
  declareExternallyReferenced: true,
  unreachableDefinitions: true,
  additionalProperties: true, // what a schema leaves open (an event's `data`) stays open
  strictIndexSignatures: false,
  format: true,
});
mkdirSync(`${root}src/gen-ws`, { recursive: true });
writeFileSync(`${root}src/gen-ws/frames.gen.ts`, ts);
console.log(`src/gen-ws/frames.gen.ts: ${names.length} schemas`);
