import type { ServerResponse } from 'node:http';

/**
 * Aborted when the caller's connection closes before its answer is written: a fetch it asked for
 * stops, and a job it waits for never runs (nothing charged for an answer nobody can read).
 */
export function callerGone(response: ServerResponse): AbortSignal {
  const gone = new AbortController();
  response.once('close', () => {
    if (!response.writableFinished) gone.abort();
  });
  return gone.signal;
}
