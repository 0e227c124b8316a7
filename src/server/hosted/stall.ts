/**
 * DESIGN §5a "Stalls": the fixed numbers of the stall rule, in one place, and the watch that applies
 * them to a transfer (an upload being received, a remote fetch running). A transfer is cut when it
 * delivers no byte for `VIDSHEET_STALL_S`, or less than 64 KiB in any 30 s after its first 10 s.
 * Requests' headers must arrive within 30 s; after an early answer at most 10 s of body is drained.
 *
 * `VIDSHEET_TEST_TIME_SCALE` (test-only, undocumented for operators, default 1) multiplies the fixed
 * durations here so tests can run the rule in seconds; production never sets it.
 */
const scale = (() => {
  const value = Number(process.env.VIDSHEET_TEST_TIME_SCALE ?? '1');
  return Number.isFinite(value) && value > 0 && value <= 1 ? value : 1;
})();

export const STALL_RULE = {
  /** A transfer must deliver at least this many bytes in every window after the grace period. */
  minBytesPerWindow: 64 * 1024,
  windowMs: 30_000 * scale,
  graceMs: 10_000 * scale,
  /** Request headers must have arrived within this long. */
  headersMs: 30_000 * scale,
  /** After an early answer (401, 402, 413, 429), the longest the rest of a body is drained. */
  earlyAnswerDrainMs: 10_000 * scale,
};

export type StallWhy = 'idle' | 'slow';

export interface StallWatch {
  stop(): void;
}

/**
 * Watches a transfer by polling `delivered()` (bytes so far: polled rather than listened for, so the
 * watch never touches the stream itself); calls `cut` once when it breaks the rule (no byte for
 * `stallMs`, or too few bytes in a window after the grace period). Stop it when the transfer ends.
 */
export function watchTransfer(
  stallMs: number,
  delivered: () => number,
  cut: (why: StallWhy) => void,
): StallWatch {
  const start = Date.now();
  let last = start;
  let seen = delivered();
  // (time, bytes so far) samples, for the bytes delivered over the last window.
  const samples: Array<[number, number]> = [[start, seen]];
  const tick = Math.max(20, Math.min(1000, stallMs / 4, STALL_RULE.windowMs / 10));
  const timer = setInterval(() => {
    const now = Date.now();
    const total = delivered();
    if (total > seen) {
      seen = total;
      last = now;
    }
    if (now - last >= stallMs) return finish('idle');
    samples.push([now, total]);
    // A window counts only when it starts after the grace period.
    const from = now - STALL_RULE.windowMs;
    if (from < start + STALL_RULE.graceMs) return;
    while (samples.length > 1 && (samples[1] as [number, number])[0] <= from) samples.shift();
    const [, before] = samples[0] as [number, number];
    if (total - before < STALL_RULE.minBytesPerWindow) finish('slow');
  }, tick);
  timer.unref();
  let done = false;
  function finish(why: StallWhy) {
    if (done) return;
    done = true;
    clearInterval(timer);
    cut(why);
  }
  return {
    stop() {
      done = true;
      clearInterval(timer);
    },
  };
}
