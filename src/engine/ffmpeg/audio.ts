/**
 * The fallback engine's audio measurement (Engine.audioPeaks): the whole first audio track is
 * decoded by one ffmpeg run, raw float PCM through a pipe (memory is one float per ms of the range,
 * no temporary WAV), while `ashowinfo` reports each decoded frame's timestamp and sample count on
 * stderr. The frames' samples are then placed by those timestamps as the native engine places
 * them (PeakBinner: fixtures/vectors/audio-binner.json), so a gap or a timestamp jump in the file
 * stays where the file puts it.
 *
 * `-copyts` keeps the file's own timestamps (the ffmpeg tool otherwise shifts them to start at 0
 * and smooths MPEG-TS discontinuities away); bins are counted from the container start time, like
 * the cells' frames. Normalisation and bucketing are core/audio.ts's, not this file's.
 */
import type { AudioPeaks, MsRange } from '../../core/audio.js';
import { run } from '../process.js';
import { type AudioDetails, input } from './media.js';

/**
 * Samples placed by timestamp into 1 ms bins. The rule and its vectors:
 * fixtures/vectors/audio-binner.json (the native engine's is crates/vidsheet-core/src/audio.rs
 * `Binner`).
 */
export class PeakBinner {
  /** Max |sample| over every sample at or after the container start. */
  peak = 0;
  readonly bins: Float32Array;
  /** Resync point: pts (time-base units) and rate of the frame that set it. */
  private origin: { pts: bigint; rate: number } | null = null;
  /** Samples counted since the origin. */
  private counted = 0n;
  private readonly num: bigint;
  private readonly den: bigint;

  /**
   * @param startUs container start time, µs (bins count from it)
   * @param range the ms the bins cover, [startMs, endMs)
   * @param timeBase the unit of the frames' pts, [num, den] (ffmpeg's filters see audio in 1/rate)
   */
  constructor(
    private readonly startUs: bigint,
    private readonly range: MsRange,
    timeBase: readonly [number, number],
  ) {
    this.bins = new Float32Array(Math.max(0, range.endMs - range.startMs));
    this.num = BigInt(timeBase[0]);
    this.den = BigInt(timeBase[1]);
  }

  /** One decoded frame: its mono samples, its pts (null when it has none: it continues the count). */
  add(pts: bigint | null, rate: number, mono: Float32Array): void {
    const n = mono.length;
    if (n === 0 || !(rate > 0)) return;
    const { num, den } = this;
    const r = BigInt(rate);
    // The counted position of this frame's first sample, in time-base units (rounded down).
    const counted =
      this.origin && this.origin.rate === rate
        ? this.origin.pts + floorDiv(this.counted * den, r * num)
        : null;
    // 2 ms in time-base units, at least one unit.
    const tolerance = max(1n, (2n * den) / (1000n * num));
    if (pts !== null && (counted === null || abs(pts - counted) > tolerance)) {
      this.origin = { pts, rate };
      this.counted = 0n;
    } else if (pts === null && counted === null) {
      return;
    }
    const origin = (this.origin as { pts: bigint }).pts;
    // Sample j counted from the origin is at t_j ms with t_j * D = A + j * B: D = den * rate * 1000,
    // A = origin * num * rate * 1e6 - startUs * den * rate, B = den * 1e6. Exact in BigInt for the
    // frame's first sample; then stepped in doubles, reduced by gcd(B, D) (a whole multiple of
    // both, so the bins stay exact) to small numbers.
    const d = den * r * 1000n;
    const b = den * 1_000_000n;
    const n0 = origin * num * r * 1_000_000n - this.startUs * den * r + this.counted * b;
    const k0 = floorDiv(n0, d);
    const g = gcd(b, d);
    const dn = Number(d / g);
    const step = Number(b / g);
    let acc = Number((n0 - k0 * d) / g); // 0 <= acc < dn
    let k = Number(k0);
    this.counted += BigInt(n);
    const lo = this.range.startMs;
    const hi = this.range.endMs;
    let binPeak = 0;
    for (let i = 0; i < n; i++) {
      const v = Math.abs(mono[i] as number);
      if (k >= 0) {
        if (v > this.peak) this.peak = v;
        if (v > binPeak) binPeak = v;
      }
      acc += step;
      if (acc >= dn || i === n - 1) {
        if (k >= lo && k < hi && binPeak > (this.bins[k - lo] as number)) this.bins[k - lo] = binPeak;
        binPeak = 0;
        k += Math.floor(acc / dn);
        acc %= dn;
      }
    }
  }
}

const abs = (x: bigint) => (x < 0n ? -x : x);
const max = (a: bigint, b: bigint) => (a > b ? a : b);
const floorDiv = (a: bigint, b: bigint) => {
  const q = a / b;
  return a % b !== 0n && a < 0n !== b < 0n ? q - 1n : q;
};
const gcd = (a: bigint, b: bigint): bigint => (b === 0n ? abs(a) : gcd(b, a % b));

/**
 * One `ashowinfo` line: the decoded frame's pts (1/rate units), channels, rate and samples. (A
 * layout without a name prints as "3 channels": the layout field may hold spaces.)
 */
const FRAME_LINE =
  /\] n:\d+ pts:(-?\d+|NOPTS) pts_time:\S+ pos:\S+ fmt:\S+ channels:(\d+) chlayout:.*? rate:(\d+) nb_samples:(\d+)/;

interface FrameInfo {
  pts: bigint | null;
  rate: number;
  samples: number;
}

/** Decoded PCM bytes waiting for their frame line, first in first out. */
class ByteQueue {
  private chunks: Buffer[] = [];
  length = 0;

  push(chunk: Buffer): void {
    this.chunks.push(chunk);
    this.length += chunk.length;
  }

  take(bytes: number): Buffer {
    const parts: Buffer[] = [];
    let left = Math.min(bytes, this.length);
    this.length -= left;
    while (left > 0) {
      const head = this.chunks[0] as Buffer;
      if (head.length <= left) {
        parts.push(head);
        this.chunks.shift();
        left -= head.length;
      } else {
        parts.push(head.subarray(0, left));
        this.chunks[0] = head.subarray(left);
        left = 0;
      }
    }
    return parts.length === 1 ? (parts[0] as Buffer) : Buffer.concat(parts);
  }
}

/**
 * Average of the channels of interleaved f32le samples. A non-finite sample from a broken decoder
 * counts as silence, as on the native engine.
 */
function downmix(data: Buffer, channels: number): Float32Array {
  // A float view of the bytes (little-endian like f32le): copied only when a pipe chunk left them
  // unaligned. The bytes are this run's own, so a mono track is cleaned in place.
  const count = Math.floor(data.length / 4);
  const samples =
    data.byteOffset % 4 === 0
      ? new Float32Array(data.buffer, data.byteOffset, count)
      : new Float32Array(data.buffer.slice(data.byteOffset, data.byteOffset + count * 4));
  const mono = channels === 1 ? samples : new Float32Array(Math.floor(count / channels));
  for (let i = 0, o = 0; i < mono.length; i++, o += channels) {
    let sum = 0;
    for (let c = 0; c < channels; c++) {
      const v = samples[o + c] as number;
      if (Number.isFinite(v)) sum += v;
    }
    mono[i] = sum / channels;
  }
  return mono;
}

/**
 * Raw peaks per ms over `range` and the whole clip's peak (AudioPeaks), for the first audio stream.
 * `containerStart` is the container start time in seconds (ffprobe's format start_time).
 */
export async function audioPeaks(
  path: string,
  audio: AudioDetails | null,
  containerStart: number,
  range: MsRange,
  signal?: AbortSignal,
): Promise<AudioPeaks> {
  const absent: AudioPeaks = {
    present: false,
    clipPeak: 0,
    startMs: range.startMs,
    peaks: new Float32Array(0),
  };
  if (!audio) return absent;
  const startUs = BigInt(Math.round(containerStart * 1e6));
  // The pipe's sample layout is the first frame's (ffmpeg converts later frames to it): channels
  // and rate come from the first ashowinfo line, not from the probe; ashowinfo's pts are in 1/rate.
  let layout: { channels: number; rate: number; binner: PeakBinner } | undefined;
  const frames: FrameInfo[] = [];
  let seen = 0;
  let lineCarry = '';
  const pcm = new ByteQueue();

  const readLines = (text: string) => {
    const lines = (lineCarry + text).split('\n');
    lineCarry = lines.pop() ?? '';
    for (const line of lines) {
      const m = FRAME_LINE.exec(line);
      if (!m) continue;
      const rate = Number(m[3]);
      layout ??= {
        channels: Math.max(1, Number(m[2])),
        rate,
        binner: new PeakBinner(startUs, range, [1, rate]),
      };
      frames.push({ pts: m[1] === 'NOPTS' ? null : BigInt(m[1] as string), rate, samples: Number(m[4]) });
      seen++;
    }
  };
  /** Places every frame whose samples have all arrived (at the end: whatever did arrive). */
  const place = (final: boolean) => {
    if (!layout) return;
    const frameBytes = 4 * layout.channels;
    for (let frame = frames[0]; frame; frame = frames[0]) {
      // A frame at another rate than the first reaches the pipe resampled to the first's rate:
      // placed at its pts, its length converted (a mid-stream rate change is rare and approximate).
      const same = frame.rate === layout.rate;
      const count = same ? frame.samples : Math.round((frame.samples * layout.rate) / frame.rate);
      const want = count * frameBytes;
      if (pcm.length < want && !final) return;
      frames.shift();
      const pts =
        same || frame.pts === null ? frame.pts : (frame.pts * BigInt(layout.rate)) / BigInt(frame.rate);
      const bytes = Math.min(want, pcm.length - (pcm.length % frameBytes));
      layout.binner.add(pts, layout.rate, downmix(pcm.take(bytes), layout.channels));
    }
    if (final && pcm.length >= frameBytes) {
      // Samples whose frame line never came (a crash mid-line) continue the count.
      layout.binner.add(
        null,
        layout.rate,
        downmix(pcm.take(pcm.length - (pcm.length % frameBytes)), layout.channels),
      );
    }
  };
  // A decoder error mid-file still leaves what decoded, as on the native engine: the exit code is
  // not a verdict, the frames are.
  await run(
    'ffmpeg',
    [
      '-hide_banner',
      '-nostats',
      '-nostdin',
      // ashowinfo reports at the info level; only its lines are read from stderr.
      '-v',
      'info',
      '-copyts',
      ...input(path, audio.fixed),
      '-map',
      `0:${audio.index}`,
      '-vn',
      '-sn',
      '-dn',
      '-af',
      'ashowinfo',
      '-f',
      'f32le',
      '-c:a',
      'pcm_f32le',
      'pipe:1',
    ],
    {
      timeoutMs: 30 * 60_000,
      signal,
      onStderr: (text) => {
        readLines(text);
        place(false);
      },
      onStdout: (chunk) => {
        pcm.push(chunk);
        place(false);
      },
    },
  );
  readLines('\n');
  if (seen === 0 || !layout) return absent;
  place(true);
  return { present: true, clipPeak: layout.binner.peak, startMs: range.startMs, peaks: layout.binner.bins };
}
