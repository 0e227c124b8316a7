/**
 * `vidsheet mcp`: the local tool server over stdio. stdout carries MCP frames only; logs go to stderr
 * through `NODE_DEBUG=vidsheet`.
 *
 * Jobs run one at a time (a video job already keeps the machine busy, and two jobs writing the same
 * sheets must not interleave); while one runs, the server keeps answering other requests and later
 * calls wait their turn. When stdin ends, queued jobs still finish and answer, then the promise
 * resolves so the process can exit. A signal aborts the running job (its children are killed and
 * awaited, its temporary files removed), then the process exits.
 */
import { debuglog } from 'node:util';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { packageVersion } from '../version.js';
import { callLocalTool, type LocalInput, toolDefinition, toolError } from './tool.js';

const debug = debuglog('vidsheet');

/** Runs tasks strictly one after another, in arrival order. */
function serialQueue() {
  let tail: Promise<unknown> = Promise.resolve();
  return {
    run<T>(task: () => Promise<T>): Promise<T> {
      const result = tail.then(task);
      tail = result.catch(() => {});
      return result;
    },
    /** Settles once every task queued so far, and any queued meanwhile, has finished. */
    async idle(): Promise<void> {
      let seen: Promise<unknown>;
      do {
        seen = tail;
        await seen;
      } while (seen !== tail);
    },
  };
}

const nextMacrotask = () => new Promise((resolve) => setImmediate(resolve));

export async function serveStdio(): Promise<void> {
  const server = new McpServer({ name: 'vidsheet', version: packageVersion() });
  const queue = serialQueue();
  const tool = toolDefinition({ source: 'path' });
  // Aborts every job of this server (signals, a client gone); a cancelled request aborts its own.
  const shutdown = new AbortController();

  server.registerTool(tool.name, tool, (args: LocalInput, extra) =>
    queue.run(async () => {
      // A request cancelled while it waited is not answered (the SDK drops the reply): skip the work.
      if (extra.signal.aborted) return toolError(new Error('cancelled before it started'));
      const token = extra._meta?.progressToken;
      const onProgress =
        token === undefined
          ? undefined
          : (progress: number, total: number) => {
              extra
                .sendNotification({
                  method: 'notifications/progress',
                  params: { progressToken: token, progress, total },
                })
                .catch((error) => debug('progress notification failed: %O', error));
            };
      const started = Date.now();
      debug('call %s: %o', tool.name, args);
      const signal = AbortSignal.any([shutdown.signal, extra.signal]);
      const result = await callLocalTool(args, { onProgress, signal });
      debug('call %s done in %d ms%s', tool.name, Date.now() - started, result.isError ? ' (error)' : '');
      return result;
    }),
  );

  const onSignal = (signal: NodeJS.Signals) => {
    debug('%s: aborting running jobs', signal);
    shutdown.abort(new Error(`interrupted (${signal})`));
    // The running job settles once its children have exited and its files are gone.
    void queue.idle().then(() => process.exit(1));
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);

  const transport = new StdioServerTransport();
  const closed = new Promise<void>((resolve) => {
    transport.onclose = () => resolve();
  });
  let ending = false;
  const drainAndClose = async (why: string) => {
    if (ending) return;
    ending = true;
    debug('%s: finishing queued jobs, then closing', why);
    // Requests read just before the end are still being validated (microtasks): let them reach the
    // queue; once it is idle, let the SDK write the last replies before closing.
    await nextMacrotask();
    await queue.idle();
    await nextMacrotask();
    await server.close();
  };
  process.stdin.once('end', () => void drainAndClose('stdin ended'));
  process.stdin.once('close', () => void drainAndClose('stdin closed'));
  // A client that went away makes stdout fail (EPIPE); stop rather than crash on the unhandled error.
  process.stdout.on('error', (error) => {
    debug('stdout failed: %O', error);
    shutdown.abort(error);
    void server.close();
  });

  await server.connect(transport);
  debug('serving %s on stdio', tool.name);
  await closed;
  process.off('SIGINT', onSignal);
  process.off('SIGTERM', onSignal);
  debug('transport closed');
}
