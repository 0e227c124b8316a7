import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

/** The scale cases (bench/scale.mjs): a vitest run of their own, outside the test tiers. */
export default defineConfig({
  root: fileURLToPath(new URL('../../', import.meta.url)),
  test: {
    include: ['bench/scale/cases.ts'],
    testTimeout: 600_000,
    hookTimeout: 300_000,
    pool: 'forks',
    maxWorkers: 1,
  },
});
