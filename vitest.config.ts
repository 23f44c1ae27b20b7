import { defineConfig } from 'vitest/config';

// The whole suite (`npm test`, CI's command). The unit lane (`npm run test:unit`) is vitest.unit.config.ts.
export default defineConfig({
  test: {
    include: ['**/*.test.ts'],
    exclude: ['node_modules/**', 'dist/**'],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    // Two cores: real sockets and big transfers behave better without oversubscription.
    maxWorkers: 2,
    globalSetup: ['test/support/run-setup.ts', 'test/support/global-setup.ts'],
  },
});
