/**
 * The upload receiver every upload route shares (hosted/upload.ts), against a real server on loopback
 * and raw sockets: DESIGN §5a "Malformed requests are 4xx" (a multipart body cut before its closing
 * boundary is `422 bad_request`, never `500`), and a cut or stalled upload leaves nothing open: no file
 * descriptor of the server process (counted in /proc/<pid>/fd) points into its work directory and the
 * count comes back to where it was, the partial file deleted, nothing charged. And the headers'
 * deadline the same server keeps on every connection: a kept-alive one waits no longer for its next
 * request than a new one for its first.
 */
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { connect } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { plainClip } from '../helpers/fixtures.js';
import {
  newAccount,
  removeServerDirs,
  showAccount,
  startServer,
  type TestServer,
} from '../helpers/server.js';
import { BUSY, STALLED, slowUpload } from '../helpers/slow-client.js';
import { waitFor } from '../helpers/wait.js';

const MALFORMED = '{"error":"bad_request","message":"the multipart body is truncated or malformed"}';
/** Every route that receives an upload. */
const UPLOAD_ROUTES = ['/v1/vidsheet', '/v1/videos'];

let server: TestServer;
let small: Buffer;

beforeAll(async () => {
  small = readFileSync(await plainClip(5));
  server = await startServer({ VIDSHEET_STALL_S: '2', VIDSHEET_TEST_TIME_SCALE: '0.1' });
});
afterAll(async () => {
  await server?.stop();
  removeServerDirs();
});

/** The server process's open descriptors, as their link targets. */
function serverFds(): string[] {
  const dir = `/proc/${server.process.pid}/fd`;
  return readdirSync(dir).flatMap((fd) => {
    try {
      return [readlinkSync(join(dir, fd))];
    } catch {
      return []; // closed between the listing and the read
    }
  });
}
const intoWork = () => serverFds().filter((target) => target.startsWith(join(server.dataDir, 'work')));
const work = () => server.leftovers().filter((f) => f.startsWith('work/'));

describe.each(UPLOAD_ROUTES)('%s: cut and stalled uploads', (path) => {
  it('a multipart body that ends mid-file (no closing boundary) is 422 bad_request, never 500; nothing left open', async () => {
    const a = await newAccount(server, 5);
    const baseline = serverFds().length;
    const upload = await slowUpload(server.url, a.key, {
      path,
      size: 256 * 1024,
      first: 64 * 1024,
      cut: true,
      from: '127.0.0.40',
    });
    // The parser has opened the file: its descriptor points into the work directory.
    await waitFor(() => intoWork().length > 0, 'the upload file to be open', 10_000);
    upload.endCut();
    const answer = await upload.answer();
    upload.destroy();
    expect(answer).toEqual({ status: 422, body: MALFORMED });
    await waitFor(() => intoWork().length === 0, 'no descriptor into the work directory', 10_000);
    await waitFor(() => serverFds().length <= baseline, `descriptors back to ${baseline}`, 10_000);
    await waitFor(() => work().length === 0, 'the partial file to be deleted', 10_000);
    expect(await showAccount(server, a.email)).toMatchObject({ balance: 5, usage: [] });
  });

  it('an upload that stalls mid-file is cut (408): its file stream ended, the file deleted, no descriptor left', async () => {
    const a = await newAccount(server, 5);
    const baseline = serverFds().length;
    const upload = await slowUpload(server.url, a.key, { path, first: 64 * 1024, from: '127.0.0.41' });
    await waitFor(() => intoWork().length > 0, 'the upload file to be open', 10_000);
    const answer = await upload.answer();
    upload.destroy();
    expect(answer).toEqual(STALLED);
    await waitFor(() => intoWork().length === 0, 'no descriptor into the work directory', 10_000);
    await waitFor(() => serverFds().length <= baseline, `descriptors back to ${baseline}`, 10_000);
    await waitFor(() => work().length === 0, 'the partial file to be deleted', 10_000);
    expect(await showAccount(server, a.email)).toMatchObject({ balance: 5, usage: [] });
  });

  it('transfer slots: a third upload of one account while two arrive is 429 busy before its body', async () => {
    const a = await newAccount(server, 5);
    const held = [
      await slowUpload(server.url, a.key, { path, first: 1024, from: '127.0.0.43' }),
      await slowUpload(server.url, a.key, { path, first: 1024, from: '127.0.0.44' }),
    ];
    try {
      await waitFor(() => work().length >= 2, 'both uploads to be received', 10_000);
      const third = await slowUpload(server.url, a.key, { path, first: 1024, from: '127.0.0.45' });
      held.push(third);
      expect(await third.answer()).toEqual(BUSY);
    } finally {
      for (const upload of held) upload.destroy();
    }
    await waitFor(() => work().length === 0, 'the abandoned uploads to be deleted', 10_000);
    expect(await showAccount(server, a.email)).toMatchObject({ balance: 5, usage: [] });
  });

  it('after both, a whole upload through the same route still succeeds', async () => {
    const a = await newAccount(server, 5);
    const done = await slowUpload(server.url, a.key, {
      path,
      size: small.length,
      fill: small,
      from: '127.0.0.42',
    });
    done.finish();
    const answer = await done.answer();
    done.destroy();
    expect(answer?.status, answer?.body).toBe(path === '/v1/videos' ? 201 : 200);
    expect(JSON.parse(answer?.body ?? '{}').input).toBe('slow.mp4');
  });
});

describe('headers must arrive within 30 s (DESIGN §5a; here scaled to 3 s)', () => {
  it('a kept-alive connection idle after its answer is closed when the next headers are overdue', async () => {
    const { port } = new URL(server.url);
    const socket = connect(Number(port), '127.0.0.1');
    let received = '';
    socket.on('data', (chunk) => (received += chunk));
    const closed = new Promise<number>((resolve) => socket.once('close', () => resolve(Date.now())));
    socket.write(`GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nConnection: keep-alive\r\n\r\n`);
    await waitFor(() => /\r\n\r\n/.test(received), 'the answer');
    const answered = Date.now();
    expect(received).toMatch(/^HTTP\/1\.1 200 /);
    // Fastify's keep-alive alone held such a connection 72 s.
    const at = await Promise.race([closed, new Promise<number>((r) => setTimeout(() => r(0), 10_000))]);
    socket.destroy();
    expect(at, 'closed within the headers deadline').toBeGreaterThan(0);
    expect(at - answered).toBeLessThan(3000 + 1500);
  });
});
