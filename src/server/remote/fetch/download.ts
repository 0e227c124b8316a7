/**
 * The remote tool's video fetch (DESIGN §6): a public http(s) URL streamed to a local file, and
 * nothing else reachable through it.
 *
 * The URL is chosen by the caller but fetched from inside the service's network, so:
 * - each hop (the URL, then at most 5 redirects, followed by hand) is checked from scratch: parsed
 *   by WHATWG `new URL()` (which normalises `2130706433`, `0x7f000001`, `0177.0.0.1` and `127.1` to
 *   `127.0.0.1`), http(s) only, no user name or password, an IP literal judged before the request
 *   (the socket connects to it as written: no lookup);
 * - a name is resolved once, at connect time, inside the socket's own `lookup`: the addresses that
 *   were judged are the ones the socket connects to, so DNS rebinding has no second lookup to
 *   change. If ANY address of the name is refused the host is refused (before any connect);
 * - exact `host:port` pairs of `allow` (VIDSHEET_FETCH_ALLOW) skip the address rule for that hop;
 * - the body goes to disk through a byte counter (never buffered), capped by `content-length` up
 *   front and while streaming; any failure removes the partial file;
 * - the whole fetch is watched by the stall rule the uploads use (hosted/stall.ts, DESIGN §5a): no
 *   byte for the idle time, or too few bytes in a window after the grace period, cuts it, and so
 *   does the total time budget;
 * - error messages say what was wrong, never the address, the server's banner or its body.
 */

import { lookup as dnsLookup } from 'node:dns/promises';
import { open, rm } from 'node:fs/promises';
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { isIP, type LookupFunction } from 'node:net';
import { type Duplex, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { type StallWatch, watchTransfer } from '../../hosted/stall.js';
import { refusedAddress } from './address-policy.js';

export type FetchReason =
  | 'bad_url'
  | 'scheme'
  | 'userinfo'
  | 'private_address'
  | 'too_many_redirects'
  | 'http_status'
  | 'too_large'
  | 'unreachable'
  | 'broken'
  | 'timeout'
  | 'stalled'
  | 'preempted'
  | 'empty';

/**
 * A refused or failed fetch. `message` is safe to show the caller (no internal address, banner or
 * body); `cause`, when set, is the underlying error, for server logs only.
 */
export class FetchError extends Error {
  constructor(
    readonly reason: FetchReason,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = 'FetchError';
  }
}

export interface DownloadOptions {
  /** Bytes at most (300 MB by default from config); checked against content-length up front and while streaming. */
  maxBytes: number;
  /** Exact `host:port` pairs allowed although private (VIDSHEET_FETCH_ALLOW), e.g. `127.0.0.1:4567`, `localhost:4567`. */
  allow: string[];
  /** Name resolution, injectable for unit tests; default: dns.lookup(host, { all: true, verbatim: true }). */
  resolve?: (hostname: string) => Promise<Array<{ address: string; family: number }>>;
  /** Aborts the download; the promise then rejects with the signal's reason (not a FetchError). */
  signal?: AbortSignal;
  /** Total time budget, connect to last byte (default 120 s). */
  timeoutMs?: number;
  /**
   * Idle timeout: no byte for this long, waiting for the response headers or between body chunks,
   * cuts the fetch (default 20 s). The body must also keep up the stall rule's rate (stall.ts).
   */
  idleTimeoutMs?: number;
  /** Handed the fetch's stall watch (a transfer slot uses it to judge and overtake it, transfers.ts). */
  onWatch?: (watch: StallWatch) => void;
}

/** Redirects followed at most (DESIGN §6). */
export const MAX_REDIRECTS = 5;
const REDIRECT_STATUSES = new Set([301, 302, 303, 307, 308]);
const HEADERS = { 'user-agent': 'vidsheet', accept: '*/*' };

const messages = {
  badUrl: 'the URL is not valid',
  badRedirect: 'the server redirected to an invalid URL',
  scheme: 'only http and https URLs can be fetched',
  userinfo: 'URLs with a user name or password cannot be fetched',
  privateAddress: 'the address is private or reserved; only public addresses can be fetched',
  redirects: `the URL redirected more than ${MAX_REDIRECTS} times`,
  unreachable: 'could not connect to the server',
  unanswered: 'the server closed the connection without answering',
  broken: 'the connection to the server broke off before the download finished',
  malformed: 'the server answered with something that is not valid HTTP',
  slow: 'the server took too long to answer',
  budget: 'the download took too long',
  stalled: 'the server sent the video too slowly',
  preempted: 'the fetch gave way to a paying one',
  empty: 'the server sent an empty response',
} as const;

const tooLarge = (maxBytes: number) => {
  const mb = Math.round((maxBytes / (1024 * 1024)) * 10) / 10;
  return new FetchError('too_large', `the download is larger than ${mb} MB`);
};

/** `host:port` as the allow list spells it: hostname as WHATWG URL writes it, explicit port. */
function hostPort(url: URL): string {
  return `${url.hostname}:${url.port || (url.protocol === 'https:' ? '443' : '80')}`;
}

/** The allow list in hostPort() form (`127.1:80` is `127.0.0.1:80`); malformed entries match nothing. */
function normaliseAllow(entries: string[]): Set<string> {
  const out = new Set<string>();
  for (const entry of entries) {
    const m = /^(.+):(\d{1,5})$/.exec(entry.trim());
    if (!m) continue;
    try {
      out.add(`${new URL(`http://${m[1]}/`).hostname}:${Number(m[2])}`);
    } catch {
      // Not a host: matches nothing.
    }
  }
  return out;
}

/** A hop's URL, or the reason it may not be requested at all (scheme, user info). */
function checkUrl(raw: string | URL, base?: URL): URL {
  let url: URL;
  try {
    url = new URL(raw, base);
  } catch {
    throw new FetchError('bad_url', base ? messages.badRedirect : messages.badUrl);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new FetchError('scheme', messages.scheme);
  if (url.username || url.password) throw new FetchError('userinfo', messages.userinfo);
  url.hash = '';
  return url;
}

const bare = (host: string) => (host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host);

function notFound(hostname: string): Error {
  return Object.assign(new Error(`no usable address for ${hostname}`), { code: 'ENOTFOUND' });
}

/** What one hop's connection found out while connecting (errors may reach us wrapped). */
interface HopState {
  refused: boolean;
}

/**
 * The hop's `lookup` (net/tls.connect call it for a name; an IP literal was judged before the
 * request): resolves once, refuses the host when ANY address is refused, and hands exactly the
 * judged addresses to the socket.
 */
function hopLookup(
  allowed: boolean,
  resolve: NonNullable<DownloadOptions['resolve']>,
  state: HopState,
): LookupFunction {
  return ((hostname, options, callback) => {
    resolve(hostname)
      .then((found) => {
        const addresses = found.map((a) => ({ address: a.address, family: isIP(a.address) }));
        if (addresses.length === 0 || addresses.some((a) => a.family === 0)) throw notFound(hostname);
        if (!allowed && addresses.some((a) => refusedAddress(a.address) !== undefined)) {
          state.refused = true;
          throw new FetchError('private_address', messages.privateAddress);
        }
        const family = options.family === 'IPv4' ? 4 : options.family === 'IPv6' ? 6 : options.family;
        const usable =
          family === 4 || family === 6 ? addresses.filter((a) => a.family === family) : addresses;
        const first = usable[0];
        if (!first) throw notFound(hostname);
        if (options.all) callback(null, usable);
        else callback(null, first.address, first.family);
      })
      .catch((error: NodeJS.ErrnoException) => callback(error, ''));
  }) as LookupFunction;
}

/**
 * One GET on its own connection (no pooling: each hop is judged afresh), resolved with the
 * response once its headers are in. Node's own client rather than undici's: undici 7 (the last
 * major for Node 20) throws an uncatchable assertion, ending the process, when a server closes the
 * connection while the body waits for a slow reader (nodejs/undici#5360, fixed only in 8).
 */
function get(url: URL, lookup: LookupFunction, signal: AbortSignal): Promise<IncomingMessage> {
  return new Promise((resolve, reject) => {
    const send = url.protocol === 'https:' ? httpsRequest : httpRequest;
    const req = send(url, { method: 'GET', headers: HEADERS, lookup, agent: false, signal }, resolve);
    // Once connected (TLS included), a reset or close before the answer is the server's doing:
    // saying it could not connect would send the caller looking for a network fault.
    let connected = false;
    req.once('socket', (socket) =>
      socket.once(url.protocol === 'https:' ? 'secureConnect' : 'connect', () => {
        connected = true;
      }),
    );
    const unanswered = (cause?: unknown) =>
      new FetchError('unreachable', connected ? messages.unanswered : messages.unreachable, { cause });
    req.once('error', (error: NodeJS.ErrnoException) =>
      reject(error.code?.startsWith('HPE_') || !connected ? error : unanswered(error)),
    );
    // A `101 Switching Protocols` is no answer to a GET. Node gives it to 'upgrade' listeners only;
    // with none it closes the socket with neither 'response' nor 'error', and the fetch would wait
    // forever, past every cut (they abort the request, which is gone by then).
    req.once('upgrade', (res: IncomingMessage, socket: Duplex) => {
      socket.destroy();
      reject(new FetchError('http_status', `the server answered ${res.statusCode}`));
    });
    // Whatever else ends the request unanswered settles the fetch too (after an answer: no effect),
    // and so does every cut, whatever state the request is in.
    req.once('close', () => reject(unanswered()));
    const cut = () => reject(signal.reason);
    signal.addEventListener('abort', cut, { once: true });
    req.once('close', () => signal.removeEventListener('abort', cut));
    req.end();
  });
}

/**
 * Drops a response body unread. A body destroyed before its end errors; with no listener that
 * error would be an uncaught exception (a process crash in the server).
 */
function discard(body: NodeJS.ReadableStream & { destroy(): void }): void {
  body.on('error', () => {});
  body.destroy();
}

/** Counts the body's bytes; errors once there are more than `maxBytes`. */
function byteCap(maxBytes: number, counted: { bytes: number }): Transform {
  return new Transform({
    transform(chunk: Buffer, _encoding, callback) {
      counted.bytes += chunk.length;
      if (counted.bytes > maxBytes) callback(tooLarge(maxBytes));
      else callback(null, chunk);
    },
  });
}

/**
 * Streams the URL's body into `file` (created, must not exist yet; removed again on any failure).
 * Returns the bytes written and the final URL after redirects. Rejects with a FetchError whose
 * message can be shown to the caller, or with the signal's reason when `options.signal` aborts.
 */
export async function downloadVideo(
  url: string,
  file: string,
  options: DownloadOptions,
): Promise<{ bytes: number; finalUrl: string; contentType?: string }> {
  const { maxBytes } = options;
  const resolve =
    options.resolve ?? ((hostname: string) => dnsLookup(hostname, { all: true, verbatim: true }));
  const allow = normaliseAllow(options.allow);
  const idle = options.idleTimeoutMs ?? 20_000;
  const stop = new AbortController();
  const timer = setTimeout(
    () => stop.abort(new FetchError('timeout', messages.budget)),
    options.timeoutMs ?? 120_000,
  );
  const onAbort = () => stop.abort(options.signal?.reason);
  if (options.signal?.aborted) onAbort();
  options.signal?.addEventListener('abort', onAbort, { once: true });
  let headersSeen = false;
  let created = false;
  let writeError: unknown;
  // Body bytes received so far (redirect bodies are dropped unread and count for nothing).
  const counted = { bytes: 0 };
  // DESIGN §5a: the same stall rule as an upload, from the first request on; its idle cut (no byte
  // for `idle`, connecting, waiting for the headers or between body chunks) is the fetch's timeout.
  const watch = watchTransfer(
    idle,
    () => counted.bytes,
    (why) =>
      stop.abort(
        why === 'idle'
          ? new FetchError('timeout', messages.slow)
          : why === 'preempted'
            ? new FetchError('preempted', messages.preempted)
            : new FetchError('stalled', messages.stalled),
      ),
  );
  options.onWatch?.(watch);
  try {
    let target = checkUrl(url);
    for (let redirects = 0; ; redirects++) {
      stop.signal.throwIfAborted();
      const allowed = allow.has(hostPort(target));
      const literal = bare(target.hostname);
      if (!allowed && isIP(literal) && refusedAddress(literal) !== undefined) {
        throw new FetchError('private_address', messages.privateAddress);
      }
      const state: HopState = { refused: false };
      let body: IncomingMessage | undefined;
      try {
        try {
          body = await get(target, hopLookup(allowed, resolve, state), stop.signal);
        } catch (error) {
          if (state.refused) throw new FetchError('private_address', messages.privateAddress);
          throw error;
        }
        const { statusCode = 0, headers } = body;
        const location = headers.location;
        if (REDIRECT_STATUSES.has(statusCode) && location !== undefined) {
          discard(body);
          if (redirects >= MAX_REDIRECTS) throw new FetchError('too_many_redirects', messages.redirects);
          target = checkUrl(location, target);
          continue;
        }
        if (statusCode < 200 || statusCode > 299) {
          discard(body);
          throw new FetchError('http_status', `the server answered ${statusCode}`);
        }
        const declared = Number(headers['content-length']);
        if (Number.isFinite(declared) && declared > maxBytes) {
          discard(body);
          throw tooLarge(maxBytes);
        }
        headersSeen = true;
        const cap = byteCap(maxBytes, counted);
        // 'wx': a file already there (or a link planted there) is never written through or removed.
        const handle = await open(file, 'wx').catch((error: unknown) => {
          writeError = error;
          throw error;
        });
        created = true;
        const out = handle.createWriteStream();
        // pipeline() hands one stream's error to the others: the disk failed only when the file
        // stream errored first (then the error is the caller's problem, not the server's).
        let failed = false;
        body.once('error', () => (failed = true));
        cap.once('error', () => (failed = true));
        out.once('error', (error) => {
          if (!failed) writeError = error;
          failed = true;
        });
        await pipeline(body, cap, out, { signal: stop.signal });
        if (counted.bytes === 0) throw new FetchError('empty', messages.empty);
        const type = headers['content-type'];
        return {
          bytes: counted.bytes,
          finalUrl: target.href,
          ...(typeof type === 'string' ? { contentType: type } : {}),
        };
      } finally {
        // The connection goes with its response (a redirect's, a refusal's, or a failed body's).
        if (body && !body.complete) discard(body);
        body?.socket?.destroy();
      }
    }
  } catch (error) {
    if (created) await rm(file, { force: true });
    throw translate(error, { stop, signal: options.signal, writeError, headersSeen });
  } finally {
    watch.stop();
    clearTimeout(timer);
    options.signal?.removeEventListener('abort', onAbort);
  }
}

/** Any failure as what the caller may see: a FetchError, the caller's abort reason, or a disk error. */
function translate(
  error: unknown,
  context: { stop: AbortController; signal?: AbortSignal; writeError: unknown; headersSeen: boolean },
): unknown {
  if (error instanceof FetchError) return error;
  if (context.stop.signal.aborted) {
    const reason: unknown = context.stop.signal.reason;
    // Our own budget, or the caller's abort (their reason, as given).
    if (reason instanceof FetchError) return reason;
    if (context.signal?.aborted) return context.signal.reason;
  }
  if (context.writeError !== undefined) return context.writeError;
  // Node's HTTP parser refused the answer (a bad status line or length, headers too large).
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code === 'string' && code.startsWith('HPE_'))
    return new FetchError('unreachable', messages.malformed, { cause: error });
  if (context.headersSeen) return new FetchError('broken', messages.broken, { cause: error });
  return new FetchError('unreachable', messages.unreachable, { cause: error });
}
