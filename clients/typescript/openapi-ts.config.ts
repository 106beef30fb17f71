import { defineConfig } from '@hey-api/openapi-ts';

// The REST client is generated from the bridge's own document; `make test` regenerates it and fails when
// the committed src/gen/ differs (scripts/check-generated.mjs).
export default defineConfig({
  input: '../../bridge/http/openapi.json',
  output: { path: 'src/gen' },
  plugins: ['@hey-api/typescript', '@hey-api/sdk', '@hey-api/client-fetch'],
});
