/**
 * Who the client is (DESIGN §5a "Proxies", "Anonymous lane"), on real servers over loopback: which
 * `X-Forwarded-For` entry becomes the client address for each `VIDSHEET_TRUST_PROXY` form (the
 * server's own request log says which address it took), that a forged leftmost entry buys no fresh
 * flood allowance, and that invented subject ids on the free lane stop at the per-address cap.
 *
 * Every address here is loopback: sockets from 127.0.0.x (undici's `localAddress`), and 127.0.0.x or
 * ::1 in the forwarded chains. Other ranges are covered by unit tests with fake inputs.
 */
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { Agent, fetch as undiciFetch } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { removeServerDirs, startServer, type TestServer } from '../helpers/server.js';

afterAll(removeServerDirs);

const SAMPLE = readFileSync(join(import.meta.dirname, '..', '..', 'fixtures', 'sample.mp4'));
const agents = new Map<string, Agent>();
afterAll(async () => {
  await Promise.all([...agents.values()].map((agent) => agent.close()));
});

/** A request from the loopback address `from`, carrying `X-Forwarded-For: forwarded` when given. */
function send(
  server: TestServer,
  path: string,
  options: { from?: string; forwarded?: string; method?: string; body?: string } = {},
) {
  const from = options.from ?? '127.0.0.1';
  if (!agents.has(from)) agents.set(from, new Agent({ localAddress: from }));
  return undiciFetch(`${server.url}${path}`, {
    method: options.method ?? 'GET',
    headers: {
      ...(options.forwarded === undefined ? {} : { 'x-forwarded-for': options.forwarded }),
      ...(options.body === undefined
        ? {}
        : { 'content-type': 'application/json', accept: 'application/json, text/event-stream' }),
    },
    body: options.body,
    dispatcher: agents.get(from),
  });
}

let probes = 0;
/** The client address the server took for one request: `remoteAddress` of its request log line. */
async function clientAddress(
  server: TestServer,
  options: { from?: string; forwarded?: string },
): Promise<string> {
  const path = `/healthz?probe=${++probes}`;
  const res = await send(server, path, options);
  expect(res.status).toBe(200);
  await res.arrayBuffer();
  const line = await server.waitForLog((l) => (l.req as { url?: string } | undefined)?.url === path);
  return String((line.req as { remoteAddress?: string }).remoteAddress);
}

describe('VIDSHEET_TRUST_PROXY: which X-Forwarded-For entry is the client', () => {
  const trusts = { off: 'false', one: 'true', two: '2', cidrs: '127.0.0.2, 127.0.0.3/32, ::1' };
  const servers = {} as Record<keyof typeof trusts, TestServer>;
  beforeAll(async () => {
    await Promise.all(
      Object.entries(trusts).map(async ([name, trust]) => {
        servers[name as keyof typeof trusts] = await startServer({ VIDSHEET_TRUST_PROXY: trust });
      }),
    );
  });
  afterAll(async () => {
    await Promise.all(Object.values(servers).map((server) => server.stop()));
  });

  it('false (the default): the socket peer, whatever the header says', async () => {
    const off = servers.off;
    expect(await clientAddress(off, { forwarded: '127.0.0.9, 127.0.0.8' })).toBe('127.0.0.1');
    expect(await clientAddress(off, { from: '127.0.0.4', forwarded: '127.0.0.9' })).toBe('127.0.0.4');
  });

  it('true means one hop: the rightmost entry, never the leftmost a client wrote', async () => {
    const one = servers.one;
    expect(await clientAddress(one, { forwarded: '127.0.0.9, 127.0.0.8' })).toBe('127.0.0.8');
    expect(await clientAddress(one, { forwarded: '127.0.0.9,127.0.0.7, 127.0.0.8' })).toBe('127.0.0.8');
    expect(await clientAddress(one, { forwarded: '127.0.0.8, ::1' })).toBe('::1');
    // A proxy that replaces the header (deploy/nginx.conf) leaves one entry: that one.
    expect(await clientAddress(one, { forwarded: '127.0.0.9' })).toBe('127.0.0.9');
    // No header (a health check from the proxy host itself): the socket peer.
    expect(await clientAddress(one, { from: '127.0.0.4' })).toBe('127.0.0.4');
  });

  it('a hop count of 2: the entry two places from the right', async () => {
    const two = servers.two;
    expect(await clientAddress(two, { forwarded: '127.0.0.9, 127.0.0.8, 127.0.0.7' })).toBe('127.0.0.8');
    expect(await clientAddress(two, { forwarded: '127.0.0.8, 127.0.0.7' })).toBe('127.0.0.8');
    expect(await clientAddress(two, { forwarded: '::1, 127.0.0.7' })).toBe('::1');
    // Fewer entries than hops: the request did not come through both proxies, and its one entry is
    // the leftmost, which a client writes: the socket peer is the client.
    expect(await clientAddress(two, { from: '127.0.0.4', forwarded: '127.0.0.9' })).toBe('127.0.0.4');
    expect(await clientAddress(two, { from: '127.0.0.4', forwarded: '127.0.0.9, ' })).toBe('127.0.0.4');
  });

  it('proxy CIDRs: the rightmost entry not inside them, and only when the socket peer is a proxy', async () => {
    const cidrs = servers.cidrs;
    const viaProxy = { from: '127.0.0.2' };
    expect(await clientAddress(cidrs, { ...viaProxy, forwarded: '127.0.0.9, 127.0.0.8, 127.0.0.3' })).toBe(
      '127.0.0.8',
    );
    expect(await clientAddress(cidrs, { ...viaProxy, forwarded: '127.0.0.9, 127.0.0.8' })).toBe('127.0.0.8');
    expect(await clientAddress(cidrs, { ...viaProxy, forwarded: '127.0.0.9, ::1, 127.0.0.3' })).toBe(
      '127.0.0.9',
    );
    // A client that reaches the server directly (not from a proxy address) is the socket peer.
    expect(await clientAddress(cidrs, { from: '127.0.0.4', forwarded: '127.0.0.9, 127.0.0.8' })).toBe(
      '127.0.0.4',
    );
  });
});

describe('per-address limits follow the proxy rule', () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startServer({ VIDSHEET_TRUST_PROXY: 'true', VIDSHEET_MCP_FLOOD_PER_MIN: '1' });
  });
  afterAll(() => server.stop());

  it('a forged leftmost entry is the same client: the /mcp flood limit is not reset by it', async () => {
    const ping = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' });
    const mcp = (forwarded: string) => send(server, '/mcp', { method: 'POST', forwarded, body: ping });
    // The flood windows are whole wall-clock minutes: start well inside one.
    const intoMinute = Date.now() % 60_000;
    if (intoMinute > 50_000) await new Promise((r) => setTimeout(r, 60_500 - intoMinute));
    const first = await mcp('127.0.0.5, 127.0.0.8');
    const forged = await mcp('127.0.0.6, 127.0.0.8');
    // The same address spelt IPv4-mapped is the same client (one address key for every limit).
    const mapped = await mcp('127.0.0.5, ::ffff:127.0.0.8');
    const other = await mcp('127.0.0.8, 127.0.0.9');
    expect(first.status).toBe(200);
    expect(forged.status).toBe(429);
    expect(forged.headers.get('retry-after')).toMatch(/^\d+$/);
    expect(mapped.status).toBe(429);
    expect(other.status).toBe(200);
    await Promise.all([first, forged, mapped, other].map((res) => res.arrayBuffer()));
  });
});

describe('the anonymous lane counts invented subject ids against their address', () => {
  const CAP = 3;
  let origin: Server;
  let originPort: number;
  let server: TestServer;
  beforeAll(async () => {
    origin = createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'video/mp4', 'content-length': SAMPLE.length });
      res.end(SAMPLE);
    });
    await new Promise<void>((resolve) => origin.listen(0, '127.0.0.1', resolve));
    originPort = (origin.address() as AddressInfo).port;
    server = await startServer({
      VIDSHEET_FETCH_ALLOW: `127.0.0.1:${originPort}`,
      VIDSHEET_TRUST_PROXY: '1',
      VIDSHEET_ANON_PER_ADDRESS: String(CAP),
    });
  });
  afterAll(async () => {
    await server.stop();
    origin.closeAllConnections();
    await new Promise((resolve) => origin.close(resolve));
  });

  /** One anonymous tool call from the client address `address` (one hop: the proxy's entry). */
  async function call(address: string, meta?: Record<string, unknown>) {
    const client = new Client({ name: 'vidsheet-test', version: '1.0.0' });
    const transport = new StreamableHTTPClientTransport(new URL(`${server.url}/mcp`), {
      requestInit: { headers: { 'x-forwarded-for': `127.0.0.200, ${address}` } },
    });
    await client.connect(transport);
    try {
      const result = (await client.callTool({
        name: 'vidsheet_video',
        arguments: { video_url: `http://127.0.0.1:${originPort}/sample.mp4`, density: '3x3' },
        ...(meta ? { _meta: meta } : {}),
      })) as { isError?: boolean; content: Array<{ type: string; text?: string }> };
      return { isError: result.isError === true, body: JSON.parse(result.content[0]?.text ?? '{}') };
    } finally {
      await client.close();
    }
  }

  it(`${CAP} calls per address per day whatever the subject ids; then the quota error; other addresses unaffected`, async () => {
    // Each invented subject is a fresh subject counter (3 a day each), but all come from 127.0.0.9.
    for (let i = 1; i <= CAP; i++) {
      const ok = await call('127.0.0.9', { 'openai/subject': `invented-${i}` });
      expect(ok.isError, JSON.stringify(ok.body)).toBe(false);
      expect(ok.body.free_jobs_remaining_today).toBe(Math.min(2, CAP - i));
    }
    const refused = await call('127.0.0.9', { 'openai/subject': 'invented-4' });
    expect(refused.isError).toBe(true);
    expect(Object.keys(refused.body)).toEqual(['error', 'message', 'hint']);
    expect(refused.body).toEqual({
      error: 'quota_exhausted',
      message: `the free lane allows ${CAP} videos per day from one network address and they are used up for today`,
      hint: 'wait for the reset at 00:00 UTC, or run vidsheet locally on your own machine, free and without limits',
    });
    // The address is spent for calls without a subject too (they count against it as well).
    const keyless = await call('127.0.0.9');
    expect(keyless.isError).toBe(true);
    expect(keyless.body.error).toBe('quota_exhausted');
    expect(keyless.body.billing_url).toBe(`${server.url}/keys`);
    // Another address, and the same invented subject from it: its own allowance.
    const elsewhere = await call('::1', { 'openai/subject': 'invented-4' });
    expect(elsewhere.isError, JSON.stringify(elsewhere.body)).toBe(false);
    expect(elsewhere.body.files).toHaveLength(elsewhere.body.sheets);
  });
});
