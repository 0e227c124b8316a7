/**
 * Transfers in flight (DESIGN §5): uploads being received and remote fetches running, bounded apart
 * from the job queue, per instance: at most `VIDSHEET_MAX_TRANSFERS` at once and
 * `VIDSHEET_TRANSFERS_PER_CLIENT` per account and per client address (the per-address key of
 * core/client-address.ts, so IPv6 counts per /64). A slot is taken before a body byte is read or a
 * fetch starts, and given back when the video is complete on disk or the transfer fails or stalls.
 */
import { addressKey } from '#vidsheet/core/client-address.js';

export interface TransferClient {
  /** The paying account, when there is one. */
  accountId?: number;
  /** The client's address as the HTTP layer established it. */
  address: string;
}

export class Transfers {
  private total = 0;
  private readonly perClient = new Map<string, number>();

  constructor(
    private readonly max: number,
    private readonly perClientMax: number,
  ) {}

  /** A release function when a slot was free for this client (call it once; idempotent), else undefined. */
  tryEnter(client: TransferClient): (() => void) | undefined {
    const keys = [`address:${addressKey(client.address)}`];
    if (client.accountId !== undefined) keys.push(`account:${client.accountId}`);
    if (this.total >= this.max) return undefined;
    if (keys.some((key) => (this.perClient.get(key) ?? 0) >= this.perClientMax)) return undefined;
    this.total++;
    for (const key of keys) this.perClient.set(key, (this.perClient.get(key) ?? 0) + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.total--;
      for (const key of keys) {
        const left = (this.perClient.get(key) ?? 1) - 1;
        if (left > 0) this.perClient.set(key, left);
        else this.perClient.delete(key);
      }
    };
  }

  get size(): number {
    return this.total;
  }
}
