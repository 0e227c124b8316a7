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
  /** Receives stderr as it arrives (the result keeps only its tail). */
  onStderr?: (chunk: string) => void;
  stdin?: Buffer;
  /**
   * The job's signal: once aborted, no new child starts and a running one is killed. The promise
   * still settles only after the child has exited, so a caller that waits for its runs knows no
   * child of its own is left writing.
   */
  signal?: AbortSignal;
}

const debug = debuglog('vidsheet');

export function run(
  tool: 'ffmpeg' | 'ffprobe',
  args: string[],
  options: RunOptions = {},
): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    const { signal } = options;
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const began = performance.now();
    const child = spawn(tool, args, { stdio: [options.stdin ? 'pipe' : 'ignore', 'pipe', 'pipe'] });
    debug('spawn %s %d %s', tool, child.pid, args.join(' '));
    const kill = () => child.kill('SIGKILL');
    signal?.addEventListener('abort', kill, { once: true });
    const done = () => {
      signal?.removeEventListener('abort', kill);
      if (timer) clearTimeout(timer);
    };
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
    child.stderr?.setEncoding('utf8');
    child.stderr?.on('data', (chunk: string) => {
      options.onStderr?.(chunk);
      // Keep only the tail: ffmpeg can be chatty on a damaged file.
      err = (err + chunk).slice(-8192);
    });
    if (options.stdin && child.stdin) {
      child.stdin.on('error', () => {});
      child.stdin.end(options.stdin);
    }
    child.on('error', (error: NodeJS.ErrnoException) => {
      done();
      if (error.code === 'ENOENT') reject(runtimeErrors.missingFfmpeg(tool, ffmpegInstallHint()));
      else reject(error);
    });
    child.on('close', (code) => {
      done();
      if (signal?.aborted) {
        reject(signal.reason);
        return;
      }
      if (code !== 0)
        debug('%s exited %s%s: %s', tool, code, timedOut ? ' (timed out)' : '', err.trim().slice(-500));
      // Where a render's time goes: each process's wall time, paired with its spawn line by pid.
      debug('%s %d done in %d ms', tool, child.pid, Math.round(performance.now() - began));
      resolve({ code: timedOut ? null : code, stdout: Buffer.concat(out), stderr: err });
    });
  });
}

/**
 * Sets a gated task's slot aside while it waits for `wait` (for what another task decides), so
 * the slot serves a queued task meanwhile; the task then queues for a slot again.
 */
export type Aside = <U>(wait: Promise<U>) => Promise<U>;

/** A gate that lets at most `limit` tasks run at once, the others queued in call order. */
export function limiter(limit: number): <T>(task: (aside: Aside) => Promise<T>) => Promise<T> {
  let running = 0;
  const queue: Array<() => void> = [];
  // Queued: a finishing task hands its slot over, so a newcomer cannot take it in between.
  const acquire = async () => {
    if (running < limit) running++;
    else await new Promise<void>((go) => queue.push(go));
  };
  const release = () => {
    const next = queue.shift();
    if (next) next();
    else running--;
  };
  const aside: Aside = async (wait) => {
    release();
    try {
      return await wait;
    } finally {
      await acquire();
    }
  };
  return async (task) => {
    await acquire();
    try {
      return await task(aside);
    } finally {
      release();
    }
  };
}

/** Runs `tasks` with at most `limit` in flight, preserving result order. */
export function pool<T>(tasks: Array<() => Promise<T>>, limit: number): Promise<T[]> {
  const gate = limiter(limit);
  return Promise.all(tasks.map((task) => gate(task)));
}

/**
 * Waits for every task to settle, then rethrows the first failure (first in time: the ones after
 * it are often the stop it caused). At that first failure `abort` is called, so the others stop
 * early instead of running on; nothing is left running when this settles (unlike Promise.all,
 * which rejects while siblings still write).
 */
export async function settleAll<T>(tasks: Array<Promise<T>>, abort: () => void): Promise<T[]> {
  let first: { error: unknown } | undefined;
  const results = await Promise.all(
    tasks.map((task) =>
      task.catch((error: unknown) => {
        first ??= { error };
        abort();
        return undefined as T;
      }),
    ),
  );
  if (first) throw first.error;
  return results;
}
