/**
 * DESIGN §5a "One at a time for free actors", in process (`inject`, SQLite, accounts made through the
 * ledger, a fake hosted job that runs until the test lets it end):
 * - an account that lives on the allowance (never a purchase, never an operator grant) has at most
 *   one job waiting or running: another upload or zoom is `429 busy` at once;
 * - an anonymous remote caller has at most one per address and one per subject id: another call gets
 *   the retry message at once, before anything is fetched;
 * - paying accounts (a purchase, or an operator grant) are unaffected;
 * - a remote fetch has its whole deadline on the body (not only the headers), and an anonymous fetch
 *   cut by it counts as a job of the day (it is not given back), where a fetch the server refused does not.
 */
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { hostedErrors } from '../../src/core/errors.js';
import { Admission } from '../../src/server/hosted/admission.js';
import type { HostedJobRequest, HostedJobs } from '../../src/server/hosted/jobs.js';
import { downloadVideo, FetchError } from '../../src/server/remote/fetch/download.js';
import {
  type BuildOptions,
  type InProcessApp,
  inProcessApps,
  mcpToolCall,
  multipartUpload,
  toolTexts,
} from '../helpers/app.js';

const apps = inProcessApps('sqlite');
const BUSY = '{"error":"busy"}';
const RETRY = hostedErrors.busy().message;

/** Every hosted job asked for in this test: each runs until `endAll()`, then fails. */
const runs: HostedJobRequest[] = [];
let waiting: Array<() => void> = [];
const endAll = () => {
  for (const end of waiting.splice(0)) end();
};
const run: HostedJobs['run'] = (request) => {
  runs.push(request);
  return new Promise((_resolve, reject) => waiting.push(() => reject(new Error('the test ended the job'))));
};
afterEach(() => {
  endAll();
  waiting = [];
  runs.length = 0;
});
const build = (options: BuildOptions = {}) => apps.build({ run, ...options });

/** A new account with a key, living on the allowance or paying (a purchase, or an operator grant). */
async function account(app: InProcessApp, how: 'allowance' | 'purchased' | 'granted') {
  const money = how === 'purchased' ? { purchase: 30 } : how === 'granted' ? { grant: 30 } : {};
  return app.account(`f-${randomUUID()}@example.com`, money);
}

const started = (n: number) => expect.poll(() => runs.length, { timeout: 5000, interval: 10 }).toBe(n);

const uploadAs = (key: string) => ({
  method: 'POST' as const,
  url: '/v1/vidsheet',
  ...multipartUpload(),
  headers: { ...multipartUpload().headers, authorization: `Bearer ${key}` },
});

describe('an account on the allowance: one job at a time', { timeout: 15_000 }, () => {
  /** An app, and an account on the allowance whose first upload's job is running. */
  async function oneRunning() {
    const built = await build();
    const free = await account(built, 'allowance');
    const first = built.app.inject(uploadAs(free.key));
    await started(1);
    return { server: built.app, free, first };
  }

  it('a second upload while the first job runs is 429 busy at once; after it, the next is let in', async () => {
    const { server, free, first } = await oneRunning();
    const second = await server.inject(uploadAs(free.key));
    expect([second.statusCode, second.body]).toEqual([429, BUSY]);
    expect(runs).toHaveLength(1);
    endAll();
    expect((await first).statusCode).toBe(500);
    const third = server.inject(uploadAs(free.key));
    await started(2);
    endAll();
    expect((await third).statusCode).toBe(500);
  });

  it('a zoom while an upload job runs is 429 busy before its body', async () => {
    const { server, free, first } = await oneRunning();
    const zoom = await server.inject({
      method: 'POST',
      url: `/v1/videos/${'A'.repeat(22)}/sheets`,
      headers: { authorization: `Bearer ${free.key}`, 'content-type': 'application/json' },
      payload: '{}',
    });
    expect([zoom.statusCode, zoom.body]).toEqual([429, BUSY]);
    endAll();
    await first;
  });

  it.each(['purchased', 'granted'] as const)('an account that %s credits runs two at once', async (how) => {
    const built = await build();
    const server = built.app;
    const paying = await account(built, how);
    const jobs = [server.inject(uploadAs(paying.key)), server.inject(uploadAs(paying.key))];
    await started(2);
    endAll();
    for (const res of await Promise.all(jobs)) expect(res.statusCode).toBe(500);
  });
});

/** A loopback HTTP server for the fetcher: `handle` answers each request. */
async function origin(handle: (res: ServerResponse) => void): Promise<{ server: Server; url: string }> {
  const server = createServer((_req, res) => handle(res));
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  servers.push(server);
  const { port } = server.address() as AddressInfo;
  return { server, url: `http://127.0.0.1:${port}/clip.mp4` };
}
const servers: Server[] = [];
afterEach(() => {
  for (const server of servers.splice(0)) server.close();
  for (const stop of trickles.splice(0)) stop();
});

/** A body that never ends, 64 KiB every 100 ms: far faster than the stall rule asks, never stalled. */
const trickles: Array<() => void> = [];
function trickle(res: ServerResponse) {
  res.writeHead(200, { 'content-type': 'video/mp4' });
  const timer = setInterval(() => res.write(Buffer.alloc(64 * 1024, 0x2a)), 100);
  const stop = () => clearInterval(timer);
  res.on('close', stop);
  trickles.push(stop);
}

/** A whole (if unreadable) 1 KiB video. */
function small(res: ServerResponse) {
  res.writeHead(200, { 'content-type': 'video/mp4' });
  res.end(Buffer.alloc(1024, 0x2a));
}

/**
 * An app with two transfer slots and room in the queue, an origin whose body never ends (far above
 * the takeover bar: nothing may overtake it) and one that sends a small file; calls to `/mcp`
 * anonymous or with a new granted (paying) account's key, from `address`; and a wait for `n`
 * endless fetches under way.
 */
async function twoSlots() {
  const endless = await origin(trickle);
  const video = await origin(small);
  const built = await build({
    admission: new Admission(5),
    env: {
      VIDSHEET_MAX_TRANSFERS: '2',
      VIDSHEET_FETCH_ALLOW: `${new URL(endless.url).host},${new URL(video.url).host}`,
    },
  });
  const anonymous = (url: string, remoteAddress: string) =>
    built.app.inject({ ...mcpToolCall({ video_url: url }), remoteAddress });
  const paying = async (url: string, remoteAddress: string) => {
    const call = mcpToolCall({ video_url: url });
    const { key } = await account(built, 'granted');
    return built.app.inject({
      ...call,
      headers: { ...call.headers, authorization: `Bearer ${key}` },
      remoteAddress,
    });
  };
  const fetching = (n: number) => expect.poll(() => trickles.length, { timeout: 5000, interval: 10 }).toBe(n);
  const end = () => {
    for (const stop of trickles.splice(0)) stop();
    endless.server.closeAllConnections();
  };
  return { built, endless: endless.url, video: video.url, anonymous, paying, fetching, end };
}

describe('the anonymous remote lane: one job at a time per address and per subject', {
  timeout: 15_000,
}, () => {
  it('a second call from the address, or with the subject, gets the retry message; others are let in', async () => {
    const video = await origin(small);
    const built = await build({
      admission: new Admission(4),
      env: { VIDSHEET_FETCH_ALLOW: new URL(video.url).host },
    });
    const server = built.app;
    const subject = { 'openai/subject': `s-${randomUUID()}` };
    const first = server.inject({
      ...mcpToolCall({ video_url: video.url }, subject),
      remoteAddress: '127.0.0.11',
    });
    await started(1);
    const sameAddress = await server.inject({
      ...mcpToolCall({ video_url: video.url }),
      remoteAddress: '127.0.0.11',
    });
    expect(toolTexts(sameAddress)).toEqual([RETRY]);
    expect(RETRY).toContain('retry');
    const sameSubject = await server.inject({
      ...mcpToolCall({ video_url: video.url }, subject),
      remoteAddress: '127.0.0.12',
    });
    expect(toolTexts(sameSubject)).toEqual([RETRY]);
    expect(runs).toHaveLength(1);
    // Another address with another subject, and a paying key from the same address, are let in.
    const other = server.inject({
      ...mcpToolCall({ video_url: video.url }, { 'openai/subject': `s-${randomUUID()}` }),
      remoteAddress: '127.0.0.13',
    });
    const paying = await account(built, 'purchased');
    const keyed = mcpToolCall({ video_url: video.url });
    const withKey = server.inject({
      ...keyed,
      headers: { ...keyed.headers, authorization: `Bearer ${paying.key}` },
      remoteAddress: '127.0.0.11',
    });
    await started(3);
    endAll();
    await Promise.all([first, other, withKey]);
  });
});

describe('free actors never take the last queue place: one stays for paying jobs', {
  timeout: 15_000,
}, () => {
  it('free jobs from many addresses and accounts fill all but one place; a paying job gets the last', async () => {
    const video = await origin(small);
    const built = await build({
      admission: new Admission(3),
      env: { VIDSHEET_FETCH_ALLOW: new URL(video.url).host },
    });
    const server = built.app;
    const anonymous = (address: string) =>
      server.inject({ ...mcpToolCall({ video_url: video.url }), remoteAddress: address });
    const held = [anonymous('127.0.0.21'), anonymous('127.0.0.22')];
    await started(2);
    // Each of these is a free actor with no job yet: only the place is missing.
    expect(toolTexts(await anonymous('127.0.0.23'))).toEqual([RETRY]);
    const onAllowance = await account(built, 'allowance');
    const upload = await server.inject(uploadAs(onAllowance.key));
    expect([upload.statusCode, upload.body]).toEqual([429, BUSY]);
    expect(runs).toHaveLength(2);
    const paying = await account(built, 'granted');
    const last = server.inject(uploadAs(paying.key));
    await started(3);
    // Paying jobs count only against each other (the ninth review): two more get in, then the
    // queue is full for payers too.
    const more = [await account(built, 'purchased'), await account(built, 'granted')].map((a) =>
      server.inject(uploadAs(a.key)),
    );
    await started(5);
    const another = await account(built, 'purchased');
    const full = await server.inject(uploadAs(another.key));
    expect([full.statusCode, full.body]).toEqual([429, BUSY]);
    // And free actors are still refused: every place is taken.
    const lateFree = await account(built, 'allowance');
    const refused = await server.inject(uploadAs(lateFree.key));
    expect([refused.statusCode, refused.body]).toEqual([429, BUSY]);
    endAll();
    await Promise.all([...held, last, ...more]);
  });

  it('free transfers never hold the last transfer slot either', async () => {
    const slots = await twoSlots();
    const holding = slots.anonymous(slots.endless, '127.0.0.31');
    await slots.fetching(1);
    expect(toolTexts(await slots.anonymous(slots.video, '127.0.0.32'))).toEqual([RETRY]);
    const withKey = slots.paying(slots.video, '127.0.0.33');
    await started(1);
    endAll();
    await withKey;
    slots.end();
    await holding;
  });

  it('a paying fetch takes the slot of a free fetch that keeps pace: its caller is told to retry and keeps its job', async () => {
    const slots = await twoSlots();
    // A free fetch and a paying one, both far above the takeover bar, hold both slots.
    const free = slots.anonymous(slots.endless, '127.0.0.41');
    await slots.fetching(1);
    const paying = slots.paying(slots.endless, '127.0.0.42');
    await slots.fetching(2);
    // A second paying fetch: the free one gives way, and is told the service is busy, not that it stalled.
    const newcomer = slots.paying(slots.video, '127.0.0.43');
    expect(toolTexts(await free)).toEqual([RETRY]);
    await started(1);
    // Nothing was the free caller's fault: the day's job is given back.
    const used = await slots.built.db
      .selectFrom('anonymous_usage')
      .select('jobs')
      .where('counter', '=', 'address:127.0.0.41')
      .execute();
    expect(used.reduce((sum, row) => sum + row.jobs, 0)).toBe(0);
    endAll();
    await newcomer;
    slots.end();
    await paying;
  });

  it('a queue of one place takes a free job, and a paying job still gets in beside it', async () => {
    const built = await build({ admission: new Admission(1) });
    const onAllowance = await account(built, 'allowance');
    const upload = built.app.inject(uploadAs(onAllowance.key));
    await started(1);
    // The ninth review: the free job held the one place for its whole run and every payer got 429.
    const paying = await account(built, 'purchased');
    const payingUpload = built.app.inject(uploadAs(paying.key));
    await started(2);
    const secondPayer = await account(built, 'granted');
    const refused = await built.app.inject(uploadAs(secondPayer.key));
    expect([refused.statusCode, refused.body]).toEqual([429, BUSY]);
    endAll();
    expect((await upload).statusCode).toBe(500);
    expect((await payingUpload).statusCode).toBe(500);
  });
});

describe('a remote fetch has its whole deadline on the body (DESIGN §5a)', { timeout: 15_000 }, () => {
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'vidsheet-fetch-deadline-'));
    return () => rmSync(dir, { recursive: true, force: true });
  });

  it('a body that keeps coming, never stalled, is cut at the deadline', async () => {
    const video = await origin(trickle);
    const begun = Date.now();
    const failed = await downloadVideo(video.url, join(dir, `d-${randomUUID()}`), {
      maxBytes: 300 * 1024 * 1024,
      allow: [new URL(video.url).host],
      timeoutMs: 800,
      idleTimeoutMs: 5000,
    }).catch((error: unknown) => error);
    expect(failed).toBeInstanceOf(FetchError);
    expect((failed as FetchError).reason).toBe('timeout');
    expect(Date.now() - begun).toBeLessThan(3000);
  });

  it('an anonymous fetch cut by the deadline uses the day’s job; a refused one gives it back', async () => {
    const slow = await origin(trickle);
    const missing = await origin((res) => {
      res.writeHead(404);
      res.end();
    });
    const built = await build({
      env: {
        VIDSHEET_FETCH_ALLOW: `${new URL(slow.url).host},${new URL(missing.url).host}`,
        VIDSHEET_FETCH_TIMEOUT_S: '1',
      },
    });
    const server = built.app;
    const used = async (address: string) => {
      const rows = await built.db
        .selectFrom('anonymous_usage')
        .select(['counter', 'jobs'])
        .where('counter', '=', `address:${address}`)
        .execute();
      return rows.reduce((sum, row) => sum + row.jobs, 0);
    };
    const refused = await server.inject({
      ...mcpToolCall({ video_url: missing.url }),
      remoteAddress: '127.0.0.21',
    });
    expect(toolTexts(refused)).toEqual(['could not fetch the video: the server answered 404']);
    expect(await used('127.0.0.21')).toBe(0);
    const cut = await server.inject({ ...mcpToolCall({ video_url: slow.url }), remoteAddress: '127.0.0.22' });
    expect(toolTexts(cut)).toEqual(['could not fetch the video: the download took too long']);
    expect(await used('127.0.0.22')).toBe(1);
    expect(runs).toEqual([]);
  });
});
