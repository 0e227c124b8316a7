/**
 * Video sessions past one machine (DESIGN §8, §9): two built servers on one PostgreSQL and one
 * S3-compatible bucket (moto), all on loopback. A video kept through one instance is zoomed through the
 * other (which downloads it once into its own cache, then zooms from the copy); both give the same
 * frames; the cap counts across instances; DELETE on one is 404 at once on the other, the bucket holds
 * nothing of it, and each instance's cache drops its copy by its next sweep.
 */
import { randomBytes } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ListObjectsV2Command, S3Client } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { indexClip } from '../helpers/fixtures.js';
import { startPostgres, type TestPostgres } from '../helpers/postgres.js';
import { startS3, TEST_AWS_ENV, type TestS3 } from '../helpers/s3.js';
import { removeServerDirs, startServer, type TestServer, videoForm } from '../helpers/server.js';

let s3: TestS3;
let pg: TestPostgres;
let a: TestServer;
let b: TestServer;
let clip: Buffer;

beforeAll(async () => {
  clip = readFileSync(await indexClip({ seconds: 100 }));
  s3 = await startS3('vidsheet/sheets');
  pg = await startPostgres();
  const shared = {
    ...TEST_AWS_ENV,
    VIDSHEET_DATABASE_URL: pg.url,
    VIDSHEET_STORAGE_URL: s3.url,
    VIDSHEET_MAX_VIDEOS: '2',
    VIDSHEET_SWEEP_S: '1',
  };
  a = await startServer(shared);
  b = await startServer(shared);
}, 180_000);
afterAll(async () => {
  await a?.stop();
  await b?.stop();
  await pg?.stop();
  await s3?.stop();
  removeServerDirs();
});

async function objectKeys(): Promise<string[]> {
  const client = new S3Client({
    endpoint: s3.endpoint,
    region: 'us-east-1',
    forcePathStyle: true,
    credentials: {
      accessKeyId: TEST_AWS_ENV.AWS_ACCESS_KEY_ID,
      secretAccessKey: TEST_AWS_ENV.AWS_SECRET_ACCESS_KEY,
    },
  });
  const listed = await client.send(new ListObjectsV2Command({ Bucket: s3.bucket }));
  client.destroy();
  return (listed.Contents ?? []).map((o) => o.Key as string).sort();
}
const cached = (server: TestServer) => {
  const dir = join(server.dataDir, 'video-cache');
  return existsSync(dir) ? readdirSync(dir) : [];
};
const auth = (key: string) => ({ authorization: `Bearer ${key}` });
async function zoom(server: TestServer, key: string, videoId: string, body: object) {
  const res = await fetch(`${server.url}/v1/videos/${videoId}/sheets`, {
    method: 'POST',
    headers: { ...auth(key), 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: await res.json() };
}
const copies = (server: TestServer, how: string) =>
  server.logs.filter((l) => l.msg === 'zoom on a kept video' && l.copy === how).length;

describe('two instances, one PostgreSQL, one bucket', () => {
  it('kept through A, zoomed through B (one download, then from its copy), same sheets; DELETE on B is 404 on A at once', async () => {
    const email = `s-${randomBytes(4).toString('hex')}@example.com`;
    const key = (await a.admin('create-key', '--email', email)).stdout.trim();
    await b.admin('add-credits', '--email', email, '--credits', '50');
    const kept = await fetch(`${a.url}/v1/videos`, {
      method: 'POST',
      headers: auth(key),
      body: videoForm({ bytes: clip, filename: 'index.mp4' }),
    });
    expect(kept.status).toBe(201);
    const { video_id: videoId } = await kept.json();
    // In the bucket under videos/, not on A's disk.
    expect((await objectKeys()).filter((k) => k.includes(videoId))).toEqual([
      `vidsheet/sheets/videos/${videoId}/upload.mp4`,
    ]);
    expect(existsSync(join(a.dataDir, 'sheets', 'videos'))).toBe(false);

    const window = { density: '4x4', start: 30, end: 90 };
    const cold = await zoom(b, key, videoId, window);
    expect(cold.status, JSON.stringify(cold.body)).toBe(200);
    expect(copies(b, 'download')).toBe(1);
    const warm = await zoom(b, key, videoId, window);
    expect(copies(b, 'download')).toBe(1);
    expect(copies(b, 'hit')).toBe(1);
    expect(cached(b)).toEqual([videoId]);
    const onA = await zoom(a, key, videoId, window);
    expect(copies(a, 'download')).toBe(1);
    for (const other of [warm, onA]) {
      expect(other.body.timecodes).toEqual(cold.body.timecodes);
      expect(other.body.window).toEqual({ start: 30, end: 90 });
      const sheet = async (r: typeof cold) => Buffer.from(await (await fetch(r.body.files[0])).arrayBuffer());
      expect((await sheet(cold)).equals(await sheet(other))).toBe(true);
    }

    // The cap counts across instances: 2 kept (one through each) and a third refused on either.
    const second = await fetch(`${b.url}/v1/videos`, {
      method: 'POST',
      headers: auth(key),
      body: videoForm({ bytes: clip, filename: 'again.mp4' }),
    });
    expect(second.status).toBe(201);
    const third = await fetch(`${a.url}/v1/videos`, {
      method: 'POST',
      headers: auth(key),
      body: videoForm({ bytes: clip, filename: 'third.mp4' }),
    });
    expect([third.status, await third.text()]).toEqual([409, '{"error":"too_many_videos","max_videos":2}']);

    const deleted = await fetch(`${b.url}/v1/videos/${videoId}`, { method: 'DELETE', headers: auth(key) });
    expect(deleted.status).toBe(204);
    expect(cached(b)).toEqual([]);
    const onAAfter = await fetch(`${a.url}/v1/videos/${videoId}/sheets`, {
      method: 'POST',
      headers: auth(key),
    });
    expect([onAAfter.status, await onAAfter.text()]).toEqual([404, '{"error":"not_found"}']);
    expect((await objectKeys()).filter((k) => k.includes(videoId))).toEqual([]);
    // A's copy goes at its next sweep (every 1 s here).
    await a.waitForLog(
      (l) => l.msg === 'expired or deleted videos removed' && Number(l.dropped) >= 1,
      15_000,
    );
    expect(cached(a)).toEqual([]);
  });
});
