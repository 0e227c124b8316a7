/**
 * The server's configuration: environment variables only (DESIGN §7; a `.env` file is not read),
 * validated once at start. Every bad value is reported, each with what was expected, so an operator
 * fixes them all in one go instead of one per restart.
 */
import { isIP } from 'node:net';
import { resolve } from 'node:path';
import { redactUrl } from '#vidsheet/core/redact.js';
import { MAX_POOL_SIZE } from './db/open.js';

/**
 * Which `X-Forwarded-For` entry is the client (DESIGN §5a): `false` (none: the socket's peer), a hop
 * count (the entry that many places from the right), or the proxies' addresses and CIDRs (the
 * rightmost entry not inside them). The leftmost entry, which any client can write, is never taken
 * just for being leftmost.
 */
export type TrustProxy = false | number | string[];

/** The largest hop count `VIDSHEET_TRUST_PROXY` takes. */
export const MAX_PROXY_HOPS = 5;

export interface ServerConfig {
  port: number;
  host: string;
  /** Public address without a trailing slash: capability URLs, `{keys_url}`, mail links. */
  baseUrl: string;
  dataDir: string;
  /** `postgres://…` without `pool_size`; unset means SQLite in the data directory. */
  databaseUrl: string | undefined;
  /**
   * PostgreSQL connections per instance: the URL's `pool_size` query parameter (1..100), taken out
   * of the URL before it reaches the driver; undefined means the default (10).
   */
  databasePoolSize: number | undefined;
  /** `s3://bucket/prefix?…`; unset means sheets in the data directory. */
  storageUrl: string | undefined;
  smtpUrl: string | undefined;
  mailFrom: string | undefined;
  stripeSecretKey: string | undefined;
  stripeWebhookSecret: string | undefined;
  stripeApiUrl: string | undefined;
  /** `/mcp` Host check: `host:port` entries. */
  allowedHosts: string[];
  /** `/mcp` Origin check: `scheme://host:port` entries. */
  allowedOrigins: string[];
  trustProxy: TrustProxy;
  /** `host:port` pairs the URL fetcher may reach although private. */
  fetchAllow: string[];
  maxUploadMb: number;
  maxDurationS: number;
  maxSheets: number;
  queueLength: number;
  sheetTtlS: number;
  sweepS: number;
  allowanceFloor: number;
  anonDaily: number;
  anonCeiling: number;
  /** Anonymous jobs per client address and UTC day, subject-counted ones included (DESIGN §5a). */
  anonPerAddress: number;
  mcpFloodPerMin: number;
  /** Transfers in flight per instance; per account and per client address (DESIGN §5). */
  maxTransfers: number;
  transfersPerClient: number;
  /** A transfer that delivers no byte for this long is cut (DESIGN §5a). */
  stallS: number;
  /** A whole remote fetch's deadline. */
  fetchTimeoutS: number;
  /** A job running longer is killed with its worker and refunded. */
  jobTimeoutS: number;
  /** An upload's whole body must have arrived within this long (DESIGN §5a), besides the stall rule. */
  uploadTimeoutS: number;
  /** Kept videos (DESIGN §9): lifetime, unexpired ones per account, this instance's local copy cache. */
  videoTtlS: number;
  maxVideos: number;
  videoCacheMb: number;
  /**
   * Decode cost (DESIGN §5a): FFmpeg's `max_pixels` for every decoder of a job (a larger picture
   * is an unreadable video), and the memory each process that runs jobs (the worker and every
   * ffmpeg/ffprobe it starts) may use, in MB.
   */
  maxPixels: number;
  workerMemoryMb: number;
  /** The most bytes an account's kept videos may total, in MB (DESIGN §5a "Kept videos cost storage"). */
  videoQuotaMb: number;
}

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`invalid configuration:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
    this.name = 'ConfigError';
  }
}

/** Reads and validates the environment; throws a ConfigError listing every bad value. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): ServerConfig {
  const problems: string[] = [];
  const text = (name: string): string | undefined => {
    const value = env[name]?.trim();
    return value === undefined || value === '' ? undefined : value;
  };
  const integer = (name: string, fallback: number, min: number, max = Number.MAX_SAFE_INTEGER) => {
    const value = text(name);
    if (value === undefined) return fallback;
    const n = /^\d+$/.test(value) ? Number(value) : Number.NaN;
    if (!Number.isSafeInteger(n) || n < min || n > max) {
      problems.push(`${name} must be an integer from ${min} to ${max} — got "${value}"`);
      return fallback;
    }
    return n;
  };
  const url = (name: string, schemes: string[]): string | undefined => {
    const value = text(name);
    if (value === undefined) return undefined;
    try {
      const parsed = new URL(value);
      if (schemes.includes(parsed.protocol.slice(0, -1))) return value;
    } catch {
      // reported below
    }
    // The value as typed may hold a password (a database or SMTP URL): never shown.
    problems.push(
      `${name} must be a ${schemes.map((s) => `${s}://`).join(' or ')} URL — got "${redactUrl(value)}"`,
    );
    return undefined;
  };
  const list = (name: string, check: (item: string) => boolean, shape: string): string[] | undefined => {
    const value = text(name);
    if (value === undefined) return undefined;
    const items = value
      .split(',')
      .map((item) => item.trim())
      .filter(Boolean);
    const bad = items.filter((item) => !check(item));
    if (bad.length)
      problems.push(`${name} must be a comma-separated list of ${shape} — got "${bad.join(',')}"`);
    return items;
  };

  const port = integer('PORT', 8080, 0, 65535);
  const host = text('HOST') ?? '127.0.0.1';
  const baseUrl = (url('VIDSHEET_BASE_URL', ['http', 'https']) ?? `http://localhost:${port}`).replace(
    /\/+$/,
    '',
  );
  const base = new URL(baseUrl);

  const database = poolSizeOf(url('VIDSHEET_DATABASE_URL', ['postgres', 'postgresql']), problems);
  const defaultHosts = [base.host, `localhost:${port}`, `127.0.0.1:${port}`];
  const config: ServerConfig = {
    port,
    host,
    baseUrl,
    dataDir: resolve(text('VIDSHEET_DATA_DIR') ?? './vidsheet-data'),
    databaseUrl: database.url,
    databasePoolSize: database.poolSize,
    storageUrl: url('VIDSHEET_STORAGE_URL', ['s3']),
    smtpUrl: url('VIDSHEET_SMTP_URL', ['smtp', 'smtps']),
    mailFrom: text('VIDSHEET_MAIL_FROM'),
    stripeSecretKey: text('VIDSHEET_STRIPE_SECRET_KEY'),
    stripeWebhookSecret: text('VIDSHEET_STRIPE_WEBHOOK_SECRET'),
    stripeApiUrl: url('VIDSHEET_STRIPE_API_URL', ['http', 'https']),
    allowedHosts: list(
      'VIDSHEET_ALLOWED_HOSTS',
      (h) => /^[^\s/:]+(:\d+)?$/.test(h) || /^\[[0-9a-f:.]+\](:\d+)?$/i.test(h),
      'host:port',
    ) ?? [...new Set(defaultHosts)],
    allowedOrigins: list(
      'VIDSHEET_ALLOWED_ORIGINS',
      (o) => /^https?:\/\/[^\s/]+$/.test(o),
      'scheme://host:port',
    ) ?? [base.origin],
    trustProxy: trustProxyOf(text('VIDSHEET_TRUST_PROXY'), problems),
    fetchAllow: list('VIDSHEET_FETCH_ALLOW', (h) => /^[^\s/]+:\d+$/.test(h), 'host:port') ?? [],
    maxUploadMb: integer('VIDSHEET_MAX_UPLOAD_MB', 300, 1, 1_000_000),
    maxDurationS: integer('VIDSHEET_MAX_DURATION_S', 1800, 1),
    maxSheets: integer('VIDSHEET_MAX_SHEETS', 20, 1),
    queueLength: integer('VIDSHEET_QUEUE_LENGTH', 4, 0),
    sheetTtlS: integer('VIDSHEET_SHEET_TTL_S', 86400, 1),
    sweepS: integer('VIDSHEET_SWEEP_S', 600, 1),
    allowanceFloor: integer('VIDSHEET_ALLOWANCE_FLOOR', 7, 0),
    anonDaily: integer('VIDSHEET_ANON_DAILY', 3, 0),
    anonCeiling: integer('VIDSHEET_ANON_CEILING', 500, 0),
    anonPerAddress: integer('VIDSHEET_ANON_PER_ADDRESS', 30, 0),
    mcpFloodPerMin: integer('VIDSHEET_MCP_FLOOD_PER_MIN', 60, 1),
    maxTransfers: integer('VIDSHEET_MAX_TRANSFERS', 8, 1),
    transfersPerClient: integer('VIDSHEET_TRANSFERS_PER_CLIENT', 2, 1),
    stallS: integer('VIDSHEET_STALL_S', 20, 1),
    fetchTimeoutS: integer('VIDSHEET_FETCH_TIMEOUT_S', 300, 1),
    jobTimeoutS: integer('VIDSHEET_JOB_TIMEOUT_S', 600, 1),
    uploadTimeoutS: integer('VIDSHEET_UPLOAD_TIMEOUT_S', 900, 1),
    videoTtlS: integer('VIDSHEET_VIDEO_TTL_S', 21600, 1),
    maxVideos: integer('VIDSHEET_MAX_VIDEOS', 5, 1),
    videoCacheMb: integer('VIDSHEET_VIDEO_CACHE_MB', 2048, 0),
    videoQuotaMb: integer('VIDSHEET_VIDEO_QUOTA_MB', 1024, 1, 1_000_000),
    // FFmpeg's max_pixels is an int: at most 2^31 - 1.
    maxPixels: integer('VIDSHEET_MAX_PIXELS', 35_389_440, 1, 2_147_483_647),
    workerMemoryMb: integer('VIDSHEET_WORKER_MEMORY_MB', 3072, 64, 1_048_576),
  };
  // Whether it was set, valid or not: a bad URL is its own problem, not also a missing pair.
  const smtpOnly = Boolean(text('VIDSHEET_SMTP_URL')) !== Boolean(config.mailFrom);
  if (smtpOnly) problems.push('VIDSHEET_SMTP_URL and VIDSHEET_MAIL_FROM must be set together');
  const stripeOnly = Boolean(config.stripeSecretKey) !== Boolean(config.stripeWebhookSecret);
  if (stripeOnly) {
    problems.push('VIDSHEET_STRIPE_SECRET_KEY and VIDSHEET_STRIPE_WEBHOOK_SECRET must be set together');
  }
  if (problems.length) throw new ConfigError(problems);
  return config;
}

/**
 * `VIDSHEET_TRUST_PROXY`: `false` (the default), `true` (= 1 hop), a hop count from 1 to 5, or a
 * comma-separated list of proxy addresses and CIDRs. A `/0` is refused: it would trust every address,
 * which is `true`'s old meaning (the leftmost entry) under another name.
 */
function trustProxyOf(value: string | undefined, problems: string[]): TrustProxy {
  if (value === undefined || value === 'false') return false;
  if (value === 'true') return 1;
  const hops = /^\d+$/.test(value) ? Number(value) : undefined;
  const proxies = value
    .split(',')
    .map((item) => item.trim())
    .filter(Boolean);
  if (hops !== undefined && hops >= 1 && hops <= MAX_PROXY_HOPS) return hops;
  if (hops === undefined && proxies.length > 0 && proxies.every(isCidr)) return proxies;
  problems.push(
    `VIDSHEET_TRUST_PROXY must be false, true, a hop count from 1 to ${MAX_PROXY_HOPS}, or a comma-separated list of proxy addresses or CIDRs — got "${value}"`,
  );
  return false;
}

/** `address` or `address/prefix` (IPv4 /1-/32, IPv6 /1-/128). */
function isCidr(item: string): boolean {
  const [address = '', prefix, ...rest] = item.split('/');
  const version = isIP(address);
  if (version === 0 || rest.length > 0) return false;
  if (prefix === undefined) return true;
  const bits = /^\d{1,3}$/.test(prefix) ? Number(prefix) : Number.NaN;
  return bits >= 1 && bits <= (version === 4 ? 32 : 128);
}

/**
 * Splits the pool size off a `postgres://` URL: `?pool_size=N` sizes this instance's connection pool
 * from the environment without a variable beyond DESIGN §7 (several instances share the database's
 * `max_connections`, so each must be able to take fewer).
 */
function poolSizeOf(
  databaseUrl: string | undefined,
  problems: string[],
): { url: string | undefined; poolSize: number | undefined } {
  if (databaseUrl === undefined) return { url: undefined, poolSize: undefined };
  const parsed = new URL(databaseUrl);
  const value = parsed.searchParams.get('pool_size');
  if (value === null) return { url: databaseUrl, poolSize: undefined };
  parsed.searchParams.delete('pool_size');
  const n = /^\d+$/.test(value) ? Number(value) : Number.NaN;
  if (!(n >= 1 && n <= MAX_POOL_SIZE)) {
    problems.push(
      `VIDSHEET_DATABASE_URL's pool_size must be an integer from 1 to ${MAX_POOL_SIZE} — got "${value}"`,
    );
  }
  return { url: parsed.toString(), poolSize: n };
}

/**
 * The longest clip a job accepts: the duration cap, and never more than the sheet cap can cover
 * (one sheet per 90 s), so a clip within it never needs more sheets than allowed.
 */
export const effectiveMaxDurationS = (config: Pick<ServerConfig, 'maxDurationS' | 'maxSheets'>): number =>
  Math.min(config.maxDurationS, config.maxSheets * 90);
