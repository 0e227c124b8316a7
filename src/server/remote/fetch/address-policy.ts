/**
 * Which IP addresses the URL fetcher may contact (DESIGN §6): public unicast only.
 *
 * The remote tool fetches a URL chosen by the caller from inside the service's network, so every
 * address it would connect to is judged here first (server-side request forgery). ipaddr.js names
 * the special ranges; anything it does not call `unicast` is refused, and a few forms it calls
 * unicast, or parses in its own way, are handled before it sees them:
 *
 * - Only canonical text is accepted (`net.isIP`): the odd IPv4 spellings (`2130706433`,
 *   `0x7f000001`, `0177.0.0.1`, `127.1`) that ipaddr.js would also parse are `not an address`
 *   here; URLs reach this module already normalised by WHATWG `new URL()`.
 * - IPv6 text goes through the WHATWG serialiser first, because ipaddr.js 2.5 reads the deprecated
 *   IPv4-compatible `::a.b.c.d` as the IPv4-mapped `::ffff:a.b.c.d` (the kernel reads it as
 *   `::a.b.c.d`). `::/96` (IPv4-compatible, deprecated) is then refused outright.
 * - IPv4-mapped `::ffff:a.b.c.d` and the well-known NAT64 prefix `64:ff9b::/96` (RFC 6052, which
 *   embeds the IPv4 address in the last 32 bits) are judged by their IPv4 address: they reach it.
 *   The local-use NAT64 prefix `64:ff9b:1::/48` (RFC 8215, network-specific embedding) is refused.
 * - IPv6 outside `2000::/3`, the only block IANA allocates global unicast from, is refused even
 *   where ipaddr.js has no name for it.
 * - Scoped IPv6 (`fe80::1%eth0`) is refused: a zone only makes sense on a local link.
 */
import { isIP } from 'node:net';
import ipaddr from 'ipaddr.js';

/** ipaddr.js range names (2.5) in words for the reason; anything not listed is shown as named. */
const RANGE_WORDS: Record<string, string> = {
  unspecified: 'unspecified',
  broadcast: 'broadcast',
  multicast: 'multicast',
  linkLocal: 'link-local',
  loopback: 'loopback',
  carrierGradeNat: 'carrier-grade NAT',
  private: 'private',
  // IPv4: 192.0.0/24, 192.0.2/24, 192.88.99/24, 198.18/15 (benchmarking), 198.51.100/24,
  // 203.0.113/24, 240/4. IPv6: 2001::/23, 2001:db8::/32 (documentation), 3fff::/20.
  reserved: 'reserved',
  uniqueLocal: 'unique-local',
  deprecatedSiteLocal: 'site-local',
  rfc6145: 'IPv4-translated',
  rfc6052: 'NAT64',
  '6to4': '6to4',
  teredo: 'Teredo',
  benchmarking: 'benchmarking',
  discard: 'discard-only',
};

const GLOBAL_UNICAST = ipaddr.IPv6.parseCIDR('2000::/3');
const NAT64_WELL_KNOWN = ipaddr.IPv6.parseCIDR('64:ff9b::/96');

function judgeIPv4(address: ipaddr.IPv4): string | undefined {
  const range = address.range();
  return range === 'unicast' ? undefined : (RANGE_WORDS[range] ?? range);
}

function judgeIPv6(address: ipaddr.IPv6): string | undefined {
  const parts = address.parts;
  if (address.isIPv4MappedAddress()) {
    const inner = judgeIPv4(address.toIPv4Address());
    return inner && `IPv4-mapped ${inner}`;
  }
  if (address.match(NAT64_WELL_KNOWN)) {
    const [hi = 0, lo = 0] = parts.slice(6);
    const inner = judgeIPv4(new ipaddr.IPv4([hi >> 8, hi & 0xff, lo >> 8, lo & 0xff]));
    return inner && `NAT64 ${inner}`;
  }
  const range = address.range();
  if (range === 'unspecified' || range === 'loopback') return RANGE_WORDS[range];
  if (parts.slice(0, 6).every((p) => p === 0)) return 'IPv4-compatible';
  if (range !== 'unicast') return RANGE_WORDS[range] ?? range;
  if (!address.match(GLOBAL_UNICAST)) return 'not global unicast';
  return undefined;
}

/**
 * Returns undefined when `ip` (canonical IPv4 or IPv6 text, brackets allowed) may be contacted,
 * else a short reason for logs ("loopback", "IPv4-mapped private", "not an address", ...).
 *
 * The reason names a range, never the address; still, callers show users only the generic text
 * of the fetch error, since the range of a name's address tells something about internal DNS.
 */
export function refusedAddress(ip: string): string | undefined {
  const text = ip.startsWith('[') && ip.endsWith(']') ? ip.slice(1, -1) : ip;
  const version = isIP(text);
  if (version === 4) return judgeIPv4(ipaddr.IPv4.parse(text));
  if (version !== 6) return 'not an address';
  if (text.includes('%')) return 'scoped';
  let canonical: string;
  try {
    // The WHATWG serialiser writes plain hex groups (`::a.b.c.d` becomes `::xxxx:xxxx`).
    canonical = new URL(`http://[${text}]/`).hostname.slice(1, -1);
  } catch {
    return 'not an address';
  }
  return judgeIPv6(ipaddr.IPv6.parse(canonical));
}
