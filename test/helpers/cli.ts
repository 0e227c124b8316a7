/** Runs the built `vidsheet` bin the way a user would, capturing exit code and both streams. */
import { spawn } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export const BIN = join(import.meta.dirname, '..', '..', 'bin', 'vidsheet.js');

export interface CliRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Engines every contract test runs against; `VIDSHEET_TEST_ENGINES=ffmpeg` narrows it. */
export const ENGINES = (process.env.VIDSHEET_TEST_ENGINES ?? 'native,ffmpeg').split(',') as Array<
  'native' | 'ffmpeg'
>;

export function runCli(
  args: string[],
  options: { cwd?: string; env?: NodeJS.ProcessEnv; engine?: string } = {},
) {
  const env = {
    ...process.env,
    ...(options.engine ? { VIDSHEET_ENGINE: options.engine } : {}),
    ...options.env,
  };
  return runNode([BIN, ...args], { cwd: options.cwd, env });
}

/** Runs `node <args>` to its end (as `uid`/`gid` when given), capturing exit code and both streams. */
export function runNode(
  args: string[],
  options: { cwd?: string; env?: NodeJS.ProcessEnv; uid?: number; gid?: number } = {},
) {
  return new Promise<CliRun>((resolve, reject) => {
    const child = spawn(process.execPath, args, {
      cwd: options.cwd,
      env: options.env ?? process.env,
      uid: options.uid,
      gid: options.gid,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

/** vidsheet-* entries in the system temp dir: per-run directories must never outlive a run. */
export function vidsheetTempDirs(): string[] {
  const dir = tmpdir();
  return existsSync(dir) ? readdirSync(dir).filter((name) => name.startsWith('vidsheet-')) : [];
}
