/**
 * A throwaway PostgreSQL for tests (DESIGN §8: "the same ledger test suite runs on SQLite and on a real
 * PostgreSQL started by the tests"): `initdb` into a temporary directory, then `postgres` listening on
 * 127.0.0.1 only, at a free port, trust authentication for local connections, fsync off. When the tests
 * run as root the server runs as the `postgres` OS user (PostgreSQL refuses to run as root).
 *
 * Nothing is skipped when PostgreSQL is missing: starting throws with what to install, so a CI machine
 * without it fails loudly instead of passing without the PostgreSQL half of the suite.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { chownSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';

export interface TestPostgres {
  /** `postgres://postgres@127.0.0.1:<port>/vidsheet`: an empty database made at start. */
  url: string;
  port: number;
  /** The cluster's data directory (readable by the tests: it is their own temporary directory). */
  dataDir: string;
  /** Creates another database (empty, or a copy of `template`) and returns its URL. */
  createDatabase(options?: { name?: string; template?: string }): Promise<string>;
  /** Fast shutdown (SIGINT), then the temporary directory is removed. Safe to call twice. */
  stop(): Promise<void>;
}

const SUPERUSER = 'postgres';
const START_TIMEOUT_MS = 30_000;
let databases = 0;

/** The directory holding `initdb` and `postgres`, or a thrown Error saying how to install them. */
export function postgresBinDir(): string {
  const candidates: string[] = [];
  try {
    candidates.push(execFileSync('pg_config', ['--bindir'], { encoding: 'utf8' }).trim());
  } catch {
    // pg_config is not on PATH (or belongs to libpq-dev only); look where Debian puts the servers.
  }
  const root = '/usr/lib/postgresql';
  if (existsSync(root)) {
    const versions = readdirSync(root)
      .filter((v) => /^\d+$/.test(v))
      .sort((a, b) => Number(b) - Number(a));
    candidates.push(...versions.map((v) => join(root, v, 'bin')));
  }
  const found = candidates.find(
    (dir) => existsSync(join(dir, 'initdb')) && existsSync(join(dir, 'postgres')),
  );
  if (found === undefined) {
    throw new Error(
      'PostgreSQL is not installed, but these tests run the ledger on a real PostgreSQL too. Install it ' +
        '(Debian/Ubuntu: `apt-get install --no-install-recommends postgresql`, which ./scripts/setup.sh ' +
        'does) so that `initdb` and `postgres` are found through `pg_config --bindir` or in ' +
        '/usr/lib/postgresql/<version>/bin.',
    );
  }
  return found;
}

/** Starts a new cluster and resolves once it accepts connections on 127.0.0.1. */
export async function startPostgres(): Promise<TestPostgres> {
  const bin = postgresBinDir();
  const root = mkdtempSync(join(tmpdir(), 'vidsheet-pg-'));
  const dataDir = join(root, 'data');
  const socketDir = join(root, 'socket');
  mkdirSync(socketDir);
  // PostgreSQL will not run as root: then the cluster belongs to the `postgres` user, run via setpriv.
  const asRoot = process.getuid?.() === 0;
  const runAs = (command: string, args: string[]): [string, string[]] => {
    if (!asRoot) return [command, args];
    return ['setpriv', ['--reuid', SUPERUSER, '--regid', SUPERUSER, '--init-groups', '--', command, ...args]];
  };
  if (asRoot) {
    const ids = execFileSync('id', ['-u', SUPERUSER], { encoding: 'utf8' }).trim();
    const gid = Number(execFileSync('id', ['-g', SUPERUSER], { encoding: 'utf8' }).trim());
    for (const dir of [root, socketDir]) chownSync(dir, Number(ids), gid);
  }
  let server: ChildProcess | undefined;
  const cleanup = () => rmSync(root, { recursive: true, force: true });
  try {
    const [initdb, initArgs] = runAs(join(bin, 'initdb'), [
      '--pgdata',
      dataDir,
      '--username',
      SUPERUSER,
      '--auth=trust',
      '--encoding=UTF8',
      '--locale=C',
      '--no-sync',
    ]);
    execFileSync(initdb, initArgs, { stdio: 'pipe', env: { ...process.env, LC_ALL: 'C' } });

    let lastError: unknown;
    for (let attempt = 0; attempt < 3; attempt++) {
      const port = await freePort();
      const [command, args] = runAs(join(bin, 'postgres'), [
        '-D',
        dataDir,
        '-p',
        String(port),
        '-k',
        socketDir,
        '-c',
        'listen_addresses=127.0.0.1',
        '-c',
        'fsync=off',
        '-c',
        'synchronous_commit=off',
        '-c',
        'full_page_writes=off',
        '-c',
        'max_connections=200',
      ]);
      const child = spawn(command, args, { stdio: ['ignore', 'ignore', 'pipe'] });
      server = child;
      let stderr = '';
      child.stderr?.on('data', (chunk) => {
        stderr = (stderr + chunk).slice(-4000);
      });
      try {
        await waitUntilReady(child, port, () => stderr);
      } catch (error) {
        lastError = error;
        await stopChild(child);
        server = undefined;
        continue;
      }
      const admin = `postgres://${SUPERUSER}@127.0.0.1:${port}`;
      await query(`${admin}/postgres`, 'create database vidsheet');
      return handle(child, port, dataDir, admin, cleanup);
    }
    throw lastError;
  } catch (error) {
    if (server !== undefined) await stopChild(server);
    cleanup();
    throw error;
  }
}

function handle(
  child: ChildProcess,
  port: number,
  dataDir: string,
  admin: string,
  cleanup: () => void,
): TestPostgres {
  // Should the test process end without calling stop (a crash, a kill of the worker), take the server
  // down with it rather than leave it running.
  const onExit = () => {
    if (child.exitCode === null) child.kill('SIGQUIT');
  };
  process.once('exit', onExit);
  let stopping: Promise<void> | undefined;
  return {
    url: `${admin}/vidsheet`,
    port,
    dataDir,
    async createDatabase(options = {}) {
      const name = options.name ?? `vidsheet_${++databases}`;
      const template = options.template ?? 'template1';
      for (const identifier of [name, template]) {
        if (!/^[a-z_][a-z0-9_]*$/.test(identifier))
          throw new Error(`not a plain database name: ${identifier}`);
      }
      // FILE_COPY: with fsync off, copying the template's files beats WAL-logging every block of them.
      await query(`${admin}/postgres`, `create database ${name} template ${template} strategy = file_copy`);
      return `${admin}/${name}`;
    },
    stop() {
      stopping ??= (async () => {
        process.removeListener('exit', onExit);
        await stopChild(child);
        cleanup();
      })();
      return stopping;
    },
  };
}

async function query(url: string, text: string): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query(text);
  } finally {
    await client.end();
  }
}

async function waitUntilReady(child: ChildProcess, port: number, stderr: () => string): Promise<void> {
  const deadline = Date.now() + START_TIMEOUT_MS;
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new Error(`postgres exited (${child.exitCode ?? child.signalCode}) at start:\n${stderr()}`);
    }
    const client = new pg.Client({
      connectionString: `postgres://${SUPERUSER}@127.0.0.1:${port}/postgres`,
      connectionTimeoutMillis: 1000,
    });
    try {
      await client.connect();
      await client.query('select 1');
      return;
    } catch (error) {
      if (Date.now() > deadline) {
        throw new Error(`postgres did not accept connections within ${START_TIMEOUT_MS} ms:\n${stderr()}`, {
          cause: error,
        });
      }
    } finally {
      await client.end().catch(() => undefined);
    }
    await sleep(50);
  }
}

/** SIGINT is PostgreSQL's fast shutdown (disconnects clients); SIGQUIT if that takes too long. */
async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill('SIGINT');
  const timer = setTimeout(() => child.kill('SIGQUIT'), 10_000);
  await exited;
  clearTimeout(timer);
}

/** A port free on 127.0.0.1 right now (the caller retries should another process take it first). */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const address = probe.address();
      const port = typeof address === 'object' && address !== null ? address.port : 0;
      probe.close(() => resolve(port));
    });
  });
}
