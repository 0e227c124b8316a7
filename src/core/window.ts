/**
 * Window rules (spec: "Local command-line tool", window rules 1–6), checked in the spec's order
 * after probing the clip. Times are integer milliseconds relative to the container start.
 */
import { cellsPerSheet, type Density } from './density.js';
import { runtimeErrors } from './errors.js';
import { msToSeconds } from './time.js';

export interface Window {
  startMs: number;
  endMs: number;
}

/** Minimum window per cell: the engine seeks at millisecond precision, two ms per cell. */
export const MS_PER_CELL_FLOOR = 2;

/** Clip duration in whole milliseconds, the unit every window rule works in. */
export const durationToMs = (durationSeconds: number): number => Math.round(durationSeconds * 1000);

/**
 * Resolves requested bounds (already parsed to ms, undefined when omitted) against the clip.
 * Throws the spec's message for the first rule that fails.
 */
export function resolveWindow(
  request: { startMs?: number; endMs?: number },
  durationMs: number,
  density: Density,
): Window {
  const fmt = (ms: number) => String(msToSeconds(ms));
  // 1. Defaults. 2. Clamp the end to the clip.
  const startMs = request.startMs ?? 0;
  const endMs = Math.min(request.endMs ?? durationMs, durationMs);
  // 3. Negative start.
  if (startMs < 0) throw runtimeErrors.negativeStart();
  // 4. Start at or after the end of the clip.
  if (startMs >= durationMs) throw runtimeErrors.startAtOrAfterEnd(fmt(startMs), fmt(durationMs));
  // 5. Empty window, also after clamping.
  if (endMs <= startMs) throw runtimeErrors.emptyWindow(fmt(endMs), fmt(startMs));
  // 6. The 2 ms per cell floor; exactly at the floor is accepted.
  const cells = cellsPerSheet(density);
  if (endMs - startMs < MS_PER_CELL_FLOOR * cells) throw runtimeErrors.windowTooSmall(cells, endMs - startMs);
  return { startMs, endMs };
}
