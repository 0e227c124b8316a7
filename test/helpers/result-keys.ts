/**
 * The key orders of the results (spec "Resources and their fields", DESIGN §9 and §10), written out
 * here, not imported from src, so every surface is checked against the spec; one list each, shared by
 * the tests of every surface that answers it.
 */

/** DESIGN §10's keys, after the surface's last key, in this order. */
export const AID_KEYS = ['frame_times', 'zoom_hints'];

/** The hosted job result (spec "Hosted job result"; §10's keys follow). */
export const HOSTED_KEYS = [
  'job_id',
  'input',
  'duration',
  'frames',
  'sheets',
  'density',
  'credits_charged',
  'credits_remaining',
  'files',
  'timecodes',
  'warnings',
  'contract',
];

/** The local tool result's v0 keys, which the remote tool result keeps and extends. */
export const MCP_KEYS = [
  'input',
  'duration',
  'frames',
  'sheets',
  'files',
  'timecodes',
  'warnings',
  'contract',
];
