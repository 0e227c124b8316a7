/**
 * DESIGN §5a stalls on the remote endpoint: a fetch that delivers too little (less than 64 KiB in a
 * window after its grace period), nothing at all (the idle cut at `VIDSHEET_STALL_S`), or outlasts
 * `VIDSHEET_FETCH_TIMEOUT_S` is cut as a failed fetch: the tool's fetch error, nothing left on disk,
 * and the queue usable by another caller during and after. The cut fetch counts as a job of the
 * anonymous lane, not given back ("One at a time for free actors"), or slow fetches would be free.
 *
 * The built server on loopback, on SQLite and PostgreSQL, driven by the MCP SDK's own client; the
 * videos come from a slow origin on loopback. Timings shrunk: STALL_S=2, test time scale 0.1 (grace
 * 1 s, window 3 s), FETCH_TIMEOUT_S=6.
 */
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BACKENDS } from '../../helpers/databases.js';
import { plainClip } from '../../helpers/fixtures.js';
import { removeServerDirs, startServer, type TestServer } from '../../helpers/server.js';
import { serverDatabase } from '../../helpers/server-database.js';

afterAll(removeServerDirs);

interface CallResult {
  isError?: boolean;
  content: Array<{ type: string; text?: string }>;
}

let small: Buffer;
let origin: Server;
let originPort: number;
/** Paths whose response the origin saw closed by the fetcher (the cut reached the origin). */
const closedByClient: string[] = [];

beforeAll(async () => {
  small = readFileSync(await plainClip(5));
  origin = createServer((req, res) => {
    const path = req.url ?? '';
    res.on('close', () => {
      if (!res.writableFinished) closedByClient.push(path);
    });
    switch (path) {
      case '/small.mp4':
        res.writeHead(200, { 'content-type': 'video/mp4', 'content-length': small.length }).end(small);
        return;
      case '/trickle.mp4': {
        // Never idle (a byte every 200 ms), far below 64 KiB a window.
        res.writeHead(200, { 'content-type': 'video/mp4' });
        res.write(small.subarray(0, 1024));
        const timer = setInterval(() => res.write('x'), 200);
        res.on('close', () => clearInterval(timer));
        return;
      }
      case '/silent.mp4':
        // Headers, one chunk, then nothing.
        res.writeHead(200, { 'content-type': 'video/mp4' });
        res.write(small.subarray(0, 1024));
        return;
      case '/endless.mp4': {
        // Fast enough for the stall rule (320 KiB/s), but it never ends.
        res.writeHead(200, { 'content-type': 'video/mp4' });
        const timer = setInterval(() => res.write(Buffer.alloc(32 * 1024, 0x2a)), 100);
        res.on('close', () => clearInterval(timer));
        return;
      }
      default:
        res.writeHead(404).end();
    }
  });
  await new Promise<void>((resolve) => origin.listen(0, '127.0.0.1', resolve));
  originPort = (origin.address() as AddressInfo).port;
});
afterAll(async () => {
  origin.closeAllConnections();
  await new Promise((resolve) => origin.close(resolve));
});

const url = (path: string) => `http://127.0.0.1:${originPort}${path}`;
const fetchFailed = (why: string): CallResult => ({
  isError: true,
  content: [{ type: 'text', text: `could not fetch the video: ${why}` }],
});

describe.each(BACKENDS)('remote fetch stalls (%s)', (backend) => {
  const database = serverDatabase(backend);
  let server: TestServer;
  const clients: Client[] = [];
  beforeAll(async () => {
    server = await startServer({
      VIDSHEET_STALL_S: '2',
      VIDSHEET_TEST_TIME_SCALE: '0.1',
      VIDSHEET_FETCH_TIMEOUT_S: '6',
      // Three cut fetches and one served: each is a free job of the day.
      VIDSHEET_ANON_DAILY: '4',
      // One queue place in all: a held place would show at once.
      VIDSHEET_QUEUE_LENGTH: '0',
      VIDSHEET_FETCH_ALLOW: `127.0.0.1:${originPort}`,
      ...(await database()),
    });
  }, 60_000);
  afterAll(async () => {
    for (const client of clients) await client.close();
    await server?.stop();
  });

  async function connect(headers: Record<string, string> = {}): Promise<Client> {
    const client = new Client({ name: 'vidsheet-test', version: '1.0.0' });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(`${server.url}/mcp`), { requestInit: { headers } }),
    );
    clients.push(client);
    return client;
  }
  const call = async (client: Client, path: string) =>
    (await client.callTool({ name: 'vidsheet_video', arguments: { video_url: url(path) } })) as CallResult;
  const work = () => server.leftovers().filter((f) => f.startsWith('work/'));
  const remainingToday = (result: CallResult) =>
    JSON.parse(result.content[0]?.text ?? '{}').free_jobs_remaining_today as number;

  it('too slow, silent, and endless fetches are cut, each a job of the day; others are served meanwhile', async () => {
    const anonymous = await connect();
    const email = `f-${randomBytes(4).toString('hex')}@example.com`;
    const key = (await server.admin('create-key', '--email', email)).stdout.trim();
    expect((await server.admin('add-credits', '--email', email, '--credits', '20')).code).toBe(0);
    const keyed = await connect({ authorization: `Bearer ${key}` });

    // The trickle: cut after its grace (1 s) and one window (3 s) of too few bytes.
    let started = Date.now();
    let settled = false;
    const trickle = call(anonymous, '/trickle.mp4').finally(() => (settled = true));
    // Meanwhile another caller goes through the one queue place.
    await sleep(300);
    const during = await call(keyed, '/small.mp4');
    expect(during.isError, during.content[0]?.text).toBeFalsy();
    expect(JSON.parse(during.content[0]?.text ?? '{}').credits_charged).toBe(1);
    expect(settled).toBe(false);
    expect(await trickle).toEqual(fetchFailed('the server sent the video too slowly'));
    expect(Date.now() - started).toBeGreaterThanOrEqual(3500);
    expect(Date.now() - started).toBeLessThan(8000);

    // Silent after its first chunk: the idle cut at STALL_S (2 s).
    started = Date.now();
    expect(await call(anonymous, '/silent.mp4')).toEqual(fetchFailed('the server took too long to answer'));
    expect(Date.now() - started).toBeGreaterThanOrEqual(1900);
    expect(Date.now() - started).toBeLessThan(5000);

    // Fast enough but endless: the whole-fetch deadline (6 s).
    started = Date.now();
    expect(await call(anonymous, '/endless.mp4')).toEqual(fetchFailed('the download took too long'));
    expect(Date.now() - started).toBeGreaterThanOrEqual(5900);
    expect(Date.now() - started).toBeLessThan(9000);

    // Every cut reached the origin (the connection closed), and nothing is left on disk.
    await expect
      .poll(() => [...new Set(closedByClient)].sort())
      .toEqual(['/endless.mp4', '/silent.mp4', '/trickle.mp4']);
    expect(work()).toEqual([]);

    // Each of the three used a free job (4 a day): this is the last.
    const after = await call(anonymous, '/small.mp4');
    expect(after.isError, after.content[0]?.text).toBeFalsy();
    expect(remainingToday(after)).toBe(0);
    const afterKeyed = await call(keyed, '/small.mp4');
    expect(afterKeyed.isError, afterKeyed.content[0]?.text).toBeFalsy();
    const shown = JSON.parse((await server.admin('show', '--email', email)).stdout);
    // 20 granted, above the allowance floor: two 1-credit jobs, nothing else.
    expect(shown.balance).toBe(18);
    expect(shown.usage).toHaveLength(2);
    expect(server.leftovers()).toEqual([]);
  }, 60_000);
});
