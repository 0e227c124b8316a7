/**
 * Deletes expired sheets and kept videos that expired or were deleted (DESIGN §9): at start, then
 * every `VIDSHEET_SWEEP_S`. Serving stops at expiry whatever the sweeper has done (the routes ask the
 * database); this only frees the space. Each pass also drops this instance's cached copies of videos
 * no longer live, so a copy outlives its video at most one sweep period.
 */
import type { Ledger } from '../billing/ledger.js';
import type { VideoCache } from '../sessions/cache.js';
import type { VideoRegistry } from '../sessions/registry.js';
import type { SheetStorage } from '../storage/storage.js';

export interface Sweeper {
  /** One pass; resolves with the number of jobs whose sheets were deleted. */
  sweep(): Promise<number>;
  stop(): Promise<void>;
}

export function startSweeper(deps: {
  registry: Pick<Ledger['jobs'], 'expiredJobs' | 'markSwept'>;
  storage: SheetStorage;
  /** Kept videos: their rows, their store (the `videos` area), this instance's copies. */
  videos?: {
    registry: Pick<VideoRegistry, 'dueForSweep' | 'markSwept' | 'isLive'>;
    store: SheetStorage;
    cache: Pick<VideoCache, 'retain'>;
  };
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
    const videos = deps.videos;
    if (videos) {
      let deleted = 0;
      for (;;) {
        const due = await videos.registry.dueForSweep(100);
        if (due.length === 0) break;
        for (const videoId of due) {
          // Claimed first, as for sheets: one instance deletes the file.
          if (!(await videos.registry.markSwept(videoId))) continue;
          await videos.store.remove(videoId);
          deleted++;
        }
      }
      const dropped = await videos.cache.retain((videoId) => videos.registry.isLive(videoId));
      if (deleted || dropped) deps.log.info({ deleted, dropped }, 'expired or deleted videos removed');
      swept += deleted;
    }
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
