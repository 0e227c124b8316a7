/**
 * The job worker process: runs the shared job runner on behalf of the server, so a crash in native
 * code ends this process and fails one job, never the server. It holds at most the prepared jobs
 * the server has asked for, and exits when the server goes away (the IPC channel closes).
 */
import { asVidsheetError } from '#vidsheet/core/errors.js';
import { selectEngine } from '#vidsheet/engine/index.js';
import { type PreparedJob, prepareJob } from '#vidsheet/job.js';
import type { FromWorker, ToWorker } from './protocol.js';

const send = (message: FromWorker) => process.send?.(message);
const prepared = new Map<string, PreparedJob>();
/** Aborts the running job when the server goes away, so its ffmpeg children stop with it. */
const shutdown = new AbortController();
let running: Promise<unknown> = Promise.resolve();

function fail(id: string, error: unknown) {
  const e = asVidsheetError(error);
  send({
    type: 'failed',
    id,
    error: { code: e.code, message: e.message, extras: e.extras, detail: e.detail },
  });
}

async function handle(message: ToWorker): Promise<void> {
  switch (message.type) {
    case 'prepare': {
      try {
        const job = await prepareJob(message.request, { ...message.options, signal: shutdown.signal });
        prepared.set(message.id, job);
        const sheets = job.plan.sheets.length;
        const frames = sheets * (job.plan.sheets[0]?.length ?? 0);
        send({
          type: 'prepared',
          id: message.id,
          durationMs: job.durationMs,
          sheets,
          frames,
          probe: job.probe,
        });
      } catch (error) {
        fail(message.id, error);
      }
      return;
    }
    case 'render': {
      const job = prepared.get(message.id);
      prepared.delete(message.id);
      if (!job) return fail(message.id, new Error(`no prepared job ${message.id}`));
      const rendering = job.render();
      running = rendering.catch(() => {});
      try {
        send({ type: 'done', id: message.id, outcome: await rendering });
      } catch (error) {
        fail(message.id, error);
      }
      return;
    }
    case 'discard':
      prepared.delete(message.id);
      return;
  }
}

process.on('message', (message: ToWorker) => void handle(message));
process.on('disconnect', () => {
  shutdown.abort(new Error('the server went away'));
  // The aborted job settles once its children have exited and its temporary files are gone.
  void running.finally(() => process.exit(0));
});
send({ type: 'ready', engine: selectEngine().name });
