#!/usr/bin/env node
/**
 * The fallback engine at scale (`npm run bench -- --scale`): 3000 targets of one GOP in one ffmpeg
 * run, and a 2016-cell plan of 56 sheets, each frame asserted and each case timed
 * (bench/scale/cases.ts, run by vitest on the TypeScript sources). Out of the test tiers for its
 * minutes; test/engine/selection-script.test.ts keeps the guard it stands behind in CI.
 */
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { ROOT } from './clip.mjs';

const vitest = join(ROOT, 'node_modules', 'vitest', 'vitest.mjs');
const config = join(ROOT, 'bench', 'scale', 'vitest.config.ts');
const r = spawnSync(process.execPath, [vitest, 'run', '--config', config, ...process.argv.slice(2)], {
  cwd: ROOT,
  stdio: 'inherit',
});
process.exit(r.status ?? 1);
