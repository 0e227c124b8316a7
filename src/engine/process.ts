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
    debug('spawn %s %s', tool, args.join(' '));
    const child = spawn(tool, args, { stdio: [options.stdin ? 'pipe' : 'ignore', 'pipe', 'pipe'] });
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

/**
 * Waits for every task to settle, then rethrows the first failure. At that first failure `abort`
 * is called, so the others stop early instead of running on; nothing is left running when this
 * settles (unlike Promise.all, which rejects while siblings still write).
 */
export async function settleAll<T>(tasks: Array<Promise<T>>, abort: () => void): Promise<T[]> {
  const results = await Promise.allSettled(
    tasks.map((task) =>
      task.catch((error: unknown) => {
        abort();
        throw error;
      }),
    ),
  );
  const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failed) throw failed.reason;
  return results.map((r) => (r as PromiseFulfilledResult<T>).value);
}
