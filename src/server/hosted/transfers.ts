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
 * transfer's only when no free transfer is left: one behind, one of an account holding several, or
 * one of an account whose slot time is not backed by credits (`unbacked`).
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
}

interface Held {
  release(): void;
  watch?: StallWatch;
  free: boolean;
  accountId?: number;
  /** Slot time so far: from its taking to its release, or to now while held. */
  heldMs(): number;
}

/**
 * A paying account's standing is its unbacked slot time within the last STANDING_MEMORY_MS: the
 * slot time all its transfers held, ended or still open, less BACKING_PER_CREDIT_MS for each credit
 * it was charged. From UNBACKED_MARK_MS of it, its transfers give way, whatever their pace, to a
 * paying newcomer with far less unbacked slot time when every slot is taken.
 * - Every transfer counts, however it ends: paid work is the one thing that tells a real sender
 *   from junk, and each way of ending a transfer the rule left out let junk hold a slot for free
 *   (the eleventh review: a client that left right after its last byte, a video kept and deleted).
 * - Open time counts as it passes: a junk transfer cannot be told from a slow real one until it
 *   ends, and counted only at its end, each fresh account held a slot with junk for the whole upload
 *   deadline (900 s) before its first mark (the tenth review).
 * - Credits back it, not upload time: a slow one-credit upload backed a quarter of an hour of junk
 *   (the eleventh review). A job's own upload counts like any other: forgiven, each slow upload
 *   ending in a one-credit job would let the next last a minute longer, so a pack of 30 credits
 *   held a slot for hours. A customer's credits carry it through a long upload or a dropped
 *   connection; one whose uploads take longer than a minute per credit they end in gives way
 *   under contention (the twelfth review); an attacker pays a credit for each slot-minute.
 * - A day's memory: with an hour's, a pool of accounts each holding a slot for just under a minute
 *   was fresh again the next hour (the twelfth review: about 500 accounts, bought once, held all
 *   eight slots for good); with a day's, a pool lasts an hour a day.
 * - A newcomer over the mark takes only from an account twice as far over: a customer cut once is
 *   not shut out for the hour while junk senders far further over keep their slots (the eleventh
 *   review), and two accounts cannot keep cutting each other's uploads short.
 * - One bad file sent at a normal pace holds a slot for seconds and marks nothing (the ninth review).
 * - By unbacked time, not by credits' share of it: ordered and shielded by share, junk that paid one
 *   credit kept every account never charged today (a new customer's first long upload, a bad first
 *   file) out of the slots for the day, for a credit a slot (the fifteenth review). A share bounds
 *   nothing; unbacked time is what an account took without paying.
 * Scaled by the test clock like the stall rule's figures.
 */
export const UNBACKED_MARK_MS = 60_000 * TEST_TIME_SCALE;
export const BACKING_PER_CREDIT_MS = 60_000 * TEST_TIME_SCALE;
export const STANDING_MEMORY_MS = 24 * 60 * 60 * 1000;
/** Entries within this long of an account's last one are added to it: at most ~60 an account. */
const LEDGER_BUCKET_MS = STANDING_MEMORY_MS / 60;

/** From `at` on: slot time held adds, credits charged take away. */
interface Entry {
  at: number;
  ms: number;
}

export class Transfers {
  private readonly held = new Set<Held>();
  private readonly perClient = new Map<string, number>();
  private freeHeld = 0;
  /** Paying accounts' slot time and credits within STANDING_MEMORY_MS (see `unbacked`). */
  private readonly ledger = new Map<number, Entry[]>();
  /** When every account's ledger was last pruned (see `record`). */
  private prunedAt = 0;

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
        if (!free && client.accountId !== undefined) this.record(client.accountId, released - takenAt);
      },
      heldMs: () => (released ?? Date.now()) - takenAt,
    };
    this.held.add(slot);
    return {
      release: slot.release,
      watch: (watch) => {
        slot.watch = watch;
      },
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
   * eighth review), else the youngest of the account with the most unbacked slot time, from
   * UNBACKED_MARK_MS of it and twice the newcomer's (`unbacked`).
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
    if (payer === undefined) return false;
    const crowding =
      held(payer) === 0
        ? paying.find((slot) => slot.watch && slot.accountId !== undefined && held(slot.accountId) > 1)
        : undefined;
    if (crowding) return this.cut(crowding, 'preempt');
    // Then the youngest transfer of the account with the most unbacked slot time, from a minute of
    // it and twice the newcomer's own: an account cut so may take a slot back from one twice as far
    // over, so of two accounts taking a slot from each other, each holds it twice as long as the
    // last time, and an upload gets through.
    let victim: Held | undefined;
    let most = Math.max(UNBACKED_MARK_MS, 2 * this.unbacked(payer)) - 1;
    for (const slot of paying) {
      const unbacked = slot.watch && slot.accountId !== undefined ? this.unbacked(slot.accountId) : 0;
      if (unbacked > most) {
        most = unbacked;
        victim = slot;
      }
    }
    return victim !== undefined && this.cut(victim, 'preempt');
  }

  private cut(victim: Held, how: 'overtake' | 'preempt'): true {
    // The slot is given back now, whatever the cut's own cleanup takes (it releases again: idempotent).
    victim.release();
    victim.watch?.[how]();
    return true;
  }

  /** An account was charged `credits` for a job: each backs a minute (see UNBACKED_MARK_MS). */
  charged(accountId: number, credits: number): void {
    this.record(accountId, -credits * BACKING_PER_CREDIT_MS);
  }

  /**
   * The account's unbacked slot time (see UNBACKED_MARK_MS): the slot time of its transfers within
   * the last STANDING_MEMORY_MS, open ones included, less what its credits charged back.
   */
  unbacked(accountId: number): number {
    const since = Date.now() - STANDING_MEMORY_MS;
    const entries = (this.ledger.get(accountId) ?? []).filter((entry) => entry.at > since);
    let ms = entries.reduce((sum, entry) => sum + entry.ms, 0);
    for (const slot of this.held) if (slot.accountId === accountId && !slot.free) ms += slot.heldMs();
    return ms;
  }

  private record(accountId: number, ms: number): void {
    const now = Date.now();
    const fresh = (entry: Entry) => now - entry.at < STANDING_MEMORY_MS;
    // Every account's old entries go at most once a bucket (not on each release: O(accounts of
    // the day) per transfer, the thirteenth review), this account's at once.
    if (now - this.prunedAt >= LEDGER_BUCKET_MS) {
      this.prunedAt = now;
      for (const [id, entries] of this.ledger) {
        const kept = entries.filter(fresh);
        if (kept.length > 0) this.ledger.set(id, kept);
        else this.ledger.delete(id);
      }
    }
    const entries = (this.ledger.get(accountId) ?? []).filter(fresh);
    const last = entries.at(-1);
    if (last && now - last.at < LEDGER_BUCKET_MS) last.ms += ms;
    else entries.push({ at: now, ms });
    this.ledger.set(accountId, entries);
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
