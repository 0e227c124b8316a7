/**
 * DESIGN §5a "after an early answer (401, 402, 413, 429) the server drains at most 10 s of body, then
 * closes", with raw sockets to a real listener on 127.0.0.1 (accounts made through the ledger, SQLite): a
 * client still sending its body reads its whole answer, and the connection is closed once the body
 * has arrived.
 */
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { Admission } from '../../src/server/hosted/admission.js';
import { bodyOf, type InProcessApp, inProcessApps } from '../helpers/app.js';

const apps = inProcessApps('sqlite');
const BUSY = '{"error":"busy"}';

/** A key: `paying` bought credits, `free` lives on the allowance (with floor 0 it cannot pay). */
async function keyOf(app: InProcessApp, how: 'paying' | 'free') {
  const email = `t-${randomUUID()}@example.com`;
  return (await app.account(email, how === 'paying' ? { purchase: 30 } : {})).key;
}

describe('early answers are not lost (DESIGN §5a: a lingering close)', () => {
  /**
   * The review's client: an upload announced 200 MB long, whose sender writes 3 MB of it (64 KiB every
   * 10 ms) before it reads anything (it is paused meanwhile, as a client busy sending is), then reads.
   * Were the connection closed under it, its next write would meet the reset (EPIPE) and the socket
   * would go with the answer still unread in it.
   */
  async function sendThenRead(headers: string, app: InProcessApp) {
    const client = await app.connect();
    client.socket.pause();
    client.socket.write(
      `POST /v1/vidsheet HTTP/1.1\r\nHost: 127.0.0.1:9\r\n${headers}` +
        `Content-Type: multipart/form-data; boundary=b\r\nContent-Length: ${200 * 1024 * 1024}\r\n\r\n--b\r\n`,
    );
    const chunk = Buffer.alloc(64 * 1024, 0x2a);
    for (let sent = 0; sent < 3 * 1024 * 1024 && !client.socket.destroyed; sent += chunk.length) {
      if (!client.socket.write(chunk)) await Promise.race([once(client.socket, 'drain'), client.closed]);
      await sleep(10);
    }
    client.socket.resume();
    await Promise.race([client.closed, sleep(3000)]);
    return client.received();
  }

  it.each([
    [
      '401',
      async (_app: InProcessApp): Promise<string> =>
        'Authorization: Bearer vs_live_0000000000000000000000000000000000000000\r\n',
      {},
    ],
    [
      '402',
      async (app: InProcessApp): Promise<string> => `Authorization: Bearer ${await keyOf(app, 'free')}\r\n`,
      { floor: '0' },
    ],
    [
      '413',
      async (app: InProcessApp): Promise<string> => `Authorization: Bearer ${await keyOf(app, 'paying')}\r\n`,
      { max: '1' },
    ],
    [
      '429',
      async (app: InProcessApp): Promise<string> => `Authorization: Bearer ${await keyOf(app, 'paying')}\r\n`,
      { full: true },
    ],
  ] as const)(
    'a %s answered before a 200 MB body is read whole by a client still sending',
    async (status, headers, how) => {
      const admission = new Admission(1);
      const place = 'full' in how ? admission.tryEnter() : undefined;
      const app = await apps.build({
        admission,
        env: {
          ...('max' in how ? { VIDSHEET_MAX_UPLOAD_MB: how.max } : {}),
          ...('floor' in how ? { VIDSHEET_ALLOWANCE_FLOOR: how.floor } : {}),
        },
      });
      const received = await sendThenRead(await headers(app), app);
      place?.();
      expect(received).toMatch(new RegExp(`^HTTP/1\\.1 ${status} `));
      expect(received).toMatch(/\r\nconnection: close\r\n/i);
      const expected = {
        '401': '{"error":"invalid_key"}',
        '402': '{"error":"insufficient_credits"}',
        '413': '{"error":"too_large","max_mb":1}',
        '429': BUSY,
      }[status];
      expect(bodyOf(received)).toBe(expected);
    },
  );

  it('a lingering connection closes as soon as the body has arrived, the answer read whole', async () => {
    const client = await (await apps.build()).connect();
    client.socket.write(
      'POST /v1/vidsheet HTTP/1.1\r\nHost: 127.0.0.1:9\r\nTransfer-Encoding: chunked\r\n' +
        'Content-Type: multipart/form-data; boundary=b\r\n\r\n',
    );
    for (let i = 0; i < 20; i++) {
      client.socket.write(`10000\r\n${'*'.repeat(0x10000)}\r\n`);
      await sleep(10);
    }
    const ended = Date.now();
    client.socket.write('0\r\n\r\n');
    const closedAt = await Promise.race([client.closed, sleep(5000).then(() => 0)]);
    expect(closedAt, 'the server closed the connection').toBeGreaterThan(0);
    expect(closedAt - ended).toBeLessThan(1000);
    expect(client.received()).toMatch(/^HTTP\/1\.1 401 /);
    expect(bodyOf(client.received())).toBe('{"error":"invalid_key"}');
  });
});
