/**
 * The fallback engine: executes a RenderPlan by spawning ffprobe/ffmpeg. This file is the
 * orchestration only; each step has its own module:
 *
 * - ffmpeg/probe.ts, extent.ts, media.ts: the probe (facts for core/probe.ts, details for the render);
 * - ffmpeg/listing.ts, packets.ts, groups.ts: the packets the frame rule is applied to, and the groups of
 *   targets that share a GOP (decoded by one process, no re-seek);
 * - ffmpeg/nal.ts: reference-picture and random-access hints read from the packets' bytes;
 * - ffmpeg/extract.ts: one group's frames, exactly (recovering from seeks that lie);
 * - ffmpeg/audio.ts: the audio peaks (`audioPeaks`, its own call: core/audio.ts turns them into levels);
 * - ffmpeg/compose.ts, encode.ts: each sheet composed as soon as its cells are in, while later
 *   groups still decode, then labelled and encoded to JPEG.
 *
 * Open-GOP H.264 far from its last IDR is entered at its recovery-point keyframes, the first entry
 * proven once per stream (core/open-gop.ts decides where that pays; ffmpeg/entry-proof.ts proves).
 *
 * Groups run in parallel, one single-threaded process per core. Where every target of a group is
 * a reference picture, the decoder skips the non-reference pictures before them
 * (`-skip_frame noref`), as the native engine does.
 */
import { setMaxListeners } from 'node:events';
import { mkdir, rm } from 'node:fs/promises';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import { entersOpenGops, type GopGroup, runSeconds } from '../core/open-gop.js';
import { audioPeaks } from './ffmpeg/audio.js';
import { composeSheet } from './ffmpeg/compose.js';
import { readFrame } from './ffmpeg/decode.js';
import { encodeSheet } from './ffmpeg/encode.js';
import { proofPairOf } from './ffmpeg/entry-proof.js';
import { extractGroup } from './ffmpeg/extract.js';
import { groupFrames, packetsFor } from './ffmpeg/groups.js';
import type { VideoDetails } from './ffmpeg/media.js';
import { pictureHints } from './ffmpeg/nal.js';
import { listHintPackets, mergeLogs } from './ffmpeg/packet-log.js';
import { frameAt, lastAtOrBefore, listAllPackets, type Packets, seconds } from './ffmpeg/packets.js';
import { probeFile, videoDetails } from './ffmpeg/probe.js';
import { OpenGops } from './ffmpeg/recovery.js';
import { limiter, settleAll } from './process.js';
import { labelSeconds } from './timestamps.js';
import type { BandLevels, Engine, PacketLog, RenderPlan, RenderResult } from './types.js';

export const ffmpegEngine: Engine = {
  name: 'ffmpeg',

  async probe(path, allowed) {
    return (await probeFile(path, { allowed })).info;
  },

  async audioPeaks(path, range, signal, format, stream) {
    const probed = await probeFile(path, format === undefined ? {} : { format });
    // The stream the audio rule chose (core/probe.ts chooseAudioStream), else the first.
    const audio =
      (stream === undefined ? undefined : probed.audio.get(stream)) ?? [...probed.audio.values()][0];
    return audioPeaks(path, audio ?? null, probed.info.startTime, range, signal);
  },

  async render(plan, onProgress, signal, bandLevels) {
    const probed = await probeFile(
      plan.input,
      plan.inputFormat === undefined ? {} : { format: plan.inputFormat },
    );
    const d = videoDetails(probed, plan.videoStream);
    // The render's own controller: the caller's abort, or this render's first failure, stops every
    // child; the render settles only once none of them runs, so the caller may remove tempDir.
    const stop = new AbortController();
    // Every child listens on it (extractions and encoders of a big plan run side by side, past
    // Node's default of 10 listeners, which would print a bogus leak warning); each removes its
    // listener when it exits.
    setMaxListeners(0, stop.signal);
    const abort = () => stop.abort(signal?.reason ?? new Error('render stopped'));
    if (signal?.aborted) abort();
    signal?.addEventListener('abort', abort, { once: true });
    const composing: Promise<void>[] = [];
    try {
      // Pixels a second of the stream decodes to (the open-GOP cost rule's unit of a run's cost).
      const facts = probed.info.videoStreams.find((v) => v.index === plan.videoStream);
      const pixelRate =
        facts?.frames && probed.info.duration > 0
          ? (facts.width * facts.height * facts.frames) / probed.info.duration
          : null;
      return await renderSheets(plan, d, pixelRate, composing, stop, onProgress, bandLevels);
    } catch (error) {
      abort();
      await Promise.allSettled(composing);
      throw error;
    } finally {
      signal?.removeEventListener('abort', abort);
    }
  },
};

/**
 * The body of `render`. Every task it starts is awaited before it returns, or is in `composing`
 * (which `render` waits for when this throws); `stop` ends them all at the first failure.
 */
async function renderSheets(
  plan: RenderPlan,
  d: VideoDetails,
  pixelRate: number | null,
  composing: Promise<void>[],
  stop: AbortController,
  onProgress: ((done: number, total: number) => void) | undefined,
  bandLevels: Promise<BandLevels> | undefined,
): Promise<RenderResult> {
  const abortAll = () => stop.abort(new Error('render stopped'));
  // A sheet that fails stops the decoding at once, and its error, not the stop, is what is thrown.
  let sheetFailure: { error: unknown } | undefined;
  const cells = plan.sheets.flatMap((sheet, s) => sheet.cells.map((cell, c) => ({ s, c, cell })));
  const size = { w: cells[0]?.cell.rect.w ?? 0, h: cells[0]?.cell.rect.h ?? 0 };

  // Each sheet is composed as soon as its cells are in, while later groups still decode. Frames
  // stay in their files until then; a file is removed once every cell showing it is on a canvas.
  const frameOf: Array<bigint | undefined> = cells.map(() => undefined);
  const files = new Map<bigint, string>();
  // Targets shown by the frame before them (their own picture never decoded): for frame_times.
  const shownInstead = new Map<bigint, bigint>();
  const users = new Map<bigint, number>();
  const release = async (pts: bigint) => {
    const left = (users.get(pts) ?? 1) - 1;
    users.set(pts, left);
    const file = files.get(pts);
    if (left > 0 || file === undefined) return;
    files.delete(pts);
    await rm(file, { force: true });
  };
  const waiting = plan.sheets.map((sheet) => sheet.cells.length);
  const firstCell = plan.sheets.map((_, s) => cells.findIndex((k) => k.s === s));
  const unreadable: RenderResult['unreadable'][] = plan.sheets.map(() => []);
  const compose = async (s: number) => {
    const sheet = plan.sheets[s] as RenderPlan['sheets'][number];
    const frames: Array<Buffer | undefined> = [];
    for (const [c, cell] of sheet.cells.entries()) {
      const pts = frameOf[(firstCell[s] as number) + c];
      const file = pts === undefined ? undefined : files.get(pts);
      const rgb = file ? await readFrame(file, cell.rect) : null;
      if (!rgb) unreadable[s]?.push({ sheet: s, cell: c });
      frames.push(rgb ?? undefined);
    }
    for (const [c] of sheet.cells.entries()) {
      const pts = frameOf[(firstCell[s] as number) + c];
      if (pts !== undefined) await release(pts);
    }
    // Levels measured while the frames decoded: awaited only now, by a sheet that has a band.
    const band =
      sheet.band && !sheet.band.message && bandLevels
        ? { ...sheet.band, levels: (await bandLevels)[s] }
        : sheet.band;
    const { canvas, labels } = composeSheet(plan, { ...sheet, band }, frames);
    const script = join(plan.tempDir, `sheet-${s + 1}.filter`);
    await encodeSheet(canvas, labels, plan.quality, sheet.path, script, stop.signal);
  };
  let settled = 0;
  const settle = (ks: number[]) => {
    for (const k of ks) {
      onProgress?.(++settled, cells.length);
      const s = cells[k]?.s as number;
      waiting[s] = (waiting[s] as number) - 1;
      if (waiting[s] !== 0) continue;
      const task = compose(s);
      task.catch((error: unknown) => {
        sheetFailure ??= { error };
        abortAll();
      });
      composing.push(task);
    }
  };

  // Targets in time order. MP4/MOV lists the first ones on their own, so decoding starts while
  // the rest are still being listed.
  const byTime = new Map<number, number[]>();
  for (const [k, { cell }] of cells.entries())
    byTime.set(cell.timeMs, [...(byTime.get(cell.timeMs) ?? []), k]);
  const times = [...byTime.keys()].sort((a, b) => a - b);
  const parallel = Math.max(1, availableParallelism());
  const parts =
    d.sampleTable && times.length > parallel ? [times.slice(0, parallel), times.slice(parallel)] : [times];
  let wholeStream: Promise<Packets> | undefined;
  // Stops the hints' light listing (below) as soon as the whole stream's list, which serves them
  // too, is asked for: the two would demux the whole file twice.
  const hintsStop = new AbortController();
  stop.signal.addEventListener('abort', () => hintsStop.abort(), { once: true });
  // The whole stream's list once it is in: set before any `whole()` caller resumes, so a part can
  // tell whether it already has it without waiting for a listing still running for the hints.
  let wholeList: Packets | undefined;
  const whole = () => {
    // The whole list serves the hints too (see wholeForHints): the light listing stops.
    hintsStop.abort();
    wholeStream ??= listAllPackets(plan.input, d, stop.signal).then((list) => {
      wholeList = list;
      return list;
    });
    return wholeStream;
  };
  // The zoom hints' packets (core/zoom.ts): what the listings below read. MP4/MOV lists only the
  // neighbourhood of each target, which leaves most gaps unseen, so a whole list (demux only, a
  // few % of a render, measured in bench/run.mjs --hints) is read alongside the decoding, as the
  // native engine reads the sample table: the light one made for the hints, unless the frame rule
  // needed the whole stream's list anyway.
  const logs: Array<Omit<PacketLog, 'cells'>> = [];
  // Per cell: the decode time of its frame's packet (where it stands among the logged packets).
  const decodeAt = cells.map(() => Number.NaN);
  const hinting = process.env.VIDSHEET_BENCH_NO_HINTS !== '1';
  const wholeForHints =
    hinting && d.sampleTable && d.timestamps ? listHintPackets(plan.input, d, hintsStop.signal) : undefined;
  wholeForHints?.catch(() => {});
  const gate = limiter(parallel);
  const seeking = { trusted: true };
  const openGops = new OpenGops(parts.length);
  // The stream's share of reference pictures (the open-GOP cost rule's weight), read once.
  let referenceShareOnce: Promise<number> | undefined;
  const shareOf = (list: Packets) => (referenceShareOnce ??= referenceShare(plan.input, d, list));
  // The listed keyframes nal.ts shows to be sync samples in name only: entries (an open GOP's
  // recovery point, or a false sync sample), which only a second decode can judge.
  const entriesOf = async (packets: Packets) => {
    const hints = await pictureHints(plan.input, d, packets, packets.keyframes);
    return new Set(packets.keyframes.filter((_, i) => hints[i]?.randomAccess === false));
  };
  // The keyframes decoding may start at: the true random-access points.
  const usableKeyframes = (packets: Packets, entries: Set<bigint>) =>
    packets.keyframes.filter((k) => !entries.has(k));
  const extractPartOf = async (partTimes: number[], p: number, chosen: () => void) => {
    let packets = await packetsFor(plan.input, d, partTimes, whole, stop.signal);
    if (hinting && !wholeForHints) logs.push(packets.log);
    let entries = await entriesOf(packets);
    let keyframes = usableKeyframes(packets, entries);
    // A target after a sync sample in name only is decoded from an earlier true random-access
    // point; when none is listed before it, the whole stream's keyframes are needed.
    const framesOf = (list: Packets) =>
      new Map(partTimes.map((t) => [t, list.pts.length ? frameAt(list.pts, d, t) : -1]));
    const needsEarlier = (list: Packets, usable: bigint[]) =>
      [...framesOf(list).values()].some((f) => {
        const pts = list.pts[f];
        if (pts === undefined) return false;
        const listed = list.keyframes[lastAtOrBefore(list.keyframes, (k) => k <= pts)];
        return listed !== undefined && !usable.includes(listed) && !usable.some((k) => k <= pts);
      });
    if (packets !== wholeList && needsEarlier(packets, keyframes)) {
      packets = await whole();
      if (hinting && !wholeForHints) logs.push(packets.log);
      entries = await entriesOf(packets);
      keyframes = usableKeyframes(packets, entries);
    }
    // Far from a true random-access point (a long open-GOP clip), decoding enters at the
    // entries instead, the first one proven (src/core/open-gop.ts). Only H.264's entries are told
    // from other trouble (decode-log.ts troubleWatch): elsewhere each entry would cost a second
    // decode. The rule is first asked of the listed packets, guessing the proof's start as close
    // as it may be; only when that says yes is the whole stream listed (the keyframes the proof
    // and the ladder go back to) and the rule asked again, exactly.
    const targetsIn = (list: Packets) =>
      [...new Set(framesOf(list).values())].filter((f) => f >= 0).sort((a, b) => a - b);
    // The rule counts the frames really decoded: a group whose targets are all reference pictures
    // skips the others, so it decodes the stream's share of reference pictures.
    const enters = async (list: Packets, guess: boolean) => {
      const wanted = targetsIn(list);
      const hints = await pictureHints(
        plan.input,
        d,
        list,
        wanted.map((f) => list.pts[f] as bigint),
      );
      const reference = new Set(wanted.filter((_, i) => hints[i]?.reference === true));
      // The share is read (once a render) only where some group may skip.
      const skips = groupFrames(wanted, list, list.keyframes).some((g) => g.every((f) => reference.has(f)));
      const share = skips ? await shareOf(list) : 1;
      return entersOpenGops(gopGroups(wanted, list, entries, d, guess, reference, share), {
        reach: d.referenceReach,
        start: d.startTime,
        run: runSeconds(pixelRate),
        cores: parallel,
      });
    };
    let entering = false;
    if (d.timestamps && d.nal?.codec === 'h264' && entries.size > 0 && (await enters(packets, true))) {
      if (packets !== wholeList) {
        packets = await whole();
        if (hinting && !wholeForHints) logs.push(packets.log);
        entries = await entriesOf(packets);
        keyframes = usableKeyframes(packets, entries);
      }
      entering = await enters(packets, false);
    }
    if (entering) keyframes = packets.keyframes;
    else entries = new Set();
    const frameIndex = framesOf(packets);
    const wanted = targetsIn(packets);
    const cellsOfFrame = new Map<number, number[]>();
    for (const [t, f] of frameIndex) {
      const ks = byTime.get(t) ?? [];
      if (f < 0) {
        settle(ks);
        continue;
      }
      const pts = packets.pts[f] as bigint;
      for (const k of ks) {
        frameOf[k] = pts;
        decodeAt[k] = packets.decodeTime.get(pts) ?? Number.NaN;
      }
      users.set(pts, (users.get(pts) ?? 0) + ks.length);
      cellsOfFrame.set(f, [...(cellsOfFrame.get(f) ?? []), ...ks]);
    }
    // Without timestamps every run decodes from the start: one run for every target.
    const groups = d.timestamps ? groupFrames(wanted, packets, keyframes) : wanted.length ? [wanted] : [];
    // May the decoder skip the non-reference pictures before a group's targets?
    const hints = await pictureHints(
      plan.input,
      d,
      packets,
      wanted.map((f) => packets.pts[f] as bigint),
    );
    const isReference = new Map(wanted.map((f, i) => [f, hints[i]?.reference]));
    // Several groups run one per core, each single-threaded; a lone group gets every thread.
    const threads = groups.length > 1 || parts.length > 1 ? 1 : 0;
    // Entering, two groups may prove the stream's entries with their own decodes, running
    // alongside the others (src/core/open-gop.ts proofPair).
    const pair =
      entering && threads === 1 ? proofPairOf(groups, packets, keyframes, entries, d, openGops) : null;
    chosen();
    await settleAll(
      groups.map((group, g) =>
        gate(async (aside) => {
          try {
            // Queued tasks start after a failure too: they must not recreate tempDir.
            stop.signal.throwIfAborted();
            const dir = join(plan.tempDir, `p${p}g${g}`);
            await mkdir(dir, { recursive: true });
            const got = await extractGroup({
              path: plan.input,
              d,
              packets,
              group,
              size,
              dir,
              threads,
              skipNonReference: group.every((f) => isReference.get(f) === true),
              keyframes,
              entries,
              seeking,
              openGops,
              pair: pair?.sides.get(g),
              aside,
              signal: stop.signal,
              shownInstead,
            });
            for (const [pts, file] of got) files.set(pts, file);
            settle(group.flatMap((f) => cellsOfFrame.get(f) ?? []));
          } finally {
            // A pair side that never decoded (aborted before it began) gives the pair up.
            const side = pair?.sides.get(g);
            side?.meeting.offer(side.side, null);
          }
        }),
      ),
      abortAll,
    );
  };
  // Each part tells openGops once it has chosen its proof pair, or has none (failed before).
  const extractPart = async (partTimes: number[], p: number) => {
    let told = false;
    const chosen = () => {
      if (told) return;
      told = true;
      openGops.paired();
    };
    try {
      await extractPartOf(partTimes, p, chosen);
    } finally {
      chosen();
    }
  };
  await settleAll(parts.map(extractPart), abortAll).catch((error: unknown) => {
    throw sheetFailure ? sheetFailure.error : error;
  });
  await settleAll(composing, abortAll);
  if (wholeForHints) {
    // Awaited even when unused (no ffprobe outlives the job); a failed listing costs the hints,
    // not the sheets.
    const light = await wholeForHints.catch(() => undefined);
    const log = wholeList?.log ?? light;
    if (log) logs.push(log);
  }
  return {
    unreadable: unreadable.flat(),
    frameTimes: cells.map((_, k) => {
      const pts = frameOf[k];
      const { s, c } = cells[k] as (typeof cells)[number];
      const lost = unreadable[s]?.some((u) => u.cell === c);
      return pts === undefined || lost
        ? null
        : labelSeconds(shownInstead.get(pts) ?? pts, d.timeBase, d.startUs);
    }),
    packets: { ...mergeLogs(logs), cells: new Float64Array(decodeAt) },
  };
}

/**
 * The groups the targets (`wanted`, ascending indices into packets.pts) would form if decoding
 * started at every keyframe, as the cost rule reads them (seconds); `guess`: the keyframe before
 * each is taken to be as close as the proof allows (the listed packets may not show it).
 */
function gopGroups(
  wanted: number[],
  packets: Packets,
  entries: Set<bigint>,
  d: VideoDetails,
  guess: boolean,
  reference: Set<number>,
  share: number,
): GopGroup[] {
  const all = packets.keyframes;
  return groupFrames(wanted, packets, all).flatMap((group) => {
    const first = packets.pts[group[0] as number] as bigint;
    const k = lastAtOrBefore(all, (p) => p <= first);
    const key = all[k];
    if (key === undefined) return [];
    const previous = all[k - 1];
    const ra = all
      .slice(0, k + 1)
      .reverse()
      .find((p) => !entries.has(p));
    return [
      {
        key: seconds(key, d),
        last: seconds(packets.pts[group[group.length - 1] as number] as bigint, d),
        entry: entries.has(key),
        // A guess: the keyframe before may not be listed, and is at least the reach before.
        previous: guess
          ? seconds(key, d) - d.referenceReach
          : previous === undefined
            ? null
            : seconds(previous, d),
        randomAccess: ra === undefined ? null : seconds(ra, d),
        // As extractPart decides `skipNonReference`.
        decoded: group.every((f) => reference.has(f)) ? share : 1,
      },
    ];
  });
}

/** Packets sampled for the share of reference pictures (evenly over the listed ones). */
const SHARE_SAMPLE = 200;

/**
 * The share of the stream's pictures that are reference pictures (what `-skip_frame noref` still
 * decodes), from the NAL headers of up to SHARE_SAMPLE listed packets; 1 where they cannot be read.
 */
async function referenceShare(path: string, d: VideoDetails, packets: Packets): Promise<number> {
  const step = Math.max(1, Math.floor(packets.pts.length / SHARE_SAMPLE));
  const sample = packets.pts.filter((_, i) => i % step === 0).slice(0, SHARE_SAMPLE);
  const hints = await pictureHints(path, d, packets, sample);
  const told = hints.filter((h) => h.reference !== undefined);
  return told.length ? told.filter((h) => h.reference).length / told.length : 1;
}
