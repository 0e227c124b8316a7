/**
 * The hosted job's bookkeeping around the worker (src/server/hosted/jobs.ts), with the worker and
 * the ledger standing in: a job the worker prepared must be discarded whenever it will not render,
 * or the worker process keeps it (its plan, its probe) until it dies.
 */
import { describe, expect, it } from 'vitest';
import type { Ledger } from '../../src/server/billing/ledger.js';
import type { ServerConfig } from '../../src/server/config.js';
import { type HostedJobRequest, HostedJobs } from '../../src/server/hosted/jobs.js';
import type { JobWorker } from '../../src/server/hosted/worker/worker.js';
import type { SheetStorage } from '../../src/server/storage/storage.js';

function setup(ledger: Partial<{ charge: () => Promise<never>; recordFreeJob: () => Promise<never> }>) {
  const discarded: string[] = [];
  const worker = {
    prepare: async () => ({
      sheets: 1,
      durationMs: 1000,
      probe: {},
      render: async () => {
        throw new Error('not rendered in this test');
      },
      discard: () => discarded.push('job'),
    }),
    kill: () => {},
  } as unknown as JobWorker;
  const jobs = new HostedJobs({
    config: {
      jobTimeoutS: 60,
      sheetTtlS: 60,
      maxSheets: 5,
      baseUrl: 'http://127.0.0.1',
    } as unknown as ServerConfig,
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
