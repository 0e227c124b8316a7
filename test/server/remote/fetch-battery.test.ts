/**
 * The fetcher against real sockets, on loopback only: an "origin" on 127.0.0.1:A (allowed through
 * `allow`) and a "canary" on 127.0.0.1:B (and [::1]:B where IPv6 loopback exists, and UDP B/B+1)
 * that counts every connection or datagram. Every case must leave the canary at zero: the oracle
 * is the operating system's accept queue, not the fetcher's own account of what it did.
 *
 * Names resolve through a fake resolver (`localhost` -> loopback, anything else: not found), so no
 * query leaves the machine either. The engine cases feed both engines files "as downloaded" (an
 * HLS playlist, an ffconcat list, a DASH manifest, an SDP session) that point at the canary.
 */
import { createSocket, type Socket as UdpSocket } from 'node:dgram';
import { once } from 'node:events';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createServer as createHttpServer, type Server as HttpServer, type ServerResponse } from 'node:http';
import { type AddressInfo, createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { cellRect, computeGrid } from '../../../src/core/layout.js';
import { parseTimeMs } from '../../../src/core/time.js';
import { ffmpegEngine } from '../../../src/engine/ffmpeg.js';
import { loadNative } from '../../../src/engine/native-loader.js';
import type { Engine } from '../../../src/engine/types.js';
import { runJob } from '../../../src/job.js';
import {
  type DownloadOptions,
  downloadVideo,
  FetchError,
  type FetchReason,
} from '../../../src/server/remote/fetch/download.js';
import { indexClip } from '../../helpers/fixtures.js';
import { decodeIndex, readJpeg } from '../../helpers/frames.js';
import { expectedIndex, frameTimes } from '../../helpers/oracle.js';

const SAMPLE = join(import.meta.dirname, '..', '..', '..', 'fixtures', 'sample.mp4');
const MB = 1024 * 1024;

// ---------------------------------------------------------------------------------------------
// Canary and origin

const canary = { tcp: 0, udp: 0 };
const canaryServers: Server[] = [];
const udpSockets: UdpSocket[] = [];
let B = 0;
let v6 = false;

const listen = (server: Server | HttpServer, port: number, host: string) =>
  new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });

function canaryServer(): Server {
  const server = createServer((socket) => {
    canary.tcp++;
    socket.destroy();
  });
  canaryServers.push(server);
  return server;
}

let origin: HttpServer;
let A = 0;
/** Paths the origin was asked for, in order. */
const seen: string[] = [];
/** Responses the origin saw closed by the client (path). */
const closed: string[] = [];

function serveFile(res: ServerResponse, chunked = false) {
  const data = readFileSync(SAMPLE);
  res.writeHead(200, {
    'content-type': 'video/mp4',
    ...(chunked ? {} : { 'content-length': String(data.length) }),
  });
  if (chunked) {
    // Several writes so the body really is chunked.
    for (let at = 0; at < data.length; at += 100_000) res.write(data.subarray(at, at + 100_000));
    res.end();
  } else res.end(data);
}

/** Writes 64 KiB chunks for as long as the client reads (honouring backpressure). */
function endless(res: ServerResponse) {
  const chunk = Buffer.alloc(64 * 1024, 7);
  res.writeHead(200, { 'content-type': 'video/mp4' });
  const pump = () => {
    while (!res.destroyed && res.write(chunk)) {
      // keep going until the socket buffer is full
    }
  };
  res.on('drain', pump);
  pump();
}

function route(path: string, query: URLSearchParams, res: ServerResponse) {
  const chain = /^\/chain\/(\d+)$/.exec(path);
  if (chain) {
    const left = Number(chain[1]);
    if (left === 0) return serveFile(res);
    res.writeHead(302, { location: `/chain/${left - 1}` });
    return res.end();
  }
  switch (path) {
    case '/video':
      return serveFile(res);
    case '/chunked':
      return serveFile(res, true);
    case '/redirect':
      res.writeHead(Number(query.get('status') ?? 302), { location: query.get('to') ?? '/' });
      return res.end('moved');
    case '/loop':
      res.writeHead(302, { location: '/loop' });
      return res.end();
    case '/no-location':
      res.writeHead(302);
      return res.end();
    case '/notfound':
      res.writeHead(404, { server: 'SecretBanner/9.9 (internal 10.9.8.7)', 'content-type': 'text/plain' });
      return res.end('internal details: db at 10.9.8.7');
    case '/error':
      res.writeHead(500, { server: 'SecretBanner/9.9' });
      return res.end('stack trace');
    case '/empty':
      res.writeHead(200, { 'content-length': '0', 'content-type': 'video/mp4' });
      return res.end();
    case '/huge':
      // Headers only: a client that waited for body bytes would hang until its idle timeout.
      res.writeHead(200, { 'content-length': String(10 * 1024 * MB), 'content-type': 'video/mp4' });
      res.flushHeaders();
      return;
    case '/endless':
      return endless(res);
    case '/stall':
      res.writeHead(200, { 'content-type': 'video/mp4' });
      res.flushHeaders();
      return;
    case '/trickle': {
      res.writeHead(200, { 'content-type': 'video/mp4' });
      const timer = setInterval(() => res.write('x'), 50);
      res.on('close', () => clearInterval(timer));
      return;
    }
    case '/truncated':
      res.writeHead(200, { 'content-length': '100000', 'content-type': 'video/mp4' });
      res.write('0123456789');
      setTimeout(() => res.socket?.destroy(), 50);
      return;
    default:
      res.writeHead(404);
      return res.end();
  }
}

beforeAll(async () => {
  const tcp4 = canaryServer();
  await listen(tcp4, 0, '127.0.0.1');
  B = (tcp4.address() as AddressInfo).port;
  try {
    await listen(canaryServer(), B, '::1');
    v6 = true;
  } catch {
    canaryServers.pop(); // no IPv6 loopback here (or the port is taken on it): skip that listener
  }
  for (const port of [B, B + 1]) {
    const udp = createSocket('udp4');
    udp.on('message', () => canary.udp++);
    udp.on('error', () => {}); // best effort: B + 1 may be taken
    try {
      udp.bind(port, '127.0.0.1');
      await once(udp, 'listening');
      udpSockets.push(udp);
    } catch {
      udp.close();
    }
  }
  origin = createHttpServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://origin');
    seen.push(url.pathname);
    res.on('close', () => {
      if (!res.writableFinished) closed.push(url.pathname);
    });
    route(url.pathname, url.searchParams, res);
  });
  await listen(origin, 0, '127.0.0.1');
  A = (origin.address() as AddressInfo).port;
});

afterAll(async () => {
  origin.closeAllConnections();
  await new Promise((done) => origin.close(done));
  await Promise.all(canaryServers.map((s) => new Promise((done) => s.close(done))));
  for (const u of udpSockets) u.close();
});

afterEach(() => {
  const counts = { ...canary };
  canary.tcp = 0;
  canary.udp = 0;
  seen.length = 0;
  closed.length = 0;
  expect(counts).toEqual({ tcp: 0, udp: 0 });
});

// ---------------------------------------------------------------------------------------------
// Helpers

let work: string;
beforeAll(() => {
  work = mkdtempSync(join(tmpdir(), 'vs-fetch-battery-'));
});
afterAll(() => rmSync(work, { recursive: true, force: true }));
let n = 0;
const fresh = () => join(work, `download-${++n}`);

const resolveNames: NonNullable<DownloadOptions['resolve']> = async (hostname) => {
  if (hostname === 'localhost' || hostname === 'localhost.') {
    return [{ address: '127.0.0.1', family: 4 }, ...(v6 ? [{ address: '::1', family: 6 }] : [])];
  }
  throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' });
};

const options = (extra: Partial<DownloadOptions> = {}): DownloadOptions => ({
  maxBytes: 64 * MB,
  allow: [`127.0.0.1:${A}`],
  resolve: resolveNames,
  ...extra,
});

async function refusal(url: string, extra: Partial<DownloadOptions> = {}) {
  const file = fresh();
  const started = performance.now();
  const error = await downloadVideo(url, file, options(extra)).then(
    () => new Error(`expected ${url} to fail`),
    (e: unknown) => e,
  );
  if (!(error instanceof FetchError)) throw error;
  expect(existsSync(file)).toBe(false);
  return { error, ms: performance.now() - started };
}

const redirectTo = (to: string, status = 302) =>
  `http://127.0.0.1:${A}/redirect?status=${status}&to=${encodeURIComponent(to)}`;

const PRIVATE = 'the address is private or reserved; only public addresses can be fetched';
const SCHEME = 'only http and https URLs can be fetched';
const USERINFO = 'URLs with a user name or password cannot be fetched';

// ---------------------------------------------------------------------------------------------
// Downloads

describe('downloads from the allowed origin', () => {
  it('streams a real video to a byte-identical file', async () => {
    const file = fresh();
    const got = await downloadVideo(`http://127.0.0.1:${A}/video`, file, options());
    const expected = readFileSync(SAMPLE);
    expect(readFileSync(file).equals(expected)).toBe(true);
    expect(got).toEqual({
      bytes: expected.length,
      finalUrl: `http://127.0.0.1:${A}/video`,
      contentType: 'video/mp4',
    });
  });

  it('streams a chunked body (no content-length)', async () => {
    const file = fresh();
    const got = await downloadVideo(`http://127.0.0.1:${A}/chunked#frag`, file, options());
    expect(readFileSync(file).equals(readFileSync(SAMPLE))).toBe(true);
    expect(got.finalUrl).toBe(`http://127.0.0.1:${A}/chunked`);
  });

  it.each([301, 302, 303, 307, 308])('follows a %i to a relative Location', async (status) => {
    const file = fresh();
    const got = await downloadVideo(redirectTo('/video', status), file, options());
    expect(got.finalUrl).toBe(`http://127.0.0.1:${A}/video`);
    expect(statSync(file).size).toBe(readFileSync(SAMPLE).length);
  });

  it('completes a body whose server closes the connection as soon as it is sent', async () => {
    // The whole response and the FIN arrive while the body still waits for its file to open: a
    // client whose parser is paused then must finish it, not fail (undici 7 threw an uncatchable
    // assertion there and the server process died: nodejs/undici#5360).
    const body = Buffer.alloc(8 * MB, 0x61);
    const closer = createServer((socket) => {
      socket.once('data', () => {
        socket.write(`HTTP/1.1 200 OK\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n`);
        socket.end(body);
      });
    });
    await listen(closer, 0, '127.0.0.1');
    const port = (closer.address() as AddressInfo).port;
    try {
      for (let i = 0; i < 5; i++) {
        const file = fresh();
        const got = await downloadVideo(
          `http://127.0.0.1:${port}/v.mp4`,
          file,
          options({ allow: [`127.0.0.1:${port}`] }),
        );
        expect(got.bytes).toBe(body.length);
        expect(readFileSync(file).equals(body)).toBe(true);
        rmSync(file);
      }
    } finally {
      closer.close();
    }
  });

  it('follows exactly 5 redirects and refuses the 6th', async () => {
    const file = fresh();
    const got = await downloadVideo(`http://127.0.0.1:${A}/chain/5`, file, options());
    expect(got.finalUrl).toBe(`http://127.0.0.1:${A}/chain/0`);
    seen.length = 0;
    const { error } = await refusal(`http://127.0.0.1:${A}/chain/6`);
    expect([error.reason, error.message]).toEqual([
      'too_many_redirects',
      'the URL redirected more than 5 times',
    ]);
    // The first request and 5 followed redirects; the 6th Location is never requested.
    expect(seen).toEqual(['/chain/6', '/chain/5', '/chain/4', '/chain/3', '/chain/2', '/chain/1']);
  });

  it('refuses a redirect loop', async () => {
    const { error } = await refusal(`http://127.0.0.1:${A}/loop`);
    expect(error.reason).toBe('too_many_redirects');
    expect(seen).toHaveLength(6);
  });

  it('reaches a name only when its exact host:port is allowed', async () => {
    // Same socket address, but `localhost:A` is not in the allow list.
    const { error } = await refusal(`http://localhost:${A}/video`);
    expect([error.reason, error.message]).toEqual(['private_address', PRIVATE]);
    expect(seen).toEqual([]);
    const file = fresh();
    const loopback4 = vi.fn(async (_hostname: string) => [{ address: '127.0.0.1', family: 4 }]);
    const got = await downloadVideo(
      `http://LOCALHOST:${A}/video`,
      file,
      options({ allow: [`localhost:${A}`], resolve: loopback4 }),
    );
    expect(got.finalUrl).toBe(`http://localhost:${A}/video`);
    expect(readFileSync(file).equals(readFileSync(SAMPLE))).toBe(true);
    // One resolution, inside the connect: no second lookup for DNS rebinding to answer differently.
    expect(loopback4.mock.calls).toEqual([['localhost']]);
  });

  const hostsFile = (() => {
    try {
      return readFileSync('/etc/hosts', 'utf8');
    } catch {
      return '';
    }
  })();
  it.runIf(/^\s*127\.0\.0\.1\s+(\S+\s+)*localhost(\s|$)/m.test(hostsFile))(
    'uses dns.lookup by default (localhost from /etc/hosts)',
    async () => {
      const { error } = await refusal(`http://localhost:${B}/`, { resolve: undefined });
      expect(error.reason).toBe('private_address');
      const file = fresh();
      const got = await downloadVideo(
        `http://localhost:${A}/video`,
        file,
        options({ allow: [`localhost:${A}`], resolve: undefined }),
      );
      expect(got.bytes).toBe(readFileSync(SAMPLE).length);
    },
  );

  it('does not overwrite or remove a file that is already there', async () => {
    const file = fresh();
    writeFileSync(file, 'keep me');
    const error = await downloadVideo(`http://127.0.0.1:${A}/video`, file, options()).catch((e) => e);
    expect(error).not.toBeInstanceOf(FetchError);
    expect((error as NodeJS.ErrnoException).code).toBe('EEXIST');
    expect(readFileSync(file, 'utf8')).toBe('keep me');
    const refused = await downloadVideo(`http://127.0.0.1:${B}/`, file, options()).catch((e) => e);
    expect(refused).toBeInstanceOf(FetchError);
    expect(readFileSync(file, 'utf8')).toBe('keep me');
  });
});

describe('size caps, statuses and timeouts', () => {
  it('cuts an endless body at maxBytes and leaves no file', async () => {
    const { error } = await refusal(`http://127.0.0.1:${A}/endless`, { maxBytes: MB });
    expect([error.reason, error.message]).toEqual(['too_large', 'the download is larger than 1 MB']);
    await expect.poll(() => closed).toContain('/endless');
  });

  it('refuses a content-length above maxBytes without reading the body', async () => {
    const { error, ms } = await refusal(`http://127.0.0.1:${A}/huge`, { maxBytes: 300 * MB });
    expect([error.reason, error.message]).toEqual(['too_large', 'the download is larger than 300 MB']);
    expect(seen).toEqual(['/huge']);
    // Waiting for any body byte would have lasted the 20 s idle timeout.
    expect(ms).toBeLessThan(3_000);
    await expect.poll(() => closed).toContain('/huge');
  });

  it.each([
    ['/notfound', 'the server answered 404'],
    ['/error', 'the server answered 500'],
    ['/no-location', 'the server answered 302'],
  ])('%s: "%s", nothing of the body or banner', async (path, message) => {
    const { error } = await refusal(`http://127.0.0.1:${A}${path}`);
    expect([error.reason, error.message]).toEqual(['http_status', message]);
    expect(JSON.stringify({ ...error, message: error.message })).not.toMatch(/Secret|10\.9\.8\.7|stack/);
  });

  it('refuses an empty body', async () => {
    const { error } = await refusal(`http://127.0.0.1:${A}/empty`);
    expect(error.reason).toBe('empty');
  });

  it('times out a server that stops sending (idle timeout)', async () => {
    const { error, ms } = await refusal(`http://127.0.0.1:${A}/stall`, { idleTimeoutMs: 300 });
    expect([error.reason, error.message]).toEqual(['timeout', 'the server took too long to answer']);
    expect(ms).toBeLessThan(5_000);
  });

  it('times out a download that outlasts the total budget', async () => {
    const { error, ms } = await refusal(`http://127.0.0.1:${A}/trickle`, { timeoutMs: 500 });
    expect([error.reason, error.message]).toEqual(['timeout', 'the download took too long']);
    expect(ms).toBeLessThan(5_000);
  });

  it('calls a body cut short broken', async () => {
    const { error } = await refusal(`http://127.0.0.1:${A}/truncated`);
    expect([error.reason, error.message]).toEqual([
      'broken',
      'the connection to the server broke off before the download finished',
    ]);
  });

  it('stops on the caller’s abort with the caller’s reason and leaves no file', async () => {
    const file = fresh();
    const controller = new AbortController();
    const reason = new Error('job cancelled');
    setTimeout(() => controller.abort(reason), 100);
    const error = await downloadVideo(
      `http://127.0.0.1:${A}/endless`,
      file,
      options({ maxBytes: 10 * 1024 * MB, signal: controller.signal }),
    ).catch((e) => e);
    expect(error).toBe(reason);
    expect(existsSync(file)).toBe(false);
  });

  it('says "could not connect" for a closed port, without the address', async () => {
    const closedPort = createServer();
    await listen(closedPort, 0, '127.0.0.1');
    const { port } = closedPort.address() as AddressInfo;
    await new Promise((done) => closedPort.close(done));
    const { error } = await refusal(`http://127.0.0.1:${port}/`, { allow: [`127.0.0.1:${port}`] });
    expect([error.reason, error.message]).toEqual(['unreachable', 'could not connect to the server']);
  });

  // An origin that writes `answer` once the request is in, then closes (`hold`: keeps the
  // connection open; `'reset'`: resets it): every such fetch ends at once, with what went wrong,
  // never waiting on a cut.
  it.each([
    [
      'a 101 Switching Protocols, then bytes',
      'HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\nConnection: Upgrade\r\n\r\nhello',
      false,
      'http_status',
      'the server answered 101',
    ],
    [
      'a 101 on a connection kept open',
      'HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\nConnection: Upgrade\r\n\r\n',
      true,
      'http_status',
      'the server answered 101',
    ],
    [
      'a status line that is not HTTP',
      'HELLO THERE\r\n\r\n',
      false,
      'unreachable',
      'the server answered with something that is not valid HTTP',
    ],
    [
      'two different Content-Lengths',
      'HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello',
      false,
      'unreachable',
      'the server answered with something that is not valid HTTP',
    ],
    [
      'headers over 16 KiB',
      `HTTP/1.1 200 OK\r\nX-Big: ${'b'.repeat(20_000)}\r\n\r\n`,
      true,
      'unreachable',
      'the server answered with something that is not valid HTTP',
    ],
    [
      'a close before any answer',
      '',
      false,
      'unreachable',
      'the server closed the connection without answering',
    ],
    [
      'a reset halfway through the headers',
      'HTTP/1.1 200 OK\r\nContent-Type: vid',
      'reset',
      'unreachable',
      'the server closed the connection without answering',
    ],
  ])('%s: ends at once', async (_what, answer, hold, reason, message) => {
    const sockets = new Set<Socket>();
    const raw = createServer((socket) => {
      sockets.add(socket);
      socket.on('error', () => {});
      socket.once('data', () => {
        if (hold === 'reset') socket.write(answer, () => socket.resetAndDestroy());
        else if (hold) socket.write(answer);
        else socket.end(answer);
      });
    });
    await listen(raw, 0, '127.0.0.1');
    const { port } = raw.address() as AddressInfo;
    try {
      const { error, ms } = await refusal(`http://127.0.0.1:${port}/v.mp4`, {
        allow: [`127.0.0.1:${port}`],
      });
      expect([error.reason, error.message]).toEqual([reason, message]);
      // The idle cut (20 s here) never had to act.
      expect(ms).toBeLessThan(5_000);
    } finally {
      for (const socket of sockets) socket.destroy();
      raw.close();
    }
  });
});

describe('the canary is never contacted', () => {
  const direct = (): Array<[string, FetchReason, string]> => [
    [`http://127.0.0.1:${B}/`, 'private_address', PRIVATE],
    [`https://127.0.0.1:${B}/`, 'private_address', PRIVATE],
    [`http://localhost:${B}/`, 'private_address', PRIVATE],
    [`http://localhost.:${B}/`, 'private_address', PRIVATE],
    [`http://[::1]:${B}/`, 'private_address', PRIVATE],
    [`http://[::]:${B}/`, 'private_address', PRIVATE],
    [`http://[::ffff:127.0.0.1]:${B}/`, 'private_address', PRIVATE],
    [`http://[::127.0.0.1]:${B}/`, 'private_address', PRIVATE],
    [`http://2130706433:${B}/`, 'private_address', PRIVATE],
    [`http://0x7f000001:${B}/`, 'private_address', PRIVATE],
    [`http://0177.0.0.1:${B}/`, 'private_address', PRIVATE],
    [`http://127.1:${B}/`, 'private_address', PRIVATE],
    [`http://127.0.0.1.:${B}/`, 'private_address', PRIVATE],
    [`http://%31%32%37.0.0.1:${B}/`, 'private_address', PRIVATE],
    [`http://0.0.0.0:${B}/`, 'private_address', PRIVATE],
    [`http://0:${B}/`, 'private_address', PRIVATE],
    [`http://user:pw@127.0.0.1:${A}/video`, 'userinfo', USERINFO],
    [`http://127.0.0.1:${A}@127.0.0.1:${B}/`, 'userinfo', USERINFO],
    ['file:///etc/passwd', 'scheme', SCHEME],
    [`ftp://127.0.0.1:${B}/`, 'scheme', SCHEME],
    [`gopher://127.0.0.1:${B}/`, 'scheme', SCHEME],
    [`ws://127.0.0.1:${B}/`, 'scheme', SCHEME],
    ['data:video/mp4;base64,AAAA', 'scheme', SCHEME],
  ];
  it('direct URLs', async () => {
    for (const [url, reason, message] of direct()) {
      const { error } = await refusal(url);
      expect([url, error.reason, error.message]).toEqual([url, reason, message]);
      expect(error.message).not.toContain('127.0.0.1');
    }
    // Even the allowed origin saw nothing: user info is refused before any request.
    expect(seen).toEqual([]);
  });

  const redirects = (): Array<[string, FetchReason, string]> => [
    [`http://127.0.0.1:${B}/x`, 'private_address', PRIVATE],
    [`https://127.0.0.1:${B}/x`, 'private_address', PRIVATE],
    [`//127.0.0.1:${B}/x`, 'private_address', PRIVATE],
    [`http://localhost:${B}/x`, 'private_address', PRIVATE],
    [`http://[::1]:${B}/x`, 'private_address', PRIVATE],
    [`http://[::ffff:127.0.0.1]:${B}/x`, 'private_address', PRIVATE],
    [`http://2130706433:${B}/x`, 'private_address', PRIVATE],
    [`http://0.0.0.0:${B}/x`, 'private_address', PRIVATE],
    // The origin's own port under another name is another host:port.
    [`http://localhost:${A}/video`, 'private_address', PRIVATE],
    [`http://user:pw@127.0.0.1:${A}/video`, 'userinfo', USERINFO],
    ['file:///etc/passwd', 'scheme', SCHEME],
    [`gopher://127.0.0.1:${B}/`, 'scheme', SCHEME],
    ['http://[::1', 'bad_url', 'the server redirected to an invalid URL'],
  ];
  it('redirects from the allowed origin', async () => {
    for (const status of [302, 307]) {
      for (const [to, reason, message] of redirects()) {
        seen.length = 0;
        const { error } = await refusal(redirectTo(to, status));
        expect([to, error.reason, error.message]).toEqual([to, reason, message]);
        expect(seen).toEqual(['/redirect']);
      }
    }
  });
});

// ---------------------------------------------------------------------------------------------
// Engines: files "as downloaded" that point at the canary

describe('engines open downloaded input as a local file only', () => {
  const engines: Engine[] = [ffmpegEngine];
  const native = loadNative();
  if ('engine' in native) engines.push(native.engine);
  let inputs: Record<string, string>;

  beforeAll(() => {
    const dir = join(work, 'as-downloaded');
    const write = (name: string, text: string) => {
      const path = join(dir, name);
      writeFileSync(path, text);
      return path;
    };
    mkdirSync(dir, { recursive: true });
    inputs = {
      hls: write(
        'playlist.m3u8',
        [
          '#EXTM3U',
          '#EXT-X-VERSION:3',
          '#EXT-X-TARGETDURATION:10',
          `#EXT-X-KEY:METHOD=AES-128,URI="http://127.0.0.1:${B}/key"`,
          '#EXTINF:10.0,',
          `http://127.0.0.1:${B}/seg.ts`,
          '#EXT-X-ENDLIST',
          '',
        ].join('\n'),
      ),
      hlsPlain: write(
        'plain.m3u8',
        `#EXTM3U\n#EXT-X-TARGETDURATION:10\n#EXTINF:10.0,\nhttp://127.0.0.1:${B}/seg.ts\n#EXT-X-ENDLIST\n`,
      ),
      ffconcat: write('list.ffconcat', `ffconcat version 1.0\nfile 'http://127.0.0.1:${B}/x.mp4'\n`),
      dash: write(
        'manifest.mpd',
        `<?xml version="1.0"?>
<MPD xmlns="urn:mpeg:dash:schema:mpd:2011" type="static" mediaPresentationDuration="PT10S" minBufferTime="PT1S" profiles="urn:mpeg:dash:profile:isoff-on-demand:2011">
<Period><AdaptationSet mimeType="video/mp4"><Representation id="1" bandwidth="1000" width="320" height="240" codecs="avc1.42c00d">
<BaseURL>http://127.0.0.1:${B}/v.mp4</BaseURL><SegmentBase indexRange="0-100"/></Representation></AdaptationSet></Period></MPD>
`,
      ),
      sdp: write(
        'session.sdp',
        `v=0\no=- 0 0 IN IP4 127.0.0.1\ns=x\nc=IN IP4 127.0.0.1\nt=0 0\nm=video ${B} RTP/AVP 96\na=rtpmap:96 H264/90000\n`,
      ),
    };
  });

  it.each(engines.map((e) => [e.name, e] as const))(
    '%s: probe and job fail on every file',
    async (_name, engine) => {
      for (const [kind, input] of Object.entries(inputs)) {
        await expect(engine.probe(input), `${kind} probe`).rejects.toThrow();
        const outDir = join(work, `out-${engine.name}-${kind}`);
        await expect(
          runJob({ input, density: '3x3', outDir }, { engine, audio: false }),
          `${kind} job`,
        ).rejects.toThrow();
        expect([kind, canary.tcp, canary.udp]).toEqual([kind, 0, 0]);
      }
    },
  );

  it('ffmpeg engine: a URL given as the input path is not opened', async () => {
    for (const url of [`http://127.0.0.1:${B}/x.mp4`, `tcp://127.0.0.1:${B}`]) {
      await expect(ffmpegEngine.probe(url)).rejects.toThrow();
    }
  });

  it.each(engines.map((e) => [e.name, e] as const))(
    '%s: a real local file still probes and renders, every cell the frame at its label',
    async (_name, engine) => {
      const clip = await indexClip({ seconds: 8, gop: 50 });
      const oracle = await frameTimes(clip);
      const info = await engine.probe(clip);
      expect(info.duration).toBeCloseTo(8, 1);
      const outDir = join(work, `out-${engine.name}-index`);
      const outcome = await runJob({ input: clip, density: '3x3', outDir }, { engine, audio: false });
      expect(outcome.warnings).toEqual([]);
      expect(outcome.timecodes).toHaveLength(1);
      expect(outcome.files).toHaveLength(1);
      const grid = computeGrid(320, 240, '3x3', false);
      const image = readJpeg(outcome.files[0] as string);
      expect([image.width, image.height]).toEqual([grid.width, grid.height]);
      const labels = outcome.timecodes[0] as string[];
      expect(labels).toHaveLength(9);
      for (const [c, label] of labels.entries()) {
        const ms = parseTimeMs(label) as number;
        const read = decodeIndex(image, cellRect(grid, c));
        expect(read.confidence, `cell ${c + 1} (${label}) is not a clean index frame`).toBeGreaterThan(40);
        expect(read.index, `cell ${c + 1} (${label})`).toBe(expectedIndex(oracle, ms / 1000));
      }
      expect(canary).toEqual({ tcp: 0, udp: 0 });
    },
  );
});
