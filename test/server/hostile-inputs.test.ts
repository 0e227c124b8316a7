/**
 * Files that name other files, sent to a real server on loopback (DESIGN §5a "Containers a server
 * opens"; issue 21): HLS playlists (with and without control bytes, with .ts/.mp4/.mkv segments),
 * DASH manifests, concat and ffconcat lists, pictures and image2 names, SDP sessions and text,
 * all pointing at a canary video outside the server's data directory, through an upload
 * (`POST /v1/vidsheet`) and through the remote endpoint's fetch lane (`/mcp`, keyed and keyless,
 * from an origin on 127.0.0.1 allowed by VIDSHEET_FETCH_ALLOW). On each engine:
 * - each is refused with the exact contract (`422 {"error":"unreadable_video"}`, or the remote
 *   "unreadable video" text) and nothing is charged;
 * - a real video whose Matroska attachment is such a playlist still opens, showing its own picture;
 * - no sheet the server ever stored shows the canary's magenta.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ENGINES } from '../helpers/cli.js';
import { decodeJpeg, readJpeg } from '../helpers/frames.js';
import {
  type CanaryPaths,
  canaryShare,
  GREEN_RGB,
  type HostileInput,
  hostileInputs,
  makeCanary,
  matroskaWithPlaylist,
  shareNear,
} from '../helpers/hostile-inputs.js';
import { postJob, removeServerDirs, startServer, type TestServer, videoForm } from '../helpers/server.js';

const UNREADABLE_BODY = '{"error":"unreadable_video"}';
const remoteUnreadable = (url: string) =>
  `unreadable video: ${url} — no decodable video stream (send a real video in a common container)`;

let root: string;
let canary: CanaryPaths;
let battery: HostileInput[];
let withPlaylist: Buffer;

/** The origin: `/hostile/<n>` serves battery entry n, `/with-playlist.mkv` the real video. */
let origin: Server;
let originPort = 0;

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'vs-hostile-'));
  canary = await makeCanary(join(root, 'canary'));
  battery = await hostileInputs(canary);
  withPlaylist = readFileSync(await matroskaWithPlaylist(join(root, 'mkv'), canary));
  origin = createServer((req, res) => {
    const n = /^\/hostile\/(\d+)(?:\?.*)?$/.exec(req.url ?? '')?.[1];
    const body =
      n !== undefined
        ? battery[Number(n)]?.bytes
        : req.url === '/with-playlist.mkv'
          ? withPlaylist
          : undefined;
    if (!body) {
      res.writeHead(404);
      res.end();
      return;
    }
    res.writeHead(200, { 'content-type': 'video/mp4', 'content-length': body.length });
    res.end(body);
  });
  await new Promise<void>((resolve) => origin.listen(0, '127.0.0.1', resolve));
  originPort = (origin.address() as AddressInfo).port;
});

afterAll(async () => {
  origin?.closeAllConnections();
  await new Promise((done) => origin?.close(done));
  removeServerDirs();
  await rm(root, { recursive: true, force: true });
});

const hostileUrl = (n: number) => `http://127.0.0.1:${originPort}/hostile/${n}`;

interface CallResult {
  isError?: boolean;
  content: Array<{ type: string; text?: string; data?: string }>;
}

async function connect(server: TestServer, key?: string): Promise<Client> {
  const client = new Client({ name: 'vidsheet-hostile-test', version: '1.0.0' });
  const headers: Record<string, string> = key ? { authorization: `Bearer ${key}` } : {};
  await client.connect(
    new StreamableHTTPClientTransport(new URL(`${server.url}/mcp`), { requestInit: { headers } }),
  );
  return client;
}

const callTool = async (client: Client, url: string) =>
  (await client.callTool({
    name: 'vidsheet_video',
    arguments: { video_url: url, density: '3x3' },
  })) as CallResult;

/** Every JPEG under a directory, recursively. */
function jpegsUnder(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return jpegsUnder(path);
    return name.endsWith('.jpg') ? [path] : [];
  });
}

describe.each(ENGINES)('engine %s', (engine) => {
  let server: TestServer;
  let key: string;
  const email = `hostile-${engine}@example.com`;
  const show = async () => JSON.parse((await server.admin('show', '--email', email)).stdout);

  beforeAll(async () => {
    server = await startServer({
      VIDSHEET_ENGINE: engine,
      VIDSHEET_FETCH_ALLOW: `127.0.0.1:${originPort}`,
      VIDSHEET_ANON_DAILY: '1000',
      VIDSHEET_MCP_FLOOD_PER_MIN: '1000',
    });
    key = (await server.admin('create-key', '--email', email)).stdout.trim();
    await server.admin('add-credits', '--email', email, '--credits', '50');
    // The canary is elsewhere on the server's disk, never under its data directory.
    expect(canary.mp4.startsWith(server.dataDir)).toBe(false);
  });
  afterAll(() => server.stop());

  it('uploads: every form is 422 {"error":"unreadable_video"}, nothing charged, nothing left', async () => {
    expect(battery.length).toBe(19);
    const before = await show();
    for (const input of battery) {
      const res = await postJob(server, key, videoForm(input, { density: '3x3' }));
      expect([input.kind, res.status, await res.text()]).toEqual([input.kind, 422, UNREADABLE_BODY]);
      expect([input.kind, server.leftovers()]).toEqual([input.kind, []]);
    }
    expect(await show()).toEqual(before);
  });

  it('/mcp fetch lane, keyed and keyless: every form is the remote "unreadable video" error, nothing charged', async () => {
    const before = await show();
    const keyed = await connect(server, key);
    const keyless = await connect(server);
    try {
      for (const [n, input] of battery.entries()) {
        for (const [lane, client] of [
          ['keyed', keyed],
          ['keyless', keyless],
        ] as const) {
          const result = await callTool(client, hostileUrl(n));
          expect([input.kind, lane, result.isError, result.content]).toEqual([
            input.kind,
            lane,
            true,
            [{ type: 'text', text: remoteUnreadable(hostileUrl(n)) }],
          ]);
        }
        expect([input.kind, server.leftovers()]).toEqual([input.kind, []]);
      }
    } finally {
      await keyed.close();
      await keyless.close();
    }
    expect(await show()).toEqual(before);
  });

  it('a long video URL is quoted by its first 64 characters, never whole (DESIGN §5a)', async () => {
    const url = `${hostileUrl(0)}?${'q'.repeat(200)}`;
    const client = await connect(server, key);
    try {
      const result = await callTool(client, url);
      expect(result.isError).toBe(true);
      expect(result.content).toEqual([{ type: 'text', text: remoteUnreadable(`${url.slice(0, 64)}…`) }]);
      expect(server.output()).not.toContain('q'.repeat(65));
    } finally {
      await client.close();
    }
  });

  it('a real video with a playlist in a Matroska attachment opens as itself, upload and fetch', async () => {
    const res = await postJob(
      server,
      key,
      videoForm({ bytes: withPlaylist, filename: 'holiday.mkv' }, { density: '3x3' }),
    );
    const text = await res.text();
    expect(res.status, text).toBe(200);
    const result = JSON.parse(text) as { duration: number; files: string[]; credits_charged: number };
    expect(result.duration).toBe(4);
    expect(result.credits_charged).toBe(1);
    for (const url of result.files) {
      const sheet = decodeJpeg(new Uint8Array(await (await fetch(url)).arrayBuffer()));
      expect(canaryShare(sheet)).toBe(0);
      expect(shareNear(sheet, GREEN_RGB)).toBeGreaterThan(0.3);
    }

    const client = await connect(server);
    const remote = await callTool(client, `http://127.0.0.1:${originPort}/with-playlist.mkv`);
    await client.close();
    expect(remote.isError, remote.content[0]?.text).toBeFalsy();
    expect(JSON.parse(remote.content[0]?.text ?? '{}').duration).toBe(4);
    const inline = decodeJpeg(Buffer.from(remote.content[1]?.data ?? '', 'base64'));
    expect(canaryShare(inline)).toBe(0);
    expect(shareNear(inline, GREEN_RGB)).toBeGreaterThan(0.3);
  });

  it('no sheet the server stored shows the canary', () => {
    const sheets = jpegsUnder(server.dataDir);
    for (const sheet of sheets) expect([sheet, canaryShare(readJpeg(sheet))]).toEqual([sheet, 0]);
    // The two jobs above (upload and fetch) stored their sheets, and only they did.
    expect(sheets.length).toBe(2);
  });
});
