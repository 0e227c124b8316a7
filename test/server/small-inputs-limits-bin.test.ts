/**
 * DESIGN §5a "Small inputs stay small", the sentences app.test.ts checks through `inject`, black-box
 * on the real bin (everything on loopback):
 * - the remote tool (`POST /mcp`, the SDK's client): each field it reads over 2048 characters is an
 *   error result naming it, the value never echoed (result or log); one of 2048 is not refused for
 *   its length and is quoted by 64 characters at most; a field the tool ignores stays ignored;
 * - a zoom from a key that could not pay is `402` before it takes a queue place: refused so while
 *   the one place is held (where a zoom that could pay gets `429 busy`), balance and ledger unchanged;
 * - a Stripe event is accepted only within 300 s of its signed timestamp, past or future: 301 s
 *   either way is `400` and credits nothing, 290 s either way credits once.
 * The last two on SQLite and on PostgreSQL + S3 (the balance, the ledger and the purchase live there);
 * the first does not touch the database or an engine, so it runs once.
 */
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDatabase } from '../../src/server/db/open.js';
import { BACKENDS, type BackendName } from '../helpers/databases.js';
import { plainClip } from '../helpers/fixtures.js';
import {
  newAccount,
  removeServerDirs,
  showAccount,
  startServer,
  type TestServer,
  videoForm,
  workerPid,
} from '../helpers/server.js';
import { scaledOutServer } from '../helpers/server-database.js';
import {
  type StripeDouble,
  sessionEvent,
  startStripeDouble,
  stripeSignature,
} from '../helpers/stripe-double.js';
import { visitor } from '../helpers/visitor.js';

afterAll(removeServerDirs);

const WEBHOOK_SECRET = 'whsec_small_inputs_bin';
const BAD_SIGNATURE = '{"error":"bad_signature"}';
const RECEIVED = '{"received":true}';

/** The Stripe API test double: Checkout Sessions. */
let stripe: StripeDouble;
/**
 * What each server is started with. The double's address is added before any server starts (this
 * file's beforeAll runs before a suite's; scaledOutServer reads `env` only then).
 */
const env: Record<string, string> = {
  // One queue place in all, so one held job fills the queue.
  VIDSHEET_QUEUE_LENGTH: '0',
  // No free allowance: a balance of 0 is below the cheapest price, whatever the day.
  VIDSHEET_ALLOWANCE_FLOOR: '0',
  VIDSHEET_STRIPE_SECRET_KEY: 'sk_test_small_inputs_bin',
  VIDSHEET_STRIPE_WEBHOOK_SECRET: WEBHOOK_SECRET,
};
let clip: Buffer;

beforeAll(async () => {
  stripe = await startStripeDouble();
  env.VIDSHEET_STRIPE_API_URL = stripe.url;
  clip = readFileSync(await plainClip(3));
}, 300_000);

afterAll(() => stripe?.close());

/** Inside a suite: one real server on `backend` (PostgreSQL means PostgreSQL + S3), started with `env`. */
function serverOn(backend: BackendName): { server: TestServer } {
  if (backend === 'postgres') return scaledOutServer(env);
  const held = {} as { server: TestServer };
  beforeAll(async () => {
    held.server = await startServer(env);
  }, 120_000);
  afterAll(async () => {
    await held.server?.stop();
  });
  return held;
}

/** An account's ledger entries, read from the server's own database. */
async function ledgerOf(server: TestServer, email: string) {
  const db = await openDatabase({ dataDir: server.dataDir, databaseUrl: server.env.VIDSHEET_DATABASE_URL });
  try {
    return await db
      .selectFrom('ledger')
      .innerJoin('accounts', 'accounts.id', 'ledger.account_id')
      .select(['ledger.kind', 'ledger.amount', 'ledger.balance_after', 'ledger.idempotency_key'])
      .where('accounts.email', '=', email)
      .orderBy('ledger.id')
      .execute();
  } finally {
    await db.destroy();
  }
}

describe('the remote tool: small inputs stay small (SQLite)', () => {
  const held = serverOn('sqlite');
  let client: Client;
  beforeAll(async () => {
    client = new Client({ name: 'vidsheet-test', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${held.server.url}/mcp`)));
  });
  afterAll(() => client?.close());

  /** Loopback and not in VIDSHEET_FETCH_ALLOW: refused before any connection is made. */
  const url = (length = 40) => {
    const head = 'http://127.0.0.1:1/';
    return `${head}${'v'.repeat(length - head.length - 4)}.mp4`;
  };
  async function call(args: Record<string, unknown>, meta?: Record<string, unknown>) {
    const result = (await client.callTool({
      name: 'vidsheet_video',
      arguments: args,
      ...(meta ? { _meta: meta } : {}),
    })) as { isError?: boolean; content: Array<{ type: string; text?: string }> };
    expect(result.isError).toBe(true);
    expect(result.content.map((c) => c.type)).toEqual(['text']);
    return result.content[0]?.text ?? '';
  }
  /** Neither `text` nor anything the server wrote up to now holds 65 of `char` in a row. */
  const expectAtMost64 = async (text: string, char: string) => {
    const run = new RegExp(`${char}{65}`);
    expect(text).not.toMatch(run);
    // The server's lines come through a pipe, maybe after the answer: a request made now is logged
    // after every line of the call before it.
    const mark = `/healthz?mark=${randomBytes(6).toString('hex')}`;
    expect((await fetch(`${held.server.url}${mark}`)).status).toBe(200);
    await held.server.waitForLog((l) => (l.req as { url?: string } | undefined)?.url === mark);
    expect(held.server.output()).not.toMatch(run);
  };

  const REFUSED =
    'could not fetch the video: the address is private or reserved; only public addresses can be fetched';
  /** The MCP SDK's own answer to a density outside the enum: it names the field, quotes nothing. */
  const NOT_A_DENSITY = /^MCP error -32602: Input validation error: .*: Invalid option: .* at density$/;
  const unparseable = (field: string, char: string) =>
    `could not parse ${field} "${char.repeat(64)}…" — use seconds (90) or a timecode (1:30, 1:07.3)`;

  it.each([
    ['video_url', 'v', { video_url: url(2049) }, undefined],
    ['start', '0', { video_url: url(), start: `1${'0'.repeat(2048)}` }, undefined],
    ['end', 'e', { video_url: url(), end: 'e'.repeat(2049) }, undefined],
    ['subject id', 's', { video_url: url() }, { 'openai/subject': 's'.repeat(100_000) }],
  ])('an over-long %s is an error result naming it, never echoed', async (field, char, args, meta) => {
    const text = await call(args, meta);
    expect(text).toBe(`${field} is longer than 2048 characters`);
    await expectAtMost64(text, char);
  });

  it('an over-long density is an error result naming it, never echoed', async () => {
    // Not one of the four grids: the SDK's input validation answers before the tool's length check.
    const text = await call({ video_url: url(), density: 'd'.repeat(100_000) });
    expect(text).toMatch(NOT_A_DENSITY);
    await expectAtMost64(text, 'd');
  });

  it.each([
    ['video_url', 'v', { video_url: url(2048) }, undefined, REFUSED],
    ['start', 'y', { video_url: url(), start: 'y'.repeat(2048) }, undefined, unparseable('start', 'y')],
    ['end', 'e', { video_url: url(), end: 'e'.repeat(2048) }, undefined, unparseable('end', 'e')],
    ['density', 'd', { video_url: url(), density: 'd'.repeat(2048) }, undefined, NOT_A_DENSITY],
    ['subject id', 's', { video_url: url() }, { 'openai/subject': 's'.repeat(2048) }, REFUSED],
    // The remote tool has no `response`: however long, it is ignored (the call goes on to the fetch).
    ['response (ignored)', 'r', { video_url: url(), response: 'r'.repeat(100_000) }, undefined, REFUSED],
  ])(
    'a %s of 2048 characters is not refused for its length, and quoted by 64 characters at most',
    async (_field, char, args, meta, expected) => {
      const text = await call(args, meta);
      if (typeof expected === 'string') expect(text).toBe(expected);
      else expect(text).toMatch(expected);
      await expectAtMost64(text, char);
    },
  );
});

describe.each(BACKENDS)('a zoom that cannot pay, and Stripe timestamps, on %s', (backend) => {
  const held = serverOn(backend);
  const auth = (key: string) => ({ authorization: `Bearer ${key}` });

  async function keepVideo(key: string): Promise<string> {
    const res = await fetch(`${held.server.url}/v1/videos`, {
      method: 'POST',
      headers: auth(key),
      body: videoForm({ bytes: clip, filename: 'clip.mp4' }),
    });
    const text = await res.text();
    expect(res.status, text).toBe(201);
    return (JSON.parse(text) as { video_id: string }).video_id;
  }
  async function zoom(key: string, videoId: string) {
    const res = await fetch(`${held.server.url}/v1/videos/${videoId}/sheets`, {
      method: 'POST',
      headers: { ...auth(key), 'content-type': 'application/json' },
      body: '{}',
    });
    return { status: res.status, body: await res.text() };
  }

  it('402 insufficient_credits before a queue place: a full queue does not hide it, nothing changes', async () => {
    const { server } = held;
    // An account that could pay once: it keeps a video and spends its one credit on a zoom.
    const broke = await newAccount(server, 1);
    const brokeVideo = await keepVideo(broke.key);
    const spent = await zoom(broke.key, brokeVideo);
    expect(spent.status, spent.body).toBe(200);
    const payer = await newAccount(server, 20);
    const payerVideo = await keepVideo(payer.key);
    const before = {
      shown: await showAccount(server, broke.email),
      ledger: await ledgerOf(server, broke.email),
    };
    expect(before.shown.balance).toBe(0);

    // The one queue place is held by a zoom whose job waits: the worker is stopped.
    await server.waitForLog((l) => l.msg === 'job worker ready');
    const worker = workerPid(server);
    process.kill(-worker, 'SIGSTOP');
    let holder: Promise<{ status: number; body: string }> | undefined;
    try {
      holder = zoom(payer.key, payerVideo);
      await server.waitForLog(
        (l) => l.msg === 'zoom on a kept video' && l.videoId === payerVideo.slice(0, 8),
        60_000,
      );
      // The queue is full: a zoom that could pay is refused for it.
      expect(await zoom(payer.key, payerVideo)).toEqual({ status: 429, body: '{"error":"busy"}' });
      // One that could not pay is refused for that first.
      expect(await zoom(broke.key, brokeVideo)).toEqual({
        status: 402,
        body: '{"error":"insufficient_credits"}',
      });
      expect(await showAccount(server, broke.email)).toEqual(before.shown);
      expect(await ledgerOf(server, broke.email)).toEqual(before.ledger);
    } finally {
      process.kill(-worker, 'SIGCONT');
    }
    const done = await holder;
    expect(done.status, done.body).toBe(200);
    expect(await showAccount(server, broke.email)).toEqual(before.shown);
  });

  it('a signed event 301 s old or 301 s ahead is 400 and credits nothing; 290 s either way credits once', async () => {
    const { server } = held;
    // A buyer signed in on the keys page (no SMTP: the code is in the log), two Checkout Sessions.
    const email = `buyer-${randomBytes(6).toString('hex')}@example.com`;
    const page = visitor();
    await page.post(server.url, '/keys/code', { _csrf: (await page.get(server.url)).csrf, email });
    const logged = await server.waitForLog((l) => l.email === email && typeof l.code === 'string');
    const signedIn = await page.post(server.url, '/keys/sign-in', {
      _csrf: (await page.get(server.url)).csrf,
      email,
      code: String(logged.code),
    });
    expect(signedIn.status).toBe(303);
    const checkout = async () => {
      const buy = await page.post(server.url, '/keys/buy', {
        _csrf: (await page.get(server.url)).csrf,
        pack: 'p30',
      });
      expect(buy.status).toBe(303);
      return (buy.location ?? '').slice((buy.location ?? '').lastIndexOf('/') + 1);
    };
    const [first, second] = [await checkout(), await checkout()];
    expect(first).toMatch(/^cs_test_/);

    /** Delivers `checkout.session.completed` for `session`, signed `offsetS` from now (seconds). */
    const deliver = async (session: string, offsetS: number) => {
      const payload = sessionEvent({ id: `evt_${session}`, sessionId: session });
      // Whole seconds rounded away from now: 301 s means at least 301 s (ahead, until a second has
      // passed: the delivery follows at once, on loopback).
      const now = Date.now() / 1000;
      const timestamp = offsetS < 0 ? Math.floor(now) + offsetS : Math.ceil(now) + offsetS;
      const header = stripeSignature(payload, WEBHOOK_SECRET, timestamp);
      const res = await fetch(`${server.url}/stripe/webhook`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'stripe-signature': header },
        body: payload,
      });
      return { status: res.status, body: await res.text() };
    };
    const books = async () => {
      const { balance, purchased } = await showAccount(server, email);
      return { balance, purchased, ledger: await ledgerOf(server, email) };
    };

    const empty = await books();
    expect(empty).toEqual({ balance: 0, purchased: false, ledger: [] });
    for (const session of [first, second]) {
      expect(await deliver(session, -301)).toEqual({ status: 400, body: BAD_SIGNATURE });
      expect(await deliver(session, 301)).toEqual({ status: 400, body: BAD_SIGNATURE });
    }
    expect(await books()).toEqual(empty);

    const purchase = (session: string, after: number) => ({
      kind: 'purchase',
      amount: 30,
      balance_after: after,
      idempotency_key: `stripe:${session}`,
    });
    expect(await deliver(first, -290)).toEqual({ status: 200, body: RECEIVED });
    expect(await books()).toEqual({ balance: 30, purchased: true, ledger: [purchase(first, 30)] });
    expect(await deliver(second, 290)).toEqual({ status: 200, body: RECEIVED });
    const credited = { balance: 60, purchased: true, ledger: [purchase(first, 30), purchase(second, 60)] };
    expect(await books()).toEqual(credited);
    // Once: the same events again, inside the window, change nothing.
    expect(await deliver(first, 290)).toEqual({ status: 200, body: RECEIVED });
    expect(await deliver(second, -290)).toEqual({ status: 200, body: RECEIVED });
    expect(await books()).toEqual(credited);
  });
});
