/**
 * The mailbox rule (DESIGN §5a "Sign-in"): an address is one RFC 5321 mailbox, `local@domain`, and
 * nothing else. Accounts, the sign-in limits and the mailer all use the one spelling this returns, so
 * what is counted is exactly what is mailed: `victim@example.com,x@y.com`, `x<victim@example.com>` or
 * `"victim@example.com"` are refused here rather than becoming "other" addresses that a mail library
 * would still parse into deliveries to the victim.
 *
 * Accepted: a dot-string local part (RFC 5321 §4.1.2: atoms of RFC 5322 `atext`, joined by single
 * dots; no quoted strings), `@`, and a domain of LDH labels (RFC 5321 §4.1.2 `Domain`, at least two
 * labels, no address literal), within the §4.5.3.1 lengths (local part 64, domain 255, each label 63)
 * and 254 in all (a 256-octet path less its angle brackets). Surrounding whitespace is trimmed (forms
 * and copy-paste add it); any inside the address refuses it. No display name, comment, comma, angle
 * bracket, quote or non-ASCII character gets through.
 *
 * The whole address is lowercased, not only the domain: otherwise `Victim@` and `victim@` would be two
 * addresses to the send limits while nearly every mail server delivers them to one mailbox (and the
 * accounts table has always held lowercase addresses).
 */

/** RFC 5321 §4.5.3.1.1: at most 64 octets of local part. */
const MAX_LOCAL = 64;
/** RFC 5321 §4.5.3.1.2: at most 255 octets of domain. */
const MAX_DOMAIN = 255;
/** RFC 5321 §4.5.3.1.3: a 256-octet path, less its `<` and `>`. */
export const MAX_MAILBOX_LENGTH = 254;

/** RFC 5322 `atext`: letters, digits and ! # $ % & ' * + - / = ? ^ _ ` { | } ~ (no `"`, `,`, `<`, space). */
const ATOM = "[A-Za-z0-9!#$%&'*+\\-/=?^_`{|}~]+";
const DOT_STRING = new RegExp(`^${ATOM}(?:\\.${ATOM})*$`);
/** An LDH label: letters, digits, inner hyphens; 1 to 63 characters. */
const LABEL = /^[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?$/;
/** RFC 3696 §2: a top-level domain is never all digits (so `a@127.0.0.1` is not a domain). */
const TOP_LABEL = /[A-Za-z]/;

/**
 * The one spelling of `input` as a mailbox (trimmed, lowercased), or undefined when it is not exactly
 * one RFC 5321 mailbox under the rules above.
 */
export function normalizeMailbox(input: string): string | undefined {
  // Judged before lowercasing: some non-ASCII letters lowercase to ASCII ones (U+212A KELVIN SIGN is `k`).
  const address = input.trim();
  if (address.length > MAX_MAILBOX_LENGTH) return undefined;
  const at = address.lastIndexOf('@');
  const local = address.slice(0, at);
  const domain = address.slice(at + 1);
  if (at < 1 || local.length > MAX_LOCAL || !DOT_STRING.test(local)) return undefined;
  const labels = domain.split('.');
  if (
    domain.length > MAX_DOMAIN ||
    labels.length < 2 ||
    !labels.every((label) => LABEL.test(label)) ||
    !TOP_LABEL.test(labels.at(-1) ?? '')
  ) {
    return undefined;
  }
  return address.toLowerCase();
}

/** DESIGN §5a "An account is a mailbox": the domains whose local parts ignore dots. */
const DOTLESS_DOMAINS = new Set(['gmail.com', 'googlemail.com']);

/**
 * The mailbox an address delivers to (DESIGN §5a "An account is a mailbox"), or undefined when it is
 * not one mailbox under {@link normalizeMailbox}. Spellings that differ only by a `+tag` in the local
 * part (`a+x@example.com` is `a@example.com`), and, at gmail.com and googlemail.com, by dots in the
 * local part (`a.b@gmail.com` is `ab@gmail.com`), are one mailbox, so one account, one daily allowance
 * and one set of free-actor and sign-in limits. Nothing more is merged: googlemail.com stays its own
 * domain (DESIGN names the two domains for dots only), and other providers' separators (`-`) are not
 * tags. A local part that starts with `+` has no mailbox name before its tag and is kept whole.
 *
 * This is a key for counting and lookup only: mail still goes to the address as typed.
 */
export function mailboxKey(input: string): string | undefined {
  const address = normalizeMailbox(input);
  if (address === undefined) return undefined;
  const at = address.lastIndexOf('@');
  const domain = address.slice(at + 1);
  let local = address.slice(0, at);
  const plus = local.indexOf('+');
  if (plus > 0) local = local.slice(0, plus);
  if (DOTLESS_DOMAINS.has(domain)) local = local.replaceAll('.', '') || local;
  return `${local}@${domain}`;
}
