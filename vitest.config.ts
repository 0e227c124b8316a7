import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';
import { glob, TIERS, type Tier } from './test/tiers.js';

/** A tier as a vitest project: its entries, without the unit tier's files (test/tiers.ts). */
const project = (name: Tier) => ({
  extends: true as const,
  test: {
    name,
    include: TIERS[name].map(glob),
    exclude: name === 'unit' ? [] : TIERS.unit.map(glob),
    // Only tiers that spawn the built bins need dist/ (the unit tier loads the sources).
    globalSetup: name === 'unit' ? [] : ['test/global-setup.ts'],
  },
});

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
    projects: (Object.keys(TIERS) as Tier[]).map(project),
    // Real ffmpeg on 2 cores: generous per-test limits; speed lives in bench/, not here.
    testTimeout: 120_000,
    hookTimeout: 300_000,
    pool: 'forks',
    maxWorkers: 2,
  },
});
