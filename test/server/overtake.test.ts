/**
 * Issue 21, DESIGN §5/§5a: when every transfer slot is taken, a newcomer takes the slot of the
 * transfer furthest behind (stall.ts `behindBy`, transfers.ts), which is cut as a stall is; only when
 * none is behind is the newcomer `429 busy`. A real server on loopback, real slow sockets, real
 * clocks (stall rule unscaled: a 20 s idle cut, so anything answered within a few seconds was the
 * takeover, not the stall rule), two slots in all and room enough per client.
 */
import { readFileSync } from 'node:fs';
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { Agent, fetch as undiciFetch } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mcpToolCall } from '../helpers/app.js';
import { plainClip } from '../helpers/fixtures.js';
import {
  newAccount,
  removeServerDirs,
  showAccount,
  startServer,
  type TestServer,
} from '../helpers/server.js';
import { BUSY, type SlowUpload, STALLED, slowUpload, wholeUpload } from '../helpers/slow-client.js';
import { waitFor } from '../helpers/wait.js';

let server: TestServer;
let small: Buffer;
let origin: Server;
let originPort: number;
/** Responses the stalling origin holds open (headers and 1 KiB sent, then nothing). */
const stalledResponses: ServerResponse[] = [];

beforeAll(async () => {
  small = readFileSync(await plainClip(5));
  origin = createServer((req, res) => {
    if (req.url === '/good.mp4') {
      res.writeHead(200, { 'content-type': 'video/mp4', 'content-length': small.length });
      res.end(small);
      return;
    }
    res.writeHead(200, { 'content-type': 'video/mp4', 'content-length': 8 * 1024 * 1024 });
    res.write(Buffer.alloc(1024, 0x2a));
    stalledResponses.push(res);
  });
  await new Promise<void>((resolve) => origin.listen(0, '127.0.0.1', resolve));
  originPort = (origin.address() as AddressInfo).port;
  server = await startServer({
    VIDSHEET_MAX_TRANSFERS: '2',
    VIDSHEET_TRANSFERS_PER_CLIENT: '4',
    // No free allowance: balances show exactly what was charged.
    VIDSHEET_ALLOWANCE_FLOOR: '0',
    VIDSHEET_FETCH_ALLOW: `127.0.0.1:${originPort}`,
  });
}, 60_000);

/** An MCP client whose requests come from `address` (a loopback address of this machine). */
async function mcpClient(address: string): Promise<Client> {
  const agent = new Agent({ localAddress: address });
  const client = new Client({ name: 'vidsheet-test', version: '1.0.0' });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(`${server.url}/mcp`), {
      fetch: ((url: string | URL, init?: object) =>
        undiciFetch(url, { ...init, dispatcher: agent })) as unknown as typeof fetch,
    }),
  );
  return client;
}

afterAll(async () => {
  await server?.stop();
  origin?.closeAllConnections();
  await new Promise((resolve) => origin?.close(resolve));
  await removeServerDirs();
});

const work = () => server.leftovers().filter((f) => f.startsWith('work/'));

/** An upload the server is receiving (its work directory exists) after `first` bytes of its file. */
async function receiving(key: string, from: string, first: number): Promise<SlowUpload> {
  const before = work().length;
  const upload = await slowUpload(server.url, key, { from, first });
  await waitFor(() => work().length > before, `the upload from ${from} to be received`);
  return upload;
}

/** A whole upload of the 5 s clip through the slow client; its answer and how long it took. */
async function whole(key: string, from: string) {
  const started = Date.now();
  const answer = await wholeUpload(server.url, key, { bytes: small, from, filename: 'small.mp4' });
  return { answer, ms: Date.now() - started };
}

describe('a newcomer takes the slot of the transfer furthest behind (issue 21)', () => {
  it('two stalled uploads hold both slots: a paying upload succeeds at once, the older stalled one gets 408, its file deleted, nobody else charged', async () => {
    const a = await newAccount(server, 5);
    const b = await newAccount(server, 5);
    const payer = await newAccount(server, 5);
    const older = await receiving(a.key, '127.0.0.51', 1024);
    await sleep(300);
    const younger = await receiving(b.key, '127.0.0.52', 1024);
    try {
      // Both are past the 2 s grace and below the pace (1 KiB where ~4.4 KB were due): behind.
      await sleep(2500);
      const done = await whole(payer.key, '127.0.0.53');
      expect(done.answer?.status, done.answer?.body).toBe(200);
      expect(JSON.parse(done.answer?.body ?? '{}').credits_charged).toBe(1);
      // At once: far sooner than the 20 s stall cut.
      expect(done.ms).toBeLessThan(10_000);
      // The one furthest behind (the older) was cut as a stall is; the younger is still being received.
      expect(await older.answer()).toEqual(STALLED);
      await waitFor(() => older.closed(), 'the overtaken connection to close');
      expect(younger.closed()).toBe(false);
      expect(younger.received()).toBe('');
      await waitFor(() => work().length === 1, 'the overtaken upload to be deleted');
    } finally {
      older.destroy();
      younger.destroy();
    }
    await waitFor(() => work().length === 0, 'the abandoned upload to be deleted');
    expect(await showAccount(server, a.email)).toMatchObject({ balance: 5, usage: [] });
    expect(await showAccount(server, b.email)).toMatchObject({ balance: 5, usage: [] });
    expect((await showAccount(server, payer.email)).balance).toBe(4);
  }, 40_000);

  it('control: two honest uploads in flight (fast but long) are never overtaken; the newcomer gets 429', async () => {
    const a = await newAccount(server, 5);
    const b = await newAccount(server, 5);
    const c = await newAccount(server, 5);
    const first = await receiving(a.key, '127.0.0.54', 64 * 1024);
    const second = await receiving(b.key, '127.0.0.55', 64 * 1024);
    // 64 KiB every 100 ms each (~650 KB/s): far ahead of the pace, never idle.
    const streaming = setInterval(() => {
      first.send(Buffer.alloc(64 * 1024, 0x2a));
      second.send(Buffer.alloc(64 * 1024, 0x2a));
    }, 100);
    try {
      // Well past the 2 s grace and the 5 s idle figure.
      await sleep(6000);
      for (let i = 0; i < 3; i++) {
        const newcomer = await slowUpload(server.url, c.key, { from: '127.0.0.56', first: 1024 });
        expect(await newcomer.answer()).toEqual(BUSY);
        newcomer.destroy();
      }
      expect(first.closed() || second.closed()).toBe(false);
      expect(first.received() + second.received()).toBe('');
    } finally {
      clearInterval(streaming);
      first.destroy();
      second.destroy();
    }
    await waitFor(() => work().length === 0, 'the abandoned uploads to be deleted');
    for (const who of [a, b, c])
      expect(await showAccount(server, who.email)).toMatchObject({ balance: 5, usage: [] });
  }, 40_000);

  it('a stalled free fetch holds one slot, never the last: a second free fetch is busy, a paying upload succeeds at once; a free newcomer overtakes the stalled fetch; each keeps its job, as does one its origin broke off', async () => {
    const payer = await newAccount(server, 5);
    const call = async (address: string) => {
      const client = await mcpClient(address);
      try {
        const result = (await client.callTool(
          { name: 'vidsheet_video', arguments: { video_url: `http://127.0.0.1:${originPort}/stall.mp4` } },
          undefined,
          { timeout: 60_000 },
        )) as { isError?: boolean; content: Array<{ type: string; text?: string }> };
        return { isError: result.isError === true, text: result.content[0]?.text, address };
      } finally {
        await client.close();
      }
    };
    // From separate addresses: one anonymous address has one job at a time (DESIGN §5a).
    const stalled = call('127.0.0.61');
    let overtaken: Awaited<ReturnType<typeof call>> | undefined;
    void stalled.then((got) => {
      overtaken = got;
    });
    await waitFor(() => stalledResponses.length === 1, 'the first fetch to reach the stalling origin');
    // The other slot is the last: no free fetch may have it (nor reach the origin).
    const refused = await call('127.0.0.62');
    expect(refused.isError).toBe(true);
    expect(refused.text).toMatch(/retry/);
    expect(stalledResponses).toHaveLength(1);
    await sleep(2500);
    const done = await whole(payer.key, '127.0.0.57');
    expect(done.answer?.status, done.answer?.body).toBe(200);
    expect(done.ms).toBeLessThan(10_000);
    // A free newcomer may take over the stalled free fetch: it fails as a stalled fetch.
    const newcomer = call('127.0.0.63');
    await waitFor(() => overtaken !== undefined, 'the overtaken fetch to fail', 5000);
    expect(overtaken?.isError).toBe(true);
    expect(overtaken?.text).toBe('could not fetch the video: the server sent the video too slowly');
    await waitFor(() => stalledResponses.length === 2, 'the newcomer to reach the stalling origin');
    // The newcomer's origin breaks off, the body under way: a broken fetch, which counts too (the
    // eighth review: given back, an origin that broke off just before the deadline made it free).
    for (const res of stalledResponses) res.destroy();
    expect((await newcomer).isError).toBe(true);
    await waitFor(() => work().length === 0, 'the partial downloads to be deleted');
    expect((await showAccount(server, payer.email)).balance).toBe(4);
    // Three a day per address: the overtaken fetch (cut as a stalled one) and the broken one used
    // one of them each; the refused one none.
    for (const address of ['127.0.0.61', '127.0.0.62', '127.0.0.63']) {
      const client = await mcpClient(address);
      try {
        const ok = (await client.callTool({
          name: 'vidsheet_video',
          arguments: { video_url: `http://127.0.0.1:${originPort}/good.mp4`, density: '3x3' },
        })) as { isError?: boolean; content: Array<{ type: string; text?: string }> };
        expect(ok.isError, ok.content[0]?.text).not.toBe(true);
        expect(JSON.parse(ok.content[0]?.text ?? '{}').free_jobs_remaining_today).toBe(
          address === '127.0.0.62' ? 2 : 1,
        );
      } finally {
        await client.close();
      }
    }
  }, 60_000);
});

describe('a keyed /mcp call whose client leaves (the ninth review)', () => {
  it('stops its fetch at once and frees its slot: the origin sees the connection close', async () => {
    const payer = await newAccount(server, 5);
    const leaving = new AbortController();
    const before = stalledResponses.length;
    const tool = mcpToolCall({ video_url: `http://127.0.0.1:${originPort}/stall.mp4` });
    const call = fetch(`${server.url}/mcp`, {
      method: 'POST',
      headers: { ...tool.headers, authorization: `Bearer ${payer.key}` },
      body: JSON.stringify(tool.payload),
      signal: leaving.signal,
    }).catch(() => 'left');
    await waitFor(() => stalledResponses.length > before, 'the fetch to reach the origin');
    const response = stalledResponses[stalledResponses.length - 1] as ServerResponse;
    let closedAt = 0;
    response.once('close', () => {
      closedAt = Date.now();
    });
    const leftAt = Date.now();
    leaving.abort();
    expect(await call).toBe('left');
    // Far sooner than the 20 s stall cut: the server dropped the fetch when its caller left.
    await waitFor(() => closedAt > 0, 'the origin connection to close', 5000);
    expect(closedAt - leftAt).toBeLessThan(3000);
    await waitFor(() => work().length === 0, 'the partial download to be deleted');
    expect(await showAccount(server, payer.email)).toMatchObject({ balance: 5, usage: [] });
  }, 30_000);
});

describe('a free upload keeping pace gives way to a paying one (the seventh review)', () => {
  let kept: TestServer;
  /** The (scaled) minute of unbacked slot time that makes an account give way (transfers.ts). */
  const MARK_MS = 12_000;
  beforeAll(async () => {
    // The daily allowance on (its default floor): a never-paying account with no balance is a free
    // actor. The test clock at 0.2: the takeover bar is 160 KiB/s, a minute 12 s.
    kept = await startServer({
      VIDSHEET_MAX_TRANSFERS: '2',
      VIDSHEET_TRANSFERS_PER_CLIENT: '4',
      VIDSHEET_TEST_TIME_SCALE: String(MARK_MS / 60_000),
    });
  }, 60_000);
  afterAll(() => kept?.stop());
  const keptWork = () => kept.leftovers().filter((f) => f.startsWith('work/'));

  /**
   * An upload of `chunk` bytes every `everyMs` (by default 64 KiB every 100 ms: ~650 KB/s, far ahead
   * of the takeover bar), as it is received.
   */
  async function streaming(key: string, from: string, chunk = 64 * 1024, everyMs = 100) {
    const before = keptWork().length;
    const upload = await slowUpload(kept.url, key, { from, first: chunk, size: 64 * 1024 * 1024 });
    const timer = setInterval(() => upload.send(Buffer.alloc(chunk, 0x2a)), everyMs);
    await waitFor(() => keptWork().length > before, `the upload from ${from} to be received`);
    return { upload, stop: () => clearInterval(timer) };
  }

  it('the free upload is answered 429 busy (not 408: it did not stall), the payer gets its slot, a slow paying upload keeps its own, nothing charged', async () => {
    const free = await newAccount(kept, 0);
    // Above the allowance floor (7): balances show exactly what was charged.
    const payer = await newAccount(kept, 10);
    const newcomer = await newAccount(kept, 10);
    const first = await streaming(free.key, '127.0.0.71');
    // A paying upload on a poor link, 20 KiB/s: below the takeover bar (32 KiB/s), far above the stall
    // pace. Behind, yet the free upload gives way first (the eighth review).
    const second = await streaming(payer.key, '127.0.0.72', 16 * 1024, 800);
    try {
      // Past the grace: the paying upload is behind, the free one is not.
      await sleep(3000);
      const started = Date.now();
      const done = await wholeUpload(kept.url, newcomer.key, {
        bytes: small,
        from: '127.0.0.73',
        filename: 'small.mp4',
      });
      expect(done?.status, done?.body).toBe(200);
      expect(Date.now() - started).toBeLessThan(10_000);
      expect(await first.upload.answer()).toEqual(BUSY);
      // The paying transfer keeps its slot.
      expect(second.upload.closed()).toBe(false);
      expect(second.upload.received()).toBe('');
    } finally {
      for (const { upload, stop } of [first, second]) {
        stop();
        upload.destroy();
      }
    }
    expect((await showAccount(kept, free.email)).usage).toEqual([]);
    expect((await showAccount(kept, payer.email)).balance).toBe(10);
    expect((await showAccount(kept, newcomer.email)).balance).toBe(9);
  }, 40_000);
  /**
   * `holders` (account key, address) stream at pace in both slots; a newcomer with its own account
   * uploads the small clip: its answer, how long it took, and the holders' uploads.
   */
  async function bothSlotsHeld(holders: Array<[string, string]>, newcomer: string) {
    await waitFor(() => keptWork().length === 0, 'the earlier uploads to be deleted');
    const held = [];
    for (const [key, from] of holders) held.push(await streaming(key, from));
    try {
      await sleep(3000);
      const started = Date.now();
      const done = await wholeUpload(kept.url, newcomer, {
        bytes: small,
        from: '127.0.0.79',
        filename: 'small.mp4',
      });
      const ms = Date.now() - started;
      const answers = await Promise.all(
        held.map(({ upload }) =>
          Promise.race([upload.answer(), sleep(500).then(() => (upload.closed() ? 'closed' : 'going on'))]),
        ),
      );
      return { done, ms, answers };
    } finally {
      for (const { upload, stop } of held) {
        stop();
        upload.destroy();
      }
    }
  }

  it('one paying account holding both slots at pace gives one to a payer holding none (the eighth review)', async () => {
    const holder = await newAccount(kept, 10);
    const newcomer = await newAccount(kept, 10);
    const { done, ms, answers } = await bothSlotsHeld(
      [
        [holder.key, '127.0.0.74'],
        [holder.key, '127.0.0.75'],
      ],
      newcomer.key,
    );
    expect(done?.status, done?.body).toBe(200);
    expect(ms).toBeLessThan(10_000);
    // Its youngest transfer gave way, told the service is busy; the older one goes on.
    expect(answers).toEqual(['going on', BUSY]);
    expect((await showAccount(kept, holder.email)).balance).toBe(10);
    expect((await showAccount(kept, newcomer.email)).balance).toBe(9);
  }, 40_000);

  it('a paying account whose uploads came to nothing for a minute of slot time gives way at any pace; an honest one does not', async () => {
    const junk = await newAccount(kept, 10);
    const honest = await newAccount(kept, 10);
    const newcomer = await newAccount(kept, 10);
    // One slot each, at pace: a newcomer is refused. (Both uploads are then abandoned: a few seconds
    // of slot time each, an honest mistake's worth, which marks nobody.)
    const before = await bothSlotsHeld(
      [
        [junk.key, '127.0.0.74'],
        [honest.key, '127.0.0.75'],
      ],
      newcomer.key,
    );
    expect(before.done).toEqual(BUSY);
    expect(before.answers).toEqual(['going on', 'going on']);
    // A file that is no video, sent at once: 422, nothing charged, milliseconds of slot time.
    await waitFor(() => keptWork().length === 0, 'the abandoned uploads to be deleted');
    const bytes = Buffer.alloc(256 * 1024, 0x2a);
    const refused = await wholeUpload(kept.url, junk.key, {
      bytes,
      from: '127.0.0.74',
      filename: 'junk.mp4',
    });
    expect(refused).toEqual({ status: 422, body: '{"error":"unreadable_video"}' });
    // Then the junk account holds both slots for over half a minute and leaves without a word (never
    // answered, as the ninth review's attacker did): over a minute of slot time that came to nothing.
    const junkHolds = [await streaming(junk.key, '127.0.0.74'), await streaming(junk.key, '127.0.0.76')];
    await sleep(MARK_MS / 2 + 1000);
    for (const { upload, stop } of junkHolds) {
      stop();
      upload.destroy();
    }
    const after = await bothSlotsHeld(
      [
        [junk.key, '127.0.0.74'],
        [honest.key, '127.0.0.75'],
      ],
      newcomer.key,
    );
    expect(after.done?.status, after.done?.body).toBe(200);
    expect(after.ms).toBeLessThan(10_000);
    expect(after.answers).toEqual([BUSY, 'going on']);
    expect((await showAccount(kept, junk.email)).balance).toBe(10);
    expect((await showAccount(kept, newcomer.email)).balance).toBe(9);
  }, 60_000);

  it("a fresh account's junk upload at pace gives way once it has held its slot a minute; one backed by a paid job does not (the tenth and eleventh reviews)", async () => {
    await waitFor(() => keptWork().length === 0, 'the earlier uploads to be deleted');
    const backed = await newAccount(kept, 10);
    const fresh = await newAccount(kept, 10);
    const newcomer = await newAccount(kept, 10);
    // A real video, uploaded at once: a job of one credit, which backs a (scaled) minute of slot.
    const real = await wholeUpload(kept.url, backed.key, { bytes: small, from: '127.0.0.81' });
    expect(real?.status, real?.body).toBe(200);
    // Both accounts stream at pace, one slot each. Within the minute, nobody gives way.
    const holds = [await streaming(backed.key, '127.0.0.82'), await streaming(fresh.key, '127.0.0.83')];
    try {
      await sleep(3000);
      expect(await wholeUpload(kept.url, newcomer.key, { bytes: small, from: '127.0.0.84' })).toEqual(BUSY);
      // Past it, the fresh account's open transfer gives way (counted only at its end, it held its slot
      // to the upload deadline); the backed account's goes on.
      await sleep(MARK_MS - 2000);
      const done = await wholeUpload(kept.url, newcomer.key, { bytes: small, from: '127.0.0.84' });
      expect(done?.status, done?.body).toBe(200);
      const gaveWay = holds.map(({ upload }) =>
        Promise.race([upload.answer(), sleep(1000).then(() => 'going on')]),
      );
      expect(await Promise.all(gaveWay)).toEqual(['going on', BUSY]);
    } finally {
      for (const { upload, stop } of holds) {
        stop();
        upload.destroy();
      }
    }
    expect((await showAccount(kept, backed.email)).balance).toBe(9);
    expect((await showAccount(kept, fresh.email)).balance).toBe(10);
    expect((await showAccount(kept, newcomer.email)).balance).toBe(9);
  }, 60_000);
});
