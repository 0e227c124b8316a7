/**
 * DESIGN §5a "Decode cost is bounded before and during a job" (issue 40), against the built
 * server on loopback with both engines:
 * - a picture over `VIDSHEET_MAX_PIXELS` (PNG and MJPEG in MOV and AVI, H.264 and AV1 really
 *   encoded, a VP9 header declaring 16384x16384) and a file of more than 32 streams are
 *   `422 {"error":"unreadable_video"}`, nothing charged, the worker's memory never near a picture;
 * - tracks that all hold one large picture under both limits are decoded once, not once per track:
 *   the job succeeds and the worker (native) or each ffmpeg/ffprobe (fallback) stays near one
 *   picture's cost;
 * - a job that needs more than `VIDSHEET_WORKER_MEMORY_MB` fails `500`, refunded, the worker is
 *   replaced, and the next job succeeds.
 */
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ENGINES } from '../helpers/cli.js';
import {
  encodedFrame,
  growingPictures,
  lateStreams,
  MAX_PIXELS,
  stillTracks,
  vp9DeclaredSize,
} from '../helpers/decode-bombs.js';
import { plainClip } from '../helpers/fixtures.js';
import { postMeasured } from '../helpers/measured.js';
import {
  newAccount,
  postJob,
  removeServerDirs,
  showAccount,
  startServer,
  type TestServer,
  videoForm,
  workerPid,
} from '../helpers/server.js';
import { scaledOutServer } from '../helpers/server-database.js';

afterAll(removeServerDirs);

const UNREADABLE = '{"error":"unreadable_video"}';
const PROCESSING_FAILED = '{"error":"processing_failed","refunded":true}';
const MB = 1024 * 1024;

/** Over the pixel bound, each in a container the server accepts. */
const OVER_PIXELS: Array<[string, () => Promise<string>]> = [
  ['PNG 16000x16000 in MOV', () => stillTracks({ w: 16000, h: 16000, codec: 'png', container: 'mov' })],
  ['PNG 9000x4000 in AVI', () => stillTracks({ w: 9000, h: 4000, codec: 'png', container: 'avi' })],
  ['MJPEG 9000x4000 in MOV', () => stillTracks({ w: 9000, h: 4000, codec: 'mjpeg', container: 'mov' })],
  ['MJPEG 9000x4000 in AVI', () => stillTracks({ w: 9000, h: 4000, codec: 'mjpeg', container: 'avi' })],
  ['H.264 8200x4320 in MP4', () => encodedFrame('h264', 8200, 4320)],
  ['AV1 8200x4320 in Matroska', () => encodedFrame('av1', 8200, 4320)],
  ['VP9 declaring 16384x16384 in IVF', () => vp9DeclaredSize(16384, 16384)],
  ['33 PNG tracks in MOV', () => stillTracks({ w: 16, h: 16, codec: 'png', container: 'mov', tracks: 33 })],
];

const files = new Map<string, Buffer>();
/** 8 tracks sharing one picture, by container (AVI: FFmpeg 5.1 once decoded every track of it). */
const shared = new Map<'mov' | 'avi', Buffer>();
let big: Buffer;
let small: Buffer;
let growing: Buffer;
let late: Buffer;
beforeAll(async () => {
  for (const [name, make] of OVER_PIXELS) files.set(name, readFileSync(await make()));
  // 34.8 Mpx: under the bound (8 tracks, under max_streams); 139 MB per decoded RGBA picture.
  for (const container of ['mov', 'avi'] as const) {
    const tracks = await stillTracks({ w: 5900, h: 5900, codec: 'png', container, tracks: 8 });
    shared.set(container, readFileSync(tracks));
  }
  // Legitimate, and over a small memory limit: 32 Mpx of 16-bit RGBA, 256 MB per picture.
  big = readFileSync(
    await stillTracks({ w: 8000, h: 4000, codec: 'png', container: 'mov', pixFmt: 'rgba64be' }),
  );
  small = readFileSync(await plainClip(3));
  // Ten 64x64 pictures, then ten like `big`: the probe's frame is small, the render's are not.
  growing = readFileSync(await growingPictures({ w: 8000, h: 4000, small: 10, big: 10 }));
  late = readFileSync(await lateStreams(40));
}, 600_000);

describe.each(ENGINES)('decode cost is bounded (engine %s)', (engine) => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startServer({ VIDSHEET_ENGINE: engine, VIDSHEET_MAX_PIXELS: String(MAX_PIXELS) });
  }, 60_000);
  afterAll(async () => {
    await server?.stop();
  });

  it.each(OVER_PIXELS.map(([name]) => name))(
    '%s: 422 unreadable_video, nothing charged, the worker never holds the picture',
    async (name) => {
      const account = await newAccount(server, 20);
      const worker = workerPid(server);
      const { status, body, rss, child } = await postMeasured(
        server,
        account.key,
        files.get(name) as Buffer,
        'bomb.mov',
      );
      expect({ status, body }).toEqual({ status: 422, body: UNREADABLE });
      expect((await showAccount(server, account.email)).balance).toBe(20);
      // The same worker, never near one picture of the file (the smallest here is 139 MB).
      expect(workerPid(server)).toBe(worker);
      expect(rss).toBeLessThan(400 * MB);
      expect(child).toBeLessThan(400 * MB);
    },
    120_000,
  );

  it('streams that pass max_streams only after the probe: the job is read as the probe saw it', async () => {
    const account = await newAccount(server, 20);
    const worker = workerPid(server);
    const res = await postJob(server, account.key, videoForm({ bytes: late, filename: 'late.ts' }));
    const text = await res.text();
    // The probe's 6 s program, its one sheet charged; the worker is the same (its native engine
    // once took the refused streams for memory running out: a refunded 500, the worker replaced).
    expect(res.status, text).toBe(200);
    expect(JSON.parse(text)).toMatchObject({ duration: 6, credits_charged: 1 });
    expect(workerPid(server)).toBe(worker);
  }, 120_000);

  it.each(['mov', 'avi'] as const)(
    'tracks that share one picture under both limits are decoded once, not per track (%s)',
    async (container) => {
      const account = await newAccount(server, 20);
      const file = shared.get(container) as Buffer;
      const { status, body, rss, child } = await postMeasured(
        server,
        account.key,
        file,
        `tracks.${container}`,
      );
      expect(status, body).toBe(200);
      // One picture is 139 MB; eight held at once would be over 1.1 GB. Every ffprobe and ffmpeg
      // run of the fallback decodes one track too (src/engine/ffmpeg/media.ts `bounded`).
      expect(rss).toBeLessThan(500 * MB);
      expect(child).toBeLessThan(500 * MB);
      console.info(
        `decode-cost ${engine}: 8 shared tracks in ${container}: worker ${(rss / MB) | 0} MB, child ${(child / MB) | 0} MB`,
      );
    },
    300_000,
  );
});

describe.each(ENGINES)('a job over the worker memory limit (engine %s)', (engine) => {
  let server: TestServer;
  const limitMb = 300;
  beforeAll(async () => {
    server = await startServer({ VIDSHEET_ENGINE: engine, VIDSHEET_WORKER_MEMORY_MB: String(limitMb) });
  }, 60_000);
  afterAll(async () => {
    await server?.stop();
  });

  it.each([
    ['at the probe', () => big],
    ['in the middle of the render', () => growing],
  ])(
    'out of memory %s: 500 refunded, the worker is replaced, and the next job runs',
    async (_, file) => {
      const account = await newAccount(server, 200);
      const worker = workerPid(server);
      const { status, body, rss } = await postMeasured(server, account.key, file(), 'big.mov');
      expect({ status, body }).toEqual({ status: 500, body: PROCESSING_FAILED });
      expect(rss).toBeLessThan(limitMb * MB);
      const shown = await showAccount(server, account.email);
      expect(shown.balance).toBe(200);
      // Replaced: killed now, a new one started for the next job.
      await server.waitForLog((l) => l.msg === 'job worker exited' && Number(l.workerPid) === worker, 30_000);

      const next = await postJob(server, account.key, videoForm({ bytes: small, filename: 'small.mp4' }));
      expect(next.status, await next.clone().text()).toBe(200);
      expect(workerPid(server)).not.toBe(worker);
    },
    300_000,
  );
});

/**
 * The same sentences black-box on the real bin over PostgreSQL and an S3-compatible store (both on
 * loopback): over the pixel bound `422` with nothing charged, shared tracks decoded once, memory
 * running out mid-render a refunded `500` with the worker replaced and the next job's sheets stored.
 */
describe.each(ENGINES)('decode cost on PostgreSQL + S3 (engine %s)', (engine) => {
  const limitMb = 300;
  const held = scaledOutServer({ VIDSHEET_ENGINE: engine, VIDSHEET_WORKER_MEMORY_MB: String(limitMb) });

  it('a picture over the bound: 422 unreadable_video, nothing charged', async () => {
    const account = await newAccount(held.server, 20);
    const { status, body } = await postMeasured(
      held.server,
      account.key,
      files.get('PNG 16000x16000 in MOV') as Buffer,
      'bomb.mov',
    );
    expect({ status, body }).toEqual({ status: 422, body: UNREADABLE });
    expect((await showAccount(held.server, account.email)).balance).toBe(20);
  }, 120_000);

  it('shared tracks decoded once; memory out mid-render: 500 refunded, the next job stored', async () => {
    const account = await newAccount(held.server, 200);
    const shared1 = await postMeasured(held.server, account.key, shared.get('mov') as Buffer, 'tracks.mov');
    expect(shared1.status, shared1.body).toBe(200);
    expect(Math.max(shared1.rss, shared1.child)).toBeLessThan(limitMb * MB);
    const charged = (await showAccount(held.server, account.email)).balance;

    const worker = workerPid(held.server);
    const { status, body } = await postMeasured(held.server, account.key, growing, 'big.mov');
    expect({ status, body }).toEqual({ status: 500, body: PROCESSING_FAILED });
    expect((await showAccount(held.server, account.email)).balance).toBe(charged);
    await held.server.waitForLog(
      (l) => l.msg === 'job worker exited' && Number(l.workerPid) === worker,
      30_000,
    );

    const next = await postJob(held.server, account.key, videoForm({ bytes: small, filename: 'small.mp4' }));
    const result = (await next.json()) as { files: string[] };
    expect(next.status).toBe(200);
    // The sheet is served from the store.
    const sheet = await fetch(result.files[0] as string, {
      headers: { authorization: `Bearer ${account.key}` },
    });
    expect(sheet.status).toBe(200);
    expect((await sheet.arrayBuffer()).byteLength).toBeGreaterThan(1000);
  }, 300_000);
});
