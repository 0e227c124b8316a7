import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

export default defineConfig({
  resolve: {
    // The server reaches the rest of vidsheet through `#vidsheet/*` (package.json `imports`: the
    // built ./dist/* for Node). Tests load the TypeScript sources, so one module graph serves both:
    // a test's VidsheetError is the server's.
    alias: [
      { find: /^#vidsheet\/(.*)\.js$/, replacement: fileURLToPath(new URL('./src/$1.ts', import.meta.url)) },
    ],
  },
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/global-setup.ts'],
    // Real ffmpeg on 2 cores: generous per-test limits; speed lives in bench/, not here.
    testTimeout: 120_000,
    hookTimeout: 300_000,
    pool: 'forks',
    maxWorkers: 2,
  },
});
