/**
 * The hosted job, shared by the HTTP API and the remote endpoint: the spec's stages in their order
 * (probe -> plan and exact price -> allowance and atomic debit -> render -> store), on the video
 * file the surface has already placed under `<data>/work/<job_id>/`.
 *
 * Money rules: nothing is charged before the debit; once charged, any failure (engine error,
 * worker death, storage) is refunded and reported as `500 processing_failed` with `refunded`.
 */
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { creditsPerSheet, DEFAULT_DENSITY, type Density } from '#vidsheet/core/density.js';
import { asVidsheetError, hostedErrors, VidsheetError } from '#vidsheet/core/errors.js';
import { excerpt } from '#vidsheet/core/redact.js';
import type { JobOutcome } from '#vidsheet/core/report.js';
import type { ProbeInfo } from '#vidsheet/engine/types.js';
import type { Ledger, Surface } from '../billing/ledger.js';
import { effectiveMaxDurationS, type ServerConfig } from '../config.js';
import type { SheetStorage } from '../storage/storage.js';
import { TEST_TIME_SCALE } from './stall.js';
import type { JobWorker } from './worker/worker.js';

export interface JobLog {
  info(object: object, message: string): void;
  warn(object: object, message: string): void;
  error(object: object, message: string): void;
}

export interface HostedJobRequest {
  jobId: string;
  /** The video, already on local disk under the job's work directory. */
  file: string;
  /** Its work directory (`<data>/work/<job_id>`); the surface removes it when the request ends. */
  workDir: string;
  /** How the result names the input: the upload's filename, or the fetched URL. */
  inputName: string;
  density: Density;
  startMs?: number;
  endMs?: number;
  /** A kept video's stored probe facts (DESIGN §9): the file is not probed again. */
  probe?: ProbeInfo;
  surface: Surface;
  /** Who pays: an account's credits, or nobody (the remote endpoint's anonymous lane). */
  payer: { accountId: number } | 'anonymous';
  /** A free actor's job (DESIGN §5a): it waits behind every paying job (see `Turns`). */
  free?: boolean;
  /** Aborted when the caller left (caller-gone.ts): if so when its turn comes, the job does not run. */
  gone?: AbortSignal;
  log: JobLog;
}

export interface HostedJobResult {
  jobId: string;
  /** `files` are capability URLs. */
  outcome: JobOutcome;
  /** 0 on the anonymous lane. */
  creditsCharged: number;
  /** The balance after the charge; undefined on the anonymous lane. */
  creditsRemaining: number | undefined;
}

/** 128 random bits, base64url: unguessable, so the sheet URLs are capabilities. */
export const newJobId = (): string => randomBytes(16).toString('base64url');

/** The capability URL of one sheet (spec: `{base_url}/v1/sheets/<job_id>/video.sheet-<N>.jpg`). */
export const sheetUrl = (baseUrl: string, jobId: string, n: number): string =>
  `${baseUrl}/v1/sheets/${jobId}/${sheetName(n)}`;
export const sheetName = (n: number): string => `video.sheet-${n}.jpg`;

/**
 * Jobs that ended because the per-job deadline killed them (DESIGN §5a): the remote tool does not
 * give such an anonymous job back, as a stall-cut fetch is not (the eighth review: killed jobs cost
 * their senders nothing, so each could hold the worker for the whole deadline, again and again).
 */
const pastDeadline = new WeakSet<object>();
export const diedPastDeadline = (error: unknown): boolean =>
  typeof error === 'object' && error !== null && pastDeadline.has(error);

/**
 * One job at a time through the worker: paying jobs first, then free actors' (DESIGN §5a), each in
 * arrival order. Free jobs may hold all queue places but one (admission.ts); were the turns taken in
 * arrival order, the paying job in the last place would wait behind every one of them, each up to
 * the job deadline (the eighth review: 4 x 600 s). Now it waits for the running job at most.
 */
class Turns {
  private busy = false;
  private readonly waiting = {
    paying: [] as Array<{ go: () => void; gone?: AbortSignal }>,
    free: [] as Array<{ go: () => void; gone?: AbortSignal }>,
  };

  /** A paying job waits whose caller is still there (one that left never makes a free job yield). */
  get payingWaits(): boolean {
    return this.waiting.paying.some((waiter) => !waiter.gone?.aborted);
  }

  async take<T>(free: boolean, gone: AbortSignal | undefined, task: () => Promise<T>): Promise<T> {
    if (this.busy) await new Promise<void>((go) => this.waiting[free ? 'free' : 'paying'].push({ go, gone }));
    else this.busy = true;
    try {
      return await task();
    } finally {
      // Handed over, never let go in between: a newcomer cannot take the turn out of order.
      const next = this.waiting.paying.shift() ?? this.waiting.free.shift();
      if (next) next.go();
      else this.busy = false;
    }
  }
}

/**
 * How long a free actor's job may hold the worker while a paying job waits (the eighth review):
 * then it yields, killed with its worker, and its caller is told the service is busy (refunded, an
 * anonymous job given back: nothing was its fault). An honest free job is done well within it; a
 * file made to decode slowly would otherwise keep the paying job waiting up to the job deadline.
 * Scaled by the test clock like the stall rule's figures (stall.ts).
 */
export const FREE_YIELD_MS = 30_000 * TEST_TIME_SCALE;

export class HostedJobs {
  private readonly turns = new Turns();

  constructor(
    private readonly deps: {
      config: ServerConfig;
      ledger: Ledger;
      storage: SheetStorage;
      worker: JobWorker;
      /** FREE_YIELD_MS, shorter in tests. */
      freeYieldMs?: number;
      /** An account was charged for a job that went through (transfers.ts `charged`). */
      onCharged?: (accountId: number, credits: number) => void;
    },
  ) {}

  run(request: HostedJobRequest): Promise<HostedJobResult> {
    return this.turns.take(request.free === true, request.gone, () => {
      // Nobody would read the answer: nothing is charged and the worker goes to the next job (the
      // ninth review: a paying upload whose client left while it waited was run and charged).
      if (request.gone?.aborted) {
        request.log.info({}, 'the caller left before its turn: job not run');
        throw hostedErrors.busy();
      }
      return this.withDeadline(request, (rendered, yielding) => this.runNow(request, rendered, yielding));
    });
  }

  /**
   * DESIGN §5a: a job still running after `VIDSHEET_JOB_TIMEOUT_S` (from the moment it leaves the
   * queue) is killed with its worker and every process the worker started; the worker's death fails
   * the job like a crash does (refunded once charged, `500` with `refunded`), the next job gets a
   * new worker. `work` calls `done` once the worker's part is over (storing sheets is not the worker's).
   * A free job yields the same way to a paying job that waits (FREE_YIELD_MS), failing as `busy`.
   */
  private async withDeadline<T>(
    request: { log?: JobLog; free?: boolean },
    work: (done: () => void, yielding: () => boolean) => Promise<T>,
  ): Promise<T> {
    const { config, worker } = this.deps;
    const { log } = request;
    let expired = false;
    let yielded = false;
    const deadline = setTimeout(() => {
      expired = true;
      log?.error({ jobTimeoutS: config.jobTimeoutS }, 'job past its deadline: killing its worker');
      worker.kill('job deadline');
    }, config.jobTimeoutS * 1000);
    // A free job yields to a paying one that waits, once it has had FREE_YIELD_MS.
    const yieldMs = this.deps.freeYieldMs ?? FREE_YIELD_MS;
    const started = Date.now();
    const yieldCheck = request.free
      ? setInterval(
          () => {
            if (!this.turns.payingWaits || Date.now() - started < yieldMs) return;
            yielded = true;
            log?.warn({}, 'a free job yields the worker to a paying one: killing its worker');
            worker.kill('a paying job waits', { planned: true });
          },
          Math.min(1000, yieldMs / 4),
        )
      : undefined;
    const stop = () => {
      clearTimeout(deadline);
      clearInterval(yieldCheck);
    };
    try {
      return await work(stop, () => yielded);
    } catch (error) {
      // Refunded (runNow) or never charged; the caller may retry.
      if (yielded) throw hostedErrors.busy();
      if (expired && typeof error === 'object' && error !== null) pastDeadline.add(error);
      throw error;
    } finally {
      stop();
    }
  }

  /**
   * A video to keep (DESIGN §9 `POST /v1/videos`): the hosted job's checks up to the probe (the
   * container allow-list, `unreadable_video`, `too_long`), in the worker and in turn with the jobs,
   * nothing planned for pay and nothing charged. Resolves with what the probe found.
   */
  probe(
    request: Pick<HostedJobRequest, 'file' | 'workDir' | 'inputName' | 'free'> & { log?: JobLog },
  ): Promise<{
    durationMs: number;
    probe: ProbeInfo;
  }> {
    return this.turns.take(request.free === true, undefined, () =>
      this.withDeadline(request, async () => {
        const job = await this.prepare({ ...request, density: DEFAULT_DENSITY }).catch((error: unknown) => {
          // Nothing is charged for keeping a video: the balance is whole whatever failed.
          const e = asVidsheetError(error);
          throw e.code === 'processing_failed' ? e.withExtras({ refunded: true }) : e;
        });
        job.discard();
        return { durationMs: job.durationMs, probe: job.probe };
      }),
    );
  }

  /** The worker's probe and plan, with the hosted caps and the allow-list. */
  private prepare(
    request: Pick<
      HostedJobRequest,
      'file' | 'workDir' | 'inputName' | 'density' | 'startMs' | 'endMs' | 'probe'
    >,
  ) {
    const { config, worker } = this.deps;
    return worker.prepare(
      {
        input: request.file,
        // DESIGN §5a: a message or report quotes an upload's name or a fetched URL by at most 64
        // characters (a local run names its own file whole).
        inputName: excerpt(request.inputName),
        density: request.density,
        startMs: request.startMs,
        endMs: request.endMs,
        probe: request.probe,
        outDir: join(request.workDir, 'sheets'),
      },
      {
        audio: false,
        baseName: 'video',
        maxSheets: config.maxSheets,
        maxDurationS: effectiveMaxDurationS(config),
        workDir: request.workDir,
        // Uploads and fetched videos open only as an allowed container (DESIGN §5a): a playlist
        // or list, whatever its bytes, would make FFmpeg open other files on the server's disk.
        containers: 'restricted',
        // Decode cost is bounded (DESIGN §5a): a picture over the pixel bound, or more than 32
        // streams, is an unreadable video; only the chosen stream is decoded.
        maxPixels: config.maxPixels,
      },
    );
  }

  /** `yielding`: the job is being stopped for a paying one (withDeadline): a failure is expected. */
  private async runNow(
    request: HostedJobRequest,
    rendered: () => void,
    yielding: () => boolean,
  ): Promise<HostedJobResult> {
    const { config, ledger, storage } = this.deps;
    const { jobId, log } = request;
    const job = await this.prepare(request).catch((error: unknown) => {
      // Nothing is charged before the debit: a failure here leaves the balance whole.
      const e = asVidsheetError(error);
      throw e.code === 'processing_failed' ? e.withExtras({ refunded: true }) : e;
    });
    const record = {
      jobId,
      surface: request.surface,
      density: request.density,
      sheets: job.sheets,
      ttlSeconds: config.sheetTtlS,
    };
    let price = 0;
    let balance: number | undefined;
    // A prepared job the debit does not go through (the database failed) is discarded: the worker
    // would hold it until it dies.
    const orDiscard = <T>(step: Promise<T>) =>
      step.catch((error: unknown) => {
        job.discard();
        throw error;
      });
    if (request.payer === 'anonymous') {
      await orDiscard(ledger.jobs.recordFreeJob(record));
      log.info({ sheets: job.sheets, durationMs: job.durationMs }, 'job started (anonymous lane)');
    } else {
      price = job.sheets * creditsPerSheet(request.density);
      const charge = await orDiscard(
        ledger.credits.charge({ ...record, accountId: request.payer.accountId, price }),
      );
      if (charge.allowance > 0) log.info({ allowance: charge.allowance }, 'free daily allowance applied');
      if (!charge.ok) {
        job.discard();
        log.info({ price, balance: charge.balance }, 'insufficient credits');
        throw hostedErrors.insufficientCredits();
      }
      balance = charge.balance;
      log.info({ price, sheets: job.sheets, durationMs: job.durationMs }, 'job charged');
    }

    try {
      const outcome = await job.render();
      rendered();
      await storage.put(jobId, outcome.files);
      await ledger.jobs.finishJob(jobId);
      if (request.payer !== 'anonymous' && price > 0) this.deps.onCharged?.(request.payer.accountId, price);
      return {
        jobId,
        outcome: { ...outcome, files: outcome.files.map((_, i) => sheetUrl(config.baseUrl, jobId, i + 1)) },
        creditsCharged: price,
        creditsRemaining: balance,
      };
    } catch (error) {
      const refunded = await ledger.credits.refund(jobId).catch((refundError: unknown) => {
        log.error({ err: refundError }, 'refund failed: the charge stands');
        return false;
      });
      await storage.remove(jobId).catch(() => {});
      const fields = {
        refunded,
        err: error,
        detail: error instanceof VidsheetError ? error.detail : undefined,
      };
      if (yielding()) log.warn({ refunded }, 'a free job gave the worker to a paying one: stopped');
      else log.error(fields, 'job failed after it was charged or recorded');
      throw hostedErrors.processingFailed(refunded, error);
    }
  }
}
