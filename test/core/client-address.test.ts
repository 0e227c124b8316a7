/**
 * The per-address key (DESIGN §5, §5a): IPv4 by the full address, IPv4-mapped IPv6 as its IPv4
 * address, any other IPv6 by its /64, whatever the spelling. Fake inputs only (no traffic): the
 * expected keys are written from the rule, not captured from the function.
 */
import { describe, expect, it } from 'vitest';
import { addressKey } from '../../src/core/client-address.js';

describe('addressKey', () => {
  it.each([
    // IPv4: the address itself.
    ['198.51.100.7', '198.51.100.7'],
    ['127.0.0.1', '127.0.0.1'],
    [' 203.0.113.9 ', '203.0.113.9'],
    // IPv4-mapped IPv6, dotted or in hex groups, any case: the IPv4 address.
    ['::ffff:198.51.100.7', '198.51.100.7'],
    ['::FFFF:198.51.100.7', '198.51.100.7'],
    ['::ffff:c633:6407', '198.51.100.7'],
    ['0:0:0:0:0:ffff:c633:6407', '198.51.100.7'],
    ['::ffff:127.0.0.1', '127.0.0.1'],
    // IPv6: the /64, in lowercase hex without leading zeros.
    ['2001:db8:1:2:3:4:5:6', '2001:db8:1:2::/64'],
    ['2001:0DB8:0001:0002:ffff:ffff:ffff:ffff', '2001:db8:1:2::/64'],
    ['2001:db8:1:2::', '2001:db8:1:2::/64'],
    ['2001:db8::1', '2001:db8:0:0::/64'],
    ['2001:db8:0:0:1::1', '2001:db8:0:0::/64'],
    ['fe80::1%eth0', 'fe80:0:0:0::/64'],
    ['::1', '0:0:0:0::/64'],
    ['::', '0:0:0:0::/64'],
    // IPv4-compatible (deprecated) and NAT64 are IPv6 addresses like any other.
    ['::198.51.100.7', '0:0:0:0::/64'],
    ['64:ff9b::198.51.100.7', '64:ff9b:0:0::/64'],
    // A port or brackets a proxy wrote are not part of the address.
    ['198.51.100.7:4711', '198.51.100.7'],
    ['[2001:db8:1:2::9]:443', '2001:db8:1:2::/64'],
    ['[::ffff:198.51.100.7]', '198.51.100.7'],
  ])('%s → %s', (address, key) => {
    expect(addressKey(address)).toBe(key);
  });

  it('puts every address of one /64 under one key, and the next /64 under another', () => {
    const inside = [
      '2001:db8:aa:bb::1',
      '2001:db8:aa:bb:ffff:ffff:ffff:ffff',
      '2001:db8:aa:bb:1234:5678:9abc:def0',
      '2001:0db8:00aa:00bb:0000:0000:0000:0002',
    ];
    expect(new Set(inside.map(addressKey))).toEqual(new Set(['2001:db8:aa:bb::/64']));
    expect(addressKey('2001:db8:aa:bc::1')).not.toBe(addressKey('2001:db8:aa:bb::1'));
    expect(addressKey('2001:db8:aa:ba:ffff:ffff:ffff:ffff')).not.toBe(addressKey('2001:db8:aa:bb::1'));
  });

  it('keeps IPv4 addresses apart, even neighbours', () => {
    expect(addressKey('198.51.100.7')).not.toBe(addressKey('198.51.100.8'));
    expect(addressKey('::ffff:198.51.100.7')).not.toBe(addressKey('::ffff:198.51.100.8'));
  });

  it.each([
    'not-an-address',
    '2001:db8::1::2',
    '2001:db8:1:2:3:4:5:6:7',
    '12345::1',
    '::ffff:300.1.1.1',
    '1:2:3:4:5:6:7',
  ])('text that is not an address (%s) is counted as written, lowercased', (text) => {
    expect(addressKey(text)).toBe(text.toLowerCase());
    expect(addressKey(text.toUpperCase())).toBe(text.toLowerCase());
  });
});
