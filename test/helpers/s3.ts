/**
 * A real S3-compatible server for storage tests: `moto_server` (Python moto 5) on a free loopback port,
 * with one fresh bucket. Nothing global is set; tests pass credentials explicitly (moto accepts any).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { CreateBucketCommand, S3Client } from '@aws-sdk/client-s3';
import { freePort } from './net.js';

export const MOTO_INSTALL = 'pip install "moto[server]"';
const MOTO_TETHERED = fileURLToPath(new URL('../../scripts/moto-tethered.py', import.meta.url));

/** Credentials moto accepts; pass as `env` to `S3SheetStorage.open` rather than setting process.env. */
export const TEST_AWS_ENV = { AWS_ACCESS_KEY_ID: 'test', AWS_SECRET_ACCESS_KEY: 'test' };

export interface TestS3 {
  /** `s3://<bucket>/<prefix>?endpoint=http://127.0.0.1:<port>&region=us-east-1` */
  url: string;
  /** `http://127.0.0.1:<port>` */
  endpoint: string;
  bucket: string;
  /** Stops moto_server (idempotent); everything in it is gone. */
  stop(): Promise<void>;
}

function exited(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => child.once('exit', () => resolve()));
}

/** Starts moto_server and creates a bucket; throws (never skips) when moto_server is not installed. */
export async function startS3(prefix = 'sheets'): Promise<TestS3> {
  const port = await freePort();
  const endpoint = `http://127.0.0.1:${port}`;
  // Through the interpreter, so no console-script shim (pyenv, a venv) has to be on PATH; tied to
  // this process by its stdin (scripts/moto-tethered.py), so a test run that dies leaves no server.
  const child = spawn('python3', [MOTO_TETHERED, '127.0.0.1', String(port)], {
    stdio: ['pipe', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr?.on('data', (d) => (stderr += d));
  const spawnError = new Promise<never>((_, reject) => {
    child.once('error', (error: NodeJS.ErrnoException) => {
      reject(
        error.code === 'ENOENT'
          ? new Error(
              `python3 was not found; the S3 storage tests run moto's server with it: ${MOTO_INSTALL}`,
            )
          : error,
      );
    });
  });
  spawnError.catch(() => {});
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null && child.pid) child.kill('SIGTERM');
    await Promise.race([exited(child), sleep(5_000)]);
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  };

  const ready = async () => {
    const deadline = Date.now() + 30_000;
    for (;;) {
      if (child.exitCode !== null) {
        throw new Error(`moto_server exited with ${child.exitCode} (${MOTO_INSTALL}?):\n${stderr}`);
      }
      const up = await fetch(`${endpoint}/moto-api/`).then(
        (r) => r.ok,
        () => false,
      );
      if (up) return;
      if (Date.now() > deadline) throw new Error(`moto_server did not answer on ${endpoint}:\n${stderr}`);
      await sleep(100);
    }
  };

  const bucket = `vidsheet-test-${randomBytes(4).toString('hex')}`;
  try {
    await Promise.race([ready(), spawnError]);
    const client = testS3Client(endpoint);
    try {
      await client.send(new CreateBucketCommand({ Bucket: bucket }));
    } finally {
      client.destroy();
    }
  } catch (error) {
    await stop();
    throw error;
  }
  return {
    url: `s3://${bucket}/${prefix}?endpoint=${endpoint}&region=us-east-1`,
    endpoint,
    bucket,
    stop,
  };
}

/** A client of the test store, with the test credentials (the caller destroys it). */
export function testS3Client(endpoint: string): S3Client {
  return new S3Client({
    endpoint,
    region: 'us-east-1',
    forcePathStyle: true,
    credentials: {
      accessKeyId: TEST_AWS_ENV.AWS_ACCESS_KEY_ID,
      secretAccessKey: TEST_AWS_ENV.AWS_SECRET_ACCESS_KEY,
    },
  });
}
