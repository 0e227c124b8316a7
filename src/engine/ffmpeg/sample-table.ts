/**
 * The zoom hints' packets of an MP4/MOV stream read from its sample table, without FFmpeg: each
 * sample's decode time, size and sync flag within a span, as the native engine reads FFmpeg's
 * index of the same table (crates/vidsheet-core/src/video/packets.rs `index_packets`). Listing
 * them with ffprobe reads every sample's bytes: the whole file for an overview, most of what the
 * hints cost one on the fallback (bench/run.mjs --hints); the table is a few hundred bytes a minute.
 *
 * The times are FFmpeg's (libavformat/mov.c of 5.1, `mov_build_index` and `mov_fix_index`): decode
 * times summed from `stts`, and, under an edit list, shifted so the first frame presented is at
 * the end of the empty edits. Modelled: one edit after any empty ones, with the samples before
 * and after it that FFmpeg keeps and where its index ends; non-negative composition offsets; sync
 * samples from `stss` alone. Anything else (fragments, several edits that present media, an edit
 * that starts the index after the first sample, negative offsets, `stps`, sample groups, a table
 * that disagrees with itself, a moov past the size limit) is declined (undefined) and the caller
 * lists with ffprobe, so a file read here gives exactly what ffprobe would list.
 */
import { open } from 'node:fs/promises';
import type { ListedPackets } from '../../core/packet-log.js';
import type { HintPackets } from '../../core/render-plan.js';
import { labelSeconds } from '../timestamps.js';
import type { VideoDetails } from './media.js';

/** A moov larger than this is declined (a three-hour 60 fps film's is under 8 MB). */
const MAX_MOOV_BYTES = 32 << 20;
/** Top-level boxes read before the moov at most (a real file has a handful). */
const MAX_TOP_BOXES = 1024;
/** FFmpeg's `max_stts_delta`: a larger sample duration is a correction it rewrites. */
const MAX_STTS_DELTA = 0xffff_ffff - 48000 * 10;
/** FFmpeg drops a composition offset table with an entry this far from 0 (`mov_read_ctts`). */
const MAX_CTTS = 1 << 28;
/** FFmpeg refuses a sample larger than this (`mov_build_index`). */
const MAX_SAMPLE = 0x3fff_ffff;

/** Something this reading does not model: the caller lists with ffprobe instead. */
class Declined extends Error {}

const decline = (why: string): never => {
  throw new Declined(why);
};

/** A box's payload: [start, end) of the buffer it was read from. */
interface Box {
  type: string;
  start: number;
  end: number;
}

/** The boxes within [from, to) of `b`, in order. */
function* boxes(b: Buffer, from: number, to: number): Generator<Box> {
  for (let at = from; at + 8 <= to; ) {
    let size = b.readUInt32BE(at);
    let head = 8;
    if (size === 1) {
      if (at + 16 > to) decline('box header');
      size = Number(b.readBigUInt64BE(at + 8));
      head = 16;
    } else if (size === 0) size = to - at;
    if (size < head || at + size > to) decline('box size');
    yield { type: b.toString('latin1', at + 4, at + 8), start: at + head, end: at + size };
    at += size;
  }
}

const child = (b: Buffer, parent: Box, type: string): Box | undefined => {
  for (const c of boxes(b, parent.start, parent.end)) if (c.type === type) return c;
  return undefined;
};

/** A full box's table: its entry count (at `countAt` in the payload) and where entries start. */
function table(b: Buffer, box: Box | undefined, countAt: number, entryBytes: number) {
  if (!box) return undefined;
  if (box.start + countAt + 4 > box.end) decline('table header');
  const count = b.readUInt32BE(box.start + countAt);
  const at = box.start + countAt + 4;
  if (count * entryBytes > box.end - at) decline('table length');
  return { count, at };
}

const nonEmpty = <T extends { count: number }>(t: T | undefined) => (t?.count ? t : undefined);

/** The moov box of the file, read whole, or undefined when there is none within the limits. */
async function readMoov(path: string): Promise<{ moov: Buffer; fileSize: number } | undefined> {
  const fh = await open(path, 'r');
  try {
    const fileSize = (await fh.stat()).size;
    const head = Buffer.alloc(16);
    let at = 0;
    for (let n = 0; n < MAX_TOP_BOXES && at + 8 <= fileSize; n++) {
      const { bytesRead } = await fh.read(head, 0, 16, at);
      if (bytesRead < 8) return undefined;
      let size = head.readUInt32BE(0);
      let headBytes = 8;
      if (size === 1) {
        if (bytesRead < 16) return undefined;
        size = Number(head.readBigUInt64BE(8));
        headBytes = 16;
      } else if (size === 0) size = fileSize - at;
      if (size < headBytes) return undefined;
      if (head.toString('latin1', 4, 8) === 'moov') {
        const bytes = Math.min(size, fileSize - at) - headBytes;
        if (bytes > MAX_MOOV_BYTES || size > fileSize - at) return undefined;
        const moov = Buffer.alloc(bytes);
        const read = await fh.read(moov, 0, bytes, at + headBytes);
        return read.bytesRead === bytes ? { moov, fileSize } : undefined;
      }
      at += size;
    }
    return undefined;
  } finally {
    await fh.close();
  }
}

/** The tables of one track that its index is built from (offsets into the moov). */
interface Track {
  /** The media's timescale (`mdhd`), and the movie's (`mvhd`, for the edit's duration). */
  timescale: number;
  movieTimescale: number;
  stts: { count: number; at: number };
  ctts: { count: number; at: number } | undefined;
  stss: { count: number; at: number } | undefined;
  stsz: { count: number; at: number };
  stsc: { count: number; at: number };
  chunks: { count: number; at: number; wide: boolean };
  /** The one edit after any empty ones (see editOf), in the media's timescale. */
  edit: { empty: number; mediaTime: number; duration: number } | undefined;
}

/**
 * The moov's track whose ID is `trackId` (FFmpeg gives a stream its track's ID; stream numbers
 * need not follow the tracks: a cover picture in the metadata is a stream too).
 */
function trackOf(m: Buffer, trackId: number): Track {
  let movieTimescale = 0;
  let trak: Box | undefined;
  for (const c of boxes(m, 0, m.length)) {
    // Fragments add samples the moov does not list; a compressed moov hides its tracks.
    if (c.type === 'mvex' || c.type === 'cmov') decline(c.type);
    if (c.type === 'mvhd') movieTimescale = m.readUInt32BE(c.start + (m.readUInt8(c.start) === 1 ? 20 : 12));
    const tkhd = c.type === 'trak' ? child(m, c, 'tkhd') : undefined;
    if (tkhd && m.readUInt32BE(tkhd.start + (m.readUInt8(tkhd.start) === 1 ? 20 : 12)) === trackId) {
      if (trak) decline('two tracks with one ID');
      trak = c;
    }
  }
  if (!trak || movieTimescale === 0) return decline('no track');
  const mdia = child(m, trak, 'mdia') ?? decline('mdia');
  const mdhd = child(m, mdia, 'mdhd') ?? decline('mdhd');
  const timescale = m.readUInt32BE(mdhd.start + (m.readUInt8(mdhd.start) === 1 ? 20 : 12));
  const hdlr = child(m, mdia, 'hdlr') ?? decline('hdlr');
  if (m.toString('latin1', hdlr.start + 8, hdlr.start + 12) !== 'vide' || timescale === 0)
    decline('not video');
  const minf = child(m, mdia, 'minf') ?? decline('minf');
  const stbl = child(m, minf, 'stbl') ?? decline('stbl');
  selfContained(m, minf);
  const has = new Set<string>();
  for (const c of boxes(m, stbl.start, stbl.end)) has.add(c.type);
  // Partial sync samples and sample groups (HEVC's open GOPs, `rap `) also mark keyframes.
  for (const t of ['stps', 'sbgp', 'sgpd', 'stz2']) if (has.has(t)) decline(t);
  const box = (t: string) => child(m, stbl, t);
  const stsd = table(m, box('stsd'), 4, 0) ?? decline('stsd');
  if (stsd.count !== 1) decline('sample descriptions');
  const stszBox = box('stsz') ?? decline('stsz');
  if (m.readUInt32BE(stszBox.start + 4) !== 0) decline('constant sample size');
  const co64 = box('co64');
  const chunks = table(m, co64 ?? box('stco'), 4, co64 ? 8 : 4) ?? decline('chunk offsets');
  return {
    timescale,
    movieTimescale,
    stts: table(m, box('stts'), 4, 8) ?? decline('stts'),
    // FFmpeg keeps no composition offsets from a table without entries.
    ctts: nonEmpty(table(m, box('ctts'), 4, 8)),
    stss: table(m, box('stss'), 4, 4),
    stsz: table(m, stszBox, 8, 4) ?? decline('stsz'),
    stsc: table(m, box('stsc'), 4, 12) ?? decline('stsc'),
    chunks: { ...chunks, wide: co64 !== undefined },
    edit: editOf(m, child(m, trak, 'edts'), timescale, movieTimescale),
  };
}

/** The samples are in this file (a data reference elsewhere is another file's bytes). */
function selfContained(m: Buffer, minf: Box): void {
  const dinf = child(m, minf, 'dinf');
  const dref = dinf && child(m, dinf, 'dref');
  if (!dref) return;
  for (const entry of boxes(m, dref.start + 8, dref.end)) {
    if ((m.readUInt32BE(entry.start) & 1) === 0) decline('external data');
  }
}

/**
 * The track's edit list: none, or empty edits (their total duration in the media's timescale)
 * followed by one edit from `mediaTime` of `duration`; anything else is declined.
 */
function editOf(m: Buffer, edts: Box | undefined, timescale: number, movieTimescale: number) {
  const elst = edts && child(m, edts, 'elst');
  if (!elst) return undefined;
  const wide = m.readUInt8(elst.start) === 1;
  const bytes = wide ? 20 : 12;
  const t = table(m, elst, 4, bytes) ?? decline('elst');
  if (t.count === 0) return undefined;
  if (elst.end - t.at !== t.count * bytes) decline('elst length');
  // av_rescale: from the movie's timescale to the media's, rounded to nearest.
  const [a, b] = [BigInt(timescale), BigInt(movieTimescale)];
  const rescale = (v: bigint) => Number((v * a + b / 2n) / b);
  let empty = 0;
  for (let i = 0; i < t.count; i++) {
    const at = t.at + i * bytes;
    const duration = wide ? m.readBigUInt64BE(at) : BigInt(m.readUInt32BE(at));
    const mediaTime = wide ? Number(m.readBigInt64BE(at + 8)) : m.readInt32BE(at + 4);
    if (mediaTime === -1 && i < t.count - 1) {
      empty += rescale(duration);
      continue;
    }
    if (i !== t.count - 1 || mediaTime < 0 || duration === 0n) decline('edits');
    return { empty, mediaTime, duration: rescale(duration) };
  }
  return decline('edits');
}

/** One sample as FFmpeg's index holds it before the edit list: decode order. */
interface Sample {
  dts: number;
  /** Presentation time (dts plus the composition offset). */
  cts: number;
  size: number;
  pos: number;
  key: boolean;
}

/**
 * Every sample in decode order, as `mov_build_index` walks them (chunk by chunk, sync samples
 * matched in order, the last duration repeating), or declined where it would stop short, leave
 * samples out or fix a table up.
 */
function* samplesOf(m: Buffer, t: Track): Generator<Sample> {
  const count = t.stsz.count;
  if (count === 0 || t.stts.count === 0 || t.stsc.count === 0 || t.stss?.count === 0) decline('empty table');
  const stsc = (i: number, field: number) => m.readUInt32BE(t.stsc.at + i * 12 + field * 4);
  for (let i = 0; i < t.stsc.count; i++) {
    if (stsc(i, 0) < i + 1 || stsc(i, 1) < 1 || stsc(i, 2) < 1) decline('stsc');
    if (i > 0 && stsc(i, 0) <= stsc(i - 1, 0)) decline('stsc order');
  }
  // FFmpeg stops its index at a chunk table that holds more samples than sizes, before applying
  // the edit list; one that holds fewer leaves samples out. Both are checked before any sample.
  let held = 0;
  for (let chunk = 0, at = 0; chunk < t.chunks.count && held <= count; chunk++) {
    while (at < t.stsc.count - 1 && chunk + 1 === stsc(at + 1, 0)) at++;
    held += stsc(at, 1);
  }
  if (held !== count) decline('chunks hold another number of samples than sizes');
  const ctts = compositionOffsets(m, t.ctts, count);
  const keyOff = t.stss && m.readUInt32BE(t.stss.at) > 0 ? 1 : 0;
  let [sample, dts, stscAt, sttsAt, sttsRun, stssAt] = [0, 0, 0, 0, 0, 0];
  for (let chunk = 0; chunk < t.chunks.count; chunk++) {
    let pos = t.chunks.wide
      ? Number(m.readBigUInt64BE(t.chunks.at + chunk * 8))
      : m.readUInt32BE(t.chunks.at + chunk * 4);
    while (stscAt < t.stsc.count - 1 && chunk + 1 === stsc(stscAt + 1, 0)) stscAt++;
    for (let j = 0; j < stsc(stscAt, 1); j++) {
      let key = !t.stss;
      if (t.stss && sample + keyOff === m.readUInt32BE(t.stss.at + stssAt * 4)) {
        key = true;
        if (stssAt + 1 < t.stss.count) stssAt++;
      }
      const size = m.readUInt32BE(t.stsz.at + sample * 4);
      if (size > MAX_SAMPLE) decline('sample size');
      yield { dts, cts: dts + (ctts.next().value ?? 0), size, pos, key };
      pos += size;
      const delta = m.readUInt32BE(t.stts.at + sttsAt * 8 + 4);
      if (delta > MAX_STTS_DELTA) decline('stts delta');
      dts += delta;
      sample++;
      if (sttsAt + 1 < t.stts.count && ++sttsRun === m.readUInt32BE(t.stts.at + sttsAt * 8)) {
        sttsRun = 0;
        sttsAt++;
      }
    }
  }
}

/** Each sample's composition offset in turn (0 past the table's end), or declined if negative. */
function* compositionOffsets(m: Buffer, ctts: Track['ctts'], samples: number): Generator<number> {
  let given = 0;
  for (let i = 0; ctts && i < ctts.count; i++) {
    const run = m.readInt32BE(ctts.at + i * 8);
    const offset = m.readInt32BE(ctts.at + i * 8 + 4);
    // FFmpeg skips a run it cannot count and shifts decode times for a negative offset.
    if (run <= 0 || offset < 0 || offset >= MAX_CTTS) decline('ctts');
    for (let k = 0; k < run && given < samples; k++, given++) yield offset;
  }
  while (given++ < samples) yield 0;
}

/**
 * What `mov_fix_index` makes of the samples under the track's edit: how many stay in the index
 * and what every decode time gains. It times the samples from the first one the edit presents,
 * after the leading empty edits, then moves them all back by what the earliest presented one
 * still lies past that (so the first frame shown is at the empty edits' end); a sample before
 * the edit's start or past its end keeps its place (FFmpeg discards it after decoding). The index
 * ends after the first keyframe reaching the edit's end (with composition offsets, the second).
 * Declined where the index would start after the first sample: it would leave those out.
 */
function editedIndex(m: Buffer, t: Track): { kept: number; add: number } {
  const edit = t.edit;
  if (!edit) return { kept: t.stsz.count, add: 0 };
  const { empty, mediaTime: from } = edit;
  const to = from + edit.duration;
  let [kept, start, lastAtStart, reached] = [0, -1, -1, 0];
  let first: Sample | undefined;
  let earliest = Number.POSITIVE_INFINITY;
  // A sample's frame duration is known at the next one, so each is judged one step late; true
  // where the index ends after it.
  const judge = (s: Sample, i: number, next: Sample | undefined): boolean => {
    if (s.dts <= from) {
      lastAtStart = i;
      if (s.key && (!t.ctts || s.cts <= from)) start = i;
    }
    if (s.cts >= from && s.cts < to) {
      first ??= s;
      earliest = Math.min(earliest, s.cts);
    }
    kept = i + 1;
    const duration = next ? next.dts - s.dts : edit.duration;
    return s.key && s.cts + duration >= to && ++reached > (t.ctts ? 1 : 0);
  };
  let [i, prev] = [0, undefined as Sample | undefined];
  let ended = false;
  for (const s of samplesOf(m, t)) {
    if (prev && judge(prev, i - 1, s)) {
      ended = true;
      break;
    }
    [prev, i] = [s, i + 1];
  }
  if (prev && !ended) judge(prev, i - 1, undefined);
  // Where no keyframe fits, FFmpeg starts with composition offsets at the first sample, without
  // them at the last one at or before the edit's start.
  if ((start < 0 ? (t.ctts ? 0 : lastAtStart) : start) !== 0) decline('edit starts after the first sample');
  if (!first) return decline('edit holds no sample');
  return { kept, add: empty - first.dts - Math.max(0, earliest - first.dts) };
}

/**
 * The stream's packets within `span` (ms on the labels' clock), as the native engine lists them
 * from FFmpeg's index: decode times, sizes and sync flags, a sample whose bytes lie past the end
 * of the file left out; undefined where the table is not one this reading models (see the module
 * comment) or the file has none.
 */
export async function sampleTablePackets(
  path: string,
  d: VideoDetails,
  span: HintPackets = {},
): Promise<ListedPackets | undefined> {
  const read = await readMoov(path);
  if (!read) return undefined;
  try {
    const { moov, fileSize } = read;
    if (d.trackId === null) return undefined;
    const t = trackOf(moov, d.trackId);
    if (d.timeBase[0] !== 1n || d.timeBase[1] !== BigInt(t.timescale)) return undefined;
    const { kept, add } = editedIndex(moov, t);
    const from = span.fromMs === undefined ? Number.NEGATIVE_INFINITY : span.fromMs / 1000;
    const to = span.toMs === undefined ? Number.POSITIVE_INFINITY : span.toMs / 1000;
    const [times, sizes, keys]: [number[], number[], number[]] = [[], [], []];
    let i = 0;
    for (const s of samplesOf(moov, t)) {
      if (i++ === kept) break;
      if (s.pos + s.size > fileSize) continue;
      const time = labelSeconds(BigInt(s.dts + add), d.timeBase, d.startUs);
      if (time < from || time > to) continue;
      times.push(time);
      sizes.push(s.size);
      keys.push(s.key ? 1 : 0);
    }
    return {
      times: Float64Array.from(times),
      sizes: Float64Array.from(sizes),
      keys: Uint8Array.from(keys),
      spans: Float64Array.of(from, to),
      indexKeys: new Float64Array(0),
    };
  } catch (e) {
    // A RangeError is a read past the moov's bytes: a table longer than its box.
    if (e instanceof Declined || e instanceof RangeError) return undefined;
    throw e;
  }
}
