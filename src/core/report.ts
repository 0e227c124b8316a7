/**
 * Report objects with the spec's fixed key order. Each surface's shape is built here and nowhere
 * else; adapters only serialise.
 */
import type { AudioReport } from './audio.js';
import type { Window } from './window.js';
import type { ZoomHint } from './zoom.js';

export const CONTRACTS = {
  cli: 'vidsheet-cli-v0',
  mcp: 'vidsheet-mcp-v0',
  http: 'vidsheet-http-v0',
  mcpHttp: 'vidsheet-mcp-http-v0',
} as const;

/** What a finished job knows, before any surface shapes it. */
export interface JobOutcome {
  input: string;
  /** Full clip duration, seconds (ms precision). */
  duration: number;
  /** Present only when the caller asked for a window. */
  window?: Window;
  frames: number;
  files: string[];
  timecodes: string[][];
  warnings: string[];
  audio?: AudioReport;
  /** Per sheet, per cell: the shown frame's presentation time, seconds (3 decimals); null: unreadable. */
  frameTimes: Array<Array<number | null>>;
  zoomHints: ZoomHint[];
}

const windowField = (w: Window | undefined) =>
  w ? { window: { start: w.startMs / 1000, end: w.endMs / 1000 } } : {};
const audioField = (a: AudioReport | undefined) => (a ? { audio: a } : {});

/** DESIGN §10's keys, last on every surface, in this order. */
const modelAids = (o: JobOutcome) => ({ frame_times: o.frameTimes, zoom_hints: o.zoomHints });

/**
 * The local report: `vidsheet --json` (vidsheet-cli-v0) and the local tool result (vidsheet-mcp-v0,
 * the same fields plus `timecodes`). `audio`, then `frame_times` and `zoom_hints` (DESIGN §10)
 * follow the v0 keys (additive changes).
 */
function localReport(o: JobOutcome, contract: string, withTimecodes: boolean) {
  return {
    input: o.input,
    duration: o.duration,
    ...windowField(o.window),
    frames: o.frames,
    sheets: o.files.length,
    files: o.files,
    ...(withTimecodes ? { timecodes: o.timecodes } : {}),
    warnings: o.warnings,
    contract,
    ...audioField(o.audio),
    ...modelAids(o),
  };
}

export const cliReport = (o: JobOutcome) => localReport(o, CONTRACTS.cli, false);
export const mcpReport = (o: JobOutcome) => localReport(o, CONTRACTS.mcp, true);

/** What the hosted surfaces add to a job's outcome (the receipt and the money). */
export interface HostedJobFacts {
  jobId: string;
  /** The kept video a zoom ran on (DESIGN §9 `POST /v1/videos/{video_id}/sheets`). */
  videoId?: string;
  density: string;
  creditsCharged: number;
  creditsRemaining: number;
}

/**
 * The hosted job result (contract vidsheet-http-v0), keys in the spec's table order; a zoom on a kept
 * video (DESIGN §9) adds `video_id` after `job_id` and, when a window was asked for, `window` after
 * `duration` (`/v1/vidsheet` never has a window: it covers the whole clip).
 */
export function hostedReport(o: JobOutcome, job: HostedJobFacts) {
  return {
    job_id: job.jobId,
    ...(job.videoId === undefined ? {} : { video_id: job.videoId }),
    input: o.input,
    duration: o.duration,
    ...windowField(o.window),
    frames: o.frames,
    sheets: o.files.length,
    density: job.density,
    credits_charged: job.creditsCharged,
    credits_remaining: job.creditsRemaining,
    files: o.files,
    timecodes: o.timecodes,
    warnings: o.warnings,
    contract: CONTRACTS.http,
    ...modelAids(o),
  };
}

/** The remote tool's lane, as its result reports it. */
export type RemoteLane =
  | { kind: 'keyed'; creditsCharged: number; creditsRemaining: number }
  | { kind: 'anonymous'; freeJobsRemainingToday: number };

/**
 * The remote tool result (contract vidsheet-mcp-http-v0, DESIGN §6 key order): the local tool
 * result's v0 fields (no `audio`), then the receipt, the sheets' lifetime and the lane's fields,
 * then DESIGN §10's keys.
 */
export function remoteReport(o: JobOutcome, job: { jobId: string; sheetTtlHours: number; lane: RemoteLane }) {
  const {
    frame_times: _f,
    zoom_hints: _z,
    ...v0
  } = localReport({ ...o, audio: undefined }, CONTRACTS.mcpHttp, true);
  return {
    ...v0,
    job_id: job.jobId,
    sheet_ttl_hours: job.sheetTtlHours,
    ...(job.lane.kind === 'keyed'
      ? { credits_charged: job.lane.creditsCharged, credits_remaining: job.lane.creditsRemaining }
      : { free_jobs_remaining_today: job.lane.freeJobsRemainingToday }),
    ...modelAids(o),
  };
}

/** The human summary the CLI prints without --json (not a stable contract). */
export function humanSummary(o: JobOutcome): string {
  const lines = [...o.files, ...o.warnings.map((w) => `warning: ${w}`)];
  lines.push(`summary: duration=${o.duration}s sheets=${o.files.length} frames=${o.frames}`);
  return `${lines.join('\n')}\n`;
}
