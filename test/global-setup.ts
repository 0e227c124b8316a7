/**
 * Builds dist/ once before contract tests spawn the bin (vitest `globalSetup`). Idempotent: when the
 * bin's entry point (tsc rewrites every output on each build) is newer than every source, nothing runs,
 * so `npm test` (which builds first) does not build twice.
 */
import { spawnSync } from 'node:child_process';
import { readdirSync, statSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const ENTRY = join(ROOT, 'dist', 'cli', 'main.js');

function newestMtime(path: string): number {
  const info = statSync(path);
  if (!info.isDirectory()) return info.mtimeMs;
  let newest = info.mtimeMs;
  for (const entry of readdirSync(path)) newest = Math.max(newest, newestMtime(join(path, entry)));
  return newest;
}

function upToDate(): boolean {
  try {
    const built = statSync(ENTRY).mtimeMs;
    const inputs = ['src', 'tsconfig.json', 'package.json'].map((p) => newestMtime(join(ROOT, p)));
    return built >= Math.max(...inputs);
  } catch {
    return false;
  }
}

/** Runs `tsc -p tsconfig.json` unless dist/ is newer than every input; throws with tsc's output on failure. */
export function ensureBuilt(): void {
  if (upToDate()) return;
  const tsc = join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');
  const result = spawnSync(process.execPath, [tsc, '-p', 'tsconfig.json'], { cwd: ROOT, encoding: 'utf8' });
  if (result.status !== 0) {
    throw new Error(`tsc -p tsconfig.json failed (exit ${result.status}):\n${result.stdout}${result.stderr}`);
  }
}

export default function setup(): void {
  ensureBuilt();
}
