/**
 * The remote tool endpoint, `POST /mcp`, driven by the SDK's own Streamable HTTP client against
 * the built server on loopback, plus raw HTTP where the SDK cannot go (Host, 405, flood). Videos
 * come from an "origin" server on loopback that the fetcher may reach through VIDSHEET_FETCH_ALLOW;
 * a "canary" server on another port must never see a connection.
 */
import { readFileSync } from 'node:fs';
import { createServer, request as httpRequest, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { Agent, fetch as undiciFetch } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseTimeMs } from '../../../src/core/time.js';
import { decodeJpeg } from '../../helpers/frames.js';
import { expectModelAids } from '../../helpers/model-aids.js';
import { AID_KEYS, MCP_KEYS } from '../../helpers/result-keys.js';
import { removeServerDirs, startServer, type TestServer } from '../../helpers/server.js';

afterAll(removeServerDirs);

const SAMPLE_PATH = join(import.meta.dirname, '..', '..', '..', 'fixtures', 'sample.mp4');
const SAMPLE = readFileSync(SAMPLE_PATH);
const TOOL = 'vidsheet_video';
// The local tool result's keys and the success extras; the lane's keys and DESIGN §10's follow.
const KEYS = [...MCP_KEYS, 'job_id', 'sheet_ttl_hours'];

interface Listening {
  server: Server;
  port: number;
  connections: number;
  close(): Promise<void>;
}

/** A loopback HTTP server counting the TCP connections it accepts. */
async function listen(handler: Parameters<typeof createServer>[1]): Promise<Listening> {
  const server = createServer(handler);
  const state = { connections: 0 };
  server.on('connection', () => state.connections++);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    server,
    port,
    get connections() {
      return state.connections;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** The origin: `/sample.mp4` serves the sample; `/slow.mp4` holds the answer until released. */
let origin: Listening;
let canary: Listening;
const slow: Array<() => void> = [];
beforeAll(async () => {
  origin = await listen((req, res) => {
    if (req.url === '/sample.mp4') {
      res.writeHead(200, { 'content-type': 'video/mp4', 'content-length': SAMPLE.length });
      res.end(SAMPLE);
    } else if (req.url === '/slow.mp4') {
      slow.push(() => {
        res.writeHead(200, { 'content-length': SAMPLE.length });
        res.end(SAMPLE);
      });
    } else if (req.url === '/to-canary') {
      res.writeHead(302, { location: `http://127.0.0.1:${canary.port}/sample.mp4` });
      res.end();
    } else {
      res.writeHead(404);
      res.end('nothing here');
    }
  });
  canary = await listen((_req, res) => res.end('canary'));
});
afterAll(async () => {
  for (const release of slow.splice(0)) release();
  await origin.close();
  await canary.close();
});

const videoUrl = (path = '/sample.mp4') => `http://127.0.0.1:${origin.port}${path}`;

/** An MCP client of `server`; `from`: the loopback address it connects from (one anonymous actor). */
async function connect(
  server: TestServer,
  headers: Record<string, string> = {},
  from?: string,
): Promise<Client> {
  const client = new Client({ name: 'vidsheet-test', version: '1.0.0' });
  const agent = from === undefined ? undefined : new Agent({ localAddress: from });
  const transport = new StreamableHTTPClientTransport(new URL(`${server.url}/mcp`), {
    requestInit: { headers },
    ...(agent && {
      fetch: ((url: string | URL, init?: object) =>
        undiciFetch(url, { ...init, dispatcher: agent })) as unknown as typeof fetch,
    }),
  });
  await client.connect(transport);
  return client;
}

interface CallResult {
  isError?: boolean;
  content: Array<{ type: string; text?: string; data?: string; mimeType?: string }>;
}

async function call(client: Client, args: Record<string, unknown>, meta?: Record<string, unknown>) {
  return (await client.callTool({
    name: TOOL,
    arguments: args,
    ...(meta ? { _meta: meta } : {}),
  })) as CallResult;
}

const textOf = (r: CallResult) => r.content[0]?.text ?? '';

/** A raw request, for what the SDK client cannot send (another Host, GET, DELETE). */
function raw(
  server: TestServer,
  options: { method: string; headers?: Record<string, string>; body?: string },
): Promise<{ status: number; headers: IncomingHttpHeaders; body: string }> {
  const { port } = new URL(server.url);
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      {
        host: '127.0.0.1',
        port: Number(port),
        path: '/mcp',
        method: options.method,
        headers: options.headers,
      },
      (res) => {
        let body = '';
        res.on('data', (d) => (body += d));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
      },
    );
    req.on('error', reject);
    req.end(options.body);
  });
}

const INIT = JSON.stringify({
  jsonrpc: '2.0',
  id: 1,
  method: 'initialize',
  params: { protocolVersion: '2025-03-26', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
});
const JSON_HEADERS = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };

describe('remote endpoint', () => {
  let server: TestServer;
  let key: string;
  beforeAll(async () => {
    server = await startServer({ VIDSHEET_FETCH_ALLOW: `127.0.0.1:${origin.port}` });
    key = (await server.admin('create-key', '--email', 'remote@example.com')).stdout.trim();
    await server.admin('add-credits', '--email', 'remote@example.com', '--credits', '100');
  });
  afterAll(() => server.stop());

  it('lists one tool, vidsheet_video, taking video_url (no video_path, no out_dir)', async () => {
    const client = await connect(server);
    const { tools } = await client.listTools();
    await client.close();
    expect(tools.map((t) => t.name)).toEqual([TOOL]);
    const schema = tools[0]?.inputSchema as { properties: Record<string, unknown>; required?: string[] };
    expect(Object.keys(schema.properties).sort()).toEqual(['density', 'end', 'start', 'video_url']);
    expect(schema.required).toEqual(['video_url']);
    expect(tools[0]?.description).toMatch(/timecodes/);
    expect(tools[0]?.description).toMatch(/`zoom_hints`.*pass them as start and end/s);
    expect(tools[0]?.description).toMatch(/`frame_times`/);
  });

  it('anonymous lane: the result in DESIGN §6 key order, capability URLs, and sheet 1 inline within 90 KB', async () => {
    const client = await connect(server);
    const result = await call(client, { video_url: videoUrl() });
    await client.close();
    expect(result.isError, textOf(result)).toBeFalsy();
    const report = JSON.parse(textOf(result));
    expect(Object.keys(report)).toEqual([...KEYS, 'free_jobs_remaining_today', ...AID_KEYS]);
    expect(report).toMatchObject({
      input: videoUrl(),
      duration: 120,
      frames: 18,
      sheets: 2,
      contract: 'vidsheet-mcp-http-v0',
      sheet_ttl_hours: 24,
      free_jobs_remaining_today: 2,
    });
    await expectModelAids(report, { clip: SAMPLE_PATH, audio: false });
    expect(report.job_id).toMatch(/^[A-Za-z0-9_-]{22}$/);
    expect(report.files).toEqual(
      [1, 2].map((n) => `${server.url}/v1/sheets/${report.job_id}/video.sheet-${n}.jpg`),
    );
    const sheet = Buffer.from(await (await fetch(report.files[0])).arrayBuffer());
    const full = decodeJpeg(sheet);

    const image = result.content[1];
    expect(image?.type).toBe('image');
    expect(image?.mimeType).toBe('image/jpeg');
    const inline = Buffer.from(image?.data ?? '', 'base64');
    expect(inline.length).toBeLessThanOrEqual(90 * 1024);
    const decoded = decodeJpeg(inline);
    // The same sheet (same aspect), reduced only when it had to be, and then the warning says so.
    expect(Math.abs(decoded.width / decoded.height - full.width / full.height)).toBeLessThan(0.02);
    if (sheet.length > 90 * 1024) {
      expect(report.warnings.some((w: string) => /read exact labels from timecodes/.test(w))).toBe(true);
    } else {
      expect(inline.equals(sheet)).toBe(true);
    }
    expect(server.leftovers()).toEqual([]);
  });

  it('keyed lane: priced and charged like the hosted API, recorded as surface mcp', async () => {
    const client = await connect(server, { authorization: `Bearer ${key}` });
    const result = await call(client, { video_url: videoUrl(), density: '4x4' });
    await client.close();
    expect(result.isError, textOf(result)).toBeFalsy();
    const report = JSON.parse(textOf(result));
    expect(Object.keys(report)).toEqual([...KEYS, 'credits_charged', 'credits_remaining', ...AID_KEYS]);
    expect(report.credits_charged).toBe(4);
    expect(report.credits_remaining).toBe(96);
    const shown = JSON.parse((await server.admin('show', '--email', 'remote@example.com')).stdout);
    expect(shown.balance).toBe(96);
    expect(shown.usage[0]).toMatchObject({
      job_id: report.job_id,
      surface: 'mcp',
      density: '4x4',
      credits: 4,
    });
  });

  it('windows: labels read from a sheet round-trip as start/end, with the local rules and wording', async () => {
    const client = await connect(server, { authorization: `Bearer ${key}` });
    const overview = JSON.parse(textOf(await call(client, { video_url: videoUrl() })));
    const [start, end] = [overview.timecodes[0][2], overview.timecodes[0][5]];
    const zoom = await call(client, { video_url: videoUrl(), start, end, density: '3x3' });
    const report = JSON.parse(textOf(zoom));
    expect(Object.keys(report).slice(0, 3)).toEqual(['input', 'duration', 'window']);
    expect(report.window).toEqual({
      start: (parseTimeMs(start) as number) / 1000,
      end: (parseTimeMs(end) as number) / 1000,
    });
    expect(report.duration).toBe(120);
    // Every label of the zoom lies inside the window, in order, and is itself valid input.
    const times = report.timecodes.flat().map((l: string) => parseTimeMs(l) as number);
    expect(times.every((t: number, i: number) => i === 0 || t > (times[i - 1] as number))).toBe(true);
    expect(times[0]).toBeGreaterThanOrEqual(parseTimeMs(start) as number);
    expect(times.at(-1)).toBeLessThanOrEqual(parseTimeMs(end) as number);

    const bad = await call(client, { video_url: videoUrl(), start: 'soon' });
    expect(bad.isError).toBe(true);
    expect(textOf(bad)).toBe('could not parse start "soon" — use seconds (90) or a timecode (1:30, 1:07.3)');
    const empty = await call(client, { video_url: videoUrl(), start: 10, end: 10 });
    expect(textOf(empty)).toBe('window is empty — end (10) must be after start (10)');
    await client.close();
  });

  it('refused fetches say why without echoing addresses, and never touch the canary', async () => {
    const client = await connect(server);
    const cases: Array<[string, string]> = [
      [
        `http://127.0.0.1:${canary.port}/sample.mp4`,
        'could not fetch the video: the address is private or reserved; only public addresses can be fetched',
      ],
      [
        `http://localhost:${canary.port}/sample.mp4`,
        'could not fetch the video: the address is private or reserved; only public addresses can be fetched',
      ],
      [
        videoUrl('/to-canary'),
        'could not fetch the video: the address is private or reserved; only public addresses can be fetched',
      ],
      [videoUrl('/missing.mp4'), 'could not fetch the video: the server answered 404'],
      ['file:///etc/passwd', 'could not fetch the video: only http and https URLs can be fetched'],
    ];
    for (const [url, message] of cases) {
      const result = await call(client, { video_url: url });
      expect(result.isError, url).toBe(true);
      expect(textOf(result), url).toBe(message);
    }
    await client.close();
    expect(canary.connections).toBe(0);
    expect(server.leftovers()).toEqual([]);
  });

  it('transport: POST only (GET and DELETE 405 with Allow: POST), no session id, invalid key 401', async () => {
    for (const method of ['GET', 'DELETE']) {
      // A JSON content type with no body changes nothing (Fastify once parsed it first: a 422).
      for (const type of [{}, { 'content-type': 'application/json' }] as Record<string, string>[]) {
        const r = await raw(server, {
          method,
          headers: { accept: 'application/json, text/event-stream', ...type },
        });
        expect([r.status, r.body], method).toEqual([405, '{"error":"method_not_allowed"}']);
        expect(r.headers.allow).toBe('POST');
      }
    }
    const init = await raw(server, { method: 'POST', headers: JSON_HEADERS, body: INIT });
    expect(init.status).toBe(200);
    expect(init.headers['mcp-session-id']).toBeUndefined();
    expect(init.headers['content-type']).toMatch(/^application\/json/);
    expect(JSON.parse(init.body).result.serverInfo.name).toBe('vidsheet');

    const wrongKey = 'vs_live_0000000000000000000000000000000000000000';
    for (const authorization of [`Bearer ${wrongKey}`, 'Bearer nonsense', 'Basic dXNlcjpwYXNz', '']) {
      const r = await raw(server, {
        method: 'POST',
        headers: { ...JSON_HEADERS, authorization },
        body: INIT,
      });
      expect(r.status, authorization).toBe(401);
      expect(r.body).toBe('{"error":"invalid_key"}');
    }
  });

  it('Host and Origin are checked before any MCP processing (403)', async () => {
    const { port } = new URL(server.url);
    const wrongHost = await raw(server, {
      method: 'POST',
      headers: { ...JSON_HEADERS, host: `attacker.example:${port}` },
      body: INIT,
    });
    expect(wrongHost.status).toBe(403);
    const wrongOrigin = await raw(server, {
      method: 'POST',
      headers: { ...JSON_HEADERS, origin: 'http://attacker.example' },
      body: INIT,
    });
    expect(wrongOrigin.status).toBe(403);
    const rightOrigin = await raw(server, {
      method: 'POST',
      headers: { ...JSON_HEADERS, origin: server.url },
      body: INIT,
    });
    expect(rightOrigin.status).toBe(200);
    for (const host of [`localhost:${port}`, `127.0.0.1:${port}`]) {
      const r = await raw(server, { method: 'POST', headers: { ...JSON_HEADERS, host }, body: INIT });
      expect(r.status, host).toBe(200);
    }
  });
});

describe('anonymous quota', () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startServer({
      VIDSHEET_FETCH_ALLOW: `127.0.0.1:${origin.port}`,
      VIDSHEET_ANON_CEILING: '7',
    });
  });
  afterAll(() => server.stop());

  it('per IP: the fourth call of the day is quota_exhausted with billing_url; per subject: the non-commercial variant', async () => {
    const client = await connect(server);
    for (const left of [2, 1, 0]) {
      const ok = await call(client, { video_url: videoUrl() });
      expect(JSON.parse(textOf(ok)).free_jobs_remaining_today).toBe(left);
    }
    const fourth = await call(client, { video_url: videoUrl() });
    expect(fourth.isError).toBe(true);
    const byIp = JSON.parse(textOf(fourth));
    expect(Object.keys(byIp)).toEqual(['error', 'message', 'hint', 'billing_url']);
    expect(byIp.error).toBe('quota_exhausted');
    expect(byIp.billing_url).toBe(`${server.url}/keys`);
    expect(byIp.hint).toMatch(/key/);

    // A subject is its own counter, whatever the IP.
    const meta = { 'openai/subject': 'user-123' };
    for (const left of [2, 1, 0]) {
      expect(
        JSON.parse(textOf(await call(client, { video_url: videoUrl() }, meta))).free_jobs_remaining_today,
      ).toBe(left);
    }
    const bySubject = JSON.parse(textOf(await call(client, { video_url: videoUrl() }, meta)));
    expect(Object.keys(bySubject)).toEqual(['error', 'message', 'hint']);
    expect(bySubject.error).toBe('quota_exhausted');
    expect(bySubject.hint).toMatch(/00:00 UTC/);
    expect(bySubject.hint).toMatch(/locally/);

    // The endpoint-wide ceiling (7): one more subject gets one job, the next none.
    expect(
      JSON.parse(textOf(await call(client, { video_url: videoUrl() }, { 'x/subject': 'other' }))).sheets,
    ).toBe(2);
    const ceiling = JSON.parse(
      textOf(await call(client, { video_url: videoUrl() }, { 'x/subject': 'third' })),
    );
    expect(ceiling.error).toBe('quota_exhausted');
    await client.close();
  });
});

describe('limits', () => {
  it('a burst past the queue gets the polite retry message at once, never a hang', async () => {
    const server = await startServer({
      VIDSHEET_FETCH_ALLOW: `127.0.0.1:${origin.port}`,
      VIDSHEET_QUEUE_LENGTH: '0',
      // A fetch holds a transfer slot, not a queue place (DESIGN §5): one slot in all.
      VIDSHEET_MAX_TRANSFERS: '1',
    });
    try {
      // Two addresses: one anonymous address has one job at a time anyway (DESIGN §5a); this is
      // the transfer slot's refusal.
      const first = await connect(server, {}, '127.0.0.71');
      const holding = call(first, { video_url: videoUrl('/slow.mp4') });
      while (slow.length === 0) await new Promise((r) => setTimeout(r, 20));
      const second = await connect(server, {}, '127.0.0.72');
      const started = Date.now();
      const busy = await call(second, { video_url: videoUrl() });
      expect(Date.now() - started).toBeLessThan(5_000);
      expect(busy.isError).toBe(true);
      expect(textOf(busy)).toMatch(/retry/);
      for (const release of slow.splice(0)) release();
      expect((await holding).isError).toBeFalsy();
      expect((await call(second, { video_url: videoUrl() })).isError).toBeFalsy();
      await first.close();
      await second.close();
    } finally {
      await server.stop();
    }
  });

  it('a flood past VIDSHEET_MCP_FLOOD_PER_MIN gets 429 with Retry-After', async () => {
    const server = await startServer({ VIDSHEET_MCP_FLOOD_PER_MIN: '5' });
    try {
      const statuses: number[] = [];
      let retryAfter: string | string[] | undefined;
      for (let i = 0; i < 7; i++) {
        const r = await raw(server, { method: 'POST', headers: JSON_HEADERS, body: INIT });
        statuses.push(r.status);
        if (r.status === 429) retryAfter = r.headers['retry-after'];
      }
      expect(statuses.slice(0, 5)).toEqual([200, 200, 200, 200, 200]);
      expect(statuses.slice(5)).toEqual([429, 429]);
      expect(Number(retryAfter)).toBeGreaterThan(0);
      expect(Number(retryAfter)).toBeLessThanOrEqual(60);
    } finally {
      await server.stop();
    }
  });
});
