/**
 * The mailbox rule (DESIGN §5a "Sign-in"), as a table of addresses. The independent oracle for
 * "nothing else gets through" is nodemailer's own address parser, the one that turns a `to` string
 * into deliveries: every accepted address parses to exactly itself, one recipient and no display name,
 * while each hostile form parses into a delivery to the victim (so refusing it is what stops the flood).
 */
import addressparser from 'nodemailer/lib/addressparser';
import { describe, expect, it } from 'vitest';
import { MAX_MAILBOX_LENGTH, mailboxKey, normalizeMailbox } from '../../src/core/mailbox.js';
import { normalizeEmail } from '../../src/server/billing/ledger.js';
import { isValidEmail } from '../../src/server/keys/sign-in.js';

const ATEXT_SPECIALS = "!#$%&'*+-/=?^_`{|}~";

/** [input, the one spelling it normalises to]. */
const ACCEPTED: [string, string][] = [
  ['alice@example.com', 'alice@example.com'],
  ['  Alice@Example.COM ', 'alice@example.com'],
  ['\tBob@EXAMPLE.org\n', 'bob@example.org'],
  // Surrounding whitespace, line ends included, is trimmed off: the spelling handed on has none.
  ['victim@example.com\r\n', 'victim@example.com'],
  ['first.last+tag@sub.example.co.uk', 'first.last+tag@sub.example.co.uk'],
  ["o'brien@example.com", "o'brien@example.com"],
  [`${ATEXT_SPECIALS}@example.com`, `${ATEXT_SPECIALS}@example.com`],
  ['user@xn--bcher-kva.example', 'user@xn--bcher-kva.example'],
  ['x@a-b.example', 'x@a-b.example'],
  ['1@2.example', '1@2.example'],
  [`${'l'.repeat(64)}@example.com`, `${'l'.repeat(64)}@example.com`],
  [`a@${'d'.repeat(63)}.example`, `a@${'d'.repeat(63)}.example`],
];

/** Each delivers to the victim through nodemailer, yet none is one mailbox. */
const HOSTILE = [
  'victim@example.com,1',
  'victim@example.com,attacker@example.org',
  'victim@example.com;other@example.org',
  'x1<victim@example.com>',
  '<victim@example.com>',
  'Victim <victim@example.com>',
  '"victim@example.com"',
  '"x" <victim@example.com>',
  'victim(comment)@example.com',
  'victim@example.com (Victim)',
  'victim@example.com victim2@example.com',
  'group: victim@example.com;',
];

const REFUSED = [
  ...HOSTILE,
  '',
  '   ',
  'alice',
  '@example.com',
  'alice@',
  'a@b',
  'a@b@example.com',
  'a b@example.com',
  'a\tb@example.com',
  'victim@example.com\nBcc: other@example.org',
  'victim@exa mple.com',
  '"a b"@example.com',
  'a\\@example.com',
  '.a@example.com',
  'a.@example.com',
  'a..b@example.com',
  'a@[127.0.0.1]',
  'a@127.0.0.1',
  'a@-example.com',
  'a@example-.com',
  'a@example..com',
  'a@.example.com',
  'a@example.com.',
  'a@exa_mple.com',
  'jörg@example.com',
  'a@bücher.example',
  'a@example.com\u0000',
  // KELVIN SIGN lowercases to an ASCII `k`: judged before lowercasing, it is simply not ASCII.
  '\u212Aate@example.com',
  'a\uFF20example.com',
  `${'l'.repeat(65)}@example.com`,
  `a@${'d'.repeat(64)}.example`,
];

describe('the mailbox rule', () => {
  it.each(ACCEPTED)('accepts %j as %j, which the mailer parses to exactly itself', (input, spelling) => {
    expect(normalizeMailbox(input)).toBe(spelling);
    expect(normalizeEmail(input)).toBe(spelling);
    expect(isValidEmail(input)).toBe(true);
    expect(addressparser(spelling, { flatten: true })).toEqual([{ address: spelling, name: '' }]);
  });

  it.each(REFUSED.map((input) => [input]))('refuses %j', (input) => {
    expect(normalizeMailbox(input)).toBeUndefined();
    expect(isValidEmail(input)).toBe(false);
    expect(() => normalizeEmail(input)).toThrow(/^not an e-mail address: /);
  });

  it.each(HOSTILE.map((input) => [input]))(
    '%j would be a delivery to the victim if it were let through',
    (input) => {
      const parsed = addressparser(input, { flatten: true }).map((a) => a.address);
      expect(parsed).toContain('victim@example.com');
    },
  );

  it('holds RFC 5321 lengths: 254 characters in all, no more', () => {
    const domain = `${'d'.repeat(63)}.${'e'.repeat(63)}.${'f'.repeat(63)}.example`;
    const longest = `${'l'.repeat(MAX_MAILBOX_LENGTH - domain.length - 1)}@${domain}`;
    expect(longest).toHaveLength(254);
    expect(normalizeMailbox(longest)).toBe(longest);
    expect(normalizeMailbox(`l${longest}`)).toBeUndefined();
  });

  it('case variants and spacing are one address: what the limits count is what gets mail', () => {
    const spellings = [
      'victim@example.com',
      'VICTIM@example.com',
      'Victim@Example.Com',
      ' victim@EXAMPLE.COM ',
    ];
    expect(new Set(spellings.map(normalizeMailbox))).toEqual(new Set(['victim@example.com']));
  });
});

/** [spellings that are one mailbox, that mailbox] (DESIGN §5a "An account is a mailbox"). */
const ONE_MAILBOX: [string[], string][] = [
  [
    ['a@example.com', 'a+x@example.com', 'A+X@Example.COM', 'a+@example.com', 'a+x+y@example.com'],
    'a@example.com',
  ],
  [['first.last@example.com', 'first.last+news@example.com'], 'first.last@example.com'],
  [['ab@gmail.com', 'a.b@gmail.com', 'A.B+tag@GMail.com', 'a.b.+x@gmail.com'], 'ab@gmail.com'],
  [
    ['jane.doe@googlemail.com', 'janedoe+x@googlemail.com', 'j.a.n.e.d.o.e@googlemail.com'],
    'janedoe@googlemail.com',
  ],
  [['+tag@example.com'], '+tag@example.com'],
];

/** Pairs that stay two mailboxes: each spelling is its own. */
const DISTINCT: [string, string][] = [
  // Dots count everywhere but at gmail.com and googlemail.com.
  ['a.b@example.com', 'ab@example.com'],
  ['a.b@mail.gmail.com', 'ab@mail.gmail.com'],
  // googlemail.com is not merged into gmail.com: DESIGN names both for dots only.
  ['ab@gmail.com', 'ab@googlemail.com'],
  // Only `+` is a tag separator.
  ['a-x@example.com', 'a@example.com'],
  ['a@example.com', 'a@example.org'],
  ['+x@example.com', '+y@example.com'],
];

describe('the mailbox key: one account per mailbox', () => {
  it.each(ONE_MAILBOX)('%j are all %j', (spellings, mailbox) => {
    for (const spelling of spellings) expect(mailboxKey(spelling), spelling).toBe(mailbox);
  });

  it.each(DISTINCT)('%j and %j are two mailboxes', (a, b) => {
    expect(mailboxKey(a)).toBeDefined();
    expect(mailboxKey(a)).not.toBe(mailboxKey(b));
  });

  it.each(REFUSED.map((input) => [input]))('has no mailbox for %j', (input) => {
    expect(mailboxKey(input)).toBeUndefined();
  });

  it('a mailbox key is itself an address with the same key (stable under a second pass)', () => {
    for (const [spellings] of ONE_MAILBOX) {
      for (const spelling of spellings) {
        const key = mailboxKey(spelling) as string;
        expect(normalizeMailbox(key)).toBe(key);
        expect(mailboxKey(key)).toBe(key);
      }
    }
  });
});
