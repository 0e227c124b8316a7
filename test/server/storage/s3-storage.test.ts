/**
 * Sheet storage on S3-compatible storage (DESIGN §8), against a real moto_server on loopback: the URL
 * grammar, byte-identical round trips, deletion that two instances may repeat, errors at start that
 * name the bucket, and one contract that the directory store and the bucket store both keep.
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { HeadObjectCommand, ListObjectsV2Command } from '@aws-sdk/client-s3';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { LocalSheetStorage } from '../../../src/server/storage/local.js';
import { parseStorageUrl, S3SheetStorage, StorageUnavailableError } from '../../../src/server/storage/s3.js';
import type { SheetStorage } from '../../../src/server/storage/storage.js';
import { freePort } from '../../helpers/net.js';
import { startS3, TEST_AWS_ENV, type TestS3 } from '../../helpers/s3.js';

const env = TEST_AWS_ENV;
const roots: string[] = [];
const opened: S3SheetStorage[] = [];
let s3: TestS3;

beforeAll(async () => {
  s3 = await startS3('sheets/v1');
});

afterAll(async () => {
  for (const storage of opened.splice(0)) storage.destroy();
  await s3?.stop();
  for (const root of roots.splice(0)) rmSync(root, { recursive: true, force: true });
});

function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'vidsheet-s3-test-'));
  roots.push(dir);
  return dir;
}

/** Rendered sheets as the worker leaves them: files in a work directory, owned by put() afterwards. */
function renderedSheets(sizes: number[]): { files: string[]; bytes: Buffer[] } {
  const dir = tempDir();
  const bytes = sizes.map((size) => randomBytes(size));
  const files = bytes.map((b, i) => {
    const file = join(dir, `video.sheet-${i + 1}.jpg`);
    writeFileSync(file, b);
    return file;
  });
  return { files, bytes };
}

async function readAll(stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(Buffer.from(chunk));
  return Buffer.concat(chunks);
}

/** A job id shaped like the server's (22 url-safe characters). */
function jobId(): string {
  return randomBytes(16).toString('base64url').slice(0, 22);
}

async function openS3(url = s3.url): Promise<S3SheetStorage> {
  const storage = await S3SheetStorage.open(url, { env });
  opened.push(storage);
  return storage;
}

async function keysOf(storage: S3SheetStorage, prefix: string): Promise<string[]> {
  const page = await storage.client.send(new ListObjectsV2Command({ Bucket: s3.bucket, Prefix: prefix }));
  return (page.Contents ?? []).map((o) => o.Key ?? '').sort();
}

describe('parseStorageUrl', () => {
  it('reads bucket, prefix, endpoint and region', () => {
    expect(parseStorageUrl('s3://sheets-bucket/a/b?endpoint=http://127.0.0.1:9000&region=eu-west-1')).toEqual(
      {
        bucket: 'sheets-bucket',
        prefix: 'a/b',
        endpoint: 'http://127.0.0.1:9000',
        region: 'eu-west-1',
      },
    );
  });

  it('defaults the region to us-east-1 and leaves the endpoint out for AWS itself', () => {
    const parsed = parseStorageUrl('s3://my.bucket/prefix');
    expect(parsed).toEqual({ bucket: 'my.bucket', prefix: 'prefix', region: 'us-east-1' });
    expect('endpoint' in parsed).toBe(false);
  });

  it('normalises the prefix: no leading, trailing or doubled slashes; empty at the root', () => {
    expect(parseStorageUrl('s3://bucket//a//b/').prefix).toBe('a/b');
    expect(parseStorageUrl('s3://bucket').prefix).toBe('');
    expect(parseStorageUrl('s3://bucket/').prefix).toBe('');
    expect(parseStorageUrl('s3://bucket/?region=').region).toBe('us-east-1');
    expect(parseStorageUrl('s3://bucket/p?endpoint=https://s3.example.com/').endpoint).toBe(
      'https://s3.example.com',
    );
  });

  it.each([
    ['http://bucket/prefix', /must start with s3:\/\//],
    ['not a url', /not a URL/],
    ['s3:///prefix', /not a bucket name/],
    ['s3://key:secret@bucket/prefix', /must not carry credentials.*AWS_ACCESS_KEY_ID/],
    ['s3://bucket:9000/prefix', /endpoint=/],
    ['s3://bucket/prefix?enpoint=http://127.0.0.1:9000', /unknown parameter "enpoint"/],
    ['s3://bucket/prefix?endpoint=ftp://host', /http:\/\/ or https:\/\//],
    ['s3://bucket/prefix?endpoint=nohost', /not a URL/],
    // URL parsing already resolves literal dot segments; encoded slashes must not smuggle them back.
    ['s3://bucket/a%2F..%2Fb', /"\." or "\.\."/],
  ])('rejects %s', (url, message) => {
    expect(() => parseStorageUrl(url)).toThrow(message);
  });
});

describe('the test store', () => {
  it('goes when the process that started it dies without stopping it (no server left after a failed run)', async () => {
    const port = await freePort();
    const endpoint = `http://127.0.0.1:${port}/moto-api/`;
    const answers = () =>
      fetch(endpoint).then(
        (r) => r.ok,
        () => false,
      );
    // A parent as test/helpers/s3.ts starts it, then killed outright: no afterAll, no stop().
    const script = fileURLToPath(new URL('../../../scripts/moto-tethered.py', import.meta.url));
    const parent = spawn(
      process.execPath,
      [
        '-e',
        `require('node:child_process').spawn('python3', [${JSON.stringify(script)}, '127.0.0.1', '${port}'], { stdio: ['pipe', 'ignore', 'ignore'] }); setInterval(() => {}, 1000);`,
      ],
      { stdio: 'ignore' },
    );
    try {
      await vi.waitFor(async () => expect(await answers()).toBe(true), { timeout: 30_000, interval: 100 });
    } finally {
      parent.kill('SIGKILL');
    }
    await vi.waitFor(async () => expect(await answers()).toBe(false), { timeout: 10_000, interval: 100 });
  });
});

describe('S3SheetStorage on moto_server', () => {
  it('round-trips two sheets byte for byte under <prefix>/<jobId>/ and deletes the local files', async () => {
    const storage = await openS3();
    const id = jobId();
    const { files, bytes } = renderedSheets([300_000, 1_234]);
    await storage.put(id, files);

    for (const file of files) expect(existsSync(file)).toBe(false);
    expect(await keysOf(storage, `sheets/v1/${id}/`)).toEqual([
      `sheets/v1/${id}/video.sheet-1.jpg`,
      `sheets/v1/${id}/video.sheet-2.jpg`,
    ]);
    for (const [i, expected] of bytes.entries()) {
      const stream = await storage.get(id, `video.sheet-${i + 1}.jpg`);
      expect(stream).toBeDefined();
      expect((await readAll(stream as Readable)).equals(expected)).toBe(true);
    }
    const head = await storage.client.send(
      new HeadObjectCommand({ Bucket: s3.bucket, Key: `sheets/v1/${id}/video.sheet-1.jpg` }),
    );
    expect(head.ContentType).toBe('image/jpeg');
    expect(head.ContentLength).toBe(300_000);
  });

  it('answers undefined for a missing sheet, a missing job and names that leave the job', async () => {
    const storage = await openS3();
    const id = jobId();
    await storage.put(id, renderedSheets([10]).files);
    expect(await storage.get(id, 'video.sheet-2.jpg')).toBeUndefined();
    expect(await storage.get(jobId(), 'video.sheet-1.jpg')).toBeUndefined();
    expect(await storage.get(id, '../video.sheet-1.jpg')).toBeUndefined();
    expect(await storage.get('..', `${id}/video.sheet-1.jpg`)).toBeUndefined();
  });

  it('remove deletes every object of the job, only that job, and may be repeated', async () => {
    const storage = await openS3();
    const id = jobId();
    const neighbour = `${id}x`; // shares the job id as a string prefix: must survive
    await storage.put(id, renderedSheets([100, 200, 300]).files);
    await storage.put(neighbour, renderedSheets([100]).files);

    await storage.remove(id);
    expect(await keysOf(storage, `sheets/v1/${id}/`)).toEqual([]);
    expect(await storage.get(id, 'video.sheet-1.jpg')).toBeUndefined();
    expect(await keysOf(storage, `sheets/v1/${neighbour}/`)).toEqual([
      `sheets/v1/${neighbour}/video.sheet-1.jpg`,
    ]);

    await expect(storage.remove(id)).resolves.toBeUndefined();
    await expect(storage.remove(jobId())).resolves.toBeUndefined();
    await expect(storage.remove('')).rejects.toThrow(/invalid job id/);
  });

  it('a second instance sees, serves and deletes what the first stored; both may sweep at once', async () => {
    const first = await openS3();
    const second = await openS3();
    const id = jobId();
    const { files, bytes } = renderedSheets([50_000, 60_000]);
    await first.put(id, files);

    const served = await second.get(id, 'video.sheet-2.jpg');
    expect((await readAll(served as Readable)).equals(bytes[1] as Buffer)).toBe(true);

    await Promise.all([first.remove(id), second.remove(id)]);
    expect(await first.get(id, 'video.sheet-1.jpg')).toBeUndefined();
    expect(await second.get(id, 'video.sheet-1.jpg')).toBeUndefined();
  });

  it('check() passes on a reachable bucket', async () => {
    const storage = await openS3();
    await expect(storage.check()).resolves.toBeUndefined();
  });
});

describe('S3SheetStorage.open errors name the bucket and what failed', () => {
  afterEach(() => {
    vi.unstubAllEnvs();
  });

  it('connection refused (nothing listening at the endpoint)', async () => {
    const port = await freePort();
    const url = `s3://${s3.bucket}/p?endpoint=http://127.0.0.1:${port}`;
    const error = await S3SheetStorage.open(url, { env }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(StorageUnavailableError);
    expect((error as StorageUnavailableError).reason).toBe('connection refused');
    expect((error as Error).message).toBe(
      `S3 bucket "${s3.bucket}" at http://127.0.0.1:${port} is not usable: connection refused`,
    );
  });

  it('no such bucket', async () => {
    const url = s3.url.replace(s3.bucket, 'no-such-bucket-here');
    await expect(S3SheetStorage.open(url, { env })).rejects.toThrow(
      `S3 bucket "no-such-bucket-here" at ${s3.endpoint} is not usable: no such bucket`,
    );
  });

  it('no credentials in the given environment', async () => {
    await expect(S3SheetStorage.open(s3.url, { env: {} })).rejects.toThrow(
      `S3 bucket "${s3.bucket}" at ${s3.endpoint} is not usable: no credentials (set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)`,
    );
  });

  it('no credentials anywhere in the SDK default chain (what the server uses)', async () => {
    const nowhere = join(tempDir(), 'absent');
    vi.stubEnv('AWS_ACCESS_KEY_ID', undefined);
    vi.stubEnv('AWS_SECRET_ACCESS_KEY', undefined);
    vi.stubEnv('AWS_SESSION_TOKEN', undefined);
    vi.stubEnv('AWS_PROFILE', undefined);
    vi.stubEnv('AWS_WEB_IDENTITY_TOKEN_FILE', undefined);
    vi.stubEnv('AWS_CONTAINER_CREDENTIALS_RELATIVE_URI', undefined);
    vi.stubEnv('AWS_CONTAINER_CREDENTIALS_FULL_URI', undefined);
    vi.stubEnv('AWS_SHARED_CREDENTIALS_FILE', nowhere);
    vi.stubEnv('AWS_CONFIG_FILE', nowhere);
    vi.stubEnv('AWS_EC2_METADATA_DISABLED', 'true'); // loopback only: never ask 169.254.169.254
    await expect(S3SheetStorage.open(s3.url)).rejects.toThrow(/is not usable: no credentials/);
  });

  it('an upload to an unreachable bucket fails (the job is then refunded) and keeps the local files', async () => {
    const port = await freePort();
    const storage = new S3SheetStorage(
      parseStorageUrl(`s3://${s3.bucket}/p?endpoint=http://127.0.0.1:${port}`),
      {
        env,
      },
    );
    opened.push(storage);
    const { files } = renderedSheets([1_000]);
    await expect(storage.put(jobId(), files)).rejects.toThrow(
      new RegExp(`uploading p/.*/video\\.sheet-1\\.jpg to S3 bucket "${s3.bucket}" .*: connection refused`),
    );
    expect(existsSync(files[0] as string)).toBe(true);
    await expect(storage.check()).rejects.toThrow(/connection refused/);
  });
});

describe('LocalSheetStorage.check', () => {
  it('fails on a missing directory and passes on a writable one', async () => {
    const dir = tempDir();
    await expect(new LocalSheetStorage(join(dir, 'absent')).check()).rejects.toThrow(/does not exist/);
    await expect(new LocalSheetStorage(dir).check()).resolves.toBeUndefined();
  });
});

/** One contract, two stores: what the server relies on does not depend on where sheets live. */
describe.each([
  ['LocalSheetStorage', async (): Promise<SheetStorage> => new LocalSheetStorage(tempDir())],
  ['S3SheetStorage', async (): Promise<SheetStorage> => openS3()],
])('SheetStorage contract: %s', (_name, make) => {
  it('put takes the files, get serves them byte for byte, remove deletes them idempotently', async () => {
    const storage = await make();
    const id = jobId();
    const { files, bytes } = renderedSheets([4_096, 70_000]);

    await storage.put(id, files);
    for (const file of files) expect(existsSync(file)).toBe(false);
    for (const [i, expected] of bytes.entries()) {
      const stream = await storage.get(id, `video.sheet-${i + 1}.jpg`);
      expect((await readAll(stream as Readable)).equals(expected)).toBe(true);
    }
    expect(await storage.get(id, 'video.sheet-3.jpg')).toBeUndefined();
    expect(await storage.get(jobId(), 'video.sheet-1.jpg')).toBeUndefined();

    await storage.remove(id);
    expect(await storage.get(id, 'video.sheet-1.jpg')).toBeUndefined();
    expect(await storage.get(id, 'video.sheet-2.jpg')).toBeUndefined();
    await storage.remove(id);
    await storage.remove(jobId());
    await expect(storage.check?.()).resolves.toBeUndefined();
  });
});
