/**
 * The fetcher's address rule and its name-resolution path, with NO network at all.
 *
 * - The address table judges strings only: nothing is contacted.
 * - downloadVideo is given names with fake resolvers that return at least one refused address, so
 *   the socket's lookup fails before any connect, and IP literals that must be refused before any
 *   socket exists.
 * - An egress guard wraps `net.Socket.prototype.connect` for this file: every address a lookup
 *   hands to a socket is counted, and a non-loopback one is replaced by an error (so even a bug
 *   here sends no packet) and reported. The tests assert that no address was handed over at all.
 */
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import net, { isIP } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { refusedAddress } from '../../../src/server/remote/fetch/address-policy.js';
import { downloadVideo, FetchError, type FetchReason } from '../../../src/server/remote/fetch/download.js';

// ---------------------------------------------------------------------------------------------
// Egress guard

const guard = { handedOver: [] as string[], violations: [] as string[], literals: [] as string[] };
const originalConnect = net.Socket.prototype.connect;
const isLoopback = (ip: string) => ip === '::1' || ip.startsWith('127.') || ip === '::ffff:127.0.0.1';

beforeAll(() => {
  net.Socket.prototype.connect = function guarded(this: net.Socket, ...args: unknown[]) {
    const first = args[0];
    const options = (Array.isArray(first) ? first[0] : first) as net.TcpNetConnectOpts | undefined;
    if (options && typeof options === 'object' && typeof options.host === 'string') {
      if (isIP(options.host)) {
        guard.literals.push(options.host);
        if (!isLoopback(options.host)) {
          guard.violations.push(options.host);
          throw new Error('egress guard: non-loopback IP literal');
        }
      }
      const lookup = options.lookup;
      if (lookup) {
        options.lookup = ((host: string, opts: object, cb: (...a: unknown[]) => void) =>
          lookup(host, opts as never, (err: unknown, address: unknown, family?: unknown) => {
            if (err) return cb(err, address, family);
            const list = Array.isArray(address)
              ? (address as Array<{ address: string }>).map((a) => a.address)
              : [String(address)];
            guard.handedOver.push(...list);
            const outside = list.filter((a) => !isLoopback(a));
            if (outside.length) {
              guard.violations.push(...outside);
              return cb(new Error('egress guard: non-loopback address'), '');
            }
            return cb(null, address, family);
          })) as net.LookupFunction;
      }
    }
    return (originalConnect as (...a: unknown[]) => net.Socket).apply(this, args);
  } as typeof net.Socket.prototype.connect;
});

afterAll(() => {
  net.Socket.prototype.connect = originalConnect;
});

afterEach(() => {
  const violations = guard.violations.splice(0);
  guard.handedOver.length = 0;
  guard.literals.length = 0;
  expect(violations).toEqual([]);
});

// ---------------------------------------------------------------------------------------------
// The address table

describe('refusedAddress', () => {
  const refused: Array<[string, string]> = [
    // IPv4
    ['127.0.0.1', 'loopback'],
    ['127.255.255.254', 'loopback'],
    ['10.0.0.1', 'private'],
    ['10.255.255.255', 'private'],
    ['172.16.0.1', 'private'],
    ['172.31.255.255', 'private'],
    ['192.168.1.1', 'private'],
    ['169.254.169.254', 'link-local'],
    ['100.64.0.1', 'carrier-grade NAT'],
    ['100.127.255.255', 'carrier-grade NAT'],
    ['224.0.0.1', 'multicast'],
    ['239.255.255.255', 'multicast'],
    ['0.0.0.0', 'unspecified'],
    ['0.1.2.3', 'unspecified'],
    ['255.255.255.255', 'broadcast'],
    // ipaddr.js 2.5 files benchmarking (198.18/15) and documentation under 'reserved'.
    ['198.18.0.1', 'reserved'],
    ['198.19.255.255', 'reserved'],
    ['192.0.2.1', 'reserved'],
    ['198.51.100.7', 'reserved'],
    ['203.0.113.9', 'reserved'],
    ['192.0.0.8', 'reserved'],
    ['240.0.0.1', 'reserved'],
    // IPv6
    ['::1', 'loopback'],
    ['[::1]', 'loopback'],
    ['::', 'unspecified'],
    ['2001:db8::1', 'reserved'],
    ['fc00::1', 'unique-local'],
    ['fd12:3456::1', 'unique-local'],
    ['fe80::1', 'link-local'],
    ['fe80::1%eth0', 'scoped'],
    ['ff02::1', 'multicast'],
    ['ff0e::1', 'multicast'],
    ['fec0::1', 'site-local'],
    ['2001:2::1', 'benchmarking'],
    ['2002:a00:1::1', '6to4'],
    ['2002:808:808::1', '6to4'],
    ['2001::1', 'Teredo'],
    ['100::1', 'discard-only'],
    ['4000::1', 'not global unicast'],
    ['::ffff:0:7f00:1', 'IPv4-translated'],
    // IPv4-mapped: judged by the IPv4 address.
    ['::ffff:10.0.0.1', 'IPv4-mapped private'],
    ['::ffff:127.0.0.1', 'IPv4-mapped loopback'],
    ['::ffff:7f00:1', 'IPv4-mapped loopback'],
    ['::ffff:169.254.169.254', 'IPv4-mapped link-local'],
    ['0:0:0:0:0:ffff:c0a8:101', 'IPv4-mapped private'],
    // NAT64 well-known prefix: judged by the embedded IPv4 address; local-use prefix: refused.
    ['64:ff9b::10.0.0.1', 'NAT64 private'],
    ['64:ff9b::127.0.0.1', 'NAT64 loopback'],
    ['64:ff9b::a9fe:a9fe', 'NAT64 link-local'],
    ['64:ff9b:1::a00:1', 'NAT64'],
    ['64:ff9b:1::808:808', 'NAT64'],
    // ::/96, IPv4-compatible (deprecated): refused outright, even around a public address.
    // (ipaddr.js alone would read `::a.b.c.d` as IPv4-mapped.)
    ['::127.0.0.1', 'IPv4-compatible'],
    ['::7f00:1', 'IPv4-compatible'],
    ['::10.0.0.1', 'IPv4-compatible'],
    ['::8.8.8.8', 'IPv4-compatible'],
    // Not canonical address text (ipaddr.js alone would accept the odd IPv4 forms).
    ['2130706433', 'not an address'],
    ['0x7f000001', 'not an address'],
    ['0177.0.0.1', 'not an address'],
    ['127.1', 'not an address'],
    ['127.000.000.001', 'not an address'],
    ['localhost', 'not an address'],
    ['', 'not an address'],
    ['1.2.3.4.5', 'not an address'],
    ['[::1', 'not an address'],
    ['::1]', 'not an address'],
  ];
  it.each(refused)('refuses %s (%s)', (ip, reason) => {
    expect(refusedAddress(ip)).toBe(reason);
  });

  const allowed = [
    '8.8.8.8',
    '1.1.1.1',
    '93.184.216.34',
    '172.32.0.1',
    '100.128.0.1',
    '198.20.0.1',
    '223.255.255.255',
    '2606:4700::1111',
    '2a00:1450:4001:80b::200e',
    '[2606:4700::1111]',
    // Forms of a public IPv4 address that reach it: IPv4-mapped and NAT64 (well-known prefix).
    '::ffff:8.8.8.8',
    '64:ff9b::8.8.8.8',
    '64:ff9b::101:101',
  ];
  it.each(allowed)('allows %s', (ip) => {
    expect(refusedAddress(ip)).toBeUndefined();
  });
});

// ---------------------------------------------------------------------------------------------
// downloadVideo through the resolver, no network

let dir: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'vs-fetch-policy-'));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

let n = 0;
const fresh = () => join(dir, `download-${++n}`);

/** A resolver that answers every name with `addresses` and records the names asked for. */
function fakeResolver(addresses: string[]) {
  const asked: string[] = [];
  const resolve = vi.fn(async (hostname: string) => {
    asked.push(hostname);
    return addresses.map((address) => ({ address, family: isIP(address) }));
  });
  return { asked, resolve };
}

async function failure(promise: Promise<unknown>): Promise<FetchError> {
  const error = await promise.then(
    () => new Error('expected the download to fail'),
    (e: unknown) => e,
  );
  if (!(error instanceof FetchError)) throw error;
  return error;
}

describe('downloadVideo: names resolving to refused addresses', () => {
  const cases: string[][] = [
    ['93.184.216.34', '10.0.0.1'],
    ['10.0.0.1', '93.184.216.34'],
    ['10.0.0.1'],
    ['169.254.169.254'],
    ['100.64.0.1'],
    ['0.0.0.0'],
    ['198.18.0.1'],
    ['192.0.2.1'],
    ['2606:4700::1111', 'fd00::1'],
    ['::ffff:10.0.0.1'],
    ['64:ff9b::a9fe:a9fe'],
    ['::8.8.8.8'],
    ['fe80::1'],
    ['2001:db8::1'],
  ];
  it.each(cases.map((a) => [a.join(' + '), a] as const))(
    'refuses a name resolving to %s before any connect',
    async (_label, addresses) => {
      const { asked, resolve } = fakeResolver(addresses);
      for (const url of ['http://video.example/clip.mp4', 'https://video.example:8443/clip.mp4']) {
        const file = fresh();
        const error = await failure(downloadVideo(url, file, { maxBytes: 1 << 20, allow: [], resolve }));
        expect(error.reason).toBe('private_address');
        for (const a of addresses) expect(error.message).not.toContain(a);
        expect(error.message).not.toContain('video.example');
        expect(existsSync(file)).toBe(false);
      }
      // Resolved once per hop, at connect time, and no address ever reached a socket.
      expect(asked).toEqual(['video.example', 'video.example']);
      expect(guard.handedOver).toEqual([]);
      expect(guard.literals).toEqual([]);
    },
  );

  it('applies the allow list to the exact host:port only', async () => {
    const { resolve } = fakeResolver(['10.0.0.1']);
    const allow = ['video.example:8080', 'other.example:80', '10.0.0.1:80'];
    const error = await failure(
      downloadVideo('http://video.example/clip.mp4', fresh(), { maxBytes: 1 << 20, allow, resolve }),
    );
    expect(error.reason).toBe('private_address');
    expect(resolve).toHaveBeenCalledTimes(1);
    expect(guard.handedOver).toEqual([]);
  });

  it('calls a name whose resolver fails or returns no address unreachable, without detail', async () => {
    const failing = vi.fn(async () => {
      throw Object.assign(new Error('getaddrinfo ENOTFOUND internal.corp 10.1.2.3'), { code: 'ENOTFOUND' });
    });
    for (const resolve of [failing, fakeResolver([]).resolve, fakeResolver(['not-an-ip']).resolve]) {
      const file = fresh();
      const error = await failure(
        downloadVideo('http://internal.corp/x.mp4', file, { maxBytes: 1 << 20, allow: [], resolve }),
      );
      expect(error.reason).toBe('unreachable');
      expect(error.message).toBe('could not connect to the server');
      expect(existsSync(file)).toBe(false);
    }
    expect(guard.handedOver).toEqual([]);
  });
});

describe('the egress guard itself', () => {
  it('sees the addresses a lookup hands to a socket (loopback only)', async () => {
    // A loopback server that hangs up at once; the name is allowed to reach it.
    const server = net.createServer((socket) => socket.destroy());
    await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
    const { port } = server.address() as net.AddressInfo;
    try {
      const { resolve } = fakeResolver(['127.0.0.1']);
      const allow = [`video.example:${port}`];
      const error = await failure(
        downloadVideo(`http://video.example:${port}/`, fresh(), { maxBytes: 1 << 20, allow, resolve }),
      );
      expect(error.reason).toBe('unreachable');
      expect(guard.handedOver).toEqual(['127.0.0.1']);
    } finally {
      await new Promise((done) => server.close(done));
    }
  });
});

describe('downloadVideo: URLs refused before any lookup', () => {
  const cases: Array<[string, FetchReason, string]> = [
    ['file:///etc/passwd', 'scheme', 'only http and https URLs can be fetched'],
    ['ftp://video.example/x.mp4', 'scheme', 'only http and https URLs can be fetched'],
    ['gopher://video.example/', 'scheme', 'only http and https URLs can be fetched'],
    ['data:video/mp4;base64,AAAA', 'scheme', 'only http and https URLs can be fetched'],
    ['javascript:alert(1)', 'scheme', 'only http and https URLs can be fetched'],
    ['ws://video.example/', 'scheme', 'only http and https URLs can be fetched'],
    ['http://user@video.example/', 'userinfo', 'URLs with a user name or password cannot be fetched'],
    ['http://user:pw@video.example/', 'userinfo', 'URLs with a user name or password cannot be fetched'],
    ['http://:pw@video.example/', 'userinfo', 'URLs with a user name or password cannot be fetched'],
    ['not a url', 'bad_url', 'the URL is not valid'],
    ['http://[::1/', 'bad_url', 'the URL is not valid'],
    ['http://4294967296/', 'bad_url', 'the URL is not valid'],
    ['http://256.0.0.1/', 'bad_url', 'the URL is not valid'],
    ['/relative/path.mp4', 'bad_url', 'the URL is not valid'],
  ];
  it.each(cases)('%s: %s', async (url, reason, message) => {
    const { resolve } = fakeResolver(['10.0.0.1']);
    const file = fresh();
    const error = await failure(downloadVideo(url, file, { maxBytes: 1 << 20, allow: [], resolve }));
    expect([error.reason, error.message]).toEqual([reason, message]);
    expect(resolve).not.toHaveBeenCalled();
    expect(existsSync(file)).toBe(false);
    expect(guard.handedOver).toEqual([]);
  });

  it('rejects with the caller’s reason when already aborted', async () => {
    const { resolve } = fakeResolver(['10.0.0.1']);
    const reason = new Error('job cancelled');
    const error = await downloadVideo('http://video.example/', fresh(), {
      maxBytes: 1 << 20,
      allow: [],
      resolve,
      signal: AbortSignal.abort(reason),
    }).catch((e: unknown) => e);
    expect(error).toBe(reason);
    expect(resolve).not.toHaveBeenCalled();
  });
});

describe('downloadVideo: IP literals in every spelling WHATWG normalises', () => {
  const literals: Array<[string, string]> = [
    ['http://2130706433/', '127.0.0.1'],
    ['http://0x7f000001/', '127.0.0.1'],
    ['http://0177.0.0.1/', '127.0.0.1'],
    ['http://127.1/', '127.0.0.1'],
    ['http://0x7f.1/', '127.0.0.1'],
    ['http://127.0.0.1./', '127.0.0.1'],
    ['http://%31%32%37.0.0.1/', '127.0.0.1'],
    ['http://\uff10x7f.1/', '127.0.0.1'],
    ['http://0/', '0.0.0.0'],
    ['http://[::ffff:127.0.0.1]/', '[::ffff:7f00:1]'],
    ['http://[::127.0.0.1]/', '[::7f00:1]'],
    ['http://[64:ff9b::10.0.0.1]/', '[64:ff9b::a00:1]'],
  ];
  it.each(literals)('%s is the literal %s: refused before any lookup or socket', async (url, hostname) => {
    // The spelling the fetcher judges (the hop's URL); the refusal below is the fetcher's own.
    expect(new URL(url).hostname).toBe(hostname);
    const { resolve } = fakeResolver(['10.0.0.1']);
    const file = fresh();
    const error = await failure(downloadVideo(url, file, { maxBytes: 1 << 20, allow: [], resolve }));
    expect([error.reason, error.message]).toEqual([
      'private_address',
      'the address is private or reserved; only public addresses can be fetched',
    ]);
    expect(resolve).not.toHaveBeenCalled();
    expect(existsSync(file)).toBe(false);
    expect(guard.literals).toEqual([]);
    expect(guard.handedOver).toEqual([]);
  });

  it('http://LOCALHOST/ is a name: resolved as "localhost", and its loopback address refused', async () => {
    const { asked, resolve } = fakeResolver(['127.0.0.1', '::1']);
    const error = await failure(
      downloadVideo('http://LOCALHOST/clip.mp4', fresh(), { maxBytes: 1 << 20, allow: [], resolve }),
    );
    expect(error.reason).toBe('private_address');
    expect(asked).toEqual(['localhost']);
    expect(guard.handedOver).toEqual([]);
  });
});
