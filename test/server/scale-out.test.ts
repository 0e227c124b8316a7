/**
 * Sheets in S3-compatible storage (DESIGN §8), against the built server and moto's S3 server on
 * loopback: the bucket holds the sheets (not the data directory), capability URLs keep their shape
 * and stream from the bucket, expiry still answers 404 from the database, the sweeper deletes the
 * objects, and a bucket that cannot be used stops the server at start with a clear message.
 */
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ListObjectsV2Command, S3Client } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort, startS3, TEST_AWS_ENV, type TestS3 } from '../helpers/s3.js';
import { removeServerDirs, runServerBin, startServer, type TestServer } from '../helpers/server.js';

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
