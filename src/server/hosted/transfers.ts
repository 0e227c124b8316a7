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
 *
 * Free actors' transfers (anonymous fetches, uploads of accounts on the allowance) never hold the
 * last slot, as their jobs never hold the queue's last place (admission.ts): eight anonymous fetches
 * kept just above the takeover bar held every slot until their deadline, and paying uploads got
 * `429` meanwhile (the sixth review). A free newcomer may take over only a free transfer behind; a
 * paying newcomer takes a free transfer's slot whatever its pace (`preempt`: its caller is told the
 * service is busy, and an anonymous fetch gets its job back, as nothing was its fault), and a paying
 * transfer's only when no free transfer is left and that one is behind.
 */
import { addressKey } from '#vidsheet/core/client-address.js';
import { type StallWatch, TEST_TIME_SCALE } from './stall.js';

export interface TransferClient {
  /** The paying account, when there is one. */
  accountId?: number;
  /** The client's address as the HTTP layer established it. */
  address: string;
  /** A free actor (DESIGN §5a): never given the last slot, and takes over only free transfers. */
  free?: boolean;
}

export interface TransferSlot {
  /** Gives the slot back (idempotent). */
  release(): void;
  /**
   * The stall watch of the transfer in this slot; until one is attached the slot cannot be taken
   * over (nothing could cut its transfer). Its `overtake` and `preempt` must end the transfer, as a
   * stall cut does.
   */
  watch(watch: StallWatch): void;
  /** How long the slot was held: from its taking to its release (or to now, while held). */
  heldMs(): number;
}

interface Held {
  release(): void;
  watch?: StallWatch;
  free: boolean;
  accountId?: number;
}

/**
 * An account's transfers that came to nothing (see `wasted`) are counted by the slot time they held:
 * once they add up to WASTE_MARK_MS within WASTE_MEMORY_MS, the account is marked for WASTE_MEMORY_MS
 * from then. An honest mistake (one bad file sent at a normal pace) holds a slot for seconds and
 * marks nothing (the ninth review: one bad file marked an honest account for an hour); a sender
 * holding a slot with junk marks itself within a minute, however it ends each transfer. Scaled
 * by the test clock like the stall rule's figures.
 */
export const WASTE_MARK_MS = 60_000 * TEST_TIME_SCALE;
export const WASTE_MEMORY_MS = 60 * 60 * 1000;

interface Waste {
  /** When this count began; counts older than WASTE_MEMORY_MS start again. */
  since: number;
  heldMs: number;
  /** When the count reached WASTE_MARK_MS, if it did. */
  markedAt?: number;
}

export class Transfers {
  private readonly held = new Set<Held>();
  private readonly perClient = new Map<string, number>();
  private freeHeld = 0;
  /** Accounts whose transfers came to nothing lately (see `wasted`). */
  private readonly waste = new Map<number, Waste>();

  constructor(
    private readonly max: number,
    private readonly perClientMax: number,
  ) {}

  /** The slots free actors' transfers may hold at once: all but one. */
  get freeMax(): number {
    return Math.max(1, this.max - 1);
  }

  /** A slot when one was free for this client, or could be taken from a transfer behind; else undefined. */
  tryEnter(client: TransferClient): TransferSlot | undefined {
    const keys = [`address:${addressKey(client.address)}`];
    if (client.accountId !== undefined) keys.push(`account:${client.accountId}`);
    if (keys.some((key) => (this.perClient.get(key) ?? 0) >= this.perClientMax)) return undefined;
    const free = client.free === true;
    const room = this.held.size < this.max && !(free && this.freeHeld >= this.freeMax);
    if (!room && !this.overtakeFurthestBehind(client)) return undefined;
    for (const key of keys) this.perClient.set(key, (this.perClient.get(key) ?? 0) + 1);
    if (free) this.freeHeld++;
    let released: number | undefined;
    const takenAt = Date.now();
    const slot: Held = {
      free,
      accountId: client.accountId,
      release: () => {
        if (released !== undefined) return;
        released = Date.now();
        if (free) this.freeHeld--;
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
      heldMs: () => (released ?? Date.now()) - takenAt,
    };
  }

  /**
   * Frees a slot for a newcomer, cutting the transfer in it; false when nothing gives way. Free
   * transfers give way first: the one furthest behind, or, for a paying newcomer, the youngest at
   * any pace (else one paying transfer in the kept slot, beside free ones just above the takeover
   * bar, shut every other paying client out: the seventh review); the youngest, as the least work is
   * lost and a free actor that keeps coming back is always it. Only then, for a paying newcomer, the
   * paying transfer furthest behind (a paying upload below the bar was cut while free transfers at
   * pace kept their slots: the eighth review), else, for a payer holding no slot, the youngest of an
   * account holding several (one cheap account held two slots of two, and four held all eight: the
   * eighth review), else the youngest of an account that wasted one lately (`wasted`).
   */
  private overtakeFurthestBehind(newcomer: TransferClient): boolean {
    const slots = [...this.held];
    const free = slots.filter((slot) => slot.free);
    const behind = furthestBehind(free);
    if (behind) return this.cut(behind, 'overtake');
    if (newcomer.free) return false;
    const youngest = free.reverse().find((slot) => slot.watch);
    if (youngest) return this.cut(youngest, 'preempt');
    const paying = slots.filter((slot) => !slot.free).reverse();
    const behindPaying = furthestBehind(paying);
    if (behindPaying) return this.cut(behindPaying, 'overtake');
    // A share each: a payer holding no slot takes one from an account holding several.
    const held = (accountId: number) => paying.filter((slot) => slot.accountId === accountId).length;
    const payer = newcomer.accountId;
    const crowding =
      payer !== undefined && held(payer) === 0
        ? paying.find((slot) => slot.watch && slot.accountId !== undefined && held(slot.accountId) > 1)
        : undefined;
    const victim = crowding ?? paying.find((slot) => slot.watch && this.isWasteful(slot.accountId));
    return victim !== undefined && this.cut(victim, 'preempt');
  }

  private cut(victim: Held, how: 'overtake' | 'preempt'): true {
    // The slot is given back now, whatever the cut's own cleanup takes (it releases again: idempotent).
    victim.release();
    victim.watch?.[how]();
    return true;
  }

  /**
   * A paying account's transfer came to nothing by its own doing, after holding its slot `heldMs`:
   * the file unreadable or too long, the body too large, malformed, stalled, past its deadline or
   * abandoned, a fetch cut, broken off or left by its caller. Once such slot time adds up to
   * WASTE_MARK_MS, the account's transfers give way to a paying newcomer when every slot is taken,
   * whatever their pace, for WASTE_MEMORY_MS: nothing is charged for such a transfer, so without
   * this a few cheap accounts sending junk just above the takeover bar held every slot for as long
   * as they liked (the eighth and ninth reviews).
   */
  wasted(accountId: number, heldMs: number): void {
    const now = Date.now();
    for (const [id, w] of this.waste)
      if (now - (w.markedAt ?? w.since) >= WASTE_MEMORY_MS) this.waste.delete(id);
    const w = this.waste.get(accountId) ?? { since: now, heldMs: 0 };
    w.heldMs += heldMs;
    if (w.markedAt === undefined && w.heldMs >= WASTE_MARK_MS) w.markedAt = now;
    this.waste.set(accountId, w);
  }

  private isWasteful(accountId: number | undefined): boolean {
    const at = accountId === undefined ? undefined : this.waste.get(accountId)?.markedAt;
    return at !== undefined && Date.now() - at < WASTE_MEMORY_MS;
  }

  get size(): number {
    return this.held.size;
  }
}

/** The slot whose transfer is furthest behind (stall.ts), if any is. */
function furthestBehind(slots: Held[]): Held | undefined {
  let victim: Held | undefined;
  let furthest = 0;
  for (const slot of slots) {
    const behind = slot.watch?.behind() ?? 0;
    if (behind > furthest) {
      furthest = behind;
      victim = slot;
    }
  }
  return victim;
}
