/**
 * The hosted job's bookkeeping around the worker (src/server/hosted/jobs.ts), with the worker and
 * the ledger standing in: a job the worker prepared must be discarded whenever it will not render,
 * or the worker process keeps it (its plan, its probe) until it dies.
 */
import { describe, expect, it } from 'vitest';
import { VidsheetError } from '../../src/core/errors.js';
import type { Ledger } from '../../src/server/billing/ledger.js';
import type { ServerConfig } from '../../src/server/config.js';
import { diedPastDeadline, type HostedJobRequest, HostedJobs } from '../../src/server/hosted/jobs.js';
import type { JobWorker } from '../../src/server/hosted/worker/worker.js';
import type { SheetStorage } from '../../src/server/storage/storage.js';

const CONFIG = {
  jobTimeoutS: 60,
  sheetTtlS: 60,
  maxSheets: 5,
  baseUrl: 'http://127.0.0.1',
} as unknown as ServerConfig;

/** A worker whose every job is one sheet, rendered by `render`. */
const workerWith = (render: () => Promise<unknown>, discard = () => {}) =>
  ({
    prepare: async () => ({ sheets: 1, durationMs: 1000, probe: {}, render, discard }),
    kill: () => {},
  }) as unknown as JobWorker;

function setup(ledger: Partial<{ charge: () => Promise<never>; recordFreeJob: () => Promise<never> }>) {
  const discarded: string[] = [];
  const worker = workerWith(
    async () => {
      throw new Error('not rendered in this test');
    },
    () => discarded.push('job'),
  );
  const jobs = new HostedJobs({
    config: CONFIG,
    ledger: {
      credits: { charge: ledger.charge },
      jobs: { recordFreeJob: ledger.recordFreeJob },
    } as unknown as Ledger,
    storage: {} as SheetStorage,
    worker,
  });
  return { jobs, discarded };
}

const request = (payer: HostedJobRequest['payer']): HostedJobRequest => ({
  jobId: 'j',
  file: '/nonexistent/video.mp4',
  workDir: '/nonexistent',
  inputName: 'video.mp4',
  density: '4x4',
  surface: 'http',
  payer,
  log: { info: () => {}, warn: () => {}, error: () => {} },
});

describe('a prepared job that will not render', () => {
  const down = async (): Promise<never> => {
    throw new Error('database down');
  };

  it('is discarded when the debit fails', async () => {
    const { jobs, discarded } = setup({ charge: down });
    await expect(jobs.run(request({ accountId: 1 }))).rejects.toThrow('database down');
    expect(discarded).toEqual(['job']);
  });

  it('is discarded when the anonymous lane cannot record it', async () => {
    const { jobs, discarded } = setup({ recordFreeJob: down });
    await expect(jobs.run(request('anonymous'))).rejects.toThrow('database down');
    expect(discarded).toEqual(['job']);
  });
});

describe("credits back the account's transfers (transfers.ts `unbacked`)", () => {
  /** A job of one 4x4 sheet (2 credits) whose render succeeds or fails; what `onCharged` heard. */
  function charging(renders: boolean) {
    const heard: Array<[number, number]> = [];
    const worker = workerWith(async () => {
      if (!renders) throw new VidsheetError('processing_failed', 'the render failed');
      return { files: [], warnings: [] };
    });
    const jobs = new HostedJobs({
      config: CONFIG,
      ledger: {
        credits: {
          charge: async () => ({ ok: true, balance: 8, allowance: 0 }),
          refund: async () => true,
        },
        jobs: { finishJob: async () => {} },
      } as unknown as Ledger,
      storage: { put: async () => {}, remove: async () => {} } as unknown as SheetStorage,
      worker,
      onCharged: (accountId, credits) => heard.push([accountId, credits]),
    });
    return { jobs, heard };
  }

  it('a job that went through backs its account by what it was charged', async () => {
    const { jobs, heard } = charging(true);
    await expect(jobs.run(request({ accountId: 7 }))).resolves.toMatchObject({ creditsCharged: 2 });
    expect(heard).toEqual([[7, 2]]);
  });

  it('a job refunded backs nothing', async () => {
    const failed = charging(false);
    await expect(failed.jobs.run(request({ accountId: 7 }))).rejects.toMatchObject({
      code: 'processing_failed',
    });
    expect(failed.heard).toEqual([]);
  });
});

describe('turns through the one worker (DESIGN §5a, the eighth review)', () => {
  /** A worker whose `prepare` waits until the test ends it (or `kill` does), recording the order. */
  function gatedWorker() {
    const order: string[] = [];
    const ends: Array<(error: Error) => void> = [];
    const worker = {
      prepare: (job: { input: string }) => {
        order.push(job.input);
        return new Promise((_resolve, reject) => ends.push(reject));
      },
      kill: () => {
        for (const end of ends.splice(0)) end(new Error('the worker died'));
      },
    } as unknown as JobWorker;
    const endNext = () => ends.shift()?.(new Error('ended by the test'));
    return { worker, order, endNext };
  }

  const jobsWith = (worker: JobWorker, jobTimeoutS = 60, freeYieldMs = 60_000) =>
    new HostedJobs({
      config: { ...CONFIG, jobTimeoutS },
      ledger: {} as Ledger,
      storage: {} as SheetStorage,
      worker,
      freeYieldMs,
    });
  const job = (file: string, free: boolean): HostedJobRequest => ({
    ...request(free ? 'anonymous' : { accountId: 1 }),
    file,
    free,
  });
  const settle = () => new Promise((resolve) => setImmediate(resolve));

  it('paying jobs go before the free jobs waiting, each in arrival order; the running one is not cut', async () => {
    const { worker, order, endNext } = gatedWorker();
    const jobs = jobsWith(worker);
    const runs = [
      jobs.run(job('free-running', true)),
      jobs.run(job('free-1', true)),
      jobs.run(job('free-2', true)),
      jobs.run(job('paying-1', false)),
      jobs.run(job('paying-2', false)),
    ];
    for (const run of runs) run.catch(() => {});
    await settle();
    expect(order).toEqual(['free-running']);
    for (let i = 1; i < runs.length; i++) {
      endNext();
      await settle();
    }
    endNext();
    await Promise.allSettled(runs);
    expect(order).toEqual(['free-running', 'paying-1', 'paying-2', 'free-1', 'free-2']);
  });

  it('a job the deadline killed is marked so; one that failed otherwise is not', async () => {
    const { worker, endNext } = gatedWorker();
    const jobs = jobsWith(worker, 0.05);
    const killed = await jobs.run(job('slow', true)).catch((error: unknown) => error);
    expect(diedPastDeadline(killed)).toBe(true);
    const failed = jobs.run(job('fails', true)).catch((error: unknown) => error);
    await settle();
    endNext();
    expect(diedPastDeadline(await failed)).toBe(false);
  });
  it('a free job yields the worker to a paying job that waits, once it has had its time: busy, and the paying job runs', async () => {
    const { worker, order, endNext } = gatedWorker();
    const jobs = jobsWith(worker, 60, 100);
    const free = jobs.run(job('free-slow', true)).catch((error: unknown) => error);
    const nextFree = jobs.run(job('free-next', true)).catch((error: unknown) => error);
    await new Promise((resolve) => setTimeout(resolve, 300));
    // Only free jobs wait: nothing yields, however long it runs.
    expect(order).toEqual(['free-slow']);
    const paying = jobs.run(job('paying', false)).catch((error: unknown) => error);
    const yielded = await free;
    expect(yielded).toBeInstanceOf(VidsheetError);
    expect([(yielded as VidsheetError).code, (yielded as VidsheetError).status]).toEqual(['busy', 429]);
    await settle();
    expect(order).toEqual(['free-slow', 'paying']);
    endNext();
    await paying;
    await settle();
    expect(order).toEqual(['free-slow', 'paying', 'free-next']);
    endNext();
    await nextFree;
  });

  it('a paying job never yields', async () => {
    const { worker, order, endNext } = gatedWorker();
    const jobs = jobsWith(worker, 60, 50);
    const first = jobs.run(job('paying-slow', false)).catch((error: unknown) => error);
    const second = jobs.run(job('paying-next', false)).catch((error: unknown) => error);
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(order).toEqual(['paying-slow']);
    endNext();
    // It ran until the test ended it: never made to yield.
    expect(((await first) as VidsheetError).localText).toContain('ended by the test');
    await settle();
    endNext();
    await second;
    expect(order).toEqual(['paying-slow', 'paying-next']);
  });
  it('a job whose caller left before its turn never runs (nothing prepared, nothing charged)', async () => {
    const { worker, order, endNext } = gatedWorker();
    const jobs = jobsWith(worker);
    const running = jobs.run(job('running', false)).catch((error: unknown) => error);
    const left = new AbortController();
    const waiting = jobs.run({ ...job('left', false), gone: left.signal }).catch((error: unknown) => error);
    const next = jobs.run(job('next', false)).catch((error: unknown) => error);
    await settle();
    left.abort();
    endNext();
    expect(((await waiting) as VidsheetError).code).toBe('busy');
    await settle();
    expect(order).toEqual(['running', 'next']);
    endNext();
    await Promise.all([running, next]);
  });
  it('a paying job whose caller left never makes a free job yield', async () => {
    const { worker, order, endNext } = gatedWorker();
    const jobs = jobsWith(worker, 60, 100);
    const free = jobs.run(job('free-slow', true)).catch((error: unknown) => error);
    const left = new AbortController();
    left.abort();
    const paying = jobs
      .run({ ...job('paying-left', false), gone: left.signal })
      .catch((error: unknown) => error);
    await new Promise((resolve) => setTimeout(resolve, 400));
    // The free job kept the worker: the only paying job waiting is one nobody will read.
    expect(order).toEqual(['free-slow']);
    endNext();
    expect(((await free) as VidsheetError).code).not.toBe('busy');
    expect(((await paying) as VidsheetError).code).toBe('busy');
    expect(order).toEqual(['free-slow']);
  });
});
