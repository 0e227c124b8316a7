/**
 * The server's life around its jobs, against the built bin on loopback: the credential check before
 * any body byte, a worker killed mid-job, expiry and the sweeper, a clean stop, recovery after a
 * crash, and configuration errors. Money is checked through the operator's own `admin show`.
 */
import { once } from 'node:events';
import { existsSync, readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { type AddressInfo, connect } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mcpToolCall } from '../helpers/app.js';
import { plainClip } from '../helpers/fixtures.js';
import {
  type LogLine,
  newAccount,
  postJob,
  removeServerDirs,
  runServerBin,
  showAccount,
  startServer,
  type TestServer,
  videoForm,
} from '../helpers/server.js';
import { slowUpload } from '../helpers/slow-client.js';
import { waitFor } from '../helpers/wait.js';

afterAll(removeServerDirs);

const SAMPLE = join(import.meta.dirname, '..', '..', 'fixtures', 'sample.mp4');
const sample = () => ({ bytes: readFileSync(SAMPLE), filename: 'sample.mp4' });

/** The pid of the worker that is running now (the last one started). */
function workerPid(server: TestServer): number {
  const started = server.logs.filter((l) => l.msg === 'job worker started');
  return Number(started[started.length - 1]?.workerPid);
}

const isCharged = (jobId?: string) => (l: LogLine) =>
  l.msg === 'job charged' && (!jobId || l.jobId === jobId);

describe('credential and capacity checks come before the body', () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startServer();
  });
  afterAll(() => server.stop());

  it('401 arrives at once while a 300 MB body has barely started, with Connection: close', async () => {
    const { port, hostname } = new URL(server.url);
    const socket = connect(Number(port), hostname);
    const boundary = 'vidsheetboundary';
    const head = [
      'POST /v1/vidsheet HTTP/1.1',
      `Host: ${hostname}:${port}`,
      'Authorization: Bearer vs_live_0000000000000000000000000000000000000000',
      `Content-Type: multipart/form-data; boundary=${boundary}`,
      `Content-Length: ${300 * 1024 * 1024}`,
      '',
      '',
    ].join('\r\n');
    const partHead = `--${boundary}\r\nContent-Disposition: form-data; name="video"; filename="big.mp4"\r\n\r\n`;
    let response = '';
    const answered = new Promise<string>((resolve, reject) => {
      socket.on('data', (d) => {
        response += d;
        if (response.includes('\r\n\r\n') && response.includes('}')) resolve(response);
      });
      socket.on('error', reject);
    });
    socket.write(head + partHead);
    socket.write(Buffer.alloc(4096, 1));
    const started = Date.now();
    const text = await answered;
    socket.destroy();
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(text).toMatch(/^HTTP\/1\.1 401 /);
    expect(text.toLowerCase()).toContain('connection: close');
    expect(text.slice(text.indexOf('\r\n\r\n') + 4)).toBe('{"error":"invalid_key"}');
    expect(server.leftovers()).toEqual([]);
  });
});

describe('a worker killed mid-job', () => {
  let server: TestServer;
  beforeAll(async () => {
    // The fallback engine on a long clip keeps the job busy long enough to kill its worker.
    server = await startServer({ VIDSHEET_ENGINE: 'ffmpeg' });
  });
  afterAll(() => server.stop());

  it('fails that job with 500 refunded:true, restores the balance, and the next job succeeds', async () => {
    const { key } = await newAccount(server, 200, 'crash@example.com');
    // A purchase-free account at 200 is above the allowance floor: the balance only moves by the job.
    const before = await showAccount(server, 'crash@example.com');
    expect(before.balance).toBe(200);
    const clip = await plainClip(1800);
    const firstWorker = workerPid(server);
    const job = postJob(
      server,
      key,
      videoForm({ bytes: readFileSync(clip), filename: 'long.mp4' }, { density: '6x6' }),
    );
    await server.waitForLog(isCharged(), 60_000);
    process.kill(firstWorker, 'SIGKILL');
    const response = await job;
    expect(response.status).toBe(500);
    expect(await response.text()).toBe('{"error":"processing_failed","refunded":true}');

    const after = await showAccount(server, 'crash@example.com');
    expect(after.balance).toBe(200);
    expect(after.usage).toHaveLength(1);
    expect(after.usage[0]).toMatchObject({ credits: 100, refunded: true, sheets: 20 });
    // The 5xx body held nothing of the crash; the log has it.
    expect(server.logs.some((l) => l.msg === 'job worker exited' && l.signal === 'SIGKILL')).toBe(true);

    const next = await postJob(server, key, videoForm(sample()));
    expect(next.status).toBe(200);
    const result = await next.json();
    expect(result.credits_remaining).toBe(198);
    expect(workerPid(server)).not.toBe(firstWorker);
    expect(server.leftovers()).toEqual([]);
  });
});

describe('sheet expiry', () => {
  it('404 once expired even before the sweep; the sweep then deletes the file', async () => {
    // The sweeper runs at start and then every 30 s: long enough that the account, the job and the
    // 3.3 s wait below end before its second run even on a loaded machine (with 10 s they did not).
    const server = await startServer({ VIDSHEET_SHEET_TTL_S: '3', VIDSHEET_SWEEP_S: '30' });
    try {
      const { key } = await newAccount(server, 20, 'expiry@example.com');
      const response = await postJob(server, key, videoForm(sample()));
      expect(response.status).toBe(200);
      const done = Date.now();
      const { job_id: jobId, files } = await response.json();
      const file = join(server.dataDir, 'sheets', jobId, 'video.sheet-1.jpg');
      const fresh = await fetch(files[0]);
      expect(fresh.status).toBe(200);
      expect(fresh.headers.get('content-type')).toBe('image/jpeg');
      await fresh.arrayBuffer();

      await new Promise((r) => setTimeout(r, 3_300 - (Date.now() - done)));
      const expired = await fetch(files[0]);
      expect(expired.status).toBe(404);
      expect(await expired.text()).toBe('{"error":"not_found"}');
      // Not swept yet (the sweeper runs at start and every 30 s): expiry alone closed the URL.
      expect(existsSync(file)).toBe(true);

      const deadline = Date.now() + 35_000;
      while (existsSync(file) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 200));
      expect(existsSync(file)).toBe(false);
      expect(existsSync(join(server.dataDir, 'sheets', jobId))).toBe(false);
    } finally {
      await server.stop();
    }
  });
});

describe('stopping', () => {
  /** A server (fallback engine) with a job charged and running (`charged`: the log line saying so). */
  async function midJob(email: string, clipSeconds = 200, density = '4x4') {
    const server = await startServer({ VIDSHEET_ENGINE: 'ffmpeg' });
    const { key } = await newAccount(server, 200, email);
    const clip = await plainClip(clipSeconds);
    const form = videoForm({ bytes: readFileSync(clip), filename: 'mid.mp4' }, { density });
    const job = postJob(server, key, form);
    const charged = await server.waitForLog(isCharged(), 60_000);
    return { server, job, charged };
  }

  it('SIGTERM lets the running job finish, answers it, and exits 0', async () => {
    const { server, job } = await midJob('stop@example.com');
    const exit = server.stop();
    const response = await job;
    expect(response.status).toBe(200);
    expect((await response.json()).sheets).toBe(3);
    expect(await exit).toBe(0);
    // Stopped for good: nothing listens any more.
    await expect(fetch(`${server.url}/healthz`)).rejects.toThrow();
  });

  it('SIGTERM closes at once the connections only sending a body, the job still finishes, exit 0', async () => {
    const { server, job } = await midJob('stop-slow@example.com');
    const uploader = await newAccount(server, 200);
    // Bodies that keep coming a byte at a time, on the routes the review held open (DESIGN §5a), and
    // an upload: each far from its deadline (30 s, VIDSHEET_UPLOAD_TIMEOUT_S) when the stop comes.
    const { port } = new URL(server.url);
    const slow = await Promise.all(
      [
        ['/stripe/webhook', 'Content-Type: application/json\r\n'],
        ['/keys/code', 'Content-Type: application/x-www-form-urlencoded\r\n'],
        ['/mcp', 'Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n'],
      ].map(async ([path, headers], i) => {
        const socket = connect({ port: Number(port), host: '127.0.0.1', localAddress: `127.0.0.${40 + i}` });
        await once(socket, 'connect');
        socket.on('error', () => {});
        socket.write(
          `POST ${path} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n${headers}Content-Length: 1000\r\n\r\n{`,
        );
        const closed = new Promise<number>((resolve) => socket.on('close', () => resolve(Date.now())));
        const trickle = setInterval(() => socket.write(' '), 200);
        return { closed, stop: () => clearInterval(trickle), socket };
      }),
    );
    const upload = await slowUpload(server.url, uploader.key, { from: '127.0.0.45', first: 64 * 1024 });
    const uploadTrickle = setInterval(() => upload.send(Buffer.alloc(16 * 1024, 0x2a)), 200);
    try {
      await server.waitForLog(
        (l) => l.msg === 'incoming request' && (l.req as { url?: string }).url === '/mcp',
      );
      await new Promise((r) => setTimeout(r, 500));
      const stopped = Date.now();
      const exit = server.stop();
      for (const connection of slow) {
        const closedAt = await Promise.race([
          connection.closed,
          new Promise<number>((r) => setTimeout(() => r(0), 5000)),
        ]);
        expect(closedAt, 'a slow body is closed at the stop').toBeGreaterThan(0);
        expect(closedAt - stopped).toBeLessThan(3000);
      }
      await waitFor(() => upload.closed(), 'the slow upload closed at the stop', 3000);
      // The running job is let finish and answered (DESIGN §7).
      const response = await job;
      expect(response.status).toBe(200);
      expect((await response.json()).sheets).toBe(3);
      expect(await exit).toBe(0);
      expect(Date.now() - stopped, 'stopped well inside the 30 s body deadline').toBeLessThan(20_000);
      expect(
        server.logs.some((l) => l.msg === 'stopping: closed the connections still receiving a body'),
      ).toBe(true);
      expect(server.leftovers()).toEqual([]);
    } finally {
      for (const connection of slow) {
        connection.stop();
        connection.socket.destroy();
      }
      clearInterval(uploadTrickle);
      upload.destroy();
    }
  });

  it('SIGTERM while a remote fetch is still downloading: exit 0 within 60 s', async () => {
    // An origin sending a 200 MB video at 256 KiB/s: far above the stall pace, so nothing cuts the
    // fetch before its 300 s budget. The stop must not wait for it (DESIGN §7).
    let sent = 0;
    const origin = createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'video/mp4', 'content-length': String(200 * 2 ** 20) });
      const pump = setInterval(() => {
        sent += 64 * 1024;
        res.write(Buffer.alloc(64 * 1024, 0x2a));
      }, 250);
      res.on('close', () => clearInterval(pump));
    });
    await new Promise<void>((resolve) => origin.listen(0, '127.0.0.1', resolve));
    const originPort = (origin.address() as AddressInfo).port;
    const server = await startServer({ VIDSHEET_FETCH_ALLOW: `127.0.0.1:${originPort}` });
    try {
      const tool = mcpToolCall({ video_url: `http://127.0.0.1:${originPort}/v.mp4` });
      const call = fetch(`${server.url}/mcp`, {
        method: 'POST',
        headers: tool.headers,
        body: JSON.stringify(tool.payload),
      }).catch(() => undefined);
      await waitFor(() => sent > 2 ** 20, 'the fetch is under way', 20_000);
      const stopped = Date.now();
      expect(await server.stop()).toBe(0);
      expect(Date.now() - stopped).toBeLessThan(60_000);
      // The log says what the deadline cut: a transfer, and no job to refund.
      expect(server.logs.find((l) => l.msg.startsWith('stop deadline reached'))).toMatchObject({
        msg: 'stop deadline reached: no job runs; closing every connection',
        jobs: 0,
        transfers: 1,
      });
      await call;
    } finally {
      origin.closeAllConnections();
      origin.close();
    }
  }, 90_000);

  it.each(['a crash (SIGKILL mid-job)', 'a second SIGTERM while stopping'])(
    'after %s, the next start refunds the job and deletes the upload',
    async (how) => {
      const email = `recover-${how.split(' ')[1]}@example.com`;
      const { server: first, job, charged } = await midJob(email, 1800, '6x6');
      if (how.includes('SIGKILL')) first.process.kill('SIGKILL');
      else {
        // The first asks for a stop that would wait for the job; the second ends the process at once.
        first.process.kill('SIGTERM');
        await first.waitForLog((l) => l.msg.startsWith('stopping: no new requests'));
        first.process.kill('SIGTERM');
      }
      await expect(job).rejects.toThrow();
      expect(await first.stop()).toBe(null);
      expect(first.process.signalCode).toBe(how.includes('SIGKILL') ? 'SIGKILL' : 'SIGTERM');
      expect(first.leftovers().some((f) => f.startsWith('work/'))).toBe(true);

      const second = await startServer({}, { dataDir: first.dataDir });
      try {
        const recovered = await second.waitForLog((l) => l.msg === 'recovered from an unclean stop');
        // Logs name a job by the first 8 characters of its id (the full id is a capability).
        expect(charged.jobId).toMatch(/^[A-Za-z0-9_-]{8}$/);
        expect(recovered.refundedJobs).toEqual([charged.jobId]);
        expect(second.leftovers()).toEqual([]);
        const shown = await showAccount(second, email);
        expect(shown.balance).toBe(200);
        expect(shown.usage[0]).toMatchObject({ refunded: true });
        const fullId = String(shown.usage[0]?.job_id);
        expect(fullId).toMatch(new RegExp(`^${charged.jobId}[A-Za-z0-9_-]{14}$`));
        expect(first.output()).not.toContain(fullId);
        expect(second.output()).not.toContain(fullId);
      } finally {
        await second.stop();
      }
    },
  );
});

describe('configuration', () => {
  it('every bad value is named at start, exit 1', async () => {
    const r = await runServerBin([], {
      ...process.env,
      PORT: 'eighty',
      VIDSHEET_MAX_SHEETS: '0',
      VIDSHEET_BASE_URL: 'ftp://example',
      VIDSHEET_TRUST_PROXY: 'yes',
    });
    expect(r.code).toBe(1);
    expect(r.stdout).toBe('');
    expect(r.stderr).toContain('PORT must be an integer from 0 to 65535 — got "eighty"');
    expect(r.stderr).toContain('VIDSHEET_MAX_SHEETS must be an integer from 1 to');
    expect(r.stderr).toContain('VIDSHEET_BASE_URL must be a http:// or https:// URL — got "ftp://example"');
    expect(r.stderr).toContain(
      'VIDSHEET_TRUST_PROXY must be false, true, a hop count from 1 to 5, or a comma-separated list of proxy addresses or CIDRs — got "yes"',
    );
  });
});
