/**
 * Video sessions (DESIGN §9) against the built server on loopback (SQLite, sheets in the data dir):
 * upload once, zoom many times; key orders and codes from §9 written out here; the local window
 * messages verbatim (spec "Runtime messages" and the local tool server's unparseable-time wording);
 * the frame oracle on windowed sheets; other accounts' keys get 404 on every route; the cap; charges,
 * refunds and usage rows as on /v1/vidsheet; after DELETE or expiry nothing is left.
 */
import { randomBytes } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cellRect, computeGrid } from '../../src/core/layout.js';
import { parseTimeMs } from '../../src/core/time.js';
import { indexClip, plainClip } from '../helpers/fixtures.js';
import { decodeIndex, decodeJpeg } from '../helpers/frames.js';
import { expectModelAids } from '../helpers/model-aids.js';
import { expectedIndex, frameTimes } from '../helpers/oracle.js';
import { AID_KEYS, HOSTED_KEYS } from '../helpers/result-keys.js';
import {
  newAccount,
  removeServerDirs,
  showAccount,
  startServer,
  type TestServer,
  videoForm,
} from '../helpers/server.js';
import { waitFor } from '../helpers/wait.js';

const VIDEO_KEYS = ['video_id', 'input', 'duration', 'expires_at', 'contract'];
// DESIGN §9: the hosted job result's keys with `video_id` after `job_id` and `window` after `duration`.
const ZOOM_KEYS = ['job_id', 'video_id', 'input', 'duration', 'window', ...HOSTED_KEYS.slice(3), ...AID_KEYS];
const NOT_FOUND = '{"error":"not_found"}';
const ID = /^[A-Za-z0-9_-]{22}$/;
const PRICE = { '3x3': 1, '4x4': 2, '5x5': 3, '6x6': 5 } as const;

let server: TestServer;
let indexPath: string;
let index: Buffer;

beforeAll(async () => {
  indexPath = await indexClip({ seconds: 100 });
  index = readFileSync(indexPath);
  server = await startServer({ VIDSHEET_MAX_VIDEOS: '2', VIDSHEET_ALLOWANCE_FLOOR: '0' });
}, 120_000);
afterAll(async () => {
  await server?.stop();
  removeServerDirs();
});

const auth = (key: string) => ({ authorization: `Bearer ${key}` });

async function keep(key: string, bytes: Buffer = index, filename = 'index.mp4') {
  const res = await fetch(`${server.url}/v1/videos`, {
    method: 'POST',
    headers: auth(key),
    body: videoForm({ bytes, filename }),
  });
  return { status: res.status, text: await res.text() };
}
async function zoom(key: string, videoId: string, body: object | string | undefined) {
  const res = await fetch(`${server.url}/v1/videos/${videoId}/sheets`, {
    method: 'POST',
    headers: { ...auth(key), ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
  });
  return { status: res.status, text: await res.text() };
}
const get = async (key: string, videoId: string, method: 'GET' | 'DELETE' = 'GET') => {
  const res = await fetch(`${server.url}/v1/videos/${videoId}`, { method, headers: auth(key) });
  return { status: res.status, text: await res.text() };
};
/** Every file of kept videos on the server's disk: the store's `videos/` and this instance's cache. */
function keptFiles(): string[] {
  const found: string[] = [];
  for (const dir of [join(server.dataDir, 'sheets', 'videos'), join(server.dataDir, 'video-cache')]) {
    if (!existsSync(dir)) continue;
    for (const entry of readdirSync(dir, { recursive: true })) found.push(join(dir, String(entry)));
  }
  return found;
}

describe('POST /v1/videos, GET, DELETE (DESIGN §9)', () => {
  it('201 with the keys in order; GET answers the same body; nothing charged; DELETE 204 then 404 everywhere', async () => {
    const a = await newAccount(server, 10);
    const before = Date.now();
    const kept = await keep(a.key);
    expect(kept.status, kept.text).toBe(201);
    const body = JSON.parse(kept.text);
    expect(Object.keys(body)).toEqual(VIDEO_KEYS);
    expect(body.video_id).toMatch(ID);
    expect(body.input).toBe('index.mp4');
    expect(body.duration).toBe(100);
    expect(body.contract).toBe('vidsheet-http-v0');
    // Default lifetime 21600 s after the upload, ISO 8601 UTC.
    expect(body.expires_at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    const expires = Date.parse(body.expires_at);
    expect(expires).toBeGreaterThanOrEqual(before + 21600_000);
    expect(expires).toBeLessThanOrEqual(Date.now() + 21600_000);
    expect(await get(a.key, body.video_id)).toEqual({ status: 200, text: kept.text });
    expect(await showAccount(server, a.email)).toMatchObject({ balance: 10, usage: [] });
    // Kept in the store under videos/, nothing left in work/.
    expect(keptFiles().some((f) => f.includes(body.video_id))).toBe(true);
    // The job's directory goes when the job ends, which may be just after its answer.
    await waitFor(() => server.leftovers().length === 0, 'the work directory to be deleted', 5000);

    expect(await get(a.key, body.video_id, 'DELETE')).toEqual({ status: 204, text: '' });
    expect(keptFiles().filter((f) => f.includes(body.video_id))).toEqual([]);
    expect(await get(a.key, body.video_id)).toEqual({ status: 404, text: NOT_FOUND });
    expect(await get(a.key, body.video_id, 'DELETE')).toEqual({ status: 404, text: NOT_FOUND });
    expect(await zoom(a.key, body.video_id, {})).toEqual({ status: 404, text: NOT_FOUND });
  });

  it("another account's key gets 404 on every route; an unknown id too; no key is 401", async () => {
    const owner = await newAccount(server, 10);
    const other = await newAccount(server, 10);
    const kept = JSON.parse((await keep(owner.key)).text);
    for (const key of [other.key]) {
      expect(await get(key, kept.video_id)).toEqual({ status: 404, text: NOT_FOUND });
      expect(await zoom(key, kept.video_id, { density: '3x3' })).toEqual({ status: 404, text: NOT_FOUND });
      expect(await get(key, kept.video_id, 'DELETE')).toEqual({ status: 404, text: NOT_FOUND });
    }
    const unknown = randomBytes(16).toString('base64url');
    expect(await get(owner.key, unknown)).toEqual({ status: 404, text: NOT_FOUND });
    expect(await zoom(owner.key, unknown, {})).toEqual({ status: 404, text: NOT_FOUND });
    const res = await fetch(`${server.url}/v1/videos/${kept.video_id}`);
    expect(res.status).toBe(401);
    // The owner's video is untouched by all that, and nothing was charged to anyone.
    expect((await get(owner.key, kept.video_id)).status).toBe(200);
    expect((await showAccount(server, other.email)).usage).toEqual([]);
    expect((await get(owner.key, kept.video_id, 'DELETE')).status).toBe(204);
  });

  it('the cap: one video more than VIDSHEET_MAX_VIDEOS is 409 too_many_videos before the body; DELETE frees a place', async () => {
    const a = await newAccount(server, 10);
    const first = JSON.parse((await keep(a.key)).text);
    const second = JSON.parse((await keep(a.key)).text);
    expect([first.video_id, second.video_id]).toEqual([expect.stringMatching(ID), expect.stringMatching(ID)]);
    const third = await keep(a.key);
    expect(third).toEqual({ status: 409, text: '{"error":"too_many_videos","max_videos":2}' });
    // Body unread: a key over the cap is refused even when no body follows.
    const res = await fetch(`${server.url}/v1/videos`, {
      method: 'POST',
      headers: { ...auth(a.key), 'content-type': 'multipart/form-data; boundary=x' },
      body: '',
    });
    expect(res.status).toBe(409);
    expect((await get(a.key, first.video_id, 'DELETE')).status).toBe(204);
    expect((await keep(a.key)).status).toBe(201);
    // Another account has its own cap.
    expect((await keep((await newAccount(server, 1)).key)).status).toBe(201);
  });

  it('an unreadable upload is 422 unreadable_video and nothing is kept', async () => {
    const a = await newAccount(server, 10);
    const kept = await keep(
      a.key,
      Buffer.from('#EXTM3U\n#EXTINF:1,\nhttp://127.0.0.1:9/a.ts\n'),
      'list.m3u8',
    );
    expect(kept).toEqual({ status: 422, text: '{"error":"unreadable_video"}' });
    // The job's directory goes when the job ends, which may be just after its answer.
    await waitFor(() => server.leftovers().length === 0, 'the work directory to be deleted', 5000);
  });
});

describe('POST /v1/videos/{video_id}/sheets: zooms', () => {
  let a: { email: string; key: string };
  let videoId: string;
  beforeAll(async () => {
    a = await newAccount(server, 100);
    videoId = JSON.parse((await keep(a.key)).text).video_id;
  });

  it('overview, range and moment: key order, window only when asked, charged per sheet, usage rows "http"', async () => {
    const overview = await zoom(a.key, videoId, undefined);
    expect(overview.status, overview.text).toBe(200);
    const o = JSON.parse(overview.text);
    expect(Object.keys(o)).toEqual(ZOOM_KEYS.filter((k) => k !== 'window'));
    expect(o).toMatchObject({ video_id: videoId, input: 'index.mp4', duration: 100, density: '3x3' });
    expect(o.credits_charged).toBe(o.sheets * PRICE['3x3']);

    const range = JSON.parse((await zoom(a.key, videoId, { density: '4x4', start: '0:30', end: 90 })).text);
    expect(Object.keys(range)).toEqual(ZOOM_KEYS);
    expect(range.window).toEqual({ start: 30, end: 90 });
    // DESIGN §10 on a zoom too: the shown frames' times (the frame oracle), hints inside the window.
    await expectModelAids(range, { clip: indexPath, audio: false, window: range.window });
    expect(range.credits_charged).toBe(range.sheets * PRICE['4x4']);

    // An end past the clip is clamped to it, as on the CLI.
    const moment = JSON.parse((await zoom(a.key, videoId, { density: '6x6', start: 98, end: '9:00' })).text);
    expect(moment.window).toEqual({ start: 98, end: 100 });
    expect(moment.sheets).toBe(1);
    expect(moment.frames).toBe(36);

    const shown = await showAccount(server, a.email);
    const spent = o.credits_charged + range.credits_charged + moment.credits_charged;
    expect(shown.balance).toBe(100 - spent);
    expect(shown.usage.map((u) => [u.surface, u.density, u.credits])).toEqual([
      ['http', '6x6', moment.credits_charged],
      ['http', '4x4', range.credits_charged],
      ['http', '3x3', o.credits_charged],
    ]);
    // The job's directory goes when the job ends, which may be just after its answer.
    await waitFor(() => server.leftovers().length === 0, 'the work directory to be deleted', 5000);
  });

  it('response=image answers sheet 1 with x-vidsheet-job and x-credits-remaining', async () => {
    const res = await fetch(`${server.url}/v1/videos/${videoId}/sheets`, {
      method: 'POST',
      headers: { ...auth(a.key), 'content-type': 'application/json' },
      body: JSON.stringify({ start: 10, end: 20, response: 'image' }),
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('image/jpeg');
    expect(res.headers.get('x-vidsheet-job')).toMatch(ID);
    expect(Number(res.headers.get('x-credits-remaining'))).toBe((await showAccount(server, a.email)).balance);
    expect(decodeJpeg(new Uint8Array(await res.arrayBuffer())).width).toBeGreaterThan(0);
  });

  it('windowed sheets show the frame displayed at each label (frame oracle)', async () => {
    const oracle = await frameTimes(indexPath);
    for (const [density, start, end] of [
      ['4x4', 30, 90],
      ['5x5', '1:07.3', '1:09'],
    ] as const) {
      const r = JSON.parse((await zoom(a.key, videoId, { density, start, end })).text);
      const grid = computeGrid(320, 240, density, false);
      for (const [s, labels] of (r.timecodes as string[][]).entries()) {
        const res = await fetch(r.files[s]);
        const image = decodeJpeg(new Uint8Array(await res.arrayBuffer()));
        for (const [c, label] of labels.entries()) {
          const ms = parseTimeMs(label) as number;
          expect(ms).toBeGreaterThanOrEqual(r.window.start * 1000);
          expect(ms).toBeLessThanOrEqual(r.window.end * 1000);
          const read = decodeIndex(image, cellRect(grid, c));
          expect(read.confidence, `${density} cell ${c + 1}`).toBeGreaterThan(40);
          expect(read.index, `${density} sheet ${s + 1} cell ${c + 1} (${label})`).toBe(
            expectedIndex(oracle, ms / 1000),
          );
        }
      }
    }
  });

  it('window and time errors: 422 bad_request with the local message verbatim; nothing charged', async () => {
    const balance = (await showAccount(server, a.email)).balance;
    const cases: Array<[object, string]> = [
      [{ start: 'soon' }, 'could not parse start "soon" — use seconds (90) or a timecode (1:30, 1:07.3)'],
      [{ end: 'later' }, 'could not parse end "later" — use seconds (90) or a timecode (1:30, 1:07.3)'],
      [{ start: -1 }, 'start must be a time ≥ 0'],
      [{ start: 100 }, 'start (100) is at/after the end of the clip (100)'],
      [{ start: 50, end: 40 }, 'window is empty — end (40) must be after start (50)'],
      [
        { density: '6x6', start: 10, end: 10.05 },
        'window too small to address distinctly: 36 cells across 50 ms (the engine seeks at millisecond precision — minimum ≈ 72 ms at this density); zoom out or lower the density',
      ],
    ];
    for (const [body, message] of cases) {
      expect(await zoom(a.key, videoId, body)).toEqual({
        status: 422,
        text: JSON.stringify({ error: 'bad_request', message }),
      });
    }
    // Exactly at the floor is accepted (2 ms per cell).
    expect((await zoom(a.key, videoId, { density: '3x3', start: 10, end: 10.018 })).status).toBe(200);
    expect(await zoom(a.key, videoId, { density: '7x7' })).toEqual({
      status: 422,
      text: '{"error":"bad_request"}',
    });
    expect(await zoom(a.key, videoId, { response: 'xml' })).toEqual({
      status: 422,
      text: '{"error":"bad_request"}',
    });
    expect((await zoom(a.key, videoId, '{"start": ')).status).toBe(422);
    expect((await showAccount(server, a.email)).balance).toBe(balance - 1);
  });

  it('402 when the balance cannot pay the zoom; nothing charged', async () => {
    const poor = await newAccount(server, 1);
    const id = JSON.parse((await keep(poor.key)).text).video_id;
    expect(await zoom(poor.key, id, { density: '6x6' })).toEqual({
      status: 402,
      text: '{"error":"insufficient_credits"}',
    });
    expect(await showAccount(server, poor.email)).toMatchObject({ balance: 1, usage: [] });
  });
});

describe('expiry (VIDSHEET_VIDEO_TTL_S=2, sweep every 1 s)', () => {
  it('an expired video is 404 at once, and the sweeper leaves nothing of it in storage', async () => {
    const short = await startServer({ VIDSHEET_VIDEO_TTL_S: '2', VIDSHEET_SWEEP_S: '1' });
    try {
      const email = `e-${randomBytes(4).toString('hex')}@example.com`;
      const key = (await short.admin('create-key', '--email', email)).stdout.trim();
      const res = await fetch(`${short.url}/v1/videos`, {
        method: 'POST',
        headers: auth(key),
        body: videoForm({ bytes: readFileSync(await plainClip(3)), filename: 'p.mp4' }),
      });
      expect(res.status).toBe(201);
      const { video_id, expires_at } = await res.json();
      const videos = join(short.dataDir, 'sheets', 'videos');
      expect(readdirSync(videos)).toEqual([video_id]);
      await sleep(Math.max(0, Date.parse(expires_at) - Date.now()) + 50);
      const after = await fetch(`${short.url}/v1/videos/${video_id}`, { headers: auth(key) });
      expect([after.status, await after.text()]).toEqual([404, NOT_FOUND]);
      await short.waitForLog((l) => l.msg === 'expired or deleted videos removed', 10_000);
      expect(readdirSync(videos)).toEqual([]);
    } finally {
      await short.stop();
    }
  });
});
