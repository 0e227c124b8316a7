/** The concurrency gate every ffmpeg extraction goes through, and how a failed batch settles. */
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { limiter, pool, settleAll } from '../../src/engine/process.js';

describe('limiter', () => {
  it('never runs more than its limit, and serves tasks in the order they came', async () => {
    const gate = limiter(2);
    let running = 0;
    let most = 0;
    const started: number[] = [];
    const task = (id: number, ms: number) => async () => {
      started.push(id);
      running++;
      most = Math.max(most, running);
      await sleep(ms);
      running--;
      // A newcomer arriving while others wait queues behind them.
      if (id < 4) void gate(task(100 + id, 1));
      return id;
    };
    const results = await Promise.all([0, 1, 2, 3, 4, 5].map((id) => gate(task(id, 5 + id))));
    await sleep(30);
    expect(results).toEqual([0, 1, 2, 3, 4, 5]);
    expect(most).toBe(2);
    // First come, first served: the six queued before any newcomer start first.
    expect(started.slice(0, 6)).toEqual([0, 1, 2, 3, 4, 5]);
    expect(started).toHaveLength(10);
  });

  it('frees the slot of a task that throws', async () => {
    const gate = limiter(1);
    await expect(gate(async () => Promise.reject(new Error('boom')))).rejects.toThrow('boom');
    expect(await gate(async () => 'next')).toBe('next');
  });

  it("sets a waiting task's slot aside: a task waiting for a queued one does not deadlock the gate", async () => {
    const gate = limiter(1);
    let running = 0;
    let most = 0;
    const busy = async <T>(value: T) => {
      running++;
      most = Math.max(most, running);
      await sleep(2);
      running--;
      return value;
    };
    let handOver = (_: string) => {};
    const handed = new Promise<string>((resolve) => {
      handOver = resolve;
    });
    // The first task waits for what the second (queued behind it) gives: with one slot and no
    // aside this never settles.
    const first = gate(async (aside) => {
      await busy(null);
      const got = await aside(handed);
      return busy(`first after ${got}`);
    });
    const second = gate(async () => {
      const value = await busy('second');
      handOver(value);
      return value;
    });
    expect(await Promise.all([first, second])).toEqual(['first after second', 'second']);
    expect(most).toBe(1);
  });

  it('pool keeps result order', async () => {
    const out = await pool(
      [30, 10, 20].map((ms) => async () => sleep(ms, ms)),
      2,
    );
    expect(out).toEqual([30, 10, 20]);
  });
});

describe('settleAll', () => {
  it('calls abort at the first failure, waits for every task, then rethrows that failure', async () => {
    const events: string[] = [];
    let aborted = false;
    const slow = (async () => {
      await sleep(30);
      events.push(aborted ? 'slow saw the abort' : 'slow ran on');
      return 'slow';
    })();
    const failing = (async () => {
      await sleep(5);
      throw new Error('first');
    })();
    const later = (async () => {
      await sleep(10);
      throw new Error('second');
    })();
    await expect(
      settleAll([slow, failing, later], () => {
        aborted = true;
        events.push('abort');
      }),
    ).rejects.toThrow('first');
    // Settled only once the slow task had finished, not at the first rejection.
    expect(events).toEqual(['abort', 'abort', 'slow saw the abort']);
  });

  it('rethrows the failure that came first, not the first listed (that one may be the stop it caused)', async () => {
    const stop = new AbortController();
    // Listed first, fails only because the abort stopped it.
    const stopped = new Promise<never>((_, reject) => {
      stop.signal.addEventListener('abort', () => reject(new Error('render stopped')), { once: true });
    });
    const cause = (async () => {
      await sleep(5);
      throw new Error('drawing labels failed');
    })();
    await expect(settleAll([stopped, cause], () => stop.abort())).rejects.toThrow('drawing labels failed');
  });

  it('returns the results in order when nothing fails', async () => {
    expect(await settleAll([sleep(10, 'a'), sleep(1, 'b')], () => {})).toEqual(['a', 'b']);
  });
});
