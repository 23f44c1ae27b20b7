import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['**/*.test.ts'],
    exclude: ['node_modules/**', 'dist/**'],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    // Two cores: real sockets and big transfers behave better without oversubscription.
    maxWorkers: 2,
    globalSetup: ['test/support/global-setup.ts'],
  },
});
