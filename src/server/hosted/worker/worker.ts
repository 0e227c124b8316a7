/**
 * The server's side of the job worker: one long-lived child process that runs jobs, restarted when
 * it dies. A death fails the job in flight (the caller refunds it); the next job gets a new process.
 *
 * The worker runs one job at a time; callers serialise their jobs (see jobs.ts).
 *
 * Its memory is bounded (DESIGN §5a "Decode cost is bounded before and during a job"): it starts
 * under an RLIMIT_DATA of `VIDSHEET_WORKER_MEMORY_MB`, which every ffmpeg and ffprobe it starts
 * inherits. Past it an allocation fails: V8 ends the worker (its death fails the job), a native
 * or FFmpeg allocation fails the job (`processing_failed`), and an ffmpeg child fails. Either way
 * the job is a refunded `500` and the worker is replaced before the next job. RLIMIT_DATA (private
 * writable memory) rather than RLIMIT_AS, which V8's address space reservations would exhaust with
 * nothing allocated. The limit is set by `/bin/sh`'s `ulimit -d` (POSIX sh, no other dependency),
 * which then execs node: the worker keeps the shell's pid, so killing its group still reaches it.
 *
 * It runs with two glibc malloc arenas unless the operator set `MALLOC_ARENA_MAX`: by default each
 * decoding thread gets an arena of its own (up to 8 per core), and freed memory scattered across
 * them creeps the resident size up job after job (120 to 140 MB over 2000 small jobs, still
 * rising) where two arenas hold it flat (about 85 MB), at no measurable CPU cost. (The native
 * engine caps them itself for every host, but only from its first open on: the variable holds from
 * the process's first thread.)
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { runtimeErrors, VidsheetError } from '#vidsheet/core/errors.js';
import type { JobOutcome } from '#vidsheet/core/report.js';
import type { ProbeInfo } from '#vidsheet/engine/types.js';
import type { JobRequest } from '#vidsheet/job.js';
import type { FromWorker, ToWorker, WorkerJobOptions } from './protocol.js';

export interface WorkerLog {
  info(object: object, message: string): void;
  warn(object: object, message: string): void;
  error(object: object, message: string): void;
}

/** A probed and planned job inside the worker: render it, or discard it. */
export interface WorkerJob {
  durationMs: number;
  /** What the probe found (a kept video stores it, so its zooms do not probe again). */
  probe: ProbeInfo;
  sheets: number;
  frames: number;
  render(): Promise<JobOutcome>;
  discard(): void;
}

type Pending = {
  resolve: (message: FromWorker) => void;
  reject: (error: Error) => void;
  /** The process the call went to: only its exit fails the call. */
  child: ChildProcess;
};

const CHILD = fileURLToPath(new URL('./child.js', import.meta.url));

export class JobWorker {
  private child: ChildProcess | undefined;
  private readonly pending = new Map<string, Pending>();
  private sequence = 0;
  private closing = false;
  private readonly planned = new WeakSet<ChildProcess>();

  /** `memoryMb`: the worker's (and each of its children's) memory limit, MB; omitted: none. */
  constructor(
    private readonly log: WorkerLog,
    private readonly memoryMb?: number,
  ) {}

  /** The worker's pid, once started (operators and tests can see which process runs jobs). */
  get pid(): number | undefined {
    return this.child?.pid;
  }

  /** Starts the process now rather than at the first job. */
  start(): void {
    this.process();
  }

  async prepare(request: JobRequest, options: WorkerJobOptions): Promise<WorkerJob> {
    const id = String(++this.sequence);
    const reply = await this.call({ type: 'prepare', id, request, options });
    if (reply.type !== 'prepared') throw new Error(`unexpected worker reply ${reply.type}`);
    let used = false;
    return {
      durationMs: reply.durationMs,
      probe: reply.probe,
      sheets: reply.sheets,
      frames: reply.frames,
      render: async () => {
        used = true;
        const done = await this.call({ type: 'render', id });
        if (done.type !== 'done') throw new Error(`unexpected worker reply ${done.type}`);
        return done.outcome;
      },
      discard: () => {
        // A worker gone meanwhile holds nothing to discard (the callback swallows that error).
        if (!used) this.child?.send({ type: 'discard', id } satisfies ToWorker, () => {});
      },
    };
  }

  /**
   * Kills the worker and every process it started, at once (a job past its deadline, DESIGN §5a):
   * the job in flight fails as a worker death does (its caller refunds it), and the next call
   * starts a new worker without waiting for this one's exit to be reported.
   */
  kill(why: string, options: { planned?: boolean } = {}): void {
    const child = this.child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    this.child = undefined;
    // A planned kill (a free job yielding to a paying one) is operation, not a fault: no error line
    // an operator would be paged for (the tenth review).
    if (options.planned) this.planned.add(child);
    this.levelFor(child)({ workerPid: child.pid, why }, 'killing the job worker');
    killGroup(child);
  }

  /** The log level for a worker's end: a warning when it was planned, else an error. */
  private levelFor(child: ChildProcess): WorkerLog['error'] {
    return this.planned.has(child) ? this.log.warn.bind(this.log) : this.log.error.bind(this.log);
  }

  /** Stops the worker: the job in flight, if any, fails as a worker death does. */
  async close(): Promise<void> {
    this.closing = true;
    const child = this.child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    killGroup(child);
    await exited;
  }

  private call(message: ToWorker & { id: string }): Promise<FromWorker> {
    const child = this.process();
    return new Promise<FromWorker>((resolve, reject) => {
      this.pending.set(message.id, { resolve, reject, child });
      child.send(message, (error) => {
        if (!error) return;
        this.pending.delete(message.id);
        reject(runtimeErrors.processingFailed(`the job worker could not be reached: ${error.message}`));
      });
    }).then((reply) => {
      if (reply.type !== 'failed') return reply;
      const { code, message: text, extras, detail } = reply.error;
      // A failure of the worker's own (out of memory, most likely, or a fault in native code)
      // leaves a process nothing vouches for: the next job gets a new one. Jobs run one at a
      // time, so nothing else is in flight in it.
      if (code === 'processing_failed') this.kill('a job failed inside it');
      throw new VidsheetError(code, text, extras, detail);
    });
  }

  /** What `fork(CHILD)` would run, under the memory limit when there is one. */
  private command(): [string, string[]] {
    const node = [...process.execArgv, CHILD];
    if (this.memoryMb === undefined) return [process.execPath, node];
    // `ulimit -d` takes KiB and sets the soft and hard limits; `exec` keeps the pid.
    const kib = String(this.memoryMb * 1024);
    return ['/bin/sh', ['-c', 'ulimit -d "$1" && shift && exec "$@"', 'sh', kib, process.execPath, ...node]];
  }

  private process(): ChildProcess {
    if (this.child && this.child.exitCode === null && this.child.signalCode === null) return this.child;
    if (this.closing) throw runtimeErrors.processingFailed('the job worker is shut down');
    // The worker inherits stdout/stderr (its own logs are debug output only) and speaks over IPC.
    // It leads its own process group, so its ffmpeg children can be killed with it: a worker that
    // dies must not leave orphans writing into a job directory that is being removed.
    const child = spawn(...this.command(), {
      env: { MALLOC_ARENA_MAX: '2', ...process.env },
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
      serialization: 'advanced',
      detached: true,
    });
    this.child = child;
    // A message that cannot be delivered to a dying worker is reported here, never thrown.
    child.on('error', (error) => this.log.error({ workerPid: child.pid, err: error }, 'job worker error'));
    child.on('message', (message: FromWorker) => {
      if (message.type === 'ready') {
        this.log.info({ workerPid: child.pid, engine: message.engine }, 'job worker ready');
        return;
      }
      const waiter = this.pending.get(message.id);
      this.pending.delete(message.id);
      waiter?.resolve(message);
    });
    child.on('exit', (code, signal) => {
      if (this.child === child) this.child = undefined;
      killGroup(child);
      if (!this.closing) this.levelFor(child)({ workerPid: child.pid, code, signal }, 'job worker exited');
      const error = runtimeErrors.processingFailed(`the job worker exited (${signal ?? `code ${code}`})`);
      for (const [id, waiter] of this.pending) {
        if (waiter.child !== child) continue;
        this.pending.delete(id);
        waiter.reject(error);
      }
    });
    this.log.info({ workerPid: child.pid }, 'job worker started');
    return child;
  }
}

/** SIGKILL to the worker's whole process group (the worker and any ffmpeg it started). */
function killGroup(child: ChildProcess): void {
  if (child.pid === undefined) return;
  try {
    process.kill(-child.pid, 'SIGKILL');
  } catch {
    // The group is already gone.
  }
}
