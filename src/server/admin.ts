/**
 * Operator commands, `vidsheet-server admin <command>` (DESIGN §7). They go through the same Ledger
 * as the server, so they are safe while it runs: every write is a short transaction that waits for
 * the server's. Output is made for scripts: `create-key` prints only the key, `add-credits` only the
 * balance, `show` one JSON object; every error is one line on stderr and exit status 1.
 */
import { KEY_PATTERN, type Ledger, MAX_CREDITS, normalizeEmail } from './billing/ledger.js';

export interface AdminIo {
  stdout(text: string): void;
  stderr(text: string): void;
}

export const adminUsage = `vidsheet-server admin — operator commands (safe while the server runs)

Usage:
  vidsheet-server admin create-key --email <e>                 create the account if needed, print a new key
  vidsheet-server admin revoke-key --key <k>                   revoke a key at once
  vidsheet-server admin add-credits --email <e> --credits <n>  grant an existing account credits (not a purchase), print the balance
  vidsheet-server admin show --email <e>                       print the account, its keys and usage as JSON

Flags take their value as "--email x" or "--email=x". The database is the server's: VIDSHEET_DATA_DIR.
`;

const COMMANDS = {
  'create-key': ['email'],
  'revoke-key': ['key'],
  'add-credits': ['email', 'credits'],
  show: ['email'],
} as const;
type Command = keyof typeof COMMANDS;

const isCommand = (name: string): name is Command => Object.hasOwn(COMMANDS, name);

/** Runs one operator command; `argv` is what follows `vidsheet-server admin`. Returns the exit status. */
export async function runAdmin(argv: string[], io: AdminIo, ledger: Ledger): Promise<number> {
  const [command, ...rest] = argv;
  if (command === undefined) {
    io.stdout(adminUsage);
    return 1;
  }
  if (command === '--help' || command === '-h' || rest.includes('--help') || rest.includes('-h')) {
    io.stdout(adminUsage);
    return 0;
  }
  try {
    if (!isCommand(command)) throw new Error(`unknown admin command: ${command}`);
    const flags = parseFlags(command, rest);
    switch (command) {
      case 'create-key': {
        const account = await ledger.accounts.findOrCreateAccount(email(flags.email));
        io.stdout(`${(await ledger.accounts.createKey(account.id)).key}\n`);
        return 0;
      }
      case 'revoke-key': {
        const key = flags.key as string;
        if (!KEY_PATTERN.test(key))
          throw new Error('--key must be a key: vs_live_ followed by 40 hex characters');
        if (!(await ledger.accounts.revokeKey(key)))
          throw new Error(`no active key ${key.slice(0, 12)}… (unknown or already revoked)`);
        io.stdout(`revoked ${key.slice(0, 12)}…\n`);
        return 0;
      }
      case 'add-credits': {
        const address = email(flags.email);
        const credits = creditsValue(flags.credits as string);
        const account = await existingAccount(ledger, address);
        io.stdout(`${await ledger.credits.grant(account.id, credits)}\n`);
        return 0;
      }
      case 'show': {
        const account = await existingAccount(ledger, email(flags.email));
        const [keys, usage] = await Promise.all([
          ledger.accounts.listKeys(account.id),
          ledger.jobs.usage(account.id),
        ]);
        const report = {
          email: account.email,
          balance: account.balance,
          purchased: account.purchased,
          keys: keys.map((key) => ({
            prefix: key.prefix,
            created_at: key.createdAt,
            revoked_at: key.revokedAt,
          })),
          usage: usage.map((row) => ({
            job_id: row.jobId,
            surface: row.surface,
            density: row.density,
            sheets: row.sheets,
            credits: row.credits,
            refunded: row.refunded,
            created_at: row.createdAt,
          })),
        };
        io.stdout(`${JSON.stringify(report, null, 2)}\n`);
        return 0;
      }
    }
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    io.stderr(`${message.split('\n')[0]}\n`);
    return 1;
  }
}

/** `--name value` or `--name=value`, each flag of the command exactly once, nothing else. */
function parseFlags(command: Command, argv: string[]): Partial<Record<string, string>> {
  const allowed: readonly string[] = COMMANDS[command];
  const flags: Partial<Record<string, string>> = {};
  for (let i = 0; i < argv.length; i++) {
    const token = argv[i] as string;
    if (!token.startsWith('--')) throw new Error(`unexpected argument for ${command}: ${token}`);
    const eq = token.indexOf('=');
    const name = token.slice(2, eq < 0 ? undefined : eq);
    if (!allowed.includes(name)) throw new Error(`unknown flag for ${command}: --${name}`);
    if (flags[name] !== undefined) throw new Error(`--${name} given twice`);
    let value = eq < 0 ? undefined : token.slice(eq + 1);
    const next = argv[i + 1];
    if (value === undefined && next !== undefined && !next.startsWith('--')) {
      value = next;
      i++;
    }
    if (value === undefined || value.trim() === '') throw new Error(`--${name} needs a value`);
    flags[name] = value;
  }
  const missing = allowed.find((name) => flags[name] === undefined);
  if (missing !== undefined) {
    throw new Error(
      `${command} needs ${allowed.map((name) => `--${name} <${name}>`).join(' ')} (missing --${missing})`,
    );
  }
  return flags;
}

/**
 * The account an e-mail names, or an error: only `create-key` makes accounts (DESIGN §5a), so a mistyped
 * address is an error instead of credits granted to an account nobody owns.
 */
async function existingAccount(ledger: Ledger, address: string) {
  const account = await ledger.accounts.accountByEmail(address);
  if (account === undefined) throw new Error(`no account for ${address}`);
  return account;
}

function email(value: string | undefined): string {
  try {
    return normalizeEmail(value as string);
  } catch {
    throw new Error(`--email must be an e-mail address, got ${JSON.stringify(value)}`);
  }
}

function creditsValue(value: string): number {
  const credits = /^\d+$/.test(value) ? Number(value) : Number.NaN;
  if (!Number.isSafeInteger(credits) || credits < 1 || credits > MAX_CREDITS) {
    throw new Error(
      `--credits must be a whole number from 1 to ${MAX_CREDITS}, got ${JSON.stringify(value)}`,
    );
  }
  return credits;
}
