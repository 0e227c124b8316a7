/**
 * The configuration's edge rules (DESIGN §5a, §7): `VIDSHEET_TRUST_PROXY` as `false`, a hop count or
 * proxy CIDRs, `VIDSHEET_ANON_PER_ADDRESS`, the transfer, stall and job deadline variables, and configuration errors that name the variable and the
 * problem but never a password — in `loadConfig` (fake inputs, any ranges) and on the real bin's stderr.
 */
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/server/config.js';
import { runServerBin } from '../helpers/server.js';

const TRUST_PROXY_PROBLEM =
  'VIDSHEET_TRUST_PROXY must be false, true, a hop count from 1 to 5, or a comma-separated list of proxy addresses or CIDRs';

function problemsOf(env: NodeJS.ProcessEnv): string[] {
  try {
    loadConfig(env);
  } catch (error) {
    if (error instanceof ConfigError) return error.problems;
    throw error;
  }
  return [];
}

describe('VIDSHEET_TRUST_PROXY', () => {
  it.each([
    [undefined, false],
    ['', false],
    ['false', false],
    ['true', 1],
    ['1', 1],
    ['2', 2],
    ['5', 5],
    ['10.0.0.0/8', ['10.0.0.0/8']],
    ['10.0.0.0/8, 192.168.1.1 ,fd00::/8', ['10.0.0.0/8', '192.168.1.1', 'fd00::/8']],
    ['127.0.0.1/32,::1/128', ['127.0.0.1/32', '::1/128']],
    ['2001:db8::/32', ['2001:db8::/32']],
  ])('%j → %j', (value, trust) => {
    expect(loadConfig(value === undefined ? {} : { VIDSHEET_TRUST_PROXY: value }).trustProxy).toEqual(trust);
  });

  it.each([
    'yes',
    'TRUE1',
    '0',
    '6',
    '-1',
    '1.5',
    '10.0.0.0/33',
    '10.0.0.0/0',
    '::/0',
    'fd00::/129',
    '10.0.0.0/8,nonsense',
    '10.0.0.0/8/8',
    'loopback',
    ',',
    '300.1.1.1',
  ])('%j is a configuration error naming the variable and what it takes', (value) => {
    expect(problemsOf({ VIDSHEET_TRUST_PROXY: value })).toEqual([`${TRUST_PROXY_PROBLEM} — got "${value}"`]);
  });
});

describe('VIDSHEET_ANON_PER_ADDRESS', () => {
  it('defaults to 30, takes 0 and up, and names a bad value', () => {
    expect(loadConfig({}).anonPerAddress).toBe(30);
    expect(loadConfig({ VIDSHEET_ANON_PER_ADDRESS: '4' }).anonPerAddress).toBe(4);
    expect(loadConfig({ VIDSHEET_ANON_PER_ADDRESS: '0' }).anonPerAddress).toBe(0);
    expect(problemsOf({ VIDSHEET_ANON_PER_ADDRESS: 'many' })).toEqual([
      `VIDSHEET_ANON_PER_ADDRESS must be an integer from 0 to ${Number.MAX_SAFE_INTEGER} — got "many"`,
    ]);
  });
});

describe('transfer, stall and deadline variables (DESIGN §7)', () => {
  it.each([
    ['VIDSHEET_MAX_TRANSFERS', 'maxTransfers', 8],
    ['VIDSHEET_TRANSFERS_PER_CLIENT', 'transfersPerClient', 2],
    ['VIDSHEET_STALL_S', 'stallS', 20],
    ['VIDSHEET_FETCH_TIMEOUT_S', 'fetchTimeoutS', 300],
    ['VIDSHEET_JOB_TIMEOUT_S', 'jobTimeoutS', 600],
  ] as const)('%s defaults to its §7 value, takes 1 and up, and names a bad value', (name, key, fallback) => {
    expect(loadConfig({})[key]).toBe(fallback);
    expect(loadConfig({ [name]: '7' })[key]).toBe(7);
    const most = `${name} must be an integer from 1 to ${Number.MAX_SAFE_INTEGER}`;
    expect(problemsOf({ [name]: '0' })).toEqual([`${most} — got "0"`]);
    expect(problemsOf({ [name]: '2.5' })).toEqual([`${most} — got "2.5"`]);
    expect(problemsOf({ [name]: 'ten' })).toEqual([`${most} — got "ten"`]);
  });
});

describe('decode and memory bounds (DESIGN §5a, §7)', () => {
  it("VIDSHEET_MAX_PIXELS defaults to 8192x4320 and fits FFmpeg's int", () => {
    expect(loadConfig({}).maxPixels).toBe(35_389_440);
    expect(loadConfig({ VIDSHEET_MAX_PIXELS: '2073600' }).maxPixels).toBe(2_073_600);
    expect(problemsOf({ VIDSHEET_MAX_PIXELS: '2147483648' })).toEqual([
      'VIDSHEET_MAX_PIXELS must be an integer from 1 to 2147483647 — got "2147483648"',
    ]);
    expect(problemsOf({ VIDSHEET_MAX_PIXELS: '0' })).toHaveLength(1);
  });

  it('VIDSHEET_WORKER_MEMORY_MB defaults to 3072 and is at least 64', () => {
    expect(loadConfig({}).workerMemoryMb).toBe(3072);
    expect(loadConfig({ VIDSHEET_WORKER_MEMORY_MB: '300' }).workerMemoryMb).toBe(300);
    expect(problemsOf({ VIDSHEET_WORKER_MEMORY_MB: '32' })).toEqual([
      'VIDSHEET_WORKER_MEMORY_MB must be an integer from 64 to 1048576 — got "32"',
    ]);
  });
});

describe('configuration errors never show a password', () => {
  const PASSWORD = 'Tr0ub4dor&3-not-shown';

  it.each([
    [
      'VIDSHEET_DATABASE_URL',
      `mysql://vidsheet:${PASSWORD}@db.internal:3306/vidsheet`,
      'VIDSHEET_DATABASE_URL must be a postgres:// or postgresql:// URL — got "mysql://vidsheet:***@db.internal:3306/vidsheet"',
    ],
    [
      'VIDSHEET_DATABASE_URL',
      `postgres://vidsheet:${PASSWORD}@db.internal:99999/vidsheet`,
      'VIDSHEET_DATABASE_URL must be a postgres:// or postgresql:// URL — got "postgres://vidsheet:***@db.internal:99999/vidsheet"',
    ],
    [
      'VIDSHEET_SMTP_URL',
      `http://mailer:${PASSWORD}@smtp.example.com:587`,
      'VIDSHEET_SMTP_URL must be a smtp:// or smtps:// URL — got "http://mailer:***@smtp.example.com:587"',
    ],
    [
      'VIDSHEET_STORAGE_URL',
      `https://key:${PASSWORD}@bucket.example.com/sheets`,
      'VIDSHEET_STORAGE_URL must be a s3:// URL — got "https://key:***@bucket.example.com/sheets"',
    ],
  ])('%s with a bad scheme: the problem with *** for the password', (name, value, problem) => {
    const env = {
      [name]: value,
      ...(name === 'VIDSHEET_SMTP_URL' ? { VIDSHEET_MAIL_FROM: 'a@example.com' } : {}),
    };
    expect(problemsOf(env)).toEqual([problem]);
  });

  it('the bin prints every problem on stderr, exit 1, and the passwords nowhere', async () => {
    const r = await runServerBin([], {
      ...process.env,
      VIDSHEET_DATABASE_URL: `mysql://vidsheet:${PASSWORD}@db.internal:3306/vidsheet`,
      VIDSHEET_SMTP_URL: `http://mailer:${PASSWORD}@smtp.example.com:587`,
      VIDSHEET_MAIL_FROM: 'vidsheet@example.com',
      VIDSHEET_TRUST_PROXY: '0.0.0.0/0',
    });
    expect(r.code).toBe(1);
    expect(r.stdout).toBe('');
    expect(r.stderr).toContain(
      'VIDSHEET_DATABASE_URL must be a postgres:// or postgresql:// URL — got "mysql://vidsheet:***@db.internal:3306/vidsheet"',
    );
    expect(r.stderr).toContain(
      'VIDSHEET_SMTP_URL must be a smtp:// or smtps:// URL — got "http://mailer:***@smtp.example.com:587"',
    );
    expect(r.stderr).toContain(`${TRUST_PROXY_PROBLEM} — got "0.0.0.0/0"`);
    expect(r.stderr).not.toContain(PASSWORD);
    expect(r.stderr).not.toContain('Tr0ub4dor');
  });
});
