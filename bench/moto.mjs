/**
 * An S3-compatible store for the benchmarks: `moto_server` (Python moto) on a free loopback port
 * with one bucket, created with the SDK the server itself uses. `url` is what VIDSHEET_STORAGE_URL
 * takes; the server needs AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY set to anything (`env`).
 */
import { spawn } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { freePort } from './free-port.mjs';

export const MOTO_ENV = { AWS_ACCESS_KEY_ID: 'test', AWS_SECRET_ACCESS_KEY: 'test' };

/** Resolves to { url, child } once the bucket exists; the caller kills `child` when done. */
export async function startMoto(bucket = 'bench') {
  const port = await freePort();
  // Tied to this process by its stdin: a bench that dies leaves no server behind.
  const tethered = fileURLToPath(new URL('../scripts/moto-tethered.py', import.meta.url));
  const child = spawn('python3', [tethered, '127.0.0.1', String(port)], {
    stdio: ['pipe', 'ignore', 'ignore'],
  });
  const endpoint = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 300; i++) {
    const up = await fetch(`${endpoint}/moto-api/`).then(
      (r) => r.ok,
      () => false,
    );
    if (up) break;
    await sleep(100);
  }
  const { S3Client, CreateBucketCommand } = await import('@aws-sdk/client-s3');
  const s3 = new S3Client({
    endpoint,
    region: 'us-east-1',
    forcePathStyle: true,
    credentials: { accessKeyId: MOTO_ENV.AWS_ACCESS_KEY_ID, secretAccessKey: MOTO_ENV.AWS_SECRET_ACCESS_KEY },
  });
  await s3.send(new CreateBucketCommand({ Bucket: bucket }));
  s3.destroy();
  return { url: `s3://${bucket}/sheets?endpoint=${endpoint}&region=us-east-1`, child };
}
