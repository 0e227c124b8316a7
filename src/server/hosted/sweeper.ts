/**
 * Deletes expired sheets: at start, then every `VIDSHEET_SWEEP_S`. Serving stops at expiry
 * whatever the sweeper has done (routes/sheets.ts asks the database); this only frees the space.
 */
import type { Ledger } from '../billing/ledger.js';
import type { SheetStorage } from '../storage/storage.js';

export interface Sweeper {
  /** One pass; resolves with the number of jobs whose sheets were deleted. */
  sweep(): Promise<number>;
  stop(): Promise<void>;
}

export function startSweeper(deps: {
  registry: Pick<Ledger['jobs'], 'expiredJobs' | 'markSwept'>;
  storage: SheetStorage;
  intervalS: number;
  log: { info(o: object, m: string): void; error(o: object, m: string): void };
}): Sweeper {
  let running: Promise<number> | undefined;
  const pass = async (): Promise<number> => {
    let swept = 0;
    for (;;) {
      const expired = await deps.registry.expiredJobs(100);
      if (expired.length === 0) break;
      for (const jobId of expired) {
        // Claimed first: of several instances, only the one that marks the job deletes its sheets.
        if (!(await deps.registry.markSwept(jobId))) continue;
        await deps.storage.remove(jobId);
        swept++;
      }
    }
    if (swept) deps.log.info({ swept }, 'expired sheets deleted');
    return swept;
  };
  // Passes never overlap: a slow pass delays the next instead of racing it.
  const sweep = () => (running ??= pass().finally(() => (running = undefined)));
  const timer = setInterval(() => {
    sweep().catch((err: unknown) => deps.log.error({ err }, 'sweep failed'));
  }, deps.intervalS * 1000);
  timer.unref();
  return {
    sweep,
    async stop() {
      clearInterval(timer);
      await running?.catch(() => 0);
    },
  };
}
