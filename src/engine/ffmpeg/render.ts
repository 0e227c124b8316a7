/**
 * One render call per job (the native engine's twin is crates/vidsheet-core/src/render.rs): the
 * target times in parts, each part planned (part-plan.ts) and its groups extracted in parallel,
 * one single-threaded process per core, while the sheets are assembled (sheets.ts).
 */
import { setMaxListeners } from 'node:events';
import { mkdir } from 'node:fs/promises';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import { limiter, settleAll } from '../process.js';
import type { BandLevels, RenderPlan, RenderResult } from '../types.js';
import { extractGroup } from './extract.js';
import type { VideoDetails } from './media.js';
import { StreamLists } from './packet-log.js';
import { PartPlanner } from './part-plan.js';
import { probeFile, videoDetails } from './probe.js';
import { OpenGops } from './recovery.js';
import { Sheets } from './sheets.js';
import { Thumbnails } from './thumbs.js';

/** The fallback engine's `render` (Engine.render). */
export async function render(
  plan: RenderPlan,
  onProgress: ((done: number, total: number) => void) | undefined,
  signal: AbortSignal | undefined,
  bandLevels: Promise<BandLevels> | undefined,
): Promise<RenderResult> {
  const bounds = plan.maxPixels === undefined ? {} : { bounds: { maxPixels: plan.maxPixels } };
  const probed = await probeFile(
    plan.input,
    plan.inputFormat === undefined ? bounds : { format: plan.inputFormat, ...bounds },
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
    const thumbnails = new Thumbnails(facts ? facts.width * facts.height : 0);
    return await renderSheets(plan, d, pixelRate, thumbnails, composing, stop, onProgress, bandLevels);
  } catch (error) {
    abort();
    await Promise.allSettled(composing);
    throw error;
  } finally {
    signal?.removeEventListener('abort', abort);
  }
}

/**
 * The body of `render`. Every task it starts is awaited before it returns, or is in `composing`
 * (which `render` waits for when this throws); `stop` ends them all at the first failure.
 */
async function renderSheets(
  plan: RenderPlan,
  d: VideoDetails,
  pixelRate: number | null,
  thumbnails: Thumbnails,
  composing: Promise<void>[],
  stop: AbortController,
  onProgress: ((done: number, total: number) => void) | undefined,
  bandLevels: Promise<BandLevels> | undefined,
): Promise<RenderResult> {
  const abortAll = () => stop.abort(new Error('render stopped'));
  const sheets = new Sheets(plan, stop.signal, abortAll, composing, onProgress, bandLevels);
  // Targets in time order. MP4/MOV lists the first ones on their own, so decoding starts while
  // the rest are still being listed.
  const times = sheets.times();
  // The window's end after the last cell, for the last gap's pictures (RenderPlan.closingMs).
  const last = times[times.length - 1];
  const closing = plan.closingMs;
  if (thumbnails.enabled && closing !== undefined && last !== undefined && closing > last)
    times.push(closing);
  const cores = Math.max(1, availableParallelism());
  const parts = d.sampleTable && times.length > cores ? [times.slice(0, cores), times.slice(cores)] : [times];
  const lists = new StreamLists(plan.input, d, stop.signal, plan.hintPackets);
  const gate = limiter(cores);
  const seeking = { trusted: true };
  const openGops = new OpenGops(parts.length);
  const planner = new PartPlanner(plan.input, d, lists, stop.signal, {
    pixelRate,
    cores,
    parts: parts.length,
    openGops,
  });
  const extractPart = async (partTimes: number[], p: number) => {
    // Each part tells openGops once it has chosen its proof pair, or has none (failed before).
    let told = false;
    const chosen = () => {
      if (told) return;
      told = true;
      openGops.paired();
    };
    try {
      const { packets, keyframes, entries, frameIndex, groups, isReference, threads, pair } =
        await planner.plan(partTimes);
      const cellsOfFrame = sheets.show(frameIndex, packets);
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
                size: sheets.size,
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
                shownInstead: sheets.shownInstead,
                thumbnails,
              });
              sheets.add(got);
              sheets.settle(group.flatMap((f) => cellsOfFrame.get(f) ?? []));
            } finally {
              // A pair side that never decoded (aborted before it began) gives the pair up.
              const side = pair?.sides.get(g);
              side?.meeting.offer(side.side, null);
            }
          }),
        ),
        abortAll,
      );
    } finally {
      chosen();
    }
  };
  await settleAll(parts.map(extractPart), abortAll).catch((error: unknown) => {
    throw sheets.failure ? sheets.failure.error : error;
  });
  await settleAll(composing, abortAll);
  return sheets.result(d, { ...(await lists.log()), ...thumbnails.log() });
}
