/**
 * Which packets the zoom hints count as keyframes (core/zoom.ts `keyframe`): the same on both
 * engines. In MP4/MOV the native engine reads them from the sample table; the fallback's listing
 * for the hints is unparsed so that it does too, while the frame rule's own listing is parsed
 * (FFmpeg's H.264 parser also flags pictures the table does not list as sync samples).
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { chooseVideoStream } from '../../src/core/probe.js';
import { PACKET_MARGIN_S } from '../../src/core/zoom.js';
import { listAllPackets } from '../../src/engine/ffmpeg/packets.js';
import { probeFile, videoDetails } from '../../src/engine/ffmpeg/probe.js';
import { ffmpegEngine } from '../../src/engine/ffmpeg.js';
import type { PacketLog } from '../../src/engine/types.js';
import { ENGINES } from '../helpers/cli.js';
import { longEventClip } from '../helpers/events.js';
import { nativeEngine, overviewLog, packetsOf } from '../helpers/packet-logs.js';

const work = mkdtempSync(join(tmpdir(), 'vs-hint-keys-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

/** The keyframes' times a log holds, each once, ascending. */
const keyTimes = (log: Pick<PacketLog, 'times' | 'keys'>) =>
  [...new Set([...log.times].filter((_, i) => log.keys[i] === 1))].sort((a, b) => a - b);

describe.runIf(ENGINES.includes('native') && ENGINES.includes('ffmpeg'))('keyframes for the hints', () => {
  it("are the sample table's on both engines where FFmpeg's H.264 parser flags more (FATE wwwq_cut.mp4)", async () => {
    const clip = new URL('../../fixtures/fate/wwwq_cut.mp4', import.meta.url).pathname;
    // The file is as hostile as meant: its parsed listing flags a picture every half second, its
    // sample table (an empty `stss`, so FFmpeg's index flags the first sample only) one.
    const probed = await probeFile(clip);
    const d = videoDetails(probed, chooseVideoStream(probed.info.videoStreams)?.index ?? -1);
    const parsed = keyTimes((await listAllPackets(clip, d)).log);
    expect(parsed.length).toBe(8);
    const table = keyTimes(await overviewLog(nativeEngine(), clip, work));
    expect(table).toEqual([0]);
    expect(keyTimes(await overviewLog(ffmpegEngine, clip, work))).toEqual(table);
  }, 120_000);

  it("leave out what a cut MP4's index lists past the end of the file (FATE two_first_slice.mp4)", async () => {
    const clip = new URL('../../fixtures/fate/two_first_slice.mp4', import.meta.url).pathname;
    // As hostile as meant: its sync-sample table lists 16 keyframes, the file holds the first 3.
    const file = readFileSync(clip);
    const stss = file.indexOf('stss', 0, 'latin1');
    expect(file.readUInt32BE(stss + 8)).toBe(16);
    const readable = execFileSync(
      'ffprobe',
      [
        '-v',
        'error',
        '-fflags',
        '+noparse',
        '-select_streams',
        'v:0',
        '-show_entries',
        'packet=dts,flags',
        '-of',
        'csv=p=0',
        clip,
      ],
      { encoding: 'utf8' },
    )
      .split('\n')
      .filter((line) => line.endsWith(',K_'))
      .map((line) => Number(line.split(',')[0]) / 90_000);
    expect(readable).toEqual([0, 1, 2]);
    expect(keyTimes(await overviewLog(nativeEngine(), clip, work))).toEqual(readable);
    expect(keyTimes(await overviewLog(ffmpegEngine, clip, work))).toEqual(readable);
  }, 120_000);

  it('of a window of a long clip: the same within PACKET_MARGIN_S of it, none far from it', async () => {
    const clip = await longEventClip();
    const window = { startMs: 140_000, endMs: 160_000 };
    const [lo, hi] = [window.startMs / 1000 - PACKET_MARGIN_S, window.endMs / 1000 + PACKET_MARGIN_S];
    const [native, fallback] = [
      await overviewLog(nativeEngine(), clip, work, window),
      await overviewLog(ffmpegEngine, clip, work, window),
    ];
    // Both hand over the sample table's packets within the span only (the fallback reads the
    // table itself: ffmpeg/sample-table.ts).
    expect(Math.min(...native.times)).toBeGreaterThanOrEqual(lo);
    expect(Math.max(...native.times)).toBeLessThanOrEqual(hi);
    expect(packetsOf(fallback)).toEqual(packetsOf(native));
    const near = (log: PacketLog) => keyTimes(log).filter((t) => t >= lo && t <= hi);
    // The copies' starts (100 s, 200 s) and the second's first cut (105.5 s) among them.
    expect(near(native).length).toBeGreaterThanOrEqual(5);
    expect(near(fallback)).toEqual(near(native));
  }, 120_000);
});
