/**
 * Runs the built `vidsheet-server` bin the way an operator would: its own data directory and
 * temp directory, environment variables only, on loopback, with its JSON log lines collected.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, chownSync, mkdirSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'vitest';
import { runNode } from './cli.js';
import { freePort } from './net.js';

export const SERVER_BIN = join(import.meta.dirname, '..', '..', 'bin', 'vidsheet-server.js');

export interface LogLine {
  level: number;
  msg: string;
  [key: string]: unknown;
}

export interface TestServer {
  /** `http://127.0.0.1:<port>` */
  url: string;
  dataDir: string;
  /** The server process's own TMPDIR (nothing may be left in it). */
  tmpDir: string;
  env: NodeJS.ProcessEnv;
  process: ChildProcess;
  logs: LogLine[];
  /** Raw stdout and stderr, for "never logged" checks. */
  output(): string;
  /** Resolves with the first log line (already seen or still to come) that matches. */
  waitForLog(match: (line: LogLine) => boolean, timeoutMs?: number): Promise<LogLine>;
  /**
   * Runs `vidsheet-server admin ...` against the same data directory: for the checkout's bin run
   * as this user, in this process through the command's own code (`runAdmin` on the configured
   * ledger), a spawn being 2-4 s of set-up; otherwise, and in the command's own tests
   * (runServerBin), by spawning the bin.
   */
  admin(...args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }>;
  /** SIGTERM; resolves with the exit code. */
  stop(): Promise<number | null>;
  /** Files left under `<data>/work` and the server's TMPDIR. */
  leftovers(): string[];
}

const roots: string[] = [];

/** Removes every data directory made by `startServer` (call in afterAll). */
export function removeServerDirs(): void {
  for (const root of roots.splice(0)) rmSync(root, { recursive: true, force: true });
}

/** Runs the bin with arguments and an environment, to completion (config errors, admin). */
export function runServerBin(args: string[], env: NodeJS.ProcessEnv) {
  return runNode([SERVER_BIN, ...args], { env });
}

export interface StartOptions {
  /** Restart on the same data. */
  dataDir?: string;
  /** Another `vidsheet-server` bin (an installed package's), instead of the checkout's. */
  bin?: string;
  /** Run the server and its admin commands as this user (the test must run as root to switch). */
  user?: { uid: number; gid: number };
  /** The server's working directory (default: this process's). */
  cwd?: string;
  /** Replaces the inherited environment (then only `env` and the variables set here are passed). */
  baseEnv?: NodeJS.ProcessEnv;
}

/**
 * Starts a server on a free loopback port with a fresh data directory. `env` adds or overrides
 * variables (a `dataDir` may be passed to restart on the same data).
 */
export async function startServer(
  env: Record<string, string> = {},
  options: StartOptions = {},
): Promise<TestServer> {
  const bin = options.bin ?? SERVER_BIN;
  const user = options.user;
  const root = mkdtempSync(join(tmpdir(), 'vidsheet-server-test-'));
  roots.push(root);
  const dataDir = options.dataDir ?? join(root, 'data');
  const tmpDir = join(root, 'tmp');
  const port = env.PORT ?? String(await freePort());
  const fullEnv: NodeJS.ProcessEnv = {
    ...(options.baseEnv ?? process.env),
    HOST: '127.0.0.1',
    PORT: port,
    VIDSHEET_BASE_URL: `http://127.0.0.1:${port}`,
    VIDSHEET_DATA_DIR: dataDir,
    TMPDIR: tmpDir,
    ...env,
  };
  mkdirSync(tmpDir, { recursive: true });
  if (user) {
    // What the image's `chown` gives its user: the data and temp directories, nothing else.
    chmodSync(root, 0o755);
    mkdirSync(dataDir, { recursive: true });
    for (const dir of [dataDir, tmpDir]) chownSync(dir, user.uid, user.gid);
  }
  const child = spawn(process.execPath, [bin], {
    cwd: options.cwd,
    env: fullEnv,
    stdio: ['ignore', 'pipe', 'pipe'],
    ...user,
  });
  const logs: LogLine[] = [];
  const waiters: Array<{ match: (l: LogLine) => boolean; resolve: (l: LogLine) => void }> = [];
  let raw = '';
  let pending = '';
  child.stdout.on('data', (chunk: Buffer) => {
    raw += chunk;
    pending += chunk;
    const lines = pending.split('\n');
    pending = lines.pop() ?? '';
    for (const text of lines) {
      if (!text.trim()) continue;
      let line: LogLine;
      try {
        line = JSON.parse(text);
      } catch {
        line = { level: 0, msg: text };
      }
      logs.push(line);
      for (const w of [...waiters]) {
        if (w.match(line)) {
          waiters.splice(waiters.indexOf(w), 1);
          w.resolve(line);
        }
      }
    }
  });
  child.stderr.on('data', (chunk: Buffer) => (raw += chunk));
  const exited = new Promise<number | null>((resolve) => child.on('close', resolve));

  const waitForLog = (match: (l: LogLine) => boolean, timeoutMs = 30_000) => {
    const seen = logs.find(match);
    if (seen) return Promise.resolve(seen);
    return new Promise<LogLine>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no matching log line; output:\n${raw}`)), timeoutMs);
      waiters.push({
        match,
        resolve: (line) => {
          clearTimeout(timer);
          resolve(line);
        },
      });
      void exited.then(() => {
        clearTimeout(timer);
        reject(new Error(`server exited before the log line; output:\n${raw}`));
      });
    });
  };

  const listening = await waitForLog((l) => l.msg === 'vidsheet-server listening');
  const url = String(listening.address);
  return {
    url,
    dataDir,
    tmpDir,
    env: fullEnv,
    process: child,
    logs,
    output: () => raw,
    waitForLog,
    admin: (...args) =>
      bin === SERVER_BIN && !user
        ? adminInProcess(args, fullEnv)
        : runNode([bin, 'admin', ...args], { env: fullEnv, ...user }),
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      return exited;
    },
    leftovers: () => [
      ...readdirSync(join(dataDir, 'work')).map((f) => `work/${f}`),
      ...readdirSync(tmpDir).map((f) => `tmp/${f}`),
    ],
  };
}

/** `vidsheet-server admin <args>` as src/server/main.ts runs it, in this process. */
async function adminInProcess(args: string[], env: NodeJS.ProcessEnv) {
  const [{ loadConfig }, { openLedger }, { runAdmin }] = await Promise.all([
    import('../../src/server/config.js'),
    import('../../src/server/server.js'),
    import('../../src/server/admin.js'),
  ]);
  const out = { stdout: '', stderr: '' };
  const io = {
    stdout: (s: string) => {
      out.stdout += s;
    },
    stderr: (s: string) => {
      out.stderr += s;
    },
  };
  const { db, ledger } = await openLedger(loadConfig(env));
  try {
    const code = await runAdmin(args, io, ledger);
    return { code, ...out };
  } finally {
    await db.destroy();
  }
}

/** The pid of the worker that runs the server's jobs now (the last one started). */
export function workerPid(server: TestServer): number {
  const started = server.logs.filter((l) => l.msg === 'job worker started');
  return Number(started[started.length - 1]?.workerPid);
}

/** A multipart body with a `video` file part and text fields. */
export function videoForm(
  video: { bytes: Uint8Array; filename: string } | undefined,
  fields: Record<string, string> = {},
): FormData {
  const form = new FormData();
  for (const [name, value] of Object.entries(fields)) form.append(name, value);
  // A copy on its own ArrayBuffer: Blob takes no view over a SharedArrayBuffer-backed buffer.
  if (video) form.append('video', new Blob([new Uint8Array(video.bytes)]), video.filename);
  return form;
}

/** POST /v1/vidsheet with a key (or none) and a form. */
export function postJob(server: TestServer, key: string | undefined, body: FormData | string) {
  return fetch(`${server.url}/v1/vidsheet`, {
    method: 'POST',
    headers: key ? { authorization: `Bearer ${key}` } : {},
    body,
  });
}

/** An account made through the operator's commands. */
export interface TestAccount {
  email: string;
  key: string;
}

/** What `vidsheet-server admin show` prints for an account. */
export interface ShownAccount {
  email: string;
  balance: number;
  purchased: boolean;
  keys: Array<{ prefix: string; created_at: string; revoked_at: string | null }>;
  usage: Array<{
    job_id: string;
    surface: string;
    density: string;
    sheets: number;
    credits: number;
    refunded: boolean;
    created_at: string;
  }>;
}

/**
 * A new never-purchased account with one key (`admin create-key`) and `credits` granted by the
 * operator (`admin add-credits`, not a purchase), under a fresh email unless one is given.
 */
export async function newAccount(
  server: TestServer,
  credits = 0,
  email = `a-${randomBytes(6).toString('hex')}@example.com`,
): Promise<TestAccount> {
  const created = await server.admin('create-key', '--email', email);
  expect(created.code, created.stderr).toBe(0);
  const key = created.stdout.trim();
  expect(key).toMatch(/^vs_live_[0-9a-f]{40}$/);
  if (credits > 0) {
    const granted = await server.admin('add-credits', '--email', email, '--credits', String(credits));
    expect(granted.code, granted.stderr).toBe(0);
    // It prints the balance: all of it granted now.
    expect(granted.stdout).toBe(`${credits}\n`);
  }
  return { email, key };
}

/** The account as `admin show` prints it (the operator's own view of balances and usage). */
export async function showAccount(server: TestServer, email: string): Promise<ShownAccount> {
  const shown = await server.admin('show', '--email', email);
  expect({ code: shown.code, stderr: shown.stderr }).toEqual({ code: 0, stderr: '' });
  return JSON.parse(shown.stdout) as ShownAccount;
}
