/**
 * A real slow client: a raw socket that sends an upload's headers and as much of its multipart body
 * as the test says, from any loopback address (`127.0.0.x`), then waits. What the server answers is
 * parsed as it arrives, so a test sees an early answer while the body is still unfinished.
 */
import { once } from 'node:events';
import net from 'node:net';

export interface SlowUpload {
  /** Sends bytes of the file part (never past its announced size). */
  send(bytes: Buffer): void;
  /** Sends the rest of the file part and the closing boundary. */
  finish(): void;
  /**
   * Sends the rest of the file part and no closing boundary: with `options.cut`, an HTTP body of exactly
   * its announced length whose multipart ends mid-file (a client that gave up, a proxy that cut it).
   */
  endCut(): void;
  /** The answer (status and body) once it has fully arrived, or undefined if the socket closed first. */
  answer(): Promise<{ status: number; body: string } | undefined>;
  /** What arrived so far (raw). */
  received(): string;
  closed(): boolean;
  destroy(): void;
}

/**
 * Opens `POST /v1/vidsheet` (or `options.path`) with a `video` part announced `size` bytes long, sends the headers and
 * the part's head, and `first` bytes of the file. `from` is the local loopback address to connect from.
 */
export async function slowUpload(
  url: string,
  key: string | undefined,
  options: {
    size?: number;
    first?: number;
    from?: string;
    filename?: string;
    fill?: Buffer;
    path?: string;
    /** Announce only the head and `size` bytes, without the closing boundary (see `endCut`). */
    cut?: boolean;
  } = {},
): Promise<SlowUpload> {
  const size = options.size ?? 8 * 1024 * 1024;
  const fill = options.fill;
  const boundary = 'vidsheet-slow-client-boundary';
  const head = Buffer.from(
    `--${boundary}\r\nContent-Disposition: form-data; name="video"; filename="${options.filename ?? 'slow.mp4'}"\r\n` +
      'Content-Type: video/mp4\r\n\r\n',
  );
  const tail = Buffer.from(`\r\n--${boundary}--\r\n`);
  const { port } = new URL(url);
  const socket = net.connect({ port: Number(port), host: '127.0.0.1', localAddress: options.from });
  await once(socket, 'connect');
  let received = '';
  let closed = false;
  const ended = new Promise<void>((resolve) => socket.on('close', () => resolve()));
  socket.on('data', (chunk) => {
    received += chunk;
  });
  socket.on('error', () => {});
  socket.on('close', () => {
    closed = true;
  });
  let sent = 0;
  const send = (bytes: Buffer) => {
    const room = size - sent;
    const part = bytes.subarray(0, room);
    sent += part.length;
    if (!socket.destroyed) socket.write(part);
  };
  const contentFor = (n: number) => (fill ? fill.subarray(sent, sent + n) : Buffer.alloc(n, 0x2a));
  socket.write(
    `POST ${options.path ?? '/v1/vidsheet'} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n` +
      (key ? `Authorization: Bearer ${key}\r\n` : '') +
      `Content-Type: multipart/form-data; boundary=${boundary}\r\nContent-Length: ${head.length + size + (options.cut ? 0 : tail.length)}\r\n\r\n`,
  );
  socket.write(head);
  if (options.first) send(contentFor(options.first));
  const parse = () => {
    const end = received.indexOf('\r\n\r\n');
    if (end < 0) return undefined;
    const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(received)?.[1]);
    const length = Number(/\r\ncontent-length: (\d+)/i.exec(received.slice(0, end))?.[1] ?? Number.NaN);
    const body = received.slice(end + 4);
    if (!Number.isNaN(length) && Buffer.byteLength(body) < length) return undefined;
    return { status, body };
  };
  return {
    send,
    finish: () => {
      send(contentFor(size - sent));
      if (!socket.destroyed) socket.write(tail);
    },
    endCut: () => send(contentFor(size - sent)),
    answer: async () => {
      for (;;) {
        const got = parse();
        if (got) return got;
        if (closed) return undefined;
        await Promise.race([once(socket, 'data').catch(() => {}), ended]);
      }
    },
    received: () => received,
    closed: () => closed,
    destroy: () => socket.destroy(),
  };
}

/** The refusals a slow client meets, written out as the spec words them ("Errors → Hosted API", DESIGN §5a). */
export const STALLED = { status: 408, body: '{"error":"bad_request","message":"the upload stalled"}' };
export const BUSY = { status: 429, body: '{"error":"busy"}' };

/** Sends the whole of `bytes` (and the closing boundary) through a slow client; the server's answer. */
export async function wholeUpload(
  url: string,
  key: string,
  options: { bytes: Buffer; from?: string; filename?: string },
) {
  const upload = await slowUpload(url, key, {
    from: options.from,
    size: options.bytes.length,
    fill: options.bytes,
    filename: options.filename,
  });
  upload.finish();
  const answer = await upload.answer();
  upload.destroy();
  return answer;
}
