/**
 * DESIGN §5 transfers and queue places, §5a "who may queue", against a real server on loopback with
 * real slow clients (raw sockets from 127.0.0.x that send part of an upload and wait):
 * - a queue place is taken when the video is complete, so slow uploads hold none;
 * - transfers are bounded per account, per client address and per instance: `429 busy` before the
 *   body is read;
 * - a key that cannot pay the cheapest job gets `402` before the body and takes no slot;
 * - a video that completes when the queue is full is refused then, its file deleted.
 * Each server suite runs on SQLite and on PostgreSQL (charges, refusals and balances are the ledger's).
 */
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import net from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { BEHIND_RULE, behindBy, STALL_RULE, watchTransfer } from '../../src/server/hosted/stall.js';
import { STANDING_MEMORY_MS, Transfers, UNBACKED_MARK_MS } from '../../src/server/hosted/transfers.js';
import { BACKENDS } from '../helpers/databases.js';
import { plainClip } from '../helpers/fixtures.js';
import {
  newAccount,
  removeServerDirs,
  showAccount,
  startServer,
  type TestServer,
} from '../helpers/server.js';
import { serverDatabase } from '../helpers/server-database.js';
import { BUSY, type SlowUpload, STALLED, slowUpload, wholeUpload } from '../helpers/slow-client.js';
import { waitFor } from '../helpers/wait.js';

let server: TestServer;
let small: Buffer;

beforeAll(async () => {
  small = readFileSync(await plainClip(5));
});

afterAll(removeServerDirs);

const work = () => server.leftovers().filter((f) => f.startsWith('work/'));

/**
 * A long upload that the server is receiving (its work directory exists). It keeps sending 64 KiB every
 * half second (128 KiB/s, four times the takeover bar of stall.ts `BEHIND_RULE`, for minutes before its
 * 64 MiB are sent), so no newcomer may take its slot (transfers.ts): the caps below are about transfers
 * that are progressing.
 */
async function held(key: string, from: string): Promise<SlowUpload> {
  const before = work().length;
  const upload = await slowUpload(server.url, key, { from, first: 64 * 1024, size: 64 * 1024 * 1024 });
  const trickle = setInterval(() => upload.send(Buffer.alloc(64 * 1024, 0x2a)), 500);
  await waitFor(() => work().length > before, `the slow upload from ${from} to be received`);
  return {
    ...upload,
    destroy: () => {
      clearInterval(trickle);
      upload.destroy();
    },
  };
}

/** A refusal that arrives while the body is still unsent: nothing of it was needed. */
async function refusedUnread(key: string, from: string) {
  const upload = await slowUpload(server.url, key, { from, first: 1024 });
  const answer = await upload.answer();
  upload.destroy();
  return answer;
}

/** A whole upload of the 5 s clip through the slow client (so it can come from any loopback address). */
const whole = (key: string, from: string) =>
  wholeUpload(server.url, key, { bytes: small, from, filename: 'small.mp4' });

describe.each(BACKENDS)('transfers and queue places (DESIGN §5) on %s', (backend) => {
  const database = serverDatabase(backend);
  beforeAll(async () => {
    server = await startServer({
      VIDSHEET_QUEUE_LENGTH: '0',
      VIDSHEET_MAX_TRANSFERS: '4',
      VIDSHEET_TRANSFERS_PER_CLIENT: '2',
      // No free allowance: a zero balance cannot pay, so "who may queue" is visible.
      VIDSHEET_ALLOWANCE_FLOOR: '0',
      ...(await database()),
    });
  }, 60_000);
  afterAll(async () => {
    await server?.stop();
  });

  it('402 before the body for a key that cannot pay the cheapest job; it takes no slot', async () => {
    const broke = await newAccount(server, 0);
    const paying = await newAccount(server, 5);
    // Five from the same address: with slots taken they would exceed every cap (2 per client, 4 in all).
    for (let i = 0; i < 5; i++) {
      expect(await refusedUnread(broke.key, '127.0.0.20')).toEqual({
        status: 402,
        body: '{"error":"insufficient_credits"}',
      });
    }
    expect(work()).toEqual([]);
    const done = await whole(paying.key, '127.0.0.20');
    expect(done?.status, done?.body).toBe(200);
    expect((await showAccount(server, paying.email)).balance).toBe(4);
    expect(await showAccount(server, broke.email)).toMatchObject({ balance: 0, usage: [] });
  });

  it('slow uploads hold no queue place; transfers are capped per account, per address, per instance', async () => {
    const a = await newAccount(server, 10);
    const b = await newAccount(server, 10);
    const c = await newAccount(server, 10);
    const open: SlowUpload[] = [];
    try {
      open.push(await held(a.key, '127.0.0.2'), await held(a.key, '127.0.0.3'));
      // Per account: A's third transfer, from a fresh address, is refused unread.
      expect(await refusedUnread(a.key, '127.0.0.4')).toEqual(BUSY);
      // The queue has one place in all (VIDSHEET_QUEUE_LENGTH=0), and two slow uploads hold none of it.
      const started = Date.now();
      const done = await whole(b.key, '127.0.0.2');
      expect(done?.status, done?.body).toBe(200);
      expect(JSON.parse(done?.body ?? '{}').credits_charged).toBe(1);
      expect(Date.now() - started).toBeLessThan(15_000);
      // Per address: 127.0.0.2 holds A's slot; C takes the second; a third from there is refused.
      open.push(await held(c.key, '127.0.0.2'));
      expect(await refusedUnread(b.key, '127.0.0.2')).toEqual(BUSY);
      // Per instance (4): a fourth from a fresh client fits, a fifth does not.
      open.push(await held(b.key, '127.0.0.5'));
      expect(await refusedUnread(c.key, '127.0.0.6')).toEqual(BUSY);
    } finally {
      for (const upload of open) upload.destroy();
    }
    await waitFor(() => work().length === 0, 'the abandoned uploads to be deleted');
    // Slots come back with the abandoned uploads, and nothing was charged for them.
    const after = await whole(c.key, '127.0.0.6');
    expect(after?.status, after?.body).toBe(200);
    expect((await showAccount(server, a.email)).balance).toBe(10);
    expect((await showAccount(server, a.email)).usage).toEqual([]);
    expect((await showAccount(server, b.email)).balance).toBe(9);
    expect((await showAccount(server, c.email)).balance).toBe(9);
  });

  it('a video that completes while the queue is full is refused then, its file deleted', async () => {
    const g = await newAccount(server, 10);
    const h = await newAccount(server, 10);
    const first = await slowUpload(server.url, g.key, {
      from: '127.0.0.7',
      size: small.length,
      fill: small,
      first: small.length - 10,
    });
    const second = await slowUpload(server.url, h.key, {
      from: '127.0.0.8',
      size: small.length,
      fill: small,
      first: small.length - 10,
    });
    await waitFor(() => work().length === 2, 'both uploads to be received');
    await sleep(200);
    // Both complete at once: the first takes the one place, the second finds none.
    first.finish();
    second.finish();
    const answers = await Promise.all([first.answer(), second.answer()]);
    first.destroy();
    second.destroy();
    const statuses = answers.map((answer) => answer?.status).sort();
    expect(statuses).toEqual([200, 429]);
    expect(answers.find((answer) => answer?.status === 429)?.body).toBe('{"error":"busy"}');
    await waitFor(() => work().length === 0, 'the refused video to be deleted');
    const balances = [
      (await showAccount(server, g.email)).balance,
      (await showAccount(server, h.email)).balance,
    ].sort((x, y) => x - y);
    expect(balances).toEqual([9, 10]);
  });
});

describe('Transfers (unit)', () => {
  it('counts IPv6 clients per /64 and IPv4-mapped ones as their IPv4 address', () => {
    const transfers = new Transfers(10, 2);
    const one = transfers.tryEnter({ address: '2001:db8:1:2::1' });
    const two = transfers.tryEnter({ address: '2001:db8:1:2:ffff::9' });
    expect(one && two).toBeTruthy();
    expect(transfers.tryEnter({ address: '2001:db8:1:2::77' })).toBeUndefined();
    expect(transfers.tryEnter({ address: '2001:db8:1:3::1' })).toBeDefined();
    expect(transfers.tryEnter({ address: '198.51.100.7' })).toBeDefined();
    expect(transfers.tryEnter({ address: '198.51.100.7' })).toBeDefined();
    expect(transfers.tryEnter({ address: '::ffff:198.51.100.7' })).toBeUndefined();
    one?.release();
    one?.release(); // idempotent
    expect(transfers.tryEnter({ address: '2001:db8:1:2::77' })).toBeDefined();
    expect(transfers.tryEnter({ address: '2001:db8:1:2::78' })).toBeUndefined();
  });

  it('counts an account across addresses, and the instance across clients', () => {
    const transfers = new Transfers(3, 2);
    expect(transfers.tryEnter({ accountId: 1, address: '127.0.0.1' })).toBeDefined();
    expect(transfers.tryEnter({ accountId: 1, address: '127.0.0.2' })).toBeDefined();
    expect(transfers.tryEnter({ accountId: 1, address: '127.0.0.3' })).toBeUndefined();
    expect(transfers.tryEnter({ accountId: 2, address: '127.0.0.3' })).toBeDefined();
    expect(transfers.tryEnter({ accountId: 3, address: '127.0.0.4' })).toBeUndefined();
    expect(transfers.size).toBe(3);
  });
});

describe('taking over the slot of the transfer furthest behind (unit, fake watches)', () => {
  it('with every slot taken, the newcomer overtakes the furthest behind; none behind: refused', () => {
    const transfers = new Transfers(2, 5);
    const lag = [0, 0];
    const overtaken: number[] = [];
    for (const i of [0, 1]) {
      transfers.tryEnter({ address: `127.0.0.${i + 1}` })?.watch({
        stop() {},
        behind: () => lag[i] ?? 0,
        overtake: () => overtaken.push(i),
        preempt: () => overtaken.push(-1),
      });
    }
    expect(transfers.tryEnter({ address: '127.0.0.9' })).toBeUndefined();
    lag[0] = 100;
    lag[1] = 300;
    expect(transfers.tryEnter({ address: '127.0.0.9' })).toBeDefined();
    expect(overtaken).toEqual([1]);
    expect(transfers.size).toBe(2);
    // Over its own per-client limit, a newcomer overtakes nobody.
    const tight = new Transfers(1, 1);
    tight
      .tryEnter({ address: '127.0.0.1' })
      ?.watch({ stop() {}, behind: () => 1e9, overtake: () => overtaken.push(9), preempt() {} });
    expect(tight.tryEnter({ address: '127.0.0.1' })).toBeUndefined();
    expect(overtaken).toEqual([1]);
  });

  it('free transfers never hold the last slot, and a free newcomer overtakes only a free transfer', () => {
    const transfers = new Transfers(3, 5);
    const lag = new Map<string, number>();
    const overtaken: string[] = [];
    const watchOf = (name: string) => ({
      stop() {},
      behind: () => lag.get(name) ?? 0,
      overtake: () => overtaken.push(name),
      preempt: () => overtaken.push(`${name} preempted`),
    });
    const enter = (name: string, free: boolean, address: string) =>
      transfers.tryEnter({ address, free })?.watch(watchOf(name));
    // Two free transfers, far above the takeover bar: the third slot stays for a paying one.
    enter('f1', true, '127.0.0.21');
    enter('f2', true, '127.0.0.22');
    expect(transfers.tryEnter({ address: '127.0.0.31', free: true })).toBeUndefined();
    enter('paid', false, '127.0.0.23');
    expect(transfers.size).toBe(3);
    // The paying transfer is the furthest behind: a free newcomer still may not take its slot.
    lag.set('paid', 1000);
    expect(transfers.tryEnter({ address: '127.0.0.32', free: true })).toBeUndefined();
    expect(overtaken).toEqual([]);
    // A free transfer behind: that one it may take.
    lag.set('f2', 10);
    transfers.tryEnter({ address: '127.0.0.33', free: true })?.watch(watchOf('f3'));
    expect(overtaken).toEqual(['f2']);
    // A paying newcomer: free transfers give way first, even at pace and with a paying one further
    // behind (preempted, not overtaken: they kept pace), the youngest first.
    expect(transfers.tryEnter({ address: '127.0.0.34' })?.watch(watchOf('paid2'))).toBeUndefined();
    expect(overtaken).toEqual(['f2', 'f3 preempted']);
    expect(transfers.tryEnter({ address: '127.0.0.35' })?.watch(watchOf('paid3'))).toBeUndefined();
    expect(overtaken).toEqual(['f2', 'f3 preempted', 'f1 preempted']);
    // No free transfer left: the paying one furthest behind gives way; none behind: refused.
    expect(transfers.tryEnter({ address: '127.0.0.36' })).toBeDefined();
    expect(overtaken).toEqual(['f2', 'f3 preempted', 'f1 preempted', 'paid']);
    expect(transfers.tryEnter({ address: '127.0.0.37' })).toBeUndefined();
    // Of two free transfers keeping pace, the youngest gives way: the least lost, and a free actor
    // that keeps coming back never outlasts a long upload that has been going steadily.
    const full = new Transfers(3, 5);
    full.tryEnter({ address: '127.0.0.41', free: true })?.watch(watchOf('old'));
    full.tryEnter({ address: '127.0.0.42', free: true })?.watch(watchOf('young'));
    full.tryEnter({ address: '127.0.0.43' })?.watch(watchOf('paying'));
    expect(full.size).toBe(3);
    expect(full.tryEnter({ address: '127.0.0.44' })).toBeDefined();
    expect(overtaken.at(-1)).toBe('young preempted');
    // One slot in all: a free transfer may have it.
    expect(new Transfers(1, 1).tryEnter({ address: '127.0.0.1', free: true })).toBeDefined();
  });

  /** Fake watches at pace (never behind), each recording its cut into `cut`. */
  const atPace = (cut: string[]) => (name: string) => ({
    stop() {},
    behind: () => 0,
    overtake: () => cut.push(name),
    preempt: () => cut.push(`${name} preempted`),
  });

  it('with every slot taken at pace, a payer holding none takes one from an account holding several', () => {
    const transfers = new Transfers(3, 5);
    const cut: string[] = [];
    const watch = atPace(cut);
    transfers.tryEnter({ accountId: 1, address: '127.0.0.61' })?.watch(watch('a-1'));
    transfers.tryEnter({ accountId: 1, address: '127.0.0.62' })?.watch(watch('a-2'));
    transfers.tryEnter({ accountId: 2, address: '127.0.0.63' })?.watch(watch('b'));
    // Account 3 holds none: account 1's youngest gives way.
    expect(transfers.tryEnter({ accountId: 3, address: '127.0.0.64' })).toBeDefined();
    expect(cut).toEqual(['a-2 preempted']);
    // A share each now: account 1 again, or a fourth account, is refused.
    expect(transfers.tryEnter({ accountId: 1, address: '127.0.0.65' })).toBeUndefined();
    expect(transfers.tryEnter({ accountId: 4, address: '127.0.0.66' })).toBeUndefined();
    expect(cut).toEqual(['a-2 preempted']);
  });

  it("every transfer's slot time counts, open ones as they go: from a minute of it, an account gives way", () => {
    vi.useFakeTimers();
    try {
      const transfers = new Transfers(3, 5);
      const cut: string[] = [];
      const watch = atPace(cut);
      // Account 1 sent a file that was no video: 5 s of slot time, an honest mistake's worth. How
      // a transfer ends does not matter (the eleventh review: each end left out was a way in).
      const mistake = transfers.tryEnter({ accountId: 1, address: '127.0.0.51' });
      vi.advanceTimersByTime(5000);
      mistake?.release();
      expect(transfers.unbacked(1)).toBe(5000);
      transfers.tryEnter({ accountId: 1, address: '127.0.0.51' })?.watch(watch('junk'));
      transfers.tryEnter({ accountId: 2, address: '127.0.0.52' })?.watch(watch('fresh-a'));
      transfers.tryEnter({ accountId: 6, address: '127.0.0.53' })?.watch(watch('fresh-b'));
      // Every slot taken, at pace, one each, nothing free: a paying newcomer is refused...
      expect(transfers.tryEnter({ accountId: 3, address: '127.0.0.54' })).toBeUndefined();
      vi.advanceTimersByTime(UNBACKED_MARK_MS - 5001);
      expect(transfers.tryEnter({ accountId: 3, address: '127.0.0.54' })).toBeUndefined();
      // ...until an account's slot time, ended and open, adds up to a minute: its transfer gives way.
      vi.advanceTimersByTime(1);
      transfers.tryEnter({ accountId: 3, address: '127.0.0.54' })?.watch(watch('newcomer'));
      expect(cut).toEqual(['junk preempted']);
      // Open time alone marks a fresh account (the tenth review's R1: a junk transfer cannot be
      // told from a real one until it ends); of two as far over, the youngest gives way.
      expect(transfers.tryEnter({ accountId: 4, address: '127.0.0.55' })).toBeUndefined();
      vi.advanceTimersByTime(5000);
      expect(transfers.tryEnter({ accountId: 4, address: '127.0.0.55' })).toBeDefined();
      expect(cut).toEqual(['junk preempted', 'fresh-b preempted']);
      // A transfer cut so still counted: accounts 1 and 6 come back as far over as they left.
      expect(transfers.unbacked(1)).toBe(UNBACKED_MARK_MS);
      expect(transfers.unbacked(6)).toBe(UNBACKED_MARK_MS);
      // They take a slot only from an account twice as far over as themselves (the eleventh review:
      // a customer cut once was shut out for the hour while junk far further over kept its slot),
      // so two accounts cutting each other hold the slot twice as long each time.
      expect(transfers.tryEnter({ accountId: 1, address: '127.0.0.56' })).toBeUndefined();
      vi.advanceTimersByTime(UNBACKED_MARK_MS - 1);
      expect(transfers.unbacked(2)).toBe(2 * UNBACKED_MARK_MS - 1);
      expect(transfers.tryEnter({ accountId: 6, address: '127.0.0.57' })).toBeUndefined();
      vi.advanceTimersByTime(1);
      expect(transfers.tryEnter({ accountId: 6, address: '127.0.0.57' })).toBeDefined();
      expect(cut).toEqual(['junk preempted', 'fresh-b preempted', 'fresh-a preempted']);
    } finally {
      vi.useRealTimers();
    }
  });

  it('two accounts taking one slot from each other: each holds it twice as long as before, so a long upload gets through', () => {
    vi.useFakeTimers();
    try {
      const transfers = new Transfers(1, 5);
      const NEEDS = 10 * UNBACKED_MARK_MS;
      const holder = { name: '', since: 0 };
      const cut: string[] = [];
      const enter = (name: string, accountId: number) => {
        const slot = transfers.tryEnter({ accountId, address: `127.0.0.${accountId}` });
        if (!slot) return;
        slot.watch({ stop() {}, behind: () => 0, overtake() {}, preempt: () => cut.push(name) });
        holder.name = name;
        holder.since = Date.now();
      };
      enter('honest', 1);
      let done = false;
      // Each second, whoever does not hold the slot tries to take it; the honest upload needs ten
      // (scaled) minutes of slot in one go.
      for (let t = 0; t < STANDING_MEMORY_MS && !done; t += 1000) {
        vi.advanceTimersByTime(1000);
        if (holder.name === 'honest' && Date.now() - holder.since >= NEEDS) done = true;
        else enter(holder.name === 'honest' ? 'cutter' : 'honest', holder.name === 'honest' ? 2 : 1);
      }
      expect(done).toBe(true);
      // The honest upload held the slot 1 minute, then 3, then the 10 it needed; the cutter 2, then 6.
      expect(cut).toEqual(['honest', 'cutter', 'honest', 'cutter']);
    } finally {
      vi.useRealTimers();
    }
  });

  it('each credit charged backs a minute, however long the upload it ended; the counts fade after STANDING_MEMORY_MS', () => {
    vi.useFakeTimers();
    try {
      const transfers = new Transfers(1, 5);
      const cut: string[] = [];
      const watch = atPace(cut);
      // Account 1's three-minute upload became a three-credit job: all backed.
      const real = transfers.tryEnter({ accountId: 1, address: '127.0.0.61' });
      vi.advanceTimersByTime(3 * UNBACKED_MARK_MS);
      real?.release();
      transfers.charged(1, 3);
      expect(transfers.unbacked(1)).toBe(0);
      // A slow upload of three minutes that became a one-credit job backs nothing more: its credit
      // covers a minute of it (the eleventh review: a slow one-credit upload backed 15 min of junk;
      // forgiving a job's own upload, each would let the next last a minute longer).
      const slow = transfers.tryEnter({ accountId: 1, address: '127.0.0.61' });
      vi.advanceTimersByTime(3 * UNBACKED_MARK_MS);
      slow?.release();
      transfers.charged(1, 1);
      expect(transfers.unbacked(1)).toBe(2 * UNBACKED_MARK_MS);
      // Zooms hold no slot: their credits back minutes all the same. Then an upload dropped after
      // a minute (the tenth review's R2), and a long one.
      transfers.charged(1, 5);
      const dropped = transfers.tryEnter({ accountId: 1, address: '127.0.0.61' });
      vi.advanceTimersByTime(UNBACKED_MARK_MS);
      dropped?.release();
      expect(transfers.unbacked(1)).toBe(-2 * UNBACKED_MARK_MS);
      // The long upload keeps its slot for its first minute and the two backed ones.
      transfers.tryEnter({ accountId: 1, address: '127.0.0.61' })?.watch(watch('backed'));
      vi.advanceTimersByTime(3 * UNBACKED_MARK_MS - 1);
      expect(transfers.tryEnter({ accountId: 2, address: '127.0.0.62' })).toBeUndefined();
      vi.advanceTimersByTime(1);
      expect(transfers.tryEnter({ accountId: 2, address: '127.0.0.62' })).toBeDefined();
      expect(cut).toEqual(['backed preempted']);
      // A free actor's slot counts against nobody.
      const free = new Transfers(1, 5);
      free.tryEnter({ accountId: 3, address: '127.0.0.63', free: true });
      vi.advanceTimersByTime(UNBACKED_MARK_MS);
      expect(free.unbacked(3)).toBe(0);
      // Past the day nothing of it is remembered.
      vi.advanceTimersByTime(STANDING_MEMORY_MS);
      expect(transfers.unbacked(1)).toBe(0);
    } finally {
      vi.useRealTimers();
    }
  });

  it('a watch judges the bar from the first byte: bytes late to start are not a shortfall', () => {
    vi.useFakeTimers();
    try {
      let delivered = 0;
      const watch = watchTransfer(
        20_000,
        () => delivered,
        () => {},
      );
      // Nothing for 1.5 s (headers and first bytes on the way), then 3 % above the bar, steadily.
      vi.advanceTimersByTime(1500);
      const perTick = (BEHIND_RULE.pace * 1.03 * 100) | 0;
      for (let t = 0; t < 16; t++) {
        delivered += perTick;
        vi.advanceTimersByTime(100);
      }
      // 3.1 s after the watch began: from its start it would be 1.4 s short; from its first byte, ahead.
      expect(watch.behind()).toBe(0);
      // Then it stops: behind once idle past idleMs.
      vi.advanceTimersByTime(BEHIND_RULE.idleMs);
      expect(watch.behind()).toBeGreaterThanOrEqual(BEHIND_RULE.idleMs);
      watch.stop();
    } finally {
      vi.useRealTimers();
    }
  });

  it('behind: never in the grace; idle past idleMs; short of the takeover bar since the start', () => {
    const { graceMs, idleMs, pace } = BEHIND_RULE;
    const t0 = 1_000_000;
    // No byte at all, but within the grace: not behind.
    expect(behindBy({ startedAt: t0, lastByteAt: t0, bytes: 0 }, t0 + graceMs - 1)).toBe(0);
    // No byte at all after the grace: behind by all its time.
    expect(behindBy({ startedAt: t0, lastByteAt: t0, bytes: 0 }, t0 + graceMs)).toBe(graceMs);
    // Far ahead of the pace and a byte just now: not behind.
    expect(behindBy({ startedAt: t0, lastByteAt: t0 + 10 * idleMs, bytes: 1e9 }, t0 + 10 * idleMs)).toBe(0);
    // Far ahead of the pace but idle for idleMs: behind by the idle time.
    expect(behindBy({ startedAt: t0, lastByteAt: t0, bytes: 1e9 }, t0 + idleMs)).toBe(idleMs);
    // Just short of the pace: behind by the time it is short.
    const at = t0 + 4 * graceMs;
    expect(behindBy({ startedAt: t0, lastByteAt: at, bytes: pace * (4 * graceMs - 500) }, at)).toBeCloseTo(
      500,
    );
  });

  it('the takeover bar: a sender just above the stall pace is behind; an honest slow link (100 KB/s) never is', () => {
    // The test clock is not scaled here: the rule's own figures, in bytes per second.
    expect(STALL_RULE.windowMs).toBe(30_000);
    const stallPace = STALL_RULE.minBytesPerWindow / (STALL_RULE.windowMs / 1000); // ~2.2 KB/s
    expect(BEHIND_RULE.pace * 1000).toBe(32 * 1024);
    const t0 = 5_000_000;
    /** A sender at `perS` bytes a second, steady (a byte just now), judged `s` seconds after its start. */
    const steady = (perS: number, s: number) =>
      behindBy({ startedAt: t0, lastByteAt: t0 + s * 1000, bytes: perS * s }, t0 + s * 1000);
    for (const s of [2, 3, 10, 60, 600, 3600]) {
      // 5% above the stall pace: the stall rule never cuts it, yet it is behind, and further with time.
      expect(steady(stallPace * 1.05, s)).toBeGreaterThan(s * 1000 * 0.9);
      // Just under the bar: behind too; just over it, or an honest phone at 100 KB/s: never.
      expect(steady(32 * 1024 * 0.99, s)).toBeGreaterThan(0);
      expect(steady(32 * 1024 * 1.01, s)).toBe(0);
      expect(steady(100_000, s)).toBe(0);
    }
    // The phone's dips are carried by what it sent before: 10 s at 100 KB/s, then 20 s at 1 KB/s.
    const t = t0 + 30_000;
    expect(behindBy({ startedAt: t0, lastByteAt: t, bytes: 100_000 * 10 + 1000 * 20 }, t)).toBe(0);
    // Of two senders, the slower (further short of the bar) is the one furthest behind.
    expect(steady(3000, 20)).toBeGreaterThan(steady(20_000, 20));
  });
});

describe.each(BACKENDS)(
  'stalls (DESIGN §5a) on %s, timings shrunk: STALL_S=2, test time scale 0.1',
  (backend) => {
    const database = serverDatabase(backend);
    let fast: TestServer;
    beforeAll(async () => {
      fast = await startServer({
        VIDSHEET_STALL_S: '2',
        VIDSHEET_TEST_TIME_SCALE: '0.1',
        ...(await database()),
      });
    }, 60_000);
    afterAll(async () => {
      await fast?.stop();
    });
    const fastWork = () => fast.leftovers().filter((f) => f.startsWith('work/'));

    it('an upload body that stops is cut with 408, its file deleted, nothing charged; the next upload succeeds', async () => {
      const a = await newAccount(fast, 5);
      const started = Date.now();
      const upload = await slowUpload(fast.url, a.key, { first: 64 * 1024, from: '127.0.0.30' });
      const answer = await upload.answer();
      const elapsed = Date.now() - started;
      expect(answer).toEqual(STALLED);
      expect(elapsed).toBeGreaterThanOrEqual(1900);
      expect(elapsed).toBeLessThan(6000);
      await waitFor(() => upload.closed(), 'the connection to be closed');
      await waitFor(() => fastWork().length === 0, 'the partial file to be deleted');
      expect((await wholeUpload(fast.url, a.key, { bytes: small, from: '127.0.0.30' }))?.status).toBe(200);
      const shown = await showAccount(fast, a.email);
      // 5 granted, raised to the allowance floor 7 at the one priced job, minus its 1 credit.
      expect(shown.balance).toBe(6);
      expect(shown.usage).toHaveLength(1);
    });

    it('a trickle (a byte every 0.5 s: never idle, too slow) is cut after its grace and one window', async () => {
      const a = await newAccount(fast, 5);
      const upload = await slowUpload(fast.url, a.key, { first: 1, from: '127.0.0.31' });
      const started = Date.now();
      const trickle = setInterval(() => upload.send(Buffer.from('x')), 500);
      try {
        const answer = await upload.answer();
        expect(answer).toEqual(STALLED);
        // Grace 1 s + window 3 s (scaled): cut after about 4 s, well before 8.
        expect(Date.now() - started).toBeGreaterThanOrEqual(3500);
        expect(Date.now() - started).toBeLessThan(8000);
      } finally {
        clearInterval(trickle);
        upload.destroy();
      }
      await waitFor(() => fastWork().length === 0, 'the partial file to be deleted');
      expect((await showAccount(fast, a.email)).balance).toBe(5);
    });

    it('half-sent headers are cut after the (scaled) 3 s headers deadline', async () => {
      const { port } = new URL(fast.url);
      const socket = net.connect(Number(port), '127.0.0.1');
      await once(socket, 'connect');
      socket.on('error', () => {});
      const closed = new Promise((resolve) => socket.on('close', resolve));
      const started = Date.now();
      socket.write('POST /v1/vidsheet HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ');
      const trickle = setInterval(() => socket.destroyed || socket.write('a'), 200);
      await closed;
      clearInterval(trickle);
      expect(Date.now() - started).toBeGreaterThanOrEqual(2500);
      expect(Date.now() - started).toBeLessThan(6000);
    });

    it('after an early 401, the rest of the body is drained at most the (scaled) 1 s, then the connection closes', async () => {
      const upload = await slowUpload(fast.url, 'vs_live_0000', { first: 1024, from: '127.0.0.32' });
      const answer = await upload.answer();
      expect(answer?.status).toBe(401);
      const answered = Date.now();
      const trickle = setInterval(() => upload.send(Buffer.alloc(1024, 0x2a)), 100);
      await waitFor(() => upload.closed(), 'the connection to close', 5000);
      clearInterval(trickle);
      expect(Date.now() - answered).toBeLessThan(3000);
    });
  },
);
