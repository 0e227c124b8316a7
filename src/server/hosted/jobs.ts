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
import { limiter } from '#vidsheet/engine/index.js';
import type { ProbeInfo } from '#vidsheet/engine/types.js';
import type { Ledger, Surface } from '../billing/ledger.js';
import { effectiveMaxDurationS, type ServerConfig } from '../config.js';
import type { SheetStorage } from '../storage/storage.js';
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

export class HostedJobs {
  /** One job at a time through the worker, in arrival order. */
  private readonly gate = limiter(1);

  constructor(
    private readonly deps: {
      config: ServerConfig;
      ledger: Ledger;
      storage: SheetStorage;
      worker: JobWorker;
    },
  ) {}

  run(request: HostedJobRequest): Promise<HostedJobResult> {
    return this.gate(() => this.withDeadline(request.log, (rendered) => this.runNow(request, rendered)));
  }

  /**
   * DESIGN §5a: a job still running after `VIDSHEET_JOB_TIMEOUT_S` (from the moment it leaves the
   * queue) is killed with its worker and every process the worker started; the worker's death fails
   * the job like a crash does (refunded once charged, `500` with `refunded`), the next job gets a
   * new worker. `work` calls `done` once the worker's part is over (storing sheets is not the worker's).
   */
  private async withDeadline<T>(log: JobLog | undefined, work: (done: () => void) => Promise<T>): Promise<T> {
    const { config, worker } = this.deps;
    const deadline = setTimeout(() => {
      log?.error({ jobTimeoutS: config.jobTimeoutS }, 'job past its deadline: killing its worker');
      worker.kill('job deadline');
    }, config.jobTimeoutS * 1000);
    try {
      return await work(() => clearTimeout(deadline));
    } finally {
      clearTimeout(deadline);
    }
  }

  /**
   * A video to keep (DESIGN §9 `POST /v1/videos`): the hosted job's checks up to the probe (the
   * container allow-list, `unreadable_video`, `too_long`), in the worker and in turn with the jobs,
   * nothing planned for pay and nothing charged. Resolves with what the probe found.
   */
  probe(request: Pick<HostedJobRequest, 'file' | 'workDir' | 'inputName'> & { log?: JobLog }): Promise<{
    durationMs: number;
    probe: ProbeInfo;
  }> {
    return this.gate(() =>
      this.withDeadline(request.log, async () => {
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

  private async runNow(request: HostedJobRequest, rendered: () => void): Promise<HostedJobResult> {
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
      log.error(
        { refunded, err: error, detail: error instanceof VidsheetError ? error.detail : undefined },
        'job failed after it was charged or recorded',
      );
      throw hostedErrors.processingFailed(refunded, error);
    }
  }
}
