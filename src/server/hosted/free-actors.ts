/**
 * DESIGN §5a "One at a time for free actors": an anonymous client (per address, and per subject id)
 * and an account that lives on the allowance have at most one job waiting or running; another is
 * refused at once (`429 busy` before the body, or the remote retry message). Without it a free actor
 * could fill every queue place with jobs that cost it nothing (issue 40: five uploads that each run
 * until the job deadline kept everyone else out for the whole deadline).
 *
 * A free actor's job is held from the moment its request is let in (before its body is read or its
 * video fetched) until the request ends, so neither a second upload nor a second fetch can start
 * meanwhile. Held in this instance's memory, like the queue and the transfer slots it sits beside
 * (DESIGN §5: per instance); the daily quotas that must hold across instances live in the database.
 */
import { createHash } from 'node:crypto';
import { addressKey } from '#vidsheet/core/client-address.js';

/** Who a free actor is, as every key it is counted under. */
export const freeActor = {
  /** An anonymous remote call: its client address (IPv6 per /64) and its subject id when it has one. */
  anonymous: (address: string, subject?: string): string[] => [
    `address:${addressKey(address)}`,
    ...(subject === undefined ? [] : [`subject:${createHash('sha256').update(subject).digest('hex')}`]),
  ],
  /** An account that lives on the allowance. */
  account: (accountId: number): string[] => [`account:${accountId}`],
};

/** Who is asking for a job, as the HTTP layer established it. */
export interface JobCaller {
  /** The account of a keyed call; none on the anonymous lane. */
  accountId?: number;
  /** The client's address. */
  address: string;
  /** The apps-SDK subject id of an anonymous remote call, when it sent one. */
  subject?: string;
}

/** A caller let in: whether it is a free actor (its job may not take the queue's last place). */
export interface FreeTicket {
  release: () => void;
  free: boolean;
}

export class FreeActors {
  private readonly busy = new Set<string>();

  /**
   * `livesOnAllowance` tells a free account from a paying one (billing/credits.ts: never a purchase,
   * never an operator grant).
   */
  constructor(private readonly livesOnAllowance: (accountId: number) => Promise<boolean>) {}

  /**
   * Lets a caller's job in: its ticket (`release` idempotent, a no-op for a paying account, which is
   * never limited here), or undefined when this free actor already has a job waiting or running.
   */
  async enter(caller: JobCaller): Promise<FreeTicket | undefined> {
    const free = (release: (() => void) | undefined) => release && { release, free: true };
    if (caller.accountId === undefined)
      return free(this.tryEnter(freeActor.anonymous(caller.address, caller.subject)));
    if (!(await this.livesOnAllowance(caller.accountId))) return { release: () => {}, free: false };
    return free(this.tryEnter(freeActor.account(caller.accountId)));
  }

  /**
   * A release function (idempotent) when none of `keys` has a job waiting or running, else undefined.
   */
  tryEnter(keys: string[]): (() => void) | undefined {
    if (keys.some((key) => this.busy.has(key))) return undefined;
    for (const key of keys) this.busy.add(key);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      for (const key of keys) this.busy.delete(key);
    };
  }

  /** Free actors with a job waiting or running now (keys counted). */
  get size(): number {
    return this.busy.size;
  }
}
