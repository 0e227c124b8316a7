/**
 * Packet timestamps both engines compute alike: the untimed-packet clock and the label clock
 * and faulty pts (fixtures/vectors/timestamps.json), and the frame step (fixtures/vectors/frame-step.json).
 */

/**
 * The untimed-packet clock over one packet: `clock` is the decode time the next packet is due at
 * (null when not known). Gives the packet's decode time (its own, else, with neither pts nor dts,
 * the clock's) and the clock after it.
 */
export function untimedDecodeTime(
  clock: bigint | null,
  pts: bigint | undefined,
  dts: bigint | undefined,
  duration: bigint | undefined,
): { dts: bigint | undefined; clock: bigint | null } {
  const given = dts ?? (pts === undefined ? (clock ?? undefined) : undefined);
  const step = duration !== undefined && duration > 0n ? duration : undefined;
  return { dts: given, clock: given === undefined || step === undefined ? null : given + step };
}

/**
 * Faulty pts over one packet (fixtures/vectors/timestamps.json, `of: faulty`): faulty once a
 * packet's pts sits below its dts, and for good.
 */
export function ptsFaulty(faulty: boolean, pts: bigint | undefined, dts: bigint | undefined): boolean {
  return faulty || (pts !== undefined && dts !== undefined && pts < dts);
}

/** A timestamp `ts` in `timeBase` units as seconds on the labels' clock, which starts at the container start `startUs` (µs). */
export function labelSeconds(ts: bigint, timeBase: readonly [bigint, bigint], startUs: bigint): number {
  return Number(ts * timeBase[0]) / Number(timeBase[1]) - Number(startUs) / 1e6;
}

/**
 * The frame step in `timeBase` units (fixtures/vectors/frame-step.json): the packet's own
 * `duration` when above 0, else one frame at the average frame rate, else at the real one
 * (ffprobe's `avg_frame_rate`, `r_frame_rate` as parsed by `ratio`), rounded to nearest; null when
 * none is known or the step rounds to 0.
 */
export function frameStep(
  duration: bigint | undefined,
  timeBase: readonly [bigint, bigint],
  rates: FrameRates,
): bigint | null {
  if (duration !== undefined && duration > 0n) return duration;
  const rate = rates.avg ?? rates.real;
  const [num, den] = timeBase;
  if (!rate || num <= 0n || den <= 0n) return null;
  const n = den * BigInt(rate[1]);
  const d = num * BigInt(rate[0]);
  const step = (2n * n + d) / (2n * d);
  return step > 0n ? step : null;
}

/** A stream's frame rates as ffprobe gives them (undefined: unknown). */
export interface FrameRates {
  avg: [number, number] | undefined;
  real: [number, number] | undefined;
}
