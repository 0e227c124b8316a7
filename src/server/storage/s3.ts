/**
 * Sheets in S3-compatible storage (`VIDSHEET_STORAGE_URL=s3://bucket/prefix?endpoint=...&region=...`), so
 * several instances behind a load balancer serve the same capability URLs (DESIGN §8). Objects live at
 * `<prefix>/<job_id>/video.sheet-N.jpg`. Expiry stays the database's decision: this class only stores,
 * streams and deletes.
 */
import { createReadStream } from 'node:fs';
import { stat, unlink } from 'node:fs/promises';
import { basename } from 'node:path';
import { Readable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  DeleteObjectsCommand,
  GetObjectCommand,
  HeadBucketCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  S3Client,
  type S3ClientConfig,
} from '@aws-sdk/client-s3';
import { redactUrl, shortJobId } from '#vidsheet/core/redact.js';
import type { HealthReason, SheetStorage } from './storage.js';

/** The parts of a `VIDSHEET_STORAGE_URL`; see {@link parseStorageUrl}. */
export interface StorageUrl {
  bucket: string;
  /** No leading or trailing slash; empty when objects sit at the bucket's root. */
  prefix: string;
  /** An S3-compatible server (MinIO, R2, moto...); absent for AWS itself. */
  endpoint?: string;
  region: string;
}

const QUERY_KEYS = new Set(['endpoint', 'region']);

/**
 * Reads `s3://bucket/prefix?endpoint=...&region=...` strictly, so a typo in the operator's variable is an
 * error at start rather than sheets quietly written somewhere else. Credentials are refused in the URL:
 * they come from the standard AWS variables, which keeps them out of logs that print the configuration.
 */
export function parseStorageUrl(url: string): StorageUrl {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new Error(`VIDSHEET_STORAGE_URL is not a URL: expected s3://bucket/prefix?endpoint=...&region=...`);
  }
  if (parsed.protocol !== 's3:') {
    throw new Error(`VIDSHEET_STORAGE_URL must start with s3:// (got ${parsed.protocol}//)`);
  }
  if (parsed.username || parsed.password) {
    throw new Error(
      'VIDSHEET_STORAGE_URL must not carry credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY',
    );
  }
  if (parsed.port) throw new Error('VIDSHEET_STORAGE_URL: put the port in ?endpoint=, not after the bucket');
  const bucket = decodeURIComponent(parsed.hostname);
  if (!/^[A-Za-z0-9._-]{3,255}$/.test(bucket)) {
    throw new Error(`VIDSHEET_STORAGE_URL: "${bucket}" is not a bucket name (s3://bucket/prefix)`);
  }
  for (const key of parsed.searchParams.keys()) {
    if (!QUERY_KEYS.has(key)) {
      throw new Error(`VIDSHEET_STORAGE_URL: unknown parameter "${key}" (known: endpoint, region)`);
    }
  }
  const prefix = decodeURIComponent(parsed.pathname)
    .split('/')
    .filter((part) => part !== '')
    .join('/');
  if (prefix.split('/').some((part) => part === '.' || part === '..')) {
    throw new Error('VIDSHEET_STORAGE_URL: the prefix may not contain "." or ".." segments');
  }
  const result: StorageUrl = { bucket, prefix, region: parsed.searchParams.get('region') || 'us-east-1' };
  const endpoint = parsed.searchParams.get('endpoint');
  if (endpoint) {
    let target: URL;
    try {
      target = new URL(endpoint);
    } catch {
      throw new Error(`VIDSHEET_STORAGE_URL: endpoint "${redactUrl(endpoint)}" is not a URL`);
    }
    if (target.protocol !== 'http:' && target.protocol !== 'https:') {
      throw new Error(
        `VIDSHEET_STORAGE_URL: endpoint must be http:// or https:// (got ${target.protocol}//)`,
      );
    }
    result.endpoint = endpoint.replace(/\/+$/, '');
  }
  return result;
}

/**
 * Why the bucket cannot be used: a short `reason` for operators, its fixed word for `/healthz`
 * (`health`), and a message naming the bucket for the start-up error.
 */
export class StorageUnavailableError extends Error {
  constructor(
    readonly reason: string,
    readonly health: HealthReason,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = 'StorageUnavailableError';
  }
}

/** How {@link S3SheetStorage.open} finds credentials. */
export interface S3OpenOptions {
  /**
   * Read AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN) from here only. Without it the
   * SDK's default chain is used: those same variables first, then profiles and instance or container roles.
   */
  env?: NodeJS.ProcessEnv;
  /** HeadBucket deadline for open() and check(); 5 s by default, short enough for a load balancer probe. */
  checkTimeoutMs?: number;
  /** Another store's client, shared (a sub-area of the same bucket, see `under`). */
  client?: S3Client;
}

interface ErrorShape {
  name?: string;
  code?: string;
  message?: string;
  errors?: unknown[];
  $metadata?: { httpStatusCode?: number };
}

function shape(error: unknown): ErrorShape {
  return typeof error === 'object' && error !== null ? (error as ErrorShape) : {};
}

/** The network error code, looking inside AggregateError (Node's happy-eyeballs connects). */
function networkCode(error: unknown): string | undefined {
  const e = shape(error);
  if (e.code && /^E[A-Z]+$/.test(e.code)) return e.code;
  for (const inner of e.errors ?? []) {
    const code = networkCode(inner);
    if (code) return code;
  }
  return undefined;
}

/** A short, operator-readable reason for a failed request. */
function reasonFor(error: unknown): string {
  const e = shape(error);
  if (e.name === 'CredentialsProviderError') {
    return 'no credentials (set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)';
  }
  if (e.name === 'AbortError' || e.name === 'TimeoutError') return 'timed out';
  const code = networkCode(error);
  if (code === 'ECONNREFUSED') return 'connection refused';
  if (code === 'ENOTFOUND' || code === 'EAI_AGAIN') return 'host not found';
  if (code === 'ETIMEDOUT') return 'timed out';
  if (code) return `network error ${code}`;
  const status = e.$metadata?.httpStatusCode;
  if (e.name === 'NoSuchBucket' || (e.name === 'NotFound' && status === 404)) return 'no such bucket';
  if (status === 403 || e.name === 'AccessDenied' || e.name === 'Forbidden') {
    return 'access denied (check the credentials and the bucket policy)';
  }
  if (e.name === 'InvalidAccessKeyId' || e.name === 'SignatureDoesNotMatch') return 'credentials rejected';
  if (status === 301 || e.name === 'PermanentRedirect') return 'wrong region';
  const detail = e.message && e.message !== 'UnknownError' ? e.message : (e.name ?? String(error));
  return status ? `HTTP ${status}: ${detail}` : detail;
}

/** `/healthz`'s word for a failed request: the bucket is gone, we may not use it, or it does not answer. */
export function healthFor(error: unknown): HealthReason {
  const e = shape(error);
  const status = e.$metadata?.httpStatusCode;
  if (e.name === 'NoSuchBucket' || (e.name === 'NotFound' && status === 404)) return 'bucket missing';
  const refused = [
    'CredentialsProviderError',
    'AccessDenied',
    'Forbidden',
    'InvalidAccessKeyId',
    'SignatureDoesNotMatch',
  ];
  if (status === 403 || refused.includes(e.name ?? '')) return 'denied';
  return 'unreachable';
}

function isMissing(error: unknown): boolean {
  const e = shape(error);
  return e.name === 'NoSuchKey' || e.name === 'NotFound' || e.$metadata?.httpStatusCode === 404;
}

/** Worth another try: the network or the server, not the request itself. */
function isTransient(error: unknown): boolean {
  const status = shape(error).$metadata?.httpStatusCode;
  if (status !== undefined) return status >= 500 || status === 429;
  return networkCode(error) !== undefined || shape(error).name === 'TimeoutError';
}

/** Job ids and sheet names become key segments; anything that could reach outside the job is refused. */
function isSegment(value: string): boolean {
  return value !== '' && value !== '.' && value !== '..' && !value.includes('/');
}

const PUT_ATTEMPTS = 3;
const quiet = { debug() {}, info() {}, warn() {}, error() {} };

/** {@link SheetStorage} on an S3-compatible bucket; build it with {@link S3SheetStorage.open}. */
export class S3SheetStorage implements SheetStorage {
  readonly client: S3Client;
  private readonly where: string;
  private readonly checkTimeoutMs: number;

  constructor(
    readonly location: StorageUrl,
    options: S3OpenOptions = {},
  ) {
    const config: S3ClientConfig = {
      region: location.region,
      // Bounded waits: an unreachable bucket fails a job (refunded) instead of hanging the worker.
      requestHandler: {
        connectionTimeout: 5_000,
        requestTimeout: 30_000,
        throwOnRequestTimeout: true,
        socketTimeout: 60_000,
      },
      // The SDK warns on the console when a streamed upload fails; put() retries itself and reports.
      logger: quiet,
    };
    if (location.endpoint) {
      config.endpoint = location.endpoint;
      config.forcePathStyle = true;
      // Many S3-compatible servers reject the SDK's default trailing CRC32 checksums on streamed bodies.
      config.requestChecksumCalculation = 'WHEN_REQUIRED';
      config.responseChecksumValidation = 'WHEN_REQUIRED';
    } else {
      config.followRegionRedirects = true;
    }
    if (options.env) {
      const { AWS_ACCESS_KEY_ID: accessKeyId, AWS_SECRET_ACCESS_KEY: secretAccessKey } = options.env;
      const sessionToken = options.env.AWS_SESSION_TOKEN || undefined;
      config.credentials = async () => {
        if (!accessKeyId || !secretAccessKey) {
          throw Object.assign(new Error('AWS_ACCESS_KEY_ID or AWS_SECRET_ACCESS_KEY is not set'), {
            name: 'CredentialsProviderError',
          });
        }
        return { accessKeyId, secretAccessKey, sessionToken };
      };
    }
    this.client = options.client ?? new S3Client(config);
    this.checkTimeoutMs = options.checkTimeoutMs ?? 5_000;
    this.where = `S3 bucket "${location.bucket}"${location.endpoint ? ` at ${location.endpoint}` : ''}`;
  }

  /** The same bucket under `<prefix>/<area>/`, sharing this client. */
  under(area: string): S3SheetStorage {
    if (!isSegment(area)) throw new Error(`invalid storage area: "${area}"`);
    const prefix = this.location.prefix ? `${this.location.prefix}/${area}` : area;
    return new S3SheetStorage(
      { ...this.location, prefix },
      { client: this.client, checkTimeoutMs: this.checkTimeoutMs },
    );
  }

  /**
   * Parses the URL and proves the bucket answers (HeadBucket) before the server takes jobs, so a wrong
   * bucket, missing credentials or a dead endpoint is one clear error at start, not a refunded job later.
   */
  static async open(url: string, options: S3OpenOptions = {}): Promise<S3SheetStorage> {
    const storage = new S3SheetStorage(parseStorageUrl(url), options);
    try {
      await storage.check();
    } catch (error) {
      storage.destroy();
      throw error;
    }
    return storage;
  }

  /** Reachability for `/healthz` and open(): throws {@link StorageUnavailableError} with a short reason. */
  async check(): Promise<void> {
    try {
      await this.client.send(new HeadBucketCommand({ Bucket: this.location.bucket }), {
        abortSignal: AbortSignal.timeout(this.checkTimeoutMs),
      });
    } catch (error) {
      const reason = reasonFor(error);
      throw new StorageUnavailableError(reason, healthFor(error), `${this.where} is not usable: ${reason}`, {
        cause: error,
      });
    }
  }

  /**
   * Uploads each file, then deletes the local copy (ownership moves to the bucket, as with a rename).
   * Streamed bodies are not retried by the SDK, so transient failures are retried here with a fresh
   * stream; a failure that remains is thrown, and the job fails and is refunded by its caller.
   */
  async put(jobId: string, files: string[]): Promise<void> {
    if (!isSegment(jobId)) throw new Error(`invalid job id for storage: "${jobId}"`);
    for (const file of files) {
      const key = this.key(jobId, basename(file));
      const { size } = await stat(file);
      for (let attempt = 1; ; attempt++) {
        const body = createReadStream(file);
        try {
          await this.client.send(
            new PutObjectCommand({
              Bucket: this.location.bucket,
              Key: key,
              Body: body,
              ContentLength: size,
              ContentType: 'image/jpeg',
            }),
          );
          break;
        } catch (error) {
          if (attempt < PUT_ATTEMPTS && isTransient(error)) {
            await sleep(200 * 2 ** (attempt - 1));
            continue;
          }
          const shown = this.shownKey(jobId, basename(file));
          throw new Error(`uploading ${shown} to ${this.where} failed: ${reasonFor(error)}`, {
            cause: error,
          });
        } finally {
          body.destroy();
        }
      }
      await unlink(file);
    }
  }

  /** The object's body as a Node stream, or undefined when it is not in the bucket. */
  async get(jobId: string, name: string): Promise<Readable | undefined> {
    if (!isSegment(jobId) || !isSegment(name)) return undefined;
    try {
      const { Body } = await this.client.send(
        new GetObjectCommand({ Bucket: this.location.bucket, Key: this.key(jobId, name) }),
      );
      if (Body instanceof Readable) return Body;
      if (!Body) return undefined;
      return Readable.from(await Body.transformToByteArray());
    } catch (error) {
      if (isMissing(error)) return undefined;
      const shown = this.shownKey(jobId, name);
      throw new Error(`reading ${shown} from ${this.where} failed: ${reasonFor(error)}`, { cause: error });
    }
  }

  /**
   * Deletes every object under `<prefix>/<jobId>/`. Deleting keys already gone succeeds in S3, so two
   * instances sweeping the same job, or a retry after a crash, change nothing and raise nothing.
   */
  async remove(jobId: string): Promise<void> {
    if (!isSegment(jobId)) throw new Error(`invalid job id for storage: "${jobId}"`);
    const Prefix = this.key(jobId, '');
    let ContinuationToken: string | undefined;
    try {
      do {
        const page = await this.client.send(
          new ListObjectsV2Command({ Bucket: this.location.bucket, Prefix, ContinuationToken }),
        );
        const keys = (page.Contents ?? []).flatMap((o) => (o.Key ? [{ Key: o.Key }] : []));
        if (keys.length) {
          const result = await this.client.send(
            new DeleteObjectsCommand({
              Bucket: this.location.bucket,
              Delete: { Objects: keys, Quiet: true },
            }),
          );
          const failed = (result.Errors ?? []).filter((e) => e.Code !== 'NoSuchKey');
          if (failed.length) {
            throw new Error(
              `${failed.length} object(s) not deleted, first ${failed[0]?.Key?.split('/').pop()}: ${failed[0]?.Code}`,
            );
          }
        }
        ContinuationToken = page.IsTruncated ? page.NextContinuationToken : undefined;
      } while (ContinuationToken);
    } catch (error) {
      const shown = this.shownKey(jobId, '');
      throw new Error(`deleting ${shown} from ${this.where} failed: ${reasonFor(error)}`, { cause: error });
    }
  }

  /** Closes the client's pooled connections (server shutdown, tests). */
  destroy(): void {
    this.client.destroy();
  }

  /** A key as an error message may show it: the job id is a capability, so only its start (DESIGN §5a). */
  private shownKey(jobId: string, name: string): string {
    return this.key(`${shortJobId(jobId)}…`, name);
  }

  private key(jobId: string, name: string): string {
    const path = `${jobId}/${name}`;
    return this.location.prefix ? `${this.location.prefix}/${path}` : path;
  }
}
