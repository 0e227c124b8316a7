/**
 * Transfers in flight (DESIGN §5): uploads being received and remote fetches running, bounded apart
 * from the job queue, per instance: at most `VIDSHEET_MAX_TRANSFERS` at once and
 * `VIDSHEET_TRANSFERS_PER_CLIENT` per account and per client address (the per-address key of
 * core/client-address.ts, so IPv6 counts per /64). A slot is taken before a body byte is read or a
 * fetch starts, and given back when the video is complete on disk or the transfer fails or stalls.
 *
 * When every slot is taken, a newcomer that is within its own per-client limit takes the slot of the
 * transfer furthest behind (stall.ts judges "behind": idle, or short of a takeover bar well above the
 * stall pace), which is cut as a stall is. Without this, stalled senders from more addresses than there
 * are slots retake each slot the stall rule frees the moment it is freed, and senders just above the
 * stall pace are never freed at all: paying users get `429 busy` for as long as the attack lasts
 * (issue 21). A newcomer is still answered at once, never queued: only when no transfer is behind is
 * it `429`.
 */
import { addressKey } from '#vidsheet/core/client-address.js';
import type { StallWatch } from './stall.js';

export interface TransferClient {
  /** The paying account, when there is one. */
  accountId?: number;
  /** The client's address as the HTTP layer established it. */
  address: string;
}

export interface TransferSlot {
  /** Gives the slot back (idempotent). */
  release(): void;
  /**
   * The stall watch of the transfer in this slot; until one is attached the slot cannot be taken
   * over (nothing could cut its transfer). Its `overtake` must end the transfer, as a stall cut does.
   */
  watch(watch: StallWatch): void;
}

interface Held {
  release(): void;
  watch?: StallWatch;
}

export class Transfers {
  private readonly held = new Set<Held>();
  private readonly perClient = new Map<string, number>();

  constructor(
    private readonly max: number,
    private readonly perClientMax: number,
  ) {}

  /** A slot when one was free for this client, or could be taken from a transfer behind; else undefined. */
  tryEnter(client: TransferClient): TransferSlot | undefined {
    const keys = [`address:${addressKey(client.address)}`];
    if (client.accountId !== undefined) keys.push(`account:${client.accountId}`);
    if (keys.some((key) => (this.perClient.get(key) ?? 0) >= this.perClientMax)) return undefined;
    if (this.held.size >= this.max && !this.overtakeFurthestBehind()) return undefined;
    for (const key of keys) this.perClient.set(key, (this.perClient.get(key) ?? 0) + 1);
    let released = false;
    const slot: Held = {
      release: () => {
        if (released) return;
        released = true;
        this.held.delete(slot);
        for (const key of keys) {
          const left = (this.perClient.get(key) ?? 1) - 1;
          if (left > 0) this.perClient.set(key, left);
          else this.perClient.delete(key);
        }
      },
    };
    this.held.add(slot);
    return {
      release: slot.release,
      watch: (watch) => {
        slot.watch = watch;
      },
    };
  }

  /** Frees the slot of the transfer furthest behind, cutting it; false when none is behind. */
  private overtakeFurthestBehind(): boolean {
    let victim: Held | undefined;
    let furthest = 0;
    for (const slot of this.held) {
      const behind = slot.watch?.behind() ?? 0;
      if (behind > furthest) {
        furthest = behind;
        victim = slot;
      }
    }
    if (!victim) return false;
    // The slot is given back now, whatever the cut's own cleanup takes (it releases again: idempotent).
    victim.release();
    victim.watch?.overtake();
    return true;
  }

  get size(): number {
    return this.held.size;
  }
}
