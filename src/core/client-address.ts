/**
 * The key every per-address limit counts a client under (DESIGN §5, §5a): the sign-in send and try
 * limits, the `/mcp` flood limit, the anonymous lane, transfers per client. One rule, so no limit can
 * be escaped by a spelling another limit does not share:
 *
 * - IPv4 (`198.51.100.7`): the address itself.
 * - IPv4-mapped IPv6 (`::ffff:198.51.100.7`): the IPv4 address it maps, as a dual-stack socket
 *   reports an IPv4 peer.
 * - Any other IPv6 address: its /64 (`2001:db8:1:2::/64`). A subscriber is normally handed at least a
 *   /64 and may use any of its 2^64 addresses at will, so counting full addresses would give one
 *   client as many quotas as it likes.
 *
 * A port a proxy appended (`198.51.100.7:4711`, `[2001:db8::1]:443`) and an IPv6 zone (`%eth0`) are
 * dropped. Text that is not an address at all is kept as it is (trimmed and lowercased): it still
 * counts, under its own name.
 */
export function addressKey(address: string): string {
  const text = withoutPort(address.trim().toLowerCase());
  const groups = ipv6Groups(text);
  if (groups === undefined) return text;
  const [a = 0, b = 0, c = 0, d = 0, e = 0, f = 0, g = 0, h = 0] = groups;
  if (a === 0 && b === 0 && c === 0 && d === 0 && e === 0 && f === 0xffff) {
    return `${g >> 8}.${g & 0xff}.${h >> 8}.${h & 0xff}`;
  }
  return `${[a, b, c, d].map((group) => group.toString(16)).join(':')}::/64`;
}

/** `[v6]:port` and `a.b.c.d:port` without the port and brackets; anything else unchanged. */
function withoutPort(text: string): string {
  const bracketed = /^\[([^\]]+)\](?::\d+)?$/.exec(text);
  if (bracketed) return bracketed[1] as string;
  const v4 = /^(\d{1,3}(?:\.\d{1,3}){3}):\d+$/.exec(text);
  return v4 ? (v4[1] as string) : text;
}

/** The eight 16-bit groups of an IPv6 address (any valid spelling), or undefined when it is not one. */
function ipv6Groups(address: string): number[] | undefined {
  let text = address.split('%')[0] as string;
  if (!text.includes(':')) return undefined;
  // A dotted IPv4 tail (`::ffff:1.2.3.4`, `64:ff9b::1.2.3.4`) is the last two groups.
  let tail: number[] = [];
  const dotted = /^(.*:)(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(text);
  if (dotted) {
    const bytes = dotted.slice(2).map(Number);
    if (bytes.some((byte) => byte > 255)) return undefined;
    const [b0 = 0, b1 = 0, b2 = 0, b3 = 0] = bytes;
    tail = [(b0 << 8) | b1, (b2 << 8) | b3];
    const head = dotted[1] as string;
    text = head.endsWith('::') ? head : head.slice(0, -1);
  }
  const halves = text.split('::');
  if (halves.length > 2) return undefined;
  const groupsOf = (part: string): number[] =>
    part === ''
      ? []
      : part.split(':').map((g) => (/^[0-9a-f]{1,4}$/.test(g) ? Number.parseInt(g, 16) : Number.NaN));
  const before = groupsOf(halves[0] as string);
  const after = halves.length === 2 ? groupsOf(halves[1] as string) : [];
  const explicit = [...before, ...after, ...tail];
  if (explicit.some(Number.isNaN)) return undefined;
  if (halves.length === 1) return explicit.length === 8 ? explicit : undefined;
  if (explicit.length > 7) return undefined;
  return [...before, ...Array<number>(8 - explicit.length).fill(0), ...after, ...tail];
}
