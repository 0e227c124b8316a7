/**
 * The fallback engine's probe: what the file holds, learnt with ffprobe only (DESIGN §1: on the
 * hosted side ffmpeg runs only after the debit). It reports facts (engine/types.ts `ProbeInfo`);
 * core/probe.ts decides the stream and the clip's extent from them. The native engine's twin is
 * crates/vidsheet-core/src/probe.rs.
 *
 * Three kinds of ffprobe runs, the last two in parallel:
 * - one `-show_format -show_streams` for the facts every stream declares;
 * - per video stream (cover art aside), its first packets decoded until a frame comes out
 *   (`decodes`), so a codec this FFmpeg lacks or a broken bitstream is known before planning;
 * - the packet listings that find where the data really ends (extent.ts).
 * A server's job probes within bounds, one run at a time and decoding the candidates' pictures
 * only (probeBounded).
 */
import { stat } from 'node:fs/promises';
import { containerAllowed } from '../../core/containers.js';
import { videoCandidates } from '../../core/probe.js';
import { run } from '../process.js';
import { referenceReach } from '../reach.js';
import { EngineError, type ProbeInfo, type VideoStreamFacts } from '../types.js';
import { MAX_PIXELS_REFUSED, outOfMemoryLine } from './decode.js';
import { withoutRefused } from './decode-log.js';
import { readableEnds } from './extent.js';
import { extradataSps, fromHexdump, type Sps } from './h264.js';
import type { Layout } from './leading-bytes.js';
import {
  type AudioDetails,
  firstInput,
  input,
  num,
  type Opening,
  type RunBounds,
  rates,
  ratio,
  type StreamJson,
  type VideoDetails,
} from './media.js';

/** Everything one probe learnt: the facts it reports, and what a render of any stream needs. */
export interface Probed {
  info: ProbeInfo;
  /** The demuxer every later run fixes (`-f`): set when the probe was restricted. */
  fixed: string | undefined;
  video: Map<number, VideoDetails>;
  /** The audio streams by index, in stream order (the envelope is built from one of them). */
  audio: Map<number, AudioDetails>;
}

/**
 * The last probe, keyed by path, size and mtime: a job probes once to plan and again to render.
 * The render's opening fixes the demuxer the plan's probe detected, so it reuses that probe.
 */
let lastProbe: { key: string; opening: Opening; probed: Promise<Probed> } | undefined;

export async function probeFile(path: string, opening: Opening = {}): Promise<Probed> {
  const s = await stat(path).catch(() => null);
  const key = s ? `${path}\0${s.size}\0${s.mtimeMs}` : '';
  const last = lastProbe;
  if (key && last?.key === key) {
    if (sameOpening(last.opening, opening)) return last.probed;
    const same = last.opening.bounds?.maxPixels === opening.bounds?.maxPixels;
    if (same && 'format' in opening && (await last.probed.catch(() => null))?.fixed === opening.format) {
      return last.probed;
    }
  }
  const probed = probeUncached(path, opening);
  if (key) {
    const entry = { key, opening, probed };
    lastProbe = entry;
    probed.catch(() => {
      if (lastProbe === entry) lastProbe = undefined;
    });
  }
  return probed;
}

function sameOpening(a: Opening, b: Opening): boolean {
  if (a.bounds?.maxPixels !== b.bounds?.maxPixels) return false;
  if ('format' in a || 'format' in b) return 'format' in a && 'format' in b && a.format === b.format;
  return a.allowed?.join('\n') === b.allowed?.join('\n');
}

/** The details a render of `stream` needs; the stream must be one the probe found. */
export function videoDetails(probed: Probed, stream: number): VideoDetails {
  const details = probed.video.get(stream);
  if (!details) throw new EngineError('render_failed', `stream ${stream} is not a video stream of the file`);
  return details;
}

async function probeUncached(path: string, opening: Opening): Promise<Probed> {
  const { bounds } = opening;
  if (bounds) return probeBounded(path, opening, bounds);
  const shown = await show(path, opening, true);
  const { video, audio } = shown;
  const [decodes, ends] = await Promise.all([
    Promise.all(
      video.map((s) => (s.disposition?.attached_pic ? false : decodesAFrame(path, shown.fixed, s.index))),
    ),
    readableEnds(path, shown.fixed, [...video, ...audio], { ...shown, bounds }),
  ]);
  return build(shown, (index) => decodes[video.findIndex((s) => s.index === index)] === true, ends);
}

/** What one ffprobe `-show_streams` run found. */
interface Shown {
  streams: StreamJson[];
  video: StreamJson[];
  audio: StreamJson[];
  programs: Array<{ program_id?: number; streams?: Array<{ index?: number }> }>;
  declared: number;
  startTime: number;
  formatName: string;
  /** The demuxer every later run fixes (`-f`): set when the probe was restricted. */
  fixed: string | undefined;
  sampleTable: boolean;
  bounds: RunBounds | undefined;
}

/**
 * One ffprobe `-show_format -show_streams -show_programs` run. `analyse`: with FFmpeg's stream
 * analysis (decoding a frame of each stream it is allowed to, see media.ts `bounded`), and the
 * codec extradata; without, only what the container's headers state.
 */
async function show(path: string, opening: Opening, analyse: boolean): Promise<Shown> {
  const { code, stdout, stderr } = await run(
    'ffprobe',
    [
      // Warnings too: ffprobe says at that level which stream's decoder it could not open.
      ...['-v', 'warning', '-print_format', 'json', '-show_format', '-show_streams', '-show_programs'],
      ...(analyse ? ['-show_data'] : ['-nofind_stream_info']),
      ...firstInput(path, opening),
    ],
    { timeoutMs: 60_000 },
  );
  let parsed: {
    streams?: StreamJson[];
    format?: { duration?: string; start_time?: string; format_name?: string };
    programs?: Shown['programs'];
  };
  try {
    parsed = JSON.parse(stdout.toString() || '{}');
  } catch {
    parsed = {};
  }
  if (code !== 0 || !parsed.format) {
    // ffprobe opens a decoder for every stream after the analysis and exits if one fails. A video
    // stream refused with a max_pixels of 0 (media.ts `bounded`) fails there when its decoder
    // gave it back a size (H.264 does, from its parameter sets; a PNG's analysis zeroes it): that
    // stream is then allowed its decoder, as without the refusal, and the run made again.
    const failed = Number(/Could not open codec for input stream (\d+)/.exec(stderr)?.[1] ?? Number.NaN);
    // (An audio stream that fails there fails again, now listed: no third run.)
    const bounds = opening.bounds;
    if (analyse && bounds?.video && Number.isInteger(failed) && !bounds.video.includes(failed)) {
      return show(path, { ...opening, bounds: { ...bounds, video: [...bounds.video, failed] } }, analyse);
    }
    if (analyse && bounds?.refuse?.includes(failed)) {
      return show(
        path,
        { ...opening, bounds: { ...bounds, refuse: bounds.refuse.filter((i) => i !== failed) } },
        analyse,
      );
    }
    // Out of memory (the worker's limit, DESIGN §5a) is the job's failure, not the file's; FFmpeg
    // also says it when refusing a stream over max_streams, which is the file's.
    const log = withoutRefused(stderr);
    if (/Cannot allocate memory/.test(log) && !/exceeds max_streams/.test(log)) {
      throw new EngineError('render_failed', `ffprobe ran out of memory opening ${path}`);
    }
    throw new EngineError('unreadable_video', `ffprobe could not open ${path}`);
  }
  const streams = parsed.streams ?? [];
  const formatName = parsed.format.format_name ?? '';
  // FFmpeg's whitelist refused any other demuxer before it read the file; this is the rule itself.
  const allowed = 'allowed' in opening ? opening.allowed : undefined;
  if (!containerAllowed(formatName, allowed)) {
    throw new EngineError('unreadable_video', `the container format (${formatName}) is not allowed here`);
  }
  return {
    streams,
    video: streams.filter((s) => s.codec_type === 'video'),
    audio: streams.filter((s) => s.codec_type === 'audio'),
    programs: parsed.programs ?? [],
    declared: num(parsed.format.duration) ?? 0,
    startTime: num(parsed.format.start_time) ?? 0,
    formatName,
    // Restricted: every later run fixes the demuxer this probe detected, never detecting again.
    fixed: 'format' in opening ? opening.format : allowed ? formatName : undefined,
    sampleTable: /\b(mov|mp4)\b/.test(formatName),
    bounds: opening.bounds,
  };
}

/**
 * A bounded probe (DESIGN §5a; the native engine's walk is engine/focus.ts), with no picture
 * decoded but the stream rule's candidates', one at a time:
 * - the container's headers alone (no stream analysis): the streams and the sizes they state;
 * - with more than one video stream to choose from, the survey that ranks them: the stream
 *   analysis with a decoder for the video streams whose size no header states only (a transport
 *   stream's: the decoder's look at the parameter sets tells it), the others' sizes the headers';
 * - for each candidate, best first, until one gives a frame: the stream analysis decoding that
 *   stream only, its frame trial, and then the packet listings that find where the data ends.
 * Every run after the first fixes the demuxer the first found (when restricted).
 */
async function probeBounded(path: string, opening: Opening, bounds: RunBounds): Promise<Probed> {
  // No decoder refused here: nothing decodes without the analysis, and ffprobe opens every
  // stream's decoder, which a stated size over a max_pixels of 0 would fail.
  const headers = await show(path, opening, false);
  const later = (focus: RunBounds): Opening =>
    headers.fixed === undefined ? { ...opening, bounds: focus } : { format: headers.fixed, bounds: focus };
  const stated = new Map(headers.video.map((s) => [s.index, s]));
  const pool = headers.video.filter((s) => s.disposition?.attached_pic !== 1);
  let survey = headers;
  let order = pool.map((s) => s.index);
  const sized = headers.video.filter((s) => (s.width ?? 0) > 0 && (s.height ?? 0) > 0).map((s) => s.index);
  // One stream whose size the headers state needs no ranking. A demuxer that finds its streams as
  // it reads them (MPEG-TS past its first program, MPEG-PS, FLV) states no size: the survey's
  // analysis finds them all, and decodes them (their size is known no other way).
  if (pool.length !== 1 || !sized.includes(pool[0]?.index as number)) {
    survey = await show(path, later({ ...bounds, refuse: sized }), true);
    order = videoCandidates(build(survey, () => false, new Map(), stated).info.videoStreams).map(
      (s) => s.index,
    );
  }
  // The one audio stream decoded with it: the file's first, as the native engine's.
  const audio = (survey.audio[0] ?? headers.audio[0])?.index;
  for (const index of order) {
    const focused = await show(path, later({ ...bounds, video: [index], audio }), true);
    const s = focused.video.find((v) => v.index === index);
    const { width, height } = s ? displaySize(s) : { width: 0, height: 0 };
    if (!s || s.disposition?.attached_pic === 1 || width <= 0 || height <= 0) continue;
    if (!(await decodesAFrame(path, focused.fixed, index, focused.bounds))) continue;
    const ends = await readableEnds(path, focused.fixed, [...focused.video, ...focused.audio], focused);
    return build(focused, (i) => i === index, ends, stated);
  }
  return build(survey, () => false, new Map(), stated);
}

/**
 * The probe's facts and every stream's details from one analysed run, which streams gave a frame,
 * and where their data ends. `stated`: the headers' streams, whose sizes stand for the ones a
 * bounded run's analysis zeroed (a refused decoder's, media.ts `bounded`).
 */
function build(
  shown: Shown,
  decodes: (index: number) => boolean,
  ends: Map<number, number>,
  stated?: Map<number, StreamJson>,
): Probed {
  const { video, audio, declared, startTime, formatName, fixed, sampleTable, bounds } = shown;
  // The ids of the programs (MPEG-TS services) that list each stream.
  const programs = (index: number) =>
    shown.programs.flatMap((p) =>
      p.program_id !== undefined && p.streams?.some((s) => s.index === index) ? [p.program_id] : [],
    );
  const details = new Map<number, VideoDetails>();
  const facts: VideoStreamFacts[] = video.map((analysed) => {
    const header = stated?.get(analysed.index);
    const sized = (analysed.width ?? 0) > 0 && (analysed.height ?? 0) > 0;
    const s = sized || !header ? analysed : { ...analysed, width: header.width, height: header.height };
    const tb = ratio(s.time_base) ?? [1, 1_000_000];
    const readableEnd = ends.get(s.index) ?? null;
    // The codec extradata as the demuxer filled it while probing (Annex B parameter sets in
    // MPEG-TS and PS too), as the native engine reads it.
    const extradata = fromHexdump(s.extradata ?? '');
    const sps = s.codec_name === 'h264' ? extradataSps(extradata) : null;
    details.set(s.index, {
      index: s.index,
      trackId: s.id && /^0x[0-9a-f]+$/i.test(s.id) ? Number.parseInt(s.id, 16) : null,
      codec: s.codec_name ?? '',
      timeBase: [BigInt(tb[0]), BigInt(tb[1])],
      rates: rates(s),
      startTime,
      startUs: BigInt(Math.round(startTime * 1e6)),
      declared,
      readableEnd,
      mayBeInterlaced: s.field_order !== 'progressive' && (s.width ?? 0) >= 4 && (s.height ?? 0) >= 4,
      ptsFromDts: /\bavi\b/.test(formatName),
      reorderDelay: num(s.has_b_frames) ?? 0,
      timestamps: num(s.start_time) !== undefined,
      referenceReach: reachSeconds(s, sps),
      demuxer: formatName,
      fixed,
      // A bounded render of this stream decodes it alone (with the streams ffprobe could not be
      // kept from decoding, see `show`).
      bounds: bounds && { ...bounds, video: [s.index, ...(bounds.video ?? []).filter((i) => i !== s.index)] },
      indexed: /\b(mov|mp4|matroska|webm|avi|flv)\b/.test(formatName),
      sampleTable,
      nal: sampleTable ? nalLayout(s) : null,
      h264: h264Reading(s, h264Layout(sampleTable, formatName), extradata, sps),
    });
    return {
      index: s.index,
      ...displaySize(s),
      isDefault: s.disposition?.default === 1,
      attachedPic: s.disposition?.attached_pic === 1,
      frames: frameCount(s, declared),
      decodes: decodes(s.index),
      readableEnd,
      programs: programs(s.index),
    };
  });
  const audioEnds = audio.map((s) => ends.get(s.index)).filter((e): e is number => e !== undefined);
  return {
    fixed,
    info: {
      format: formatName,
      duration: declared,
      startTime,
      videoStreams: facts,
      hasAudio: audio.length > 0,
      audioStreams: audio.map((s) => ({ index: s.index, programs: programs(s.index) })),
      audioEnd: audioEnds.length ? Math.max(...audioEnds) : null,
    },
    video: details,
    audio: new Map(
      audio.map((s) => [
        s.index,
        {
          index: s.index,
          channels: s.channels ?? 1,
          sampleRate: num(s.sample_rate) ?? 48000,
          startTime: num(s.start_time) ?? startTime,
          fixed,
        },
      ]),
    ),
  };
}

/** Display size: sample aspect ratio applied to the width, then a quarter turn swaps the sides. */
function displaySize(s: StreamJson): { width: number; height: number } {
  const sar = ratio(s.sample_aspect_ratio) ?? [1, 1];
  const rotation =
    s.side_data_list?.find((d) => d.rotation !== undefined)?.rotation ?? num(s.tags?.rotate) ?? 0;
  const quarterTurn = Math.abs(Math.round(rotation / 90)) % 2 === 1;
  const w = Math.round(((s.width ?? 0) * sar[0]) / sar[1]);
  const h = s.height ?? 0;
  return quarterTurn ? { width: h, height: w } : { width: w, height: h };
}

/** The container's frame count, else duration x average frame rate; null when neither is known. */
function frameCount(s: StreamJson, declared: number): number | null {
  const counted = num(s.nb_frames);
  if (counted !== undefined && counted > 0) return Math.round(counted);
  const rate = ratio(s.avg_frame_rate) ?? ratio(s.r_frame_rate);
  const duration = num(s.duration) ?? declared;
  return rate && duration > 0 ? Math.max(1, Math.round((duration * rate[0]) / rate[1])) : null;
}

/** See VideoDetails.referenceReach: the rule's frame durations, in seconds. */
function reachSeconds(s: StreamJson, sps: Sps | null): number {
  const rate = ratio(s.avg_frame_rate) ?? ratio(s.r_frame_rate) ?? [25, 1];
  const frames = referenceReach(s.codec_name ?? '', sps?.maxNumRefFrames ?? null, num(s.has_b_frames) ?? 0);
  return (frames * rate[1]) / rate[0];
}

/** Length-prefixed H.264/HEVC in MP4/MOV: where each packet's NAL unit headers can be read. */
function nalLayout(s: StreamJson): VideoDetails['nal'] {
  const progressive = s.field_order === 'progressive';
  if (s.codec_name === 'h264' && s.is_avc === 'true') {
    return { codec: 'h264', lengthSize: num(s.nal_length_size) ?? 4, progressive };
  }
  return s.codec_name === 'hevc' ? { codec: 'hevc', lengthSize: 4, progressive } : null;
}

/** Where leading-bytes.ts finds a packet's bytes in this container; null where it cannot. */
function h264Layout(sampleTable: boolean, formatName: string): Layout | null {
  if (sampleTable) return 'sample';
  if (/\bmpegts\b/.test(formatName)) return 'transport';
  if (/\bmpeg\b/.test(formatName)) return 'program';
  return /\bmatroska\b/.test(formatName) ? 'block' : null;
}

/** See VideoDetails.h264: the layouts leading-bytes.ts reads, the SPS from the extradata. */
function h264Reading(
  s: StreamJson,
  layout: Layout | null,
  extradata: Buffer,
  sps: Sps | null,
): VideoDetails['h264'] {
  if (s.codec_name !== 'h264' || layout === null) return null;
  // avcC (MP4) says how long its length prefixes are; Annex B (MPEG-TS, PS) has start codes.
  const lengthSize = extradata[0] === 1 && extradata.length > 4 ? ((extradata[4] as number) & 3) + 1 : null;
  if (layout !== 'transport' && layout !== 'program' && lengthSize === null) return null;
  return { layout, lengthSize, sps };
}

/**
 * Whether a frame of `stream` decodes: its first few packets, then (a stream opening mid-GOP, as
 * broadcast captures do) up to 300, decoded until the end of that read; the decoder is flushed, so
 * B-frame delay does not hide a frame.
 */
async function decodesAFrame(
  path: string,
  fixed: string | undefined,
  stream: number,
  bounds?: RunBounds,
): Promise<boolean> {
  for (const packets of [8, 300]) {
    const { stdout, stderr } = await run(
      'ffprobe',
      [
        '-v',
        'error',
        '-select_streams',
        String(stream),
        '-read_intervals',
        `%+#${packets}`,
        '-show_entries',
        'frame=media_type',
        '-of',
        'csv=p=0',
        ...input(path, fixed, bounds),
      ],
      { timeoutMs: 20_000 },
    );
    if (/\S/.test(stdout.toString())) return true;
    // No frame because memory ran out (the worker's limit) is the job's failure, not the file's; a
    // picture over max_pixels is refused before its buffer is asked for, and says so.
    // The other video streams' decoders, refused (media.ts `bounded`), log their own refusals.
    const log = withoutRefused(stderr);
    if (bounds && outOfMemoryLine(log) && !log.includes(MAX_PIXELS_REFUSED)) {
      throw new EngineError('render_failed', `ffprobe ran out of memory decoding ${path}`);
    }
  }
  return false;
}
