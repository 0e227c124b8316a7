/**
 * Where a stream's data really ends, from the packets one read hands out (DESIGN §2: the latest
 * presentation end of a complete packet present in the file). The rule and its vectors:
 * fixtures/vectors/readable-end.json (the native engine's is crates/vidsheet-core/src/extent.rs
 * `PacketEnds`); ffmpeg/extent.ts decides where the read starts and turns the ends into seconds.
 */

/** What the rule needs of a stream (its time-base units). */
export interface StreamClock {
  /** One frame's duration from the frame rate; null when unknown. */
  frame: bigint | null;
  /**
   * Where its next packet without timestamps starts: on a read from the start of the file, the
   * stream's start (else 0); null after a seek (unknown until a packet has a timestamp).
   */
  clock: bigint | null;
}

/** One packet as a read hands it out (time-base units; `pos` null or negative when unknown). */
export interface PacketFacts {
  pts: bigint | null;
  dts: bigint | null;
  duration: bigint | null;
  pos: number | null;
  size: number;
  /** The demuxer flags it corrupt, or the caller knows it was cut short. */
  corrupt: boolean;
  /** The demuxer flags it to be discarded: an MP4 sample outside the edit list, never presented. */
  discard: boolean;
}

/** Per stream, the latest pts + duration of a complete, presented packet (readable-end.json). */
export class PacketEnds<K> {
  /** Per stream, the duration its last counted packet was given (above 0). */
  private readonly lastDuration = new Map<K, bigint>();
  readonly ends = new Map<K, bigint>();

  constructor(
    private readonly fileSize: number,
    private readonly streams: Map<K, StreamClock>,
  ) {}

  add(stream: K, p: PacketFacts): void {
    const s = this.streams.get(stream);
    if (!s) return;
    const pastTheEnd = p.pos !== null && p.pos >= 0 && p.pos + p.size > this.fileSize;
    const start = p.pts ?? p.dts ?? s.clock;
    if (start === null || p.corrupt || p.discard || pastTheEnd) return;
    const last = this.lastDuration.get(stream);
    let duration = p.duration !== null && p.duration > 0n ? p.duration : (last ?? s.frame ?? 0n);
    // A still held for seconds (a screen recording's) is not data: it counts as one step.
    const step = s.frame ?? last;
    if (step !== undefined && duration > MAX_STEPS * step) duration = step;
    if (duration > 0n) this.lastDuration.set(stream, duration);
    const end = start + duration;
    s.clock = end;
    const known = this.ends.get(stream);
    if (known === undefined || end > known) this.ends.set(stream, end);
  }
}

/** A packet lasting over this many of its stream's usual frame steps counts as one step. */
const MAX_STEPS = 4n;
