/**
 * One call of the remote `vidsheet_video` tool (DESIGN §6): the lane (API key credits, or the
 * anonymous daily quota), a place in the shared job queue, the video fetched safely to local disk,
 * the hosted job on it, and the result with the first sheet inline.
 *
 * Every failure is a tool result (`isError`, one text block) a model can relay: window and time
 * errors in the local wording, the rest from the catalog, never an internal address or FFmpeg text.
 */
import { mkdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { DEFAULT_DENSITY } from '#vidsheet/core/density.js';
import { asVidsheetError, hostedErrors, remoteErrors, VidsheetError } from '#vidsheet/core/errors.js';
import { shortJobId } from '#vidsheet/core/redact.js';
import { remoteReport } from '#vidsheet/core/report.js';
import { checkInputLengths, parseWindowArgs } from '#vidsheet/core/request.js';
import { fitJpeg } from '#vidsheet/engine/index.js';
import { type RemoteInput, toolError } from '#vidsheet/mcp/tool.js';
import type { AnonymousCounter, AnonymousLane, TakenJob } from '../billing/anonymous-lane.js';
import type { Account } from '../billing/ledger.js';
import type { ServerConfig } from '../config.js';
import type { Admission } from '../hosted/admission.js';
import type { FreeActors } from '../hosted/free-actors.js';
import { diedPastDeadline, type HostedJobs, newJobId, sheetName } from '../hosted/jobs.js';
import type { Transfers } from '../hosted/transfers.js';
import type { SheetStorage } from '../storage/storage.js';
import { downloadVideo, FetchError, type FetchReason } from './fetch/download.js';

/**
 * What a remote call uses: the shared job queue, transfer slots and hosted job, the one job of each
 * free actor, the anonymous quota, the sheets.
 */
export interface RemoteParts {
  config: ServerConfig;
  admission: Admission;
  transfers: Transfers;
  freeActors: FreeActors;
  jobs: Pick<HostedJobs, 'run'>;
  anonymous: Pick<AnonymousLane, 'take' | 'giveBack'>;
  storage: SheetStorage;
}

/** Who is calling, as the HTTP layer established it. */
export interface RemoteCaller {
  /** Set on the keyed lane (a valid `Authorization` header); the anonymous lane has none. */
  account?: Account;
  /** The client's IP (behind a proxy: from X-Forwarded-For when VIDSHEET_TRUST_PROXY is set). */
  ip: string;
  /** Aborted when the caller's connection closes before its answer: the fetch stops, no job runs. */
  gone?: AbortSignal;
  log: {
    info(o: object, m: string): void;
    warn(o: object, m: string): void;
    error(o: object, m: string): void;
  };
}

/** The inline first sheet's budget (spec: "about 90 KB"; DESIGN §6: at most 90 KB). */
export const INLINE_BUDGET_BYTES = 90 * 1024;

export const INLINE_REDUCED_WARNING =
  'the attached image of sheet 1 was reduced to fit about 90 KB; read exact labels from timecodes, and open files[] for full-size sheets where you can';

/** The apps-SDK subject id: a `_meta` entry whose key ends in `/subject`. */
export function subjectOf(meta: Record<string, unknown> | undefined): string | undefined {
  for (const [key, value] of Object.entries(meta ?? {})) {
    if (key.endsWith('/subject') && typeof value === 'string' && value.length > 0) return value;
  }
  return undefined;
}

/** DESIGN §6: the anonymous lane's quota error, with the upsell only where it is allowed. */
function quotaExhausted(
  config: ServerConfig,
  counter: AnonymousCounter,
  why: 'counter' | 'address' | 'ceiling',
): CallToolResult {
  const message = {
    counter: `the free lane allows ${config.anonDaily} videos per day and they are used up for today`,
    address: `the free lane allows ${config.anonPerAddress} videos per day from one network address and they are used up for today`,
    ceiling: 'the free lane is used up for today across all users',
  }[why];
  const body =
    counter.kind === 'subject'
      ? {
          error: 'quota_exhausted',
          message,
          hint: 'wait for the reset at 00:00 UTC, or run vidsheet locally on your own machine, free and without limits',
        }
      : {
          error: 'quota_exhausted',
          message,
          hint: `mint a free API key at ${config.baseUrl}/keys (${config.allowanceFloor} free credits per day, no card) and send it as "Authorization: Bearer <key>", or run vidsheet locally on your own machine`,
          billing_url: `${config.baseUrl}/keys`,
        };
  return { isError: true, content: [{ type: 'text', text: JSON.stringify(body) }] };
}

export async function callRemoteTool(
  args: RemoteInput,
  meta: Record<string, unknown> | undefined,
  caller: RemoteCaller,
  deps: RemoteParts,
): Promise<CallToolResult> {
  let window: { startMs?: number; endMs?: number };
  try {
    // DESIGN §5a: an over-long input is an error result naming the field, before anything reads it.
    checkInputLengths({
      video_url: args.video_url,
      start: args.start,
      end: args.end,
      density: args.density,
      'subject id': subjectOf(meta),
    });
    window = parseWindowArgs(args);
  } catch (error) {
    return toolError(error, 'remote');
  }
  // A full queue refuses before anything is fetched; so does a free actor's second job (DESIGN §5a:
  // an anonymous caller per address and per subject id, an account on the allowance), held until this
  // call ends. The fetch itself holds a transfer slot (DESIGN §5), and the queue place is taken only
  // when the video is complete on disk.
  if (deps.admission.isFull()) return toolError(hostedErrors.busy(), 'remote');
  const subject = subjectOf(meta);
  const ticket = await deps.freeActors.enter({ accountId: caller.account?.id, address: caller.ip, subject });
  if (!ticket || deps.admission.isFull(ticket.free)) {
    ticket?.release();
    return toolError(hostedErrors.busy(), 'remote');
  }
  const free = ticket.release;
  const slot = deps.transfers.tryEnter({
    accountId: caller.account?.id,
    address: caller.ip,
    free: ticket.free,
  });
  if (!slot) {
    free();
    return toolError(hostedErrors.busy(), 'remote');
  }
  let release: (() => void) | undefined;

  const jobId = newJobId();
  const workDir = join(deps.config.dataDir, 'work', jobId);
  const log = caller.log;
  let counter: AnonymousCounter | undefined;
  let taken: (TakenJob & { remaining: number }) | undefined;
  // The caller left mid-fetch (or before its job): nobody reads an answer and no job runs, and an
  // anonymous job is not given back (the ninth review: a client that left held its slot to the
  // fetch's end, for free).
  const callerGone = () => {
    log.info({ jobId: shortJobId(jobId) }, 'the caller went away: fetch stopped, no job');
    return toolError(hostedErrors.busy(), 'remote');
  };
  try {
    if (!caller.account) {
      // A subject's calls also count against the address they come from (DESIGN §5a).
      counter = subject ? { kind: 'subject', subject, address: caller.ip } : { kind: 'ip', ip: caller.ip };
      const take = await deps.anonymous.take(counter);
      if (!take.ok) return quotaExhausted(deps.config, counter, take.exhausted);
      taken = take;
    }
    await mkdir(workDir, { recursive: true });
    const file = join(workDir, 'download');
    try {
      const got = await downloadVideo(args.video_url, file, {
        maxBytes: deps.config.maxUploadMb * 1024 * 1024,
        allow: deps.config.fetchAllow,
        // DESIGN §5a: no byte for VIDSHEET_STALL_S cuts the fetch; the whole fetch has its deadline.
        idleTimeoutMs: deps.config.stallS * 1000,
        timeoutMs: deps.config.fetchTimeoutS * 1000,
        // A newcomer may take this slot while the fetch is behind: it then fails as a stalled fetch;
        // a paying newcomer may take it from a free fetch at any pace: the caller is told to retry.
        onWatch: slot.watch,
        signal: caller.gone,
      });
      log.info({ jobId: shortJobId(jobId), bytes: got.bytes }, 'video fetched');
    } catch (error) {
      if (caller.gone?.aborted) return callerGone();
      if (error instanceof FetchError) {
        log.info({ jobId: shortJobId(jobId), reason: error.reason }, 'fetch refused or failed');
        // A URL that could not be fetched used no job: the quota is given back; but a fetch cut by
        // the stall rule or its deadline, or broken off by its origin, held a transfer slot for as
        // long as those allow, so it counts as a job of the anonymous lane (DESIGN §5a), or slow
        // fetches would be free.
        if (taken && !FETCH_CUT.has(error.reason)) await deps.anonymous.giveBack(taken);
        // A free fetch that gave its slot to a paying one (transfers.ts) was not refused: retry.
        if (error.reason === 'preempted') return toolError(hostedErrors.busy(), 'remote');
        return toolError(remoteErrors.fetchFailed(error.message), 'remote');
      }
      throw error;
    } finally {
      slot.release();
    }
    if (caller.gone?.aborted) return callerGone();
    release = deps.admission.tryEnter(ticket.free);
    if (!release) {
      // Complete, but the queue filled meanwhile: refused now, the file deleted below, no job used.
      if (taken) await deps.anonymous.giveBack(taken);
      return toolError(hostedErrors.busy(), 'remote');
    }

    const density = args.density ?? DEFAULT_DENSITY;
    const result = await deps.jobs.run({
      jobId,
      file,
      workDir,
      inputName: args.video_url,
      density,
      ...window,
      surface: 'mcp',
      payer: caller.account ? { accountId: caller.account.id } : 'anonymous',
      free: ticket.free,
      gone: caller.gone,
      log: { info: log.info.bind(log), warn: log.warn.bind(log), error: log.error.bind(log) },
    });
    const first = await deps.storage.get(jobId, sheetName(1));
    if (!first) throw new Error('the first sheet is missing from storage');
    const inline = await fitJpeg(await readAll(first), { budgetBytes: INLINE_BUDGET_BYTES });
    const outcome = inline.reduced
      ? { ...result.outcome, warnings: [...result.outcome.warnings, INLINE_REDUCED_WARNING] }
      : result.outcome;
    const report = remoteReport(outcome, {
      jobId,
      sheetTtlHours: deps.config.sheetTtlS / 3600,
      lane: caller.account
        ? {
            kind: 'keyed',
            creditsCharged: result.creditsCharged,
            creditsRemaining: result.creditsRemaining ?? 0,
          }
        : { kind: 'anonymous', freeJobsRemainingToday: taken?.remaining ?? 0 },
    });
    return {
      content: [
        { type: 'text', text: JSON.stringify(report) },
        { type: 'image', data: inline.jpeg.toString('base64'), mimeType: 'image/jpeg' },
      ],
    };
  } catch (error) {
    const known = asVidsheetError(error);
    // The service failed the job, or made it yield to a paying one (`busy`, jobs.ts): an anonymous
    // caller gets the job back, as a keyed one gets credits; but not a job the deadline killed
    // (`diedPastDeadline`), as a stall-cut fetch is not.
    const serviceFault =
      known.code === 'busy' || (known.code === 'processing_failed' && !diedPastDeadline(error));
    if (taken && serviceFault) await deps.anonymous.giveBack(taken).catch(() => {});
    if (known.code === 'insufficient_credits') {
      const topUp = `${known.message}: top up at ${deps.config.baseUrl}/keys, or lower the density`;
      return toolError(new VidsheetError(known.code, topUp), 'remote');
    }
    return toolError(known, 'remote');
  } finally {
    await rm(workDir, { recursive: true, force: true, maxRetries: 5, retryDelay: 100 }).catch((err) =>
      log.error({ err, jobId: shortJobId(jobId) }, 'could not remove the job directory'),
    );
    slot.release();
    release?.();
    free();
  }
}

/**
 * The fetch failures that count as a job of the anonymous lane (DESIGN §5a): the stall rule's and
 * the deadline's cuts, and a body the origin broke off, which held a transfer slot as long as it
 * liked (the eighth review: given back, an origin that resets just before the deadline made slow
 * fetches free again). What never reached a body (a refusal, an error status, no connection) does not.
 */
const FETCH_CUT: ReadonlySet<FetchReason> = new Set(['timeout', 'stalled', 'broken']);

async function readAll(stream: NodeJS.ReadableStream): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(Buffer.from(chunk as Buffer));
  return Buffer.concat(chunks);
}
