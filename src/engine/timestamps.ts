/**
 * Packet timestamps both engines compute alike: the untimed-packet clock and the label clock.
 * The rules: fixtures/vectors/timestamps.json.
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

/** A timestamp `ts` in `timeBase` units as seconds on the labels' clock, which starts at the container start `startUs` (µs). */
export function labelSeconds(ts: bigint, timeBase: readonly [bigint, bigint], startUs: bigint): number {
  return Number(ts * timeBase[0]) / Number(timeBase[1]) - Number(startUs) / 1e6;
}
