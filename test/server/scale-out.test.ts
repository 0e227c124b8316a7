/**
 * Past one machine (DESIGN §8), against the built server, a throwaway PostgreSQL and moto's S3
 * server, all on loopback: the bucket holds the sheets (not the data directory), capability URLs
 * keep their shape and stream from the bucket, expiry still answers 404 from the database, the
 * sweeper deletes the objects, a bucket that cannot be used stops the server at start; and two
 * instances on one database and bucket serve each other's jobs, keys and sessions, and after a
 * crash each refunds only its own jobs.
 */
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ListObjectsV2Command } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { plainClip } from '../helpers/fixtures.js';
import { freePort } from '../helpers/net.js';
import { startPostgres, type TestPostgres } from '../helpers/postgres.js';
import { startS3, TEST_AWS_ENV, type TestS3, testS3Client } from '../helpers/s3.js';
import { removeServerDirs, runServerBin, startServer, type TestServer } from '../helpers/server.js';
import { visitor } from '../helpers/visitor.js';

const SAMPLE = readFileSync(join(import.meta.dirname, '..', '..', 'fixtures', 'sample.mp4'));

const scratchDirs: string[] = [];
const scratch = () => {
  const dir = mkdtempSync(join(tmpdir(), 'vidsheet-s3-test-'));
  scratchDirs.push(dir);
  return dir;
};

let s3: TestS3;
beforeAll(async () => {
  s3 = await startS3('vidsheet/sheets');
});
afterAll(async () => {
  await s3?.stop();
  removeServerDirs();
  for (const dir of scratchDirs) rmSync(dir, { recursive: true, force: true });
});

async function objectKeys(): Promise<string[]> {
  const client = testS3Client(s3.endpoint);
  const listed = await client.send(new ListObjectsV2Command({ Bucket: s3.bucket }));
  client.destroy();
  return (listed.Contents ?? []).map((o) => o.Key as string).sort();
}

describe('sheets in an S3-compatible bucket', () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startServer({
      ...TEST_AWS_ENV,
      VIDSHEET_STORAGE_URL: s3.url,
      VIDSHEET_SHEET_TTL_S: '3',
      VIDSHEET_SWEEP_S: '2',
    });
  });
  afterAll(() => server.stop());

  it('a job writes its sheets to the bucket, serves them from it, and they expire and are swept', async () => {
    const created = await server.admin('create-key', '--email', 's3@example.com');
    const form = new FormData();
    form.append('video', new Blob([SAMPLE]), 'sample.mp4');
    const res = await fetch(`${server.url}/v1/vidsheet`, {
      method: 'POST',
      headers: { authorization: `Bearer ${created.stdout.trim()}` },
      body: form,
    });
    expect(res.status).toBe(200);
    const { job_id: jobId, files } = await res.json();
    expect(files).toEqual([1, 2].map((n) => `${server.url}/v1/sheets/${jobId}/video.sheet-${n}.jpg`));
    expect(await objectKeys()).toEqual([
      `vidsheet/sheets/${jobId}/video.sheet-1.jpg`,
      `vidsheet/sheets/${jobId}/video.sheet-2.jpg`,
    ]);
    // Nothing of the job on local disk.
    expect(existsSync(join(server.dataDir, 'sheets', jobId))).toBe(false);
    expect(readdirSync(join(server.dataDir, 'work'))).toEqual([]);

    const sheet = await fetch(files[0]);
    expect(sheet.status).toBe(200);
    expect(sheet.headers.get('content-type')).toBe('image/jpeg');
    const bytes = Buffer.from(await sheet.arrayBuffer());
    expect([bytes[0], bytes[1], bytes.at(-2), bytes.at(-1)]).toEqual([0xff, 0xd8, 0xff, 0xd9]);

    const health = await (await fetch(`${server.url}/healthz`)).json();
    expect(health).toMatchObject({ ok: true, database: 'ok', storage: 'ok' });

    // Expired: 404 from the database's word; then the sweeper deletes the objects.
    await new Promise((r) => setTimeout(r, 3_200));
    expect((await fetch(files[0])).status).toBe(404);
    const deadline = Date.now() + 10_000;
    while ((await objectKeys()).length > 0 && Date.now() < deadline)
      await new Promise((r) => setTimeout(r, 200));
    expect(await objectKeys()).toEqual([]);
  });
});

describe('a bucket that cannot be used', () => {
  it('stops the server at start with a message naming the bucket and the cause', async () => {
    const nothing = `http://127.0.0.1:${await freePort()}`;
    const r = await runServerBin([], {
      ...process.env,
      ...TEST_AWS_ENV,
      PORT: String(await freePort()),
      VIDSHEET_DATA_DIR: scratch(),
      VIDSHEET_STORAGE_URL: `s3://${s3.bucket}/x?endpoint=${encodeURIComponent(nothing)}&region=us-east-1`,
    });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`S3 bucket "${s3.bucket}"`);
    expect(r.stderr).toContain('connection refused');

    const missing = await runServerBin([], {
      ...process.env,
      ...TEST_AWS_ENV,
      PORT: String(await freePort()),
      VIDSHEET_DATA_DIR: scratch(),
      VIDSHEET_STORAGE_URL: `s3://no-such-bucket/x?endpoint=${encodeURIComponent(s3.endpoint)}&region=us-east-1`,
    });
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain('no such bucket');
  });
});

describe('two instances on one PostgreSQL database and one bucket', () => {
  let pg: TestPostgres;
  let a: TestServer;
  let b: TestServer;
  beforeAll(async () => {
    pg = await startPostgres();
    const shared = { ...TEST_AWS_ENV, VIDSHEET_DATABASE_URL: pg.url, VIDSHEET_STORAGE_URL: s3.url };
    // The fallback engine keeps a long job busy long enough to crash its instance in the middle.
    a = await startServer({ ...shared, VIDSHEET_ENGINE: 'ffmpeg' });
    b = await startServer(shared);
  });
  afterAll(async () => {
    await a?.stop();
    await b?.stop();
    await pg?.stop();
  });

  const post = (server: TestServer, key: string, bytes: Buffer, density = '3x3') => {
    const form = new FormData();
    form.append('video', new Blob([new Uint8Array(bytes)]), 'clip.mp4');
    form.append('density', density);
    return fetch(`${server.url}/v1/vidsheet`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}` },
      body: form,
    });
  };

  it('a key made through one instance works on the other; a job made on one is served by the other', async () => {
    const key = (await a.admin('create-key', '--email', 'both@example.com')).stdout.trim();
    await b.admin('add-credits', '--email', 'both@example.com', '--credits', '20');
    const res = await post(b, key, SAMPLE);
    expect(res.status).toBe(200);
    const { job_id: jobId, credits_remaining: remaining } = await res.json();
    expect(remaining).toBe(18);
    const fromB = Buffer.from(
      await (await fetch(`${b.url}/v1/sheets/${jobId}/video.sheet-1.jpg`)).arrayBuffer(),
    );
    const fromA = await fetch(`${a.url}/v1/sheets/${jobId}/video.sheet-1.jpg`);
    expect(fromA.status).toBe(200);
    expect(Buffer.from(await fromA.arrayBuffer()).equals(fromB)).toBe(true);
    expect(JSON.parse((await a.admin('show', '--email', 'both@example.com')).stdout).balance).toBe(18);
    for (const server of [a, b]) {
      expect(await (await fetch(`${server.url}/healthz`)).json()).toMatchObject({
        ok: true,
        database: 'ok',
        storage: 'ok',
      });
    }
  });

  it('a keys page session made on one instance is valid on the other, and sign-out ends it on both', async () => {
    const v = visitor();
    const page = (server: TestServer) => v.get(server.url);
    const post = (server: TestServer, path: string, fields: Record<string, string>) =>
      v.post(server.url, path, fields);
    await post(a, '/keys/code', { _csrf: (await page(a)).csrf, email: 'roam@example.com' });
    const logged = await a.waitForLog((l) => l.email === 'roam@example.com' && typeof l.code === 'string');
    const signIn = await post(a, '/keys/sign-in', {
      _csrf: (await page(a)).csrf,
      email: 'roam@example.com',
      code: String(logged.code),
    });
    expect(signIn.status).toBe(303);
    expect((await page(b)).html).toContain('Signed in as roam@example.com');
    const token = v.cookie('vidsheet_session') as string;
    await post(b, '/keys/sign-out', { _csrf: (await page(b)).csrf });
    const stale = await fetch(`${a.url}/keys`, { headers: { cookie: `vidsheet_session=${token}` } });
    expect(await stale.text()).not.toContain('Signed in as');
  });

  it("after a crash an instance refunds its own interrupted job, never the other instance's", async () => {
    const key = (await a.admin('create-key', '--email', 'crash@example.com')).stdout.trim();
    await a.admin('add-credits', '--email', 'crash@example.com', '--credits', '200');
    const job = post(a, key, readFileSync(await plainClip(1800)), '6x6');
    const charged = await a.waitForLog((l) => l.msg === 'job charged', 60_000);
    a.process.kill('SIGKILL');
    await expect(job).rejects.toThrow();
    await a.stop();
    // B restarts while A is down: A's job is not B's to refund.
    await b.stop();
    b = await startServer(b.env as Record<string, string>, { dataDir: b.dataDir });
    expect(b.logs.some((l) => l.msg === 'recovered from an unclean stop')).toBe(false);
    expect(JSON.parse((await b.admin('show', '--email', 'crash@example.com')).stdout).balance).toBe(100);
    // A comes back and refunds it.
    a = await startServer(a.env as Record<string, string>, { dataDir: a.dataDir });
    const recovered = await a.waitForLog((l) => l.msg === 'recovered from an unclean stop');
    expect(recovered.refundedJobs).toEqual([charged.jobId]);
    expect(JSON.parse((await b.admin('show', '--email', 'crash@example.com')).stdout).balance).toBe(200);
  });
});

describe('a bucket that goes away while the server runs', () => {
  it('fails the job with 500 refunded:true, gives the credits back, and health says storage is down', async () => {
    const own = await startS3('gone');
    const server = await startServer({ ...TEST_AWS_ENV, VIDSHEET_STORAGE_URL: own.url });
    try {
      const key = (await server.admin('create-key', '--email', 'gone@example.com')).stdout.trim();
      await server.admin('add-credits', '--email', 'gone@example.com', '--credits', '20');
      await own.stop();
      const form = new FormData();
      form.append('video', new Blob([SAMPLE]), 'sample.mp4');
      const res = await fetch(`${server.url}/v1/vidsheet`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}` },
        body: form,
      });
      expect(res.status).toBe(500);
      expect(await res.text()).toBe('{"error":"processing_failed","refunded":true}');
      const shown = JSON.parse((await server.admin('show', '--email', 'gone@example.com')).stdout);
      expect(shown.balance).toBe(20);
      expect(shown.usage[0]).toMatchObject({ refunded: true });
      const health = await fetch(`${server.url}/healthz`);
      expect(health.status).toBe(503);
      expect(await health.json()).toMatchObject({ ok: false, database: 'ok' });
      expect(server.leftovers()).toEqual([]);
    } finally {
      await server.stop();
    }
  });
});
