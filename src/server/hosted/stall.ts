/**
 * DESIGN §5a "Stalls": the fixed numbers of the stall rule, in one place, and the watch that applies
 * them to a transfer (an upload being received, a remote fetch running). A transfer is cut when it
 * delivers no byte for `VIDSHEET_STALL_S`, or less than 64 KiB in any 30 s after its first 10 s.
 * Requests' headers must arrive within 30 s; after an early answer at most 10 s of body is drained.
 *
 * `VIDSHEET_TEST_TIME_SCALE` (test-only, undocumented for operators, default 1) multiplies the fixed
 * durations here so tests can run the rule in seconds; production never sets it.
 */
export const TEST_TIME_SCALE = (() => {
  const value = Number(process.env.VIDSHEET_TEST_TIME_SCALE ?? '1');
  return Number.isFinite(value) && value > 0 && value <= 1 ? value : 1;
})();

export const STALL_RULE = {
  /** A transfer must deliver at least this many bytes in every window after the grace period. */
  minBytesPerWindow: 64 * 1024,
  windowMs: 30_000 * TEST_TIME_SCALE,
  graceMs: 10_000 * TEST_TIME_SCALE,
  /** Request headers must have arrived within this long. */
  headersMs: 30_000 * TEST_TIME_SCALE,
  /** After an early answer (401, 402, 413, 429), the longest the rest of a body is drained. */
  earlyAnswerDrainMs: 10_000 * TEST_TIME_SCALE,
};

/**
 * DESIGN §5 / issue 21: when every transfer slot is taken, a newcomer takes the slot of the transfer
 * furthest behind (transfers.ts), so slow or stalled senders cannot keep a paying user out, neither by
 * retaking each slot the stall rule frees nor by trickling just fast enough never to be cut. DESIGN
 * fixes the stall cut but is silent on this takeover; the decision taken here, judged next to the rule
 * it extends:
 * - never in a transfer's first `graceMs` (2 s): its headers and first bytes are still on the way;
 * - no byte for `idleMs` (5 s): a quarter of the default stall cut, far longer than any pause of a
 *   working connection, so an honest transfer that is merely bursty is not mistaken for a stalled one;
 * - or fewer bytes since its start than the takeover bar, `pace` (32 KiB/s, 256 kbit/s), would
 *   have delivered. The bar is deliberately far above the stall pace (64 KiB per 30 s, ~2.2 KB/s):
 *   measured against that pace alone, one trickle per slot at ~2.3 KB/s (~17 KB/s for 8 slots) was
 *   never behind and never cut, and held every slot for as long as its sender liked. At the bar, holding
 *   every slot costs real bandwidth (8 x 32 KiB/s, ~2 Mbit/s, sustained, each slot given back when its
 *   upload reaches the size cap). It is well below an honest slow link: a phone on a poor connection
 *   at 100 KB/s is three times ahead of it (two seconds of margin banked per second sent), so it is
 *   never taken over.
 * The average since the start (not a recent window) is judged, so an honest upload's dips are carried
 * by what it sent before; the transfer longest short of the bar is the one taken over. The figures are
 * scaled by the test clock like the rule's.
 */
export const BEHIND_RULE = {
  graceMs: 2_000 * TEST_TIME_SCALE,
  idleMs: 5_000 * TEST_TIME_SCALE,
  /** Bytes per millisecond a transfer must average since its start to keep its slot: 32 KiB/s, scaled. */
  pace: (32 * 1024) / (1000 * TEST_TIME_SCALE),
};

/**
 * How far behind a transfer is, in milliseconds (0: not behind): the longer of its idle time (once
 * past `idleMs`) and the time its bytes are short of the takeover bar, so the furthest behind is the
 * largest.
 */
export function behindBy(
  progress: { startedAt: number; lastByteAt: number; bytes: number },
  now: number,
): number {
  const elapsed = now - progress.startedAt;
  if (elapsed < BEHIND_RULE.graceMs) return 0;
  const idle = now - progress.lastByteAt;
  const short = elapsed - progress.bytes / BEHIND_RULE.pace;
  return Math.max(idle >= BEHIND_RULE.idleMs ? idle : 0, short, 0);
}

/**
 * `overtaken`: cut because a newcomer needed the slot of a transfer that was behind; `preempted`: a
 * free transfer that was not behind, cut because a paying newcomer needed its slot (transfers.ts).
 */
export type StallWhy = 'idle' | 'slow' | 'overtaken' | 'preempted';

export interface StallWatch {
  stop(): void;
  /** How far behind the transfer is now (`behindBy`); 0 once the watch is stopped. */
  behind(): number;
  /** Cuts the transfer as a stall cut does, with the reason `overtaken` (once; no-op when stopped). */
  overtake(): void;
  /** Cuts the transfer with the reason `preempted`: not the sender's fault, so not told it stalled. */
  preempt(): void;
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
  const initial = seen;
  // (time, bytes so far) samples, for the bytes delivered over the last window.
  const samples: Array<[number, number]> = [[start, seen]];
  const tick = Math.max(20, Math.min(1000, stallMs / 4, STALL_RULE.windowMs / 10));
  // When its bytes began: the takeover bar is judged from there, so a transfer whose first bytes were
  // still on the way when the watch began is not behind for that (the eighth review: 3 % over the
  // bar, taken over 3.1 s in). Before any byte it is judged from the watch's start.
  let firstAt: number | undefined;
  const observe = (now: number) => {
    const total = delivered();
    if (total > seen) {
      seen = total;
      last = now;
      firstAt ??= now;
    }
    return total;
  };
  const timer = setInterval(() => {
    const now = Date.now();
    const total = observe(now);
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
    behind() {
      if (done) return 0;
      const now = Date.now();
      // Bytes counted from the watch's start (a reused socket's earlier bytes are not this transfer's).
      const bytes = observe(now) - initial;
      return behindBy({ startedAt: firstAt ?? start, lastByteAt: last, bytes }, now);
    },
    overtake: () => finish('overtaken'),
    preempt: () => finish('preempted'),
  };
}
