/** Every test file runs in exactly one tier (test/tiers.ts), so no file is left out of `npm test`. */
import { readdirSync } from 'node:fs';
import { join, relative } from 'node:path';
import { expect, it } from 'vitest';
import { ROOT } from './global-setup.js';
import { tierOf } from './tiers.js';

function* testFiles(dir: string): Generator<string> {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) yield* testFiles(path);
    else if (entry.name.endsWith('.test.ts')) yield relative(ROOT, path);
  }
}

it('every test file is in exactly one tier', () => {
  const files = [...testFiles(join(ROOT, 'test'))];
  expect(files.length).toBeGreaterThan(50);
  expect(
    files.filter((f) => tierOf(f).length !== 1).map((f) => `${f}: ${tierOf(f).join(', ') || 'none'}`),
  ).toEqual([]);
});
