/**
 * The operator commands (DESIGN §7) on a real database: what each prints on stdout (only the key, only
 * the balance, `show`'s JSON in its fixed key order), one-line errors with exit 1, and running beside a
 * server that holds the same file open and writes to it.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Kysely } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { adminUsage, runAdmin } from '../../src/server/admin.js';
import { Ledger } from '../../src/server/billing/ledger.js';
import { openDatabase } from '../../src/server/db/open.js';
import type { Database } from '../../src/server/db/schema.js';

const tmp = mkdtempSync(join(tmpdir(), 'vidsheet-admin-'));
const dataDir = join(tmp, 'data');
const clock = { now: new Date('2025-03-01T12:00:00.000Z') };
let db: Kysely<Database>;
let ledger: Ledger;

beforeAll(async () => {
  db = await openDatabase({ dataDir });
  ledger = new Ledger(db, { allowanceFloor: 7, clock: () => clock.now });
});

afterAll(async () => {
  await db.destroy();
  rmSync(tmp, { recursive: true, force: true });
});

async function admin(...argv: string[]) {
  let stdout = '';
  let stderr = '';
  const code = await runAdmin(
    argv,
    {
      stdout: (text) => {
        stdout += text;
      },
      stderr: (text) => {
        stderr += text;
      },
    },
    ledger,
  );
  return { code, stdout, stderr };
}

/** Every object's keys, depth first, so a reordering anywhere shows. */
function keyPaths(value: unknown, path = ''): string[] {
  if (Array.isArray(value)) return value.flatMap((item, i) => keyPaths(item, `${path}[${i}]`));
  if (value === null || typeof value !== 'object') return [];
  return Object.entries(value).flatMap(([key, inner]) => [
    `${path}.${key}`,
    ...keyPaths(inner, `${path}.${key}`),
  ]);
}

describe('create-key and revoke-key', () => {
  it('create-key creates the account if needed and prints only a working key', async () => {
    const result = await admin('create-key', '--email', ' New@Example.com');
    expect(result).toMatchObject({ code: 0, stderr: '' });
    expect(result.stdout).toMatch(/^vs_live_[0-9a-f]{40}\n$/);
    const account = await ledger.accounts.accountForKey(result.stdout.trim());
    expect(account).toMatchObject({ email: 'new@example.com', balance: 0, purchased: false });

    const second = await admin('create-key', '--email=new@example.com');
    expect(second.code).toBe(0);
    expect(second.stdout).not.toBe(result.stdout);
    expect((await ledger.accounts.accountForKey(second.stdout.trim()))?.id).toBe(account?.id);
  });

  it('create-key with any spelling of a mailbox mints keys of its one account (DESIGN §5a)', async () => {
    const spellings = ['ops.team+ci@gmail.com', 'opsteam@gmail.com', 'O.P.S.Team+laptop@GMAIL.com'];
    const ids = [];
    for (const email of spellings) {
      const result = await admin('create-key', '--email', email);
      expect(result, email).toMatchObject({ code: 0, stderr: '' });
      ids.push((await ledger.accounts.accountForKey(result.stdout.trim()))?.id);
    }
    expect(new Set(ids).size).toBe(1);
    const shown = JSON.parse((await admin('show', '--email', 'opsteam+x@gmail.com')).stdout);
    expect(shown).toMatchObject({ email: 'ops.team+ci@gmail.com' });
    expect(shown.keys).toHaveLength(3);
  });

  it('revoke-key makes the key invalid at once and says so; a second revoke is an error', async () => {
    const key = (await admin('create-key', '--email', 'revoke@example.com')).stdout.trim();
    const result = await admin('revoke-key', '--key', key);
    expect(result).toEqual({ code: 0, stdout: `revoked ${key.slice(0, 12)}…\n`, stderr: '' });
    expect(await ledger.accounts.accountForKey(key)).toBeUndefined();

    const again = await admin('revoke-key', `--key=${key}`);
    expect(again.code).toBe(1);
    expect(again.stdout).toBe('');
    expect(again.stderr).toMatch(/^no active key vs_live_.{4}… \(unknown or already revoked\)\n$/);
    expect(again.stderr).not.toContain(key);

    const unknown = await admin('revoke-key', '--key', `vs_live_${'a'.repeat(40)}`);
    expect(unknown.code).toBe(1);
    const malformed = await admin('revoke-key', '--key', 'vs_live_nothex');
    expect(malformed).toMatchObject({ code: 1, stdout: '' });
    expect(malformed.stderr).toMatch(/--key must be a key/);
  });
});

describe('add-credits', () => {
  it('prints only the new balance of an existing account, and is a grant, not a purchase', async () => {
    await ledger.accounts.findOrCreateAccount('fund@example.com');
    expect(await admin('add-credits', '--email', 'fund@example.com', '--credits', '25')).toEqual({
      code: 0,
      stdout: '25\n',
      stderr: '',
    });
    expect(await admin('add-credits', '--credits=5', '--email=FUND@example.com')).toEqual({
      code: 0,
      stdout: '30\n',
      stderr: '',
    });
    const account = await ledger.accounts.accountByEmail('fund@example.com');
    expect(account).toMatchObject({ balance: 30, purchased: false });
    expect(await ledger.credits.ledgerSum(account?.id as number)).toBe(30);
    const kinds = await db
      .selectFrom('ledger')
      .select('kind')
      .where('account_id', '=', account?.id as number)
      .execute();
    expect(kinds).toEqual([{ kind: 'grant' }, { kind: 'grant' }]);
  });

  it('refuses an e-mail no account has: exit 1, one line on stderr, no account and no ledger entry made', async () => {
    const entries = async () =>
      Number(
        (
          await db
            .selectFrom('ledger')
            .select((eb) => eb.fn.countAll().as('n'))
            .executeTakeFirst()
        )?.n,
      );
    const before = await entries();
    for (const address of ['nobody@example.com', ' NoBody@Example.com']) {
      expect(await admin('add-credits', '--email', address, '--credits', '50')).toEqual({
        code: 1,
        stdout: '',
        stderr: 'no account for nobody@example.com\n',
      });
    }
    expect(await ledger.accounts.accountByEmail('nobody@example.com')).toBeUndefined();
    expect(await entries()).toBe(before);
    // Only create-key makes an account; then add-credits works for it.
    expect((await admin('create-key', '--email', 'nobody@example.com')).code).toBe(0);
    expect(await admin('add-credits', '--email', 'nobody@example.com', '--credits', '50')).toEqual({
      code: 0,
      stdout: '50\n',
      stderr: '',
    });
    expect(await entries()).toBe(before + 1);
  });

  it('refuses anything but a positive whole number of credits', async () => {
    for (const bad of ['0', '-5', '1.5', '1e3', 'ten', '', '2000000000']) {
      const result = await admin('add-credits', '--email', 'bad@example.com', `--credits=${bad}`);
      expect(result.code, bad).toBe(1);
      expect(result.stdout).toBe('');
      expect(result.stderr).toMatch(/^--credits (must be a whole number|needs a value)/);
      expect(result.stderr.trimEnd().split('\n')).toHaveLength(1);
    }
    expect(await ledger.accounts.accountByEmail('bad@example.com')).toBeUndefined();
  });
});

describe('show', () => {
  it('prints email, balance, purchased, keys and usage in the fixed key order', async () => {
    const account = await ledger.accounts.findOrCreateAccount('show@example.com');
    const first = await ledger.accounts.createKey(account.id);
    await ledger.accounts.revokeKey(first.key);
    const second = await ledger.accounts.createKey(account.id);
    await ledger.credits.purchase(account.id, 30, 'stripe:cs_show');
    await ledger.credits.charge({
      accountId: account.id,
      jobId: 'job-a',
      price: 2,
      surface: 'http',
      density: '4x4',
      sheets: 1,
      ttlSeconds: 60,
    });
    clock.now = new Date('2025-03-01T12:00:05.000Z');
    await ledger.credits.charge({
      accountId: account.id,
      jobId: 'job-b',
      price: 5,
      surface: 'mcp',
      density: '6x6',
      sheets: 1,
      ttlSeconds: 60,
    });
    await ledger.credits.refund('job-b');

    const result = await admin('show', '--email', 'show@example.com');
    expect(result.code).toBe(0);
    expect(result.stderr).toBe('');
    const expected = {
      email: 'show@example.com',
      balance: 28,
      purchased: true,
      keys: [
        {
          prefix: first.prefix,
          created_at: '2025-03-01T12:00:00.000Z',
          revoked_at: '2025-03-01T12:00:00.000Z',
        },
        { prefix: second.prefix, created_at: '2025-03-01T12:00:00.000Z', revoked_at: null },
      ],
      usage: [
        {
          job_id: 'job-b',
          surface: 'mcp',
          density: '6x6',
          sheets: 1,
          credits: 5,
          refunded: true,
          created_at: '2025-03-01T12:00:05.000Z',
        },
        {
          job_id: 'job-a',
          surface: 'http',
          density: '4x4',
          sheets: 1,
          credits: 2,
          refunded: false,
          created_at: '2025-03-01T12:00:00.000Z',
        },
      ],
    };
    // The text itself, so the key order on stdout is checked, not only the parsed values.
    expect(result.stdout).toBe(`${JSON.stringify(expected, null, 2)}\n`);
    const parsed = JSON.parse(result.stdout);
    expect(keyPaths(parsed)).toEqual(keyPaths(expected));
    expect(Object.keys(parsed)).toEqual(['email', 'balance', 'purchased', 'keys', 'usage']);
    expect(Object.keys(parsed.keys[0])).toEqual(['prefix', 'created_at', 'revoked_at']);
    expect(Object.keys(parsed.usage[0])).toEqual([
      'job_id',
      'surface',
      'density',
      'sheets',
      'credits',
      'refunded',
      'created_at',
    ]);
    expect(result.stdout).not.toContain(second.key);
  });

  it('is an error for an unknown account, and makes none', async () => {
    expect(await admin('show', '--email', 'unknown@example.com')).toEqual({
      code: 1,
      stdout: '',
      stderr: 'no account for unknown@example.com\n',
    });
    expect(await ledger.accounts.accountByEmail('unknown@example.com')).toBeUndefined();
    expect(await admin('show', '--email', 'nobody-at-all@example.com')).toEqual({
      code: 1,
      stdout: '',
      stderr: 'no account for nobody-at-all@example.com\n',
    });
  });
});

describe('usage and command-line errors', () => {
  it('prints the usage on stdout: exit 0 for --help, exit 1 for no command', async () => {
    for (const help of [['--help'], ['-h'], ['show', '--help']]) {
      expect(await admin(...help)).toEqual({ code: 0, stdout: adminUsage, stderr: '' });
    }
    expect(await admin()).toEqual({ code: 1, stdout: adminUsage, stderr: '' });
    for (const command of ['create-key', 'revoke-key', 'add-credits', 'show'])
      expect(adminUsage).toContain(command);
  });

  it.each([
    [['frobnicate'], /^unknown admin command: frobnicate$/],
    [['create-key'], /^create-key needs --email <email> \(missing --email\)$/],
    [['create-key', '--email'], /^--email needs a value$/],
    [['create-key', '--email='], /^--email needs a value$/],
    [['create-key', '--email', '--key', 'x'], /^--email needs a value$/],
    [['create-key', '--email', 'a@example.com', '--email', 'b@example.com'], /^--email given twice$/],
    [['create-key', '--email', 'a@example.com', 'extra'], /^unexpected argument for create-key: extra$/],
    [['create-key', '--key', 'x'], /^unknown flag for create-key: --key$/],
    [
      ['create-key', '--email', 'not-an-address'],
      /^--email must be an e-mail address, got "not-an-address"$/,
    ],
    [['add-credits', '--email', 'a@example.com'], /^add-credits needs .* \(missing --credits\)$/],
    [['show', '--email', 'a b@example.com'], /^--email must be an e-mail address/],
    [['revoke-key'], /^revoke-key needs --key <key> \(missing --key\)$/],
  ])('%j → exit 1 and one line on stderr', async (argv, message) => {
    const result = await admin(...argv);
    expect(result.code).toBe(1);
    expect(result.stdout).toBe('');
    expect(result.stderr.endsWith('\n')).toBe(true);
    const lines = result.stderr.slice(0, -1).split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(message);
  });
});

describe('beside a running server', () => {
  it('works while another connection holds the same file open and writes to it at the same moment', async () => {
    // A second connection to the same file, as a running server holds it. Each round starts an admin
    // command and a server charge together, so their transactions overlap and one has to wait for the other.
    const server = await openDatabase({ dataDir });
    try {
      const serverLedger = new Ledger(server, { allowanceFloor: 7, clock: () => clock.now });
      const customer = await serverLedger.accounts.findOrCreateAccount('busy@example.com');
      await serverLedger.credits.purchase(customer.id, 100, 'stripe:busy');
      const charge = (round: number) =>
        serverLedger.credits.charge({
          accountId: customer.id,
          jobId: `busy-${round}`,
          price: 1,
          surface: 'http',
          density: '3x3',
          sheets: 1,
          ttlSeconds: 60,
        });

      for (let round = 0; round < 20; round++) {
        const [granted, charged, key] = await Promise.all([
          admin('add-credits', '--email', 'busy@example.com', '--credits', '10'),
          charge(round),
          admin('create-key', '--email', 'busy@example.com'),
        ]);
        expect(granted).toMatchObject({ code: 0, stderr: '' });
        expect(granted.stdout).toMatch(/^\d+\n$/);
        expect(charged.ok).toBe(true);
        expect(key).toMatchObject({ code: 0, stderr: '' });
      }

      const account = await serverLedger.accounts.accountById(customer.id);
      expect(account?.balance).toBe(100 + 20 * 10 - 20);
      expect(await serverLedger.credits.ledgerSum(customer.id)).toBe(account?.balance);
      expect(await ledger.accounts.listKeys(customer.id)).toHaveLength(20);
      const shown = JSON.parse((await admin('show', '--email', 'busy@example.com')).stdout);
      expect(shown.usage).toHaveLength(20);
      expect(shown.balance).toBe(280);
    } finally {
      await server.destroy();
    }
  });
});
