/** Spawning ffmpeg/ffprobe: bounded in time, never through a shell, missing binaries named. */
import { spawn } from 'node:child_process';
import { debuglog } from 'node:util';
import { ffmpegInstallHint, runtimeErrors } from '../core/errors.js';

export interface RunResult {
  code: number | null;
  stdout: Buffer;
  stderr: string;
}

export interface RunOptions {
  /** Kill the child after this long (a hostile file must not hang a job). */
  timeoutMs?: number;
  /** Receives stdout chunks as they arrive instead of buffering them. */
  onStdout?: (chunk: Buffer) => void;
  stdin?: Buffer;
}

const debug = debuglog('vidsheet');

/** Children still running, killed if the process is interrupted. */
const live = new Set<import('node:child_process').ChildProcess>();

export function killAllChildren(): void {
  for (const child of live) child.kill('SIGKILL');
}

export function run(
  tool: 'ffmpeg' | 'ffprobe',
  args: string[],
  options: RunOptions = {},
): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    debug('spawn %s %s', tool, args.join(' '));
    const child = spawn(tool, args, { stdio: [options.stdin ? 'pipe' : 'ignore', 'pipe', 'pipe'] });
    live.add(child);
    const out: Buffer[] = [];
    let err = '';
    let timedOut = false;
    const timer = options.timeoutMs
      ? setTimeout(() => {
          timedOut = true;
          child.kill('SIGKILL');
        }, options.timeoutMs)
      : undefined;
    child.stdout?.on('data', (chunk: Buffer) =>
      options.onStdout ? options.onStdout(chunk) : out.push(chunk),
    );
    child.stderr?.on('data', (chunk: Buffer) => {
      // Keep only the tail: ffmpeg can be chatty on a damaged file.
      err = (err + chunk.toString()).slice(-8192);
    });
    if (options.stdin && child.stdin) {
      child.stdin.on('error', () => {});
      child.stdin.end(options.stdin);
    }
    child.on('error', (error: NodeJS.ErrnoException) => {
      live.delete(child);
      if (timer) clearTimeout(timer);
      if (error.code === 'ENOENT') reject(runtimeErrors.missingFfmpeg(tool, ffmpegInstallHint()));
      else reject(error);
    });
    child.on('close', (code) => {
      live.delete(child);
      if (timer) clearTimeout(timer);
      if (code !== 0)
        debug('%s exited %s%s: %s', tool, code, timedOut ? ' (timed out)' : '', err.trim().slice(-500));
      resolve({ code: timedOut ? null : code, stdout: Buffer.concat(out), stderr: err });
    });
  });
}

/** A gate that lets at most `limit` tasks run at once, the others queued in call order. */
export function limiter(limit: number): <T>(task: () => Promise<T>) => Promise<T> {
  let running = 0;
  const queue: Array<() => void> = [];
  return async (task) => {
    if (running < limit) running++;
    // Queued: a finishing task hands its slot over, so a newcomer cannot take it in between.
    else await new Promise<void>((go) => queue.push(go));
    try {
      return await task();
    } finally {
      const next = queue.shift();
      if (next) next();
      else running--;
    }
  };
}

/** Runs `tasks` with at most `limit` in flight, preserving result order. */
export function pool<T>(tasks: Array<() => Promise<T>>, limit: number): Promise<T[]> {
  const gate = limiter(limit);
  return Promise.all(tasks.map((task) => gate(task)));
}
