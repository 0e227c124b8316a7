/**
 * The fallback's bounded probe and render (DESIGN §5a "Decode cost is bounded before and during a
 * job", issue 40): a server's job decodes pictures of the chosen video stream only, in every
 * ffprobe and ffmpeg run, and must still find and show exactly what the unbounded fallback (the
 * local surfaces' probe, which decodes every stream) finds and shows. The files hold more than one
 * video stream, where the refusal of the others does something: two H.264 tracks (whose refused
 * decoders ffprobe cannot open afterwards: the probe allows them again), a transport stream of two
 * programs (no size stated: the survey decodes both), eight PNG tracks of one picture.
 */

import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stillTracks } from '../helpers/decode-bombs.js';
import { cached, FFMPEG, run, twoProgramsAudioTs } from '../helpers/fixtures.js';

const { probeFile } = await import('../../dist/engine/ffmpeg/probe.js');
const { ffmpegEngine } = await import('../../dist/engine/ffmpeg.js');
const { runJob } = await import('../../dist/job.js');
const { allowedContainers } = await import('../../dist/core/containers.js');
const { chooseVideoStream } = await import('../../dist/core/probe.js');
const { input } = await import('../../dist/engine/ffmpeg/media.js');
const { logLine, readLogLine, refusedDecoders } = await import('../../dist/engine/ffmpeg/decode-log.js');
const { outOfMemoryLine } = await import('../../dist/engine/ffmpeg/decode.js');

const MAX_PIXELS = 35_389_440;

/** Two H.264 video tracks (the first the default, the smaller picture) and two audio tracks. */
const twoTracksMp4 = () =>
  cached('bounded-two-tracks', 'mp4', { v: 1 }, (out) =>
    run('ffmpeg', [
      ...FFMPEG,
      ...['-f', 'lavfi', '-i', 'testsrc2=s=320x240:r=25:d=4'],
      ...['-f', 'lavfi', '-i', 'testsrc=s=640x480:r=25:d=4'],
      ...['-f', 'lavfi', '-i', 'sine=d=4', '-f', 'lavfi', '-i', 'sine=f=300:d=4'],
      ...['-map', '0', '-map', '1', '-map', '2', '-map', '3'],
      ...['-c:v', 'libx264', '-preset', 'ultrafast', '-g', '25', '-bf', '2', '-c:a', 'aac'],
      out,
    ]),
  );

const FILES: Array<[string, () => Promise<string>]> = [
  ['two H.264 tracks in MP4', twoTracksMp4],
  ['two programs in MPEG-TS', twoProgramsAudioTs],
  [
    'eight PNG tracks of one picture',
    () => stillTracks({ w: 640, h: 360, codec: 'png', container: 'mov', tracks: 8 }),
  ],
];

const paths = new Map<string, string>();
let work: string;
beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), 'vs-bounded-'));
  for (const [name, make] of FILES) paths.set(name, await make());
}, 300_000);
afterAll(() => rmSync(work, { recursive: true, force: true }));

/** JSON with bigints, without the run bounds a bounded probe adds to each stream's details. */
const plain = (value: unknown) =>
  JSON.parse(
    JSON.stringify(value, (key, v) =>
      key === 'bounds' ? undefined : typeof v === 'bigint' ? `${v}n` : v instanceof Map ? [...v] : v,
    ),
  );

async function probed(path: string, bounded: boolean) {
  const allowed = allowedContainers('restricted');
  const p = await probeFile(path, bounded ? { allowed, bounds: { maxPixels: MAX_PIXELS } } : { allowed });
  const chosen = chooseVideoStream(p.info.videoStreams);
  return {
    p,
    facts: plain({
      ...p.info,
      videoStreams: undefined,
      chosen: chosen && { ...chosen, details: p.video.get(chosen.index) },
      audio: p.audio,
    }),
  };
}

async function sheets(path: string, bounded: boolean) {
  const outDir = mkdtempSync(join(work, 'job-'));
  const outcome = await runJob(
    { input: path, density: '4x4', outDir },
    {
      engine: ffmpegEngine,
      audio: false,
      containers: 'restricted',
      baseName: 'video',
      ...(bounded ? { maxPixels: MAX_PIXELS } : {}),
    },
  );
  const md5 = outcome.files.map((f: string) => createHash('md5').update(readFileSync(f)).digest('hex'));
  return { ...plain(outcome), files: undefined, md5 };
}

describe.each(FILES.map(([name]) => name))('the bounded fallback on %s', (name) => {
  it('finds the stream and facts the unbounded probe finds, decoding one video stream', async () => {
    const path = paths.get(name) as string;
    const [bounded, unbounded] = [await probed(path, true), await probed(path, false)];
    expect(bounded.facts.chosen).not.toBeNull();
    expect(bounded.facts).toEqual(unbounded.facts);
    // The stream rule's pick decodes; the streams after it are never tried.
    expect(bounded.p.info.videoStreams.filter((s: { decodes: boolean }) => s.decodes)).toHaveLength(1);
    expect(
      unbounded.p.info.videoStreams.filter((s: { decodes: boolean }) => s.decodes).length,
    ).toBeGreaterThan(1);
  }, 120_000);

  it('renders the sheets the unbounded render makes, with no warning from the refused decoders', async () => {
    const path = paths.get(name) as string;
    const bounded = await sheets(path, true);
    expect(bounded.warnings).toEqual([]);
    expect(bounded).toEqual(await sheets(path, false));
  }, 300_000);
});

describe('the refused decoders in a bounded ffmpeg run', () => {
  /** The decoder errors (decode-log.ts's rule) and allocation failures of an ffmpeg decode of stream 1. */
  async function decodeLog(
    bounds: { maxPixels: number; video: number[]; audio: number } | undefined,
    filter: boolean,
  ) {
    const path = paths.get('two H.264 tracks in MP4') as string;
    const { stderr } = await promisify(execFile)(
      'ffmpeg',
      [
        ...['-loglevel', 'level+debug', '-nostats', '-nostdin'],
        ...input(path, 'mov,mp4,m4a,3gp,3g2,mj2', bounds),
        ...['-map', '0:1', '-f', 'null', '-'],
      ],
      { maxBuffer: 1 << 28 },
    );
    const { keep } = refusedDecoders();
    const lines = stderr.split('\n').filter((l) => !filter || keep(l));
    const errors = lines.filter((l) => {
      const read = readLogLine(l, 'mov,mp4,m4a,3gp,3g2,mj2');
      return read !== null && logLine(read.source, read.level, read.message) === 'error';
    });
    return { errors: errors.length, outOfMemory: lines.some(outOfMemoryLine) };
  }

  it("are not the decode's errors: filtered, the log says what the unbounded run's says", async () => {
    const unbounded = await decodeLog(undefined, false);
    expect(unbounded).toEqual({ errors: 0, outOfMemory: false });
    const bounds = { maxPixels: MAX_PIXELS, video: [1], audio: 2 };
    // The refused streams (video 0, audio 3) log errors, and failed buffers that read as memory
    // running out.
    expect(await decodeLog(bounds, false)).not.toEqual(unbounded);
    expect(await decodeLog(bounds, true)).toEqual(unbounded);
  }, 60_000);
});
