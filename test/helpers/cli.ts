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
  return runProcess(process.execPath, args, { ...options, env: options.env ?? process.env });
}

/**
 * Runs a command (no shell) to its end without blocking this process (a test server or registry
 * may be answering from it); resolves with its exit code and output, never rejects on a non-zero exit.
 */
export function runProcess(
  command: string,
  args: string[],
  options: { cwd?: string; env?: NodeJS.ProcessEnv; uid?: number; gid?: number } = {},
) {
  return new Promise<CliRun>((resolve, reject) => {
    const child = spawn(command, args, { ...options, stdio: ['ignore', 'pipe', 'pipe'] });
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

/**
 * Usage errors: argv -> the message printed (with the usage text after it) on stderr, exit 1. The
 * spawned contract tests and the in-process ones (test/cli/main.test.ts) run the same table.
 */
export const USAGE_CASES: Array<[string[], string]> = [
  [['--json'], 'missing <video> input'],
  [['a.mp4', 'b.mp4'], 'one video per run — got a second input: b.mp4'],
  [['a.mp4', '--bogus'], 'unknown flag: --bogus'],
  [['a.mp4', '-x'], 'unknown flag: -x'],
  [['a.mp4', '--density'], '--density must be one of 3x3|4x4|5x5|6x6'],
  [['a.mp4', '--density', '7x7'], '--density must be one of 3x3|4x4|5x5|6x6'],
  [['a.mp4', '--density=2x2'], '--density must be one of 3x3|4x4|5x5|6x6'],
  [['a.mp4', '--start'], '--start needs a time — seconds (90) or a timecode (1:30)'],
  [['a.mp4', '--start', 'soon'], '--start needs a time — seconds (90) or a timecode (1:30)'],
  [['a.mp4', '--end', '--json'], '--end needs a time — seconds (90) or a timecode (1:30)'],
  [['a.mp4', '--end', '1:75'], '--end needs a time — seconds (90) or a timecode (1:30)'],
  [['a.mp4', '--out'], '--out needs a directory'],
  [['a.mp4', '--out', '--json'], '--out needs a directory'],
  [['mcp', 'extra'], 'vidsheet mcp takes no arguments'],
];

/**
 * Window errors on a 20 s clip: extra argv -> the message on stderr (alone), exit 1. Shared like
 * {@link USAGE_CASES}.
 */
export const WINDOW_CASES: Array<[string[], string]> = [
  [['--start', '-5'], 'start must be a time ≥ 0'],
  [['--start=-0:01', '--end', '5'], 'start must be a time ≥ 0'],
  [['--start', '25'], 'start (25) is at/after the end of the clip (20)'],
  [['--start', '0:20'], 'start (20) is at/after the end of the clip (20)'],
  [['--start', '10', '--end', '4'], 'window is empty — end (4) must be after start (10)'],
  [['--start', '10', '--end', '10'], 'window is empty — end (10) must be after start (10)'],
  [
    ['--start', '1', '--end', '1.017'],
    'window too small to address distinctly: 9 cells across 17 ms (the engine seeks at millisecond precision — minimum ≈ 18 ms at this density); zoom out or lower the density',
  ],
  [
    ['--density', '6x6', '--start', '1', '--end', '1.071'],
    'window too small to address distinctly: 36 cells across 71 ms (the engine seeks at millisecond precision — minimum ≈ 72 ms at this density); zoom out or lower the density',
  ],
];
