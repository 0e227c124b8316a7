/**
 * DESIGN §5a "No secrets or capabilities in text meant for others", on real servers over loopback:
 * the server's whole stdout and stderr never hold a full job id (a capability: it opens the job's
 * sheets), through hosted jobs, sheet downloads, refused uploads, remote jobs and a job that fails
 * with a file-system error quoting its paths; and `/healthz` answers fixed words for a dead
 * database, a dead or missing bucket and a broken sheet directory, never the driver's text.
 */
import { readFileSync, renameSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { DeleteBucketCommand } from '@aws-sdk/client-s3';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CONTRACTS } from '../../src/core/report.js';
import { Ledger } from '../../src/server/billing/ledger.js';
import { healthFor, S3SheetStorage } from '../../src/server/storage/s3.js';
import { useBackend } from '../helpers/databases.js';
import { startPostgres } from '../helpers/postgres.js';
import { startS3, TEST_AWS_ENV, testS3Client } from '../helpers/s3.js';
import { postJob, removeServerDirs, startServer, type TestServer, videoForm } from '../helpers/server.js';

afterAll(removeServerDirs);

const SAMPLE = readFileSync(join(import.meta.dirname, '..', '..', 'fixtures', 'sample.mp4'));
const JOB_ID = /^[A-Za-z0-9_-]{22}$/;
const VERSION = JSON.parse(
  readFileSync(join(import.meta.dirname, '..', '..', 'package.json'), 'utf8'),
).version;

describe('job ids in the log', () => {
  let origin: Server;
  let videoUrl: string;
  let server: TestServer;
  let key: string;
  beforeAll(async () => {
    origin = createServer((req, res) => {
      if (req.url !== '/sample.mp4') {
        res.writeHead(404);
        res.end();
        return;
      }
      res.writeHead(200, { 'content-type': 'video/mp4', 'content-length': SAMPLE.length });
      res.end(SAMPLE);
    });
    await new Promise<void>((resolve) => origin.listen(0, '127.0.0.1', resolve));
    videoUrl = `http://127.0.0.1:${(origin.address() as AddressInfo).port}`;
    server = await startServer({ VIDSHEET_FETCH_ALLOW: new URL(videoUrl).host });
    key = (await server.admin('create-key', '--email', 'logs@example.com')).stdout.trim();
    expect((await server.admin('add-credits', '--email', 'logs@example.com', '--credits', '100')).code).toBe(
      0,
    );
  });
  afterAll(async () => {
    await server.stop();
    origin.closeAllConnections();
    await new Promise((resolve) => origin.close(resolve));
  });

  async function remoteCall(path: string) {
    const client = new Client({ name: 'vidsheet-test', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${server.url}/mcp`)));
    try {
      const result = (await client.callTool({
        name: 'vidsheet_video',
        arguments: { video_url: `${videoUrl}${path}` },
      })) as { isError?: boolean; content: Array<{ text?: string }> };
      return { isError: result.isError === true, text: result.content[0]?.text ?? '' };
    } finally {
      await client.close();
    }
  }

  it('stdout and stderr carry the first 8 characters of each job id, never the whole id', async () => {
    const ids: string[] = [];
    // A hosted job, its sheet fetched through its capability URL (a request line names that URL).
    const hosted = await postJob(server, key, videoForm({ bytes: SAMPLE, filename: 'sample.mp4' }));
    expect(hosted.status).toBe(200);
    const report = await hosted.json();
    ids.push(report.job_id);
    const sheet = await fetch(report.files[0]);
    expect(sheet.status).toBe(200);
    await sheet.arrayBuffer();
    // The image response mode: the id travels in a response header.
    const image = await postJob(
      server,
      key,
      videoForm({ bytes: SAMPLE, filename: 'sample.mp4' }, { response: 'image' }),
    );
    expect(image.status).toBe(200);
    await image.arrayBuffer();
    ids.push(String(image.headers.get('x-vidsheet-job')));
    // A remote job on the anonymous lane, and a remote fetch that fails (its job id is logged).
    const remote = await remoteCall('/sample.mp4');
    expect(remote.isError, remote.text).toBe(false);
    ids.push(JSON.parse(remote.text).job_id);
    expect((await remoteCall('/missing.mp4')).isError).toBe(true);
    // A refused upload (a text file) is logged with its job id.
    const text = await postJob(
      server,
      key,
      videoForm({ bytes: Buffer.from('#EXTM3U\n'), filename: 'a.mp4' }),
    );
    expect(text.status).toBe(422);
    await text.arrayBuffer();

    // A job that fails after its charge with a file-system error quoting `<data>/sheets/<job id>`: the
    // sheet directory is replaced by a file, so storing the sheets fails (ENOTDIR), refunded.
    const sheets = join(server.dataDir, 'sheets');
    renameSync(sheets, `${sheets}.moved`);
    writeFileSync(sheets, 'not a directory');
    const failed = await postJob(server, key, videoForm({ bytes: SAMPLE, filename: 'sample.mp4' }));
    expect(failed.status).toBe(500);
    expect(await failed.text()).toBe('{"error":"processing_failed","refunded":true}');
    const shown = JSON.parse((await server.admin('show', '--email', 'logs@example.com')).stdout);
    const refunded = shown.usage.find((row: { refunded: boolean }) => row.refunded);
    ids.push(refunded.job_id);
    const failure = await server.waitForLog((l) => l.msg === 'job failed after it was charged or recorded');
    expect(JSON.stringify(failure)).toContain(`/sheets/${refunded.job_id.slice(0, 8)}`);

    // The same broken sheet directory, as /healthz tells it: a fixed word, not the path.
    const health = await fetch(`${server.url}/healthz`);
    expect(health.status).toBe(503);
    expect(await health.text()).toBe(
      JSON.stringify({
        ok: false,
        contract: CONTRACTS.http,
        version: VERSION,
        database: 'ok',
        storage: 'unreachable',
      }),
    );
    await server.stop();

    expect(ids).toHaveLength(4);
    for (const id of ids) expect(id).toMatch(JOB_ID);
    const output = server.output();
    for (const id of ids) {
      expect(output).not.toContain(id);
      expect(output).toContain(id.slice(0, 8));
    }
    // Every log field named jobId holds 8 characters.
    const logged = server.logs.filter((l) => 'jobId' in l);
    expect(logged.length).toBeGreaterThan(5);
    for (const line of logged) expect(String(line.jobId)).toMatch(/^[A-Za-z0-9_-]{8}$/);
  });
});

describe('error texts the log may carry', () => {
  const databases = useBackend('sqlite');
  const id = 'Qw3rTy_uIoP-aSdFgHjKlZ';

  it('the ledger names a job by its first 8 characters', async () => {
    const { db } = await databases.fresh();
    const ledger = new Ledger(db, { allowanceFloor: 7, clock: () => new Date('2025-03-01T12:00:00Z') });
    const account = await ledger.accounts.findOrCreateAccount('texts@example.com');
    await ledger.credits.grant(account.id, 10);
    const charge = {
      accountId: account.id,
      jobId: id,
      price: 1,
      surface: 'http',
      density: '3x3',
      sheets: 1,
    } as const;
    await ledger.credits.charge({ ...charge, ttlSeconds: 60 });
    await expect(ledger.credits.charge({ ...charge, ttlSeconds: 60 })).rejects.toThrow(
      'job Qw3rTy_u… already exists',
    );
    await expect(ledger.jobs.finishJob('Zx9cVb_nMaSdFgHjKlQwEr')).rejects.toThrow('unknown job: Zx9cVb_n…');
  });

  it('the bucket store names a job by its first 8 characters when a request fails', async () => {
    const s3 = await startS3('texts');
    const storage = await S3SheetStorage.open(s3.url, { env: TEST_AWS_ENV, checkTimeoutMs: 2_000 });
    try {
      await s3.stop();
      const failures = await Promise.all([
        storage.get(id, 'video.sheet-1.jpg').catch((error: Error) => error),
        storage.remove(id).catch((error: Error) => error),
      ]);
      for (const failure of failures) {
        expect(failure).toBeInstanceOf(Error);
        expect((failure as Error).message).toContain('texts/Qw3rTy_u…/');
        expect((failure as Error).message).not.toContain(id);
      }
    } finally {
      storage.destroy();
      await s3.stop();
    }
  });
});

describe('/healthz says which part is down in fixed words', () => {
  const body = (database: string, storage: string) =>
    JSON.stringify({ ok: false, contract: CONTRACTS.http, version: VERSION, database, storage });

  it('a PostgreSQL that stopped: database "unreachable", never the driver text', async () => {
    const pg = await startPostgres();
    const server = await startServer({ VIDSHEET_DATABASE_URL: pg.url });
    try {
      expect((await fetch(`${server.url}/healthz`)).status).toBe(200);
      await pg.stop();
      const down = await fetch(`${server.url}/healthz`);
      expect(down.status).toBe(503);
      expect(await down.text()).toBe(body('unreachable', 'ok'));
      // The detail is for the operator, in the log.
      const logged = await server.waitForLog((l) => l.msg === 'health check failed' && l.part === 'database');
      expect(JSON.stringify(logged.err)).toMatch(/ECONNREFUSED|connect|terminat/i);
    } finally {
      await server.stop();
      await pg.stop();
    }
  });

  it('a bucket that was deleted: storage "bucket missing"; a storage server that stopped: "unreachable"', async () => {
    const s3 = await startS3('health');
    const server = await startServer({ ...TEST_AWS_ENV, VIDSHEET_STORAGE_URL: s3.url });
    try {
      expect((await fetch(`${server.url}/healthz`)).status).toBe(200);
      const client = testS3Client(s3.endpoint);
      try {
        await client.send(new DeleteBucketCommand({ Bucket: s3.bucket }));
      } finally {
        client.destroy();
      }
      const missing = await fetch(`${server.url}/healthz`);
      expect(missing.status).toBe(503);
      expect(await missing.text()).toBe(body('ok', 'bucket missing'));
      await s3.stop();
      const gone = await fetch(`${server.url}/healthz`);
      expect(gone.status).toBe(503);
      expect(await gone.text()).toBe(body('ok', 'unreachable'));
    } finally {
      await server.stop();
      await s3.stop();
    }
  });

  it.each([
    [{ name: 'NoSuchBucket', $metadata: { httpStatusCode: 404 } }, 'bucket missing'],
    [{ name: 'NotFound', $metadata: { httpStatusCode: 404 } }, 'bucket missing'],
    [{ name: 'AccessDenied', $metadata: { httpStatusCode: 403 } }, 'denied'],
    [{ name: 'Forbidden', $metadata: { httpStatusCode: 403 } }, 'denied'],
    [{ name: 'UnknownError', $metadata: { httpStatusCode: 403 } }, 'denied'],
    [{ name: 'InvalidAccessKeyId', $metadata: { httpStatusCode: 400 } }, 'denied'],
    [{ name: 'SignatureDoesNotMatch', $metadata: { httpStatusCode: 400 } }, 'denied'],
    [
      { name: 'CredentialsProviderError', message: 'Could not load credentials from any providers' },
      'denied',
    ],
    [{ name: 'TimeoutError' }, 'unreachable'],
    [{ code: 'ECONNREFUSED', message: 'connect ECONNREFUSED 10.1.2.3:9000' }, 'unreachable'],
    [
      {
        name: 'InternalError',
        $metadata: { httpStatusCode: 500 },
        message: 'We encountered an internal error',
      },
      'unreachable',
    ],
    [new Error('anything else'), 'unreachable'],
  ])('S3 error %j → %s (fake errors for what moto does not produce)', (error, word) => {
    expect(healthFor(error)).toBe(word);
  });
});
