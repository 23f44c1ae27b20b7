import { defineConfig } from 'vitest/config';
import whole from './vitest.config.js';

// The unit lane (`npm run test:unit`, test/README.md): the tests beside the code, and the docs' contract
// (test/docs.test.ts); no outside binary, no root, no network namespace, no built dist/. The whole suite
// is vitest.config.ts.
export default defineConfig({
  test: {
    ...whole.test,
    exclude: [...(whole.test?.exclude ?? []), 'test/!(docs).test.ts'],
    globalSetup: ['test/support/run-setup.ts'],
  },
});
