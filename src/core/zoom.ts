/**
 * Where to look next (DESIGN §10): `frame_times` and `zoom_hints`, the one place they are decided.
 *
 * Sampling shows what is on screen at each label; what happens between two cells is invisible on
 * the sheet. The engines already read what betrays it, and hand it over raw (`PacketLog`): every
 * video packet's size and keyframe flag they listed while finding the cells' frames, and a thumbnail
 * of every picture they decoded on the way. Locally the
 * audio peaks are measured anyway. This module turns those into at most MAX_HINTS gaps between
 * consecutive cells, each with a score and the signals that raised it:
 *
 * - `keyframe`: a keyframe the stream's regular keyframe interval does not explain. Encoders put a
 *   keyframe every N pictures and, with scene-cut detection (x264's default), also at a cut, which
 *   restarts the count. So the regular interval is the longest that recurs (within PACKET_MARGIN_S
 *   of the window); a keyframe that comes sooner than that after the previous one is the encoder
 *   saying "the picture changed".
 * - `bitrate`: packets well above the run's baseline. A cut, a flash or a burst of motion cannot be
 *   predicted from the previous picture, so it costs an intra-like packet (or many larger ones);
 *   the baseline is the median gap, so the scene's own level (talking head, noisy camera) is
 *   discounted.
 * - `audio` (local surfaces only): the loudest millisecond in the gap well above the run's usual
 *   loudest millisecond (a click, a bang, speech starting in silence). Sound is heard while frames
 *   are shown, so a gap's sound lies between the two cells' presentation times, not between their
 *   packets' decode times (with B-frames those run a few frames earlier, out of order).
 * - `picture`: the frames the engine decoded between the two cells, on tiny thumbnails: a frame
 *   unlike both cells or its neighbours (a flash, an object that comes and goes), or a step far
 *   above the run's usual (./pictures.ts). A gap none of whose frames was decoded has none.
 *
 * A short departure (the picture's, or the encoder cutting away and straight back) scores above
 * every gap without one: 0.5 and up, the rest below 0.5 (./pictures.ts combinedScore).
 *
 * The packets come from the engines as the contract in ./packet-log.ts says.
 */
import type { AudioPeaks } from './audio.js';
import { type PacketLog, packetSource } from './packet-log.js';
import { combinedScore, pictureGap, pictureScores, picturesOf } from './pictures.js';
import type { HintPackets } from './render-plan.js';
import { formatLabel } from './time.js';
import type { Window } from './window.js';

/** Entries in `zoom_hints` at most (DESIGN §10). */
export const MAX_HINTS = 5;

/**
 * A gap's bytes (its largest packet, or its bytes per second) at least this many times the run's
 * median gap raise `bitrate`. Within one steady scene x264's largest P/B packet per gap varies by
 * well under 2x (the median of gap maxima is already the scene's ordinary peak); a cut without a
 * keyframe, a white flash or a motion burst costs 3x to 20x. Measured on the event clips
 * (test/helpers/events.ts) and the corpus.
 */
export const BITRATE_RATIO = 2.5;
/** The ratio at which the bitrate part of a score reaches 1 (log scale between 1x and this). */
const BITRATE_FULL = 16;
/**
 * An unexplained keyframe's part of a score: the encoder's own scene-cut detector is good evidence
 * of a change, but says nothing of how large it is (bitrate and audio add to it).
 */
const KEYFRAME_WEIGHT = 0.5;
/**
 * Audio: the gap's loudest millisecond must exceed the median gap's loudest by this much (in
 * clip-peak units, 0..1) and be at least twice it. A steady soundtrack varies little from gap to
 * gap; a click in a quiet scene goes from ~0 to near the clip peak.
 */
const AUDIO_JUMP = 0.25;
/**
 * Keyframe intervals (in packets, counted in decode order) that differ by at most this much count
 * as the same interval: B-frame reordering moves a keyframe's decode position against its display
 * position by up to the B-frame run (x265's regular keyframes measured 246, 250 and 254 packets
 * apart for keyint 250), and encoders rarely run more than 8 B-frames.
 */
const INTERVAL_SLACK = 8;
/**
 * A short departure (DESIGN §10 ranks it above an ordinary cut): the encoder cutting away and
 * straight back within this many pictures (a flash, a moment of something else), seen as two
 * unexplained keyframes, or as one followed by a packet at least as large (the way back, coded
 * intra but, inside the encoder's minimum keyframe interval, no sync sample). An ordinary cut's
 * keyframe is the largest packet for a while after it. Without B-frames x264 codes a one-frame
 * white flash as a small keyframe and its return as a large I-frame; on the real-footage haystacks
 * (bench/hunt/real-haystack.mjs) that gap ranked 18th of 179 on its keyframe and bytes, level with
 * the footage's own cuts, which come seconds apart. Half a second at 25 fps.
 */
const DEPARTURE_PICTURES = 12;
/** A departure's part of a score, in place of KEYFRAME_WEIGHT: above any ordinary cut's. */
const DEPARTURE_WEIGHT = 0.9;
/**
 * How far either side of the window the hints read packets (seconds): the keyframe rhythm is
 * learnt there, not from the whole stream. Sixty seconds hold six keyframe intervals of the common
 * encoders (x264's default, 250 frames, is 10 s at 25 fps), and a zoom into ten seconds of a film
 * need not list the whole film (the fallback reads every packet it lists: a 1.1 GB file for a
 * 10 s window of it).
 */
export const PACKET_MARGIN_S = 60;

/**
 * The part of the clip whose packets the hints of `window` read (ms, labels' clock), as a
 * RenderPlan carries it (`hintPackets`): each end only where it leaves part of the clip out;
 * undefined for the whole clip.
 */
export function hintPacketSpan(window: Window, durationMs: number): HintPackets | undefined {
  const [fromMs, toMs] = packetRangeMs(window);
  if (fromMs <= 0 && toMs >= durationMs) return undefined;
  return { ...(fromMs > 0 ? { fromMs } : {}), ...(toMs < durationMs ? { toMs } : {}) };
}

/** The window widened by PACKET_MARGIN_S each side (ms): where the hints read packets. */
const packetRangeMs = (window: Window): [number, number] => [
  window.startMs - PACKET_MARGIN_S * 1000,
  window.endMs + PACKET_MARGIN_S * 1000,
];

export interface ZoomHint {
  start: string;
  end: string;
  score: number;
  signals: Array<'keyframe' | 'bitrate' | 'audio' | 'picture'>;
}

/** One cell of the run, in time order (all sheets together). */
export interface HintCell {
  label: string;
  /** The cell's sample time (ms, labels' clock). */
  timeMs: number;
  /** Presentation time of the frame the cell shows (seconds, labels' clock), null when unreadable. */
  frameTime: number | null;
}

/**
 * Where each cell stands among the packets: its frame's packet's decode time where the engine
 * knows it, else its frame's presentation time, else its sample time.
 */
function packetPositions(cells: HintCell[], log: PacketLog): number[] {
  return cells.map((c, k) => {
    const decoded = log.cells[k];
    if (decoded !== undefined && Number.isFinite(decoded)) return decoded;
    return c.frameTime ?? c.timeMs / 1000;
  });
}

/** A frame time as the report shows it: seconds, at most 3 decimals. */
export const reportedFrameTime = (t: number | null): number | null =>
  t === null || !Number.isFinite(t) ? null : Math.round(t * 1000) / 1000;

/** A window edge as a timecode that is valid window input and means exactly that ms. */
function edgeLabel(ms: number, decimals: number): string {
  const step = 10 ** (3 - decimals);
  return formatLabel(ms, ms % step === 0 ? decimals : 3);
}

interface Gap {
  start: string;
  end: string;
  /** (from, to] in seconds: packets with a time in it belong to the gap (empty when to <= from). */
  from: number;
  to: number;
  /** (heardFrom, heardTo] in seconds: the sound between the two frames, on the presentation clock. */
  heardFrom: number;
  heardTo: number;
}

/**
 * The gaps of a run: window start to the first cell, each cell to the next (across sheets), the
 * last cell to the window end. A gap holds what changes after the frame its first cell shows, up to
 * and including the frame its second cell shows (an unreadable cell stands at its sample time):
 * among the packets, from `at` (packetPositions); in sound, from the frames' presentation times.
 * Gaps between two cells of one frame hold nothing and are left out.
 */
function gapsOf(cells: HintCell[], at: number[], window: Window, decimals: number): Gap[] {
  const first = cells[0];
  const last = cells[cells.length - 1];
  if (!first || !last) return [];
  const shown = cells.map((c) => c.frameTime ?? c.timeMs / 1000);
  // Before the first cell: from the window start itself, which its first frame may show.
  const windowStart = window.startMs / 1000 - 1e-9;
  const edges = [
    { label: edgeLabel(window.startMs, decimals), at: windowStart, shown: windowStart },
    ...cells.map((c, i) => ({ label: c.label, at: at[i] as number, shown: shown[i] as number })),
    { label: edgeLabel(window.endMs, decimals), at: window.endMs / 1000, shown: window.endMs / 1000 },
  ];
  const gaps: Gap[] = [];
  for (let i = 1; i < edges.length; i++) {
    const [a, b] = [edges[i - 1] as (typeof edges)[number], edges[i] as (typeof edges)[number]];
    gaps.push({ start: a.label, end: b.label, from: a.at, to: b.at, heardFrom: a.shown, heardTo: b.shown });
  }
  return gaps.filter((g) => g.to > g.from || g.heardTo > g.heardFrom);
}

/** Median of a non-empty list (0 for an empty one). */
function median(values: number[]): number {
  if (values.length === 0) return 0;
  const s = [...values].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 ? (s[mid] as number) : ((s[mid - 1] as number) + (s[mid] as number)) / 2;
}

interface Packet {
  time: number;
  size: number;
  key: boolean;
}

/**
 * The log's packets, each once, in time order. A packet read twice has the same time, size and
 * flag; two packets may share a time (a first packet timed by its pts among packets timed by
 * their dts), so the time alone does not identify one.
 */
function packetsOf(log: PacketLog): Packet[] {
  const { times, sizes, keys } = log;
  // An index's listing is usually in time order already, each time once: nothing to merge.
  if (times.every((t, i) => Number.isFinite(t) && (i === 0 || t > (times[i - 1] as number))))
    return Array.from(times, (time, i) => ({ time, size: sizes[i] ?? 0, key: keys[i] === 1 }));
  const order: number[] = [];
  for (let i = 0; i < times.length; i++) if (Number.isFinite(times[i])) order.push(i);
  // A stable sort: packets of one time stay in the order the log read them.
  order.sort((a, b) => (times[a] as number) - (times[b] as number));
  const out: Packet[] = [];
  const seen = new Set<number>(); // size * 2 + key of the packets kept at `current`
  let current = Number.NaN;
  for (const i of order) {
    const time = times[i] as number;
    const size = sizes[i] ?? 0;
    const key = keys[i] === 1;
    if (time !== current) {
      current = time;
      seen.clear();
    }
    const id = size * 2 + (key ? 1 : 0);
    if (seen.has(id)) continue;
    seen.add(id);
    out.push({ time, size, key });
  }
  return out;
}

/** The spans as [start, end] pairs, merged where they overlap. */
function spansOf(log: PacketLog): Array<[number, number]> {
  const spans: Array<[number, number]> = [];
  for (let i = 0; i + 1 < log.spans.length; i += 2)
    spans.push([log.spans[i] as number, log.spans[i + 1] as number]);
  spans.sort((a, b) => a[0] - b[0]);
  const merged: Array<[number, number]> = [];
  for (const s of spans) {
    const last = merged[merged.length - 1];
    if (last && s[0] <= last[1]) last[1] = Math.max(last[1], s[1]);
    else merged.push([...s]);
  }
  return merged;
}

/**
 * Consecutive keyframes: the later one's time, the earlier one's, and how far apart they are
 * (packets or frames).
 */
interface Interval {
  time: number;
  from: number;
  length: number;
}

/** Unexplained keyframes (their times), and those of them that make a short departure. */
interface Unexplained {
  times: number[];
  departures: number[];
}

/**
 * Keyframes the regular interval does not explain. Intervals are counted in pictures (an
 * encoder's keyframe interval is a picture count, whatever the timestamps of a variable-rate
 * stream say). The regular interval is the longest interval that occurs at least twice; a
 * keyframe that follows its predecessor sooner than that (by more than the slack) is unexplained.
 * When no interval recurs (a short clip, an irregular encoder), none is: a short clip's cut then
 * shows by its bytes alone. An intra-only codec (every picture a keyframe) has none. Returns the
 * unexplained keyframes' times, or null when the cadence is unknown.
 */
function unexplainedOf(intervals: Interval[]): Unexplained | null {
  if (intervals.length === 0) return null;
  if (intervals.every((v) => v.length === 1)) return { times: [], departures: [] };
  const counts = new Map<number, number>();
  for (const { length } of intervals) {
    let matches = 0;
    for (const other of intervals) if (Math.abs(other.length - length) <= INTERVAL_SLACK) matches++;
    counts.set(length, matches);
  }
  const recurring = [...counts].filter(([, n]) => n >= 2).map(([length]) => length);
  // Without a recurring interval the cadence is unknown, and nothing is unexplained: on the corpus,
  // AVI and Ogg files whose keyframe intervals never repeat exactly gave a hint at every keyframe
  // when these counted as cuts (and only the engine that had read the whole stream gave them).
  if (!recurring.length) return null;
  const regular = Math.max(...recurring);
  const short = intervals.filter((v) => v.length < regular - INTERVAL_SLACK);
  const times = short.map((v) => v.time);
  // Away and straight back: both keyframes of a short interval that follows an unexplained one.
  const departures = short
    .filter((v) => v.length <= DEPARTURE_PICTURES && times.includes(v.from))
    .flatMap((v) => [v.from, v.time]);
  return { times, departures };
}

/**
 * Unexplained keyframes among the listed packets: intervals counted in packets (decode order),
 * only between keyframes listed in the same span. A departure is also an unexplained keyframe
 * followed, within DEPARTURE_PICTURES packets of its span, by a packet at least as large: the way
 * back coded as a picture of its own, which is no sync sample when it falls inside the encoder's
 * minimum keyframe interval (x264 codes a one-frame flash's return as a plain I-frame, whose
 * bytes both engines list; only FFmpeg's parser would call it a keyframe).
 */
export function unexplainedKeyframes(packets: Packet[], spans: Array<[number, number]>): Unexplained | null {
  const inSpan = (t: number) => spans.findIndex(([a, b]) => t >= a && t <= b);
  const intervals: Interval[] = [];
  const keyAt = new Map<number, { index: number; span: number }>();
  let prev: { index: number; span: number; time: number } | null = null;
  for (let i = 0; i < packets.length; i++) {
    const p = packets[i] as Packet;
    if (!p.key) continue;
    const span = inSpan(p.time);
    if (span >= 0) keyAt.set(p.time, { index: i, span });
    if (prev && span >= 0 && prev.span === span)
      intervals.push({ time: p.time, from: prev.time, length: i - prev.index });
    prev = span >= 0 ? { index: i, span, time: p.time } : null;
  }
  const found = unexplainedOf(intervals);
  if (!found) return found;
  const departures = new Set(found.departures);
  for (const time of found.times) {
    const at = keyAt.get(time);
    if (!at) continue;
    const key = packets[at.index] as Packet;
    for (let i = at.index + 1; i <= at.index + DEPARTURE_PICTURES && i < packets.length; i++) {
      const back = packets[i] as Packet;
      if (inSpan(back.time) !== at.span) break;
      if (back.size >= key.size) {
        departures.add(time).add(back.time);
        break;
      }
    }
  }
  return { times: found.times, departures: [...departures] };
}

/**
 * Unexplained keyframes of a keyframe-only index (ascending, distinct times): intervals counted in
 * frames, the seconds between two keyframes over the stream's frame step (null when unknown).
 */
export function unexplainedIndexKeys(times: number[], step: number | null): Unexplained | null {
  if (step === null) return null;
  const intervals = times.slice(1).map((t, i) => {
    const from = times[i] as number;
    return { time: t, from, length: Math.round((t - from) / step) };
  });
  return unexplainedOf(intervals);
}

/**
 * The stream's frame step (seconds): the median step between consecutive listed packets of one
 * span; null with fewer than two such packets.
 */
function frameStep(packets: Packet[], spans: Array<[number, number]>): number | null {
  const inSpan = (t: number) => spans.findIndex(([a, b]) => t >= a && t <= b);
  const steps: number[] = [];
  for (let i = 1; i < packets.length; i++) {
    const [a, b] = [packets[i - 1] as Packet, packets[i] as Packet];
    const span = inSpan(b.time);
    if (b.time > a.time && span >= 0 && inSpan(a.time) === span) steps.push(b.time - a.time);
  }
  return steps.length ? median(steps) : null;
}

/** What the packets say of one gap: its largest packet and bytes per second, regular keyframes left out. */
interface GapBytes {
  peak: number;
  rate: number;
  keyframe: boolean;
  /** One of its unexplained keyframes makes a short departure (DEPARTURE_PICTURES). */
  departure: boolean;
  /** Its packets were not measured (only the index's keyframe signal holds). */
  unmeasured?: boolean;
}

/**
 * The hints of a run (DESIGN §10): at most MAX_HINTS gaps with at least one signal, highest score
 * first (then earliest), `[]` when nothing stands out. `audio` only on local surfaces.
 */
export function zoomHints(input: {
  cells: HintCell[];
  window: Window;
  /** The labels' decimals (the plan's), for the window edges. */
  decimals: number;
  /** The demuxer's name as the probe found it (`ProbeInfo.format`): where the packets come from. */
  container: string;
  packets: PacketLog;
  audio?: AudioPeaks | null;
  /** How many to keep: MAX_HINTS, unless a benchmark ranks every gap with a signal. */
  limit?: number;
}): ZoomHint[] {
  const gaps = gapsOf(input.cells, packetPositions(input.cells, input.packets), input.window, input.decimals);
  if (gaps.length === 0) return [];
  const source = packetSource(input.container);
  // Only the packets within PACKET_MARGIN_S of the window count, whatever more an engine listed.
  const [lo, hi] = packetRangeMs(input.window).map((ms) => ms / 1000) as [number, number];
  const near = (t: number) => t >= lo && t <= hi;
  const packets = source === 'none' ? [] : packetsOf(input.packets).filter((p) => near(p.time));
  const spans =
    source === 'none'
      ? []
      : spansOf(input.packets)
          .map(([a, b]): [number, number] => [Math.max(a, lo), Math.min(b, hi)])
          .filter(([a, b]) => a <= b);
  const indexed = source === 'cues';
  const indexKeys = indexed ? [...new Set(input.packets.indexKeys)].filter(near).sort((a, b) => a - b) : [];
  const found = indexed
    ? unexplainedIndexKeys(indexKeys, frameStep(packets, spans))
    : unexplainedKeyframes(packets, spans);
  const unexplained = new Set(found?.times ?? []);
  const departures = new Set(found?.departures ?? []);
  // A keyframe the cadence explains is big by design: it says nothing of the picture. Where the
  // cadence is unknown, a keyframe's bytes count like any packet's (a VFR screen recording's few
  // keyframes are its changes).
  // An index's keyframe times are presentation times, a packet's its decode time: a listed
  // keyframe is the index's nearest one.
  const nearestIndexKey = (t: number) =>
    indexKeys.reduce((best, k) => (Math.abs(k - t) < Math.abs(best - t) ? k : best), Number.NaN);
  const regularKey = (p: Packet) =>
    found !== null && p.key && !unexplained.has(indexed ? nearestIndexKey(p.time) : p.time);
  const keyframeIn = (g: Gap, of = unexplained) => [...of].some((t) => t > g.from && t <= g.to);

  // With a keyframe-only index, a gap is measured only within one keyframe interval (no index
  // keyframe in it): the native engine reads from the keyframe before each cell to the cell, so
  // that is what both engines have read, whatever more the fallback's listing holds.
  const covered = (g: Gap) =>
    g.to > g.from &&
    spans.some(([a, b]) => a <= g.from && b >= g.to) &&
    !(indexed && indexKeys.some((t) => t > g.from && t <= g.to));
  const bytes: Array<GapBytes | null> = gaps.map((g) => {
    const departure = indexed && keyframeIn(g, departures);
    if (!covered(g))
      return indexed && keyframeIn(g)
        ? { peak: 0, rate: 0, keyframe: true, departure, unmeasured: true }
        : null;
    let peak = 0;
    let total = 0;
    let keyframe = indexed && keyframeIn(g);
    let away = departure;
    for (let k = firstPacketAfter(packets, g.from); k < packets.length; k++) {
      const p = packets[k] as Packet;
      if (p.time > g.to) break;
      if (!indexed && unexplained.has(p.time)) keyframe = true;
      if (!indexed && departures.has(p.time)) away = true;
      if (regularKey(p)) continue;
      peak = Math.max(peak, p.size);
      total += p.size;
    }
    return { peak, rate: total / (g.to - g.from), keyframe, departure: away };
  });
  const measured = bytes.filter((b): b is GapBytes => b !== null && !b.unmeasured);
  const basePeak = median(measured.map((b) => b.peak));
  const baseRate = median(measured.map((b) => b.rate));

  const loudest = gaps.map((g) =>
    input.audio && g.heardTo > g.heardFrom
      ? loudestIn(input.audio, g.heardFrom * 1000, g.heardTo * 1000)
      : null,
  );
  const baseLoud = median(loudest.filter((l): l is number => l !== null));

  const decoded = picturesOf(input.packets);
  const pictures = pictureScores(
    gaps.map((g) => (g.heardTo > g.heardFrom ? pictureGap(decoded, g.heardFrom, g.heardTo) : null)),
  );

  const hints: Array<ZoomHint & { order: number }> = [];
  for (const [i, g] of gaps.entries()) {
    const signals: ZoomHint['signals'] = [];
    let quiet = 1; // product of (1 - part): the score is 1 - quiet
    const b = bytes[i];
    if (b?.keyframe) {
      signals.push('keyframe');
      quiet *= 1 - (b.departure ? DEPARTURE_WEIGHT : KEYFRAME_WEIGHT);
    }
    if (b && !b.unmeasured && basePeak > 0 && baseRate > 0) {
      const ratio = Math.max(b.peak / basePeak, b.rate / baseRate);
      if (ratio >= BITRATE_RATIO) {
        signals.push('bitrate');
        quiet *= 1 - Math.min(1, Math.log(ratio) / Math.log(BITRATE_FULL));
      }
    }
    const loud = loudest[i];
    if (loud !== null && loud !== undefined && loud - baseLoud >= AUDIO_JUMP && loud >= 2 * baseLoud) {
      signals.push('audio');
      quiet *= 1 - Math.min(1, loud - baseLoud);
    }
    const picture = pictures[i] ?? null;
    if (picture && (picture.departs || picture.step > 0)) signals.push('picture');
    if (signals.length === 0) continue;
    const score = combinedScore(1 - quiet, picture, b?.keyframe === true && b.departure);
    hints.push({
      start: g.start,
      end: g.end,
      score: Math.round(score * 100) / 100,
      signals,
      order: i,
    });
  }
  hints.sort((a, b) => b.score - a.score || a.order - b.order);
  return hints
    .slice(0, input.limit ?? MAX_HINTS)
    .map(({ start, end, score, signals }) => ({ start, end, score, signals }));
}

/** The first packet with a time after `t`, in a time-ordered list. */
function firstPacketAfter(packets: Packet[], t: number): number {
  let lo = 0;
  let hi = packets.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if ((packets[mid] as Packet).time <= t) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** Clip-peak level (0..1) of the loudest ms in (from, to] ms; null without audio. */
function loudestIn(audio: AudioPeaks, fromMs: number, toMs: number): number | null {
  if (!audio.present || !(audio.clipPeak > 0)) return null;
  const lo = Math.max(Math.floor(fromMs) + 1, audio.startMs) - audio.startMs;
  const hi = Math.min(Math.ceil(toMs) + 1, audio.startMs + audio.peaks.length) - audio.startMs;
  let peak = 0;
  for (let i = lo; i < hi; i++) peak = Math.max(peak, audio.peaks[i] as number);
  return Math.min(1, peak / audio.clipPeak);
}
