/**
 * The package's library entry (`import { runJob } from 'vidsheet'`): the same job runner the CLI,
 * the MCP server and the hosted API use, for programs that want sheets without spawning the CLI.
 *
 *   const outcome = await runJob({ input: 'clip.mp4', density: '4x4' }, { audio: true });
 *   outcome.files      // JPEG sheet paths, in time order
 *   outcome.timecodes  // per sheet, each cell's absolute timecode
 *
 * Failures reject with a VidsheetError whose `code` is the spec's error code.
 */
export type { Density } from './core/density.js';
export { DENSITIES } from './core/density.js';
export { type ErrorCode, VidsheetError } from './core/errors.js';
export type { JobOutcome } from './core/report.js';
export { type JobOptions, type JobRequest, type PreparedJob, prepareJob, runJob } from './job.js';
export { packageVersion as version } from './version.js';
