/** The zoom hints' packet logs as each engine hands them over for a render (src/core/packet-log.ts). */
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { computeGrid } from '../../src/core/layout.js';
import { chooseVideoStream } from '../../src/core/probe.js';
import type { HintPackets } from '../../src/core/render-plan.js';
import type { Window } from '../../src/core/window.js';
import { hintPacketSpan } from '../../src/core/zoom.js';
import type { VideoDetails } from '../../src/engine/ffmpeg/media.js';
import { probeFile, videoDetails } from '../../src/engine/ffmpeg/probe.js';
import { loadNative } from '../../src/engine/native-loader.js';
import { labelSeconds } from '../../src/engine/timestamps.js';
import type { Engine, PacketLog } from '../../src/engine/types.js';
import { renderPlan } from './plans.js';

/** The native engine (the tests that use it run only where it loads). */
export function nativeEngine(): Engine {
  const native = loadNative();
  if (!('engine' in native)) throw new Error(native.error);
  return native.engine;
}

/**
 * The packet log of a 3x3 run of `clip`'s chosen video stream on `engine` (its temporary files
 * under `work`): an overview, or the window `window` (ms) with the packets its hints read
 * (core/zoom.ts hintPacketSpan).
 */
export async function overviewLog(
  engine: Engine,
  clip: string,
  work: string,
  window?: Window,
): Promise<PacketLog> {
  const info = await engine.probe(clip);
  // The stream the engines render (core/probe.ts), not a cover picture.
  const video = chooseVideoStream(info.videoStreams);
  const durationMs = Math.floor(info.duration * 1000);
  const { startMs, endMs } = window ?? { startMs: 0, endMs: durationMs };
  const dir = mkdtempSync(join(work, `${engine.name}-`));
  const times = Array.from(
    { length: 9 },
    (_, i) => startMs + Math.floor(((i + 0.5) * (endMs - startMs)) / 9),
  );
  const hintPackets = hintPacketSpan({ startMs, endMs }, durationMs);
  const plan = renderPlan(clip, dir, {
    grid: computeGrid(video?.width ?? 320, video?.height ?? 240, '3x3', false),
    sheets: [times.map((timeMs) => ({ timeMs, label: String(timeMs) }))],
    window: { startMs, endMs },
    paths: [join(dir, 'sheet.jpg')],
  });
  const stream = { ...plan, videoStream: video?.index ?? 0 };
  return (await engine.render(hintPackets ? { ...stream, hintPackets } : stream)).packets;
}

/** What a log says of the packets (not the cells or pictures, which each engine decodes its own way). */
export const packetsOf = (l: PacketLog) => ({
  times: [...l.times],
  sizes: [...l.sizes],
  keys: [...l.keys],
  spans: [...l.spans],
  indexKeys: [...l.indexKeys],
});

/** The details of the stream the engines render (core/probe.ts), as the fallback probes them. */
export async function details(clip: string): Promise<VideoDetails> {
  const probed = await probeFile(clip);
  return videoDetails(probed, chooseVideoStream(probed.info.videoStreams)?.index ?? -1);
}

/**
 * The byte size of each sample in FFmpeg's index of an MP4/MOV stream, by byte offset (the mov
 * demuxer's trace log of its index): a packet read from a cut file is shorter than its sample.
 */
function indexSizes(clip: string, stream: number): Map<number, number> {
  const log = spawnSync('ffprobe', ['-v', 'trace', '-show_entries', 'stream=index', '-of', 'csv', clip], {
    encoding: 'utf8',
    maxBuffer: 256 << 20,
  }).stderr;
  const sizes = new Map<number, number>();
  for (const m of log.matchAll(
    /AVIndex stream (\d+), sample \d+, offset ([0-9a-f]+), dts -?\d+, size (\d+)/g,
  )) {
    if (Number(m[1]) === stream) sizes.set(Number.parseInt(m[2] as string, 16), Number(m[3]));
  }
  return sizes;
}

/**
 * ffprobe's listing of the stream (unparsed: the sample table's sync samples), each packet's
 * decode time on the labels' clock, size and keyframe flag, within `span`; a packet whose sample
 * runs past the end of the file is left out, as the native engine leaves it out of its index.
 */
export function ffprobeListing(clip: string, d: VideoDetails, span: HintPackets = {}) {
  const out = execFileSync(
    'ffprobe',
    [
      ...['-v', 'error', '-fflags', '+noparse', '-select_streams', String(d.index)],
      ...['-show_entries', 'packet=dts,size,pos,flags', '-of', 'csv=p=0', clip],
    ],
    { encoding: 'utf8', maxBuffer: 64 << 20 },
  );
  const fileSize = statSync(clip).size;
  const whole = indexSizes(clip, d.index);
  const [from, to] = [(span.fromMs ?? -1e12) / 1000, (span.toMs ?? 1e12) / 1000];
  const rows = out
    .trim()
    .split('\n')
    .map((line) => line.split(','))
    .filter((f) => f.length === 4 && /^[K_]/.test(f[3] as string))
    .map(([dts, size, pos, flags]) => {
      const bytes = whole.get(Number(pos)) ?? Number(size);
      return {
        time: labelSeconds(BigInt(dts as string), d.timeBase, d.startUs),
        size: bytes,
        end: Number(pos) + bytes,
        key: flags?.startsWith('K') ? 1 : 0,
      };
    })
    .filter((p) => p.end <= fileSize && p.time >= from && p.time <= to);
  return { times: rows.map((p) => p.time), sizes: rows.map((p) => p.size), keys: rows.map((p) => p.key) };
}
