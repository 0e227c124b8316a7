/**
 * Report objects with the spec's fixed key order. Each surface's shape is built here and nowhere
 * else; adapters only serialise.
 */
import type { AudioReport } from './audio.js';
import type { Window } from './window.js';

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
}

const windowField = (w: Window | undefined) =>
  w ? { window: { start: w.startMs / 1000, end: w.endMs / 1000 } } : {};
const audioField = (a: AudioReport | undefined) => (a ? { audio: a } : {});

/** `vidsheet --json` (contract vidsheet-cli-v0); `audio` follows the v0 keys (additive change). */
export function cliReport(o: JobOutcome) {
  return {
    input: o.input,
    duration: o.duration,
    ...windowField(o.window),
    frames: o.frames,
    sheets: o.files.length,
    files: o.files,
    warnings: o.warnings,
    contract: CONTRACTS.cli,
    ...audioField(o.audio),
  };
}

/** Local tool result (vidsheet-mcp-v0): the CLI fields plus `timecodes`, one array per sheet. */
export function mcpReport(o: JobOutcome) {
  return {
    input: o.input,
    duration: o.duration,
    ...windowField(o.window),
    frames: o.frames,
    sheets: o.files.length,
    files: o.files,
    timecodes: o.timecodes,
    warnings: o.warnings,
    contract: CONTRACTS.mcp,
    ...audioField(o.audio),
  };
}

/** The human summary the CLI prints without --json (not a stable contract). */
export function humanSummary(o: JobOutcome): string {
  const lines = [...o.files, ...o.warnings.map((w) => `warning: ${w}`)];
  lines.push(`summary: duration=${o.duration}s sheets=${o.files.length} frames=${o.frames}`);
  return `${lines.join('\n')}\n`;
}
