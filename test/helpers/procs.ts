/**
 * The machine's processes as /proc shows them (Linux): enough to tell which ones a server's job
 * worker started, and that none of them outlives it.
 */
import { readdirSync, readFileSync } from 'node:fs';

export interface Proc {
  pid: number;
  ppid: number;
  /** Process group id. */
  pgrp: number;
  /** The command's name (`comm`, at most 15 characters). */
  name: string;
}

export function processes(): Proc[] {
  const out: Proc[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
    } catch {
      continue; // exited meanwhile
    }
    // `pid (comm) state ppid pgrp ...`: comm may hold spaces and parentheses, so split at the last ')'.
    const close = stat.lastIndexOf(')');
    const [state, ppid, pgrp] = stat.slice(close + 2).split(' ');
    if (state === 'Z' || state === 'X') continue; // dead, waiting to be reaped
    out.push({
      pid: Number(entry),
      ppid: Number(ppid),
      pgrp: Number(pgrp),
      name: stat.slice(stat.indexOf('(') + 1, close),
    });
  }
  return out;
}
