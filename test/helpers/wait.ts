/** Polls `condition` every 25 ms until it holds; throws naming `what` after `timeoutMs`. */
import { setTimeout as sleep } from 'node:timers/promises';

export async function waitFor(condition: () => boolean, what: string, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(25);
  }
}
