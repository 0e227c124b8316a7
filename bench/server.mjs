/**
 * The hosted benchmarks' common ground (hosted.mjs, session.mjs, soak.mjs): a `vidsheet-server` on
 * a free loopback port with its own data and temp directories and its JSON log lines collected, its
 * admin commands, funded accounts, hand-built multipart uploads, and /proc readings of a process.
 * Everything goes to 127.0.0.0/8 only.
 */
import { execFile, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import {
  createReadStream,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
} from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { ROOT } from './clip.mjs';
import { freePort } from './free-port.mjs';

export const SERVER_BIN = join(ROOT, 'bin', 'vidsheet-server.js');
/** Signals that end a bench: its server is stopped first (see startServer). */
const STOP_SIGNALS = ['SIGINT', 'SIGTERM'];

const temps = [];
const started = [];

/** A fresh temporary directory, removed by `cleanUp`. */
export function tempDir(prefix) {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  temps.push(dir);
  return dir;
}

/** Stops every server `startServer` started and removes every `tempDir`. */
export async function cleanUp() {
  for (const server of started.splice(0)) await server.stop();
  for (const dir of temps.splice(0)) rmSync(dir, { recursive: true, force: true });
}

/**
 * Starts the server with its defaults for everything but where it listens and keeps its data (no
 * VIDSHEET_* is inherited), plus `env`; resolves once its job worker is ready. `stop()` ends it and
 * removes its directories.
 */
export async function startServer({ prefix = 'vidsheet-bench-', env: extra = {} } = {}) {
  const root = mkdtempSync(join(tmpdir(), prefix));
  const port = await freePort();
  const env = Object.fromEntries(
    Object.entries(process.env).filter(([name]) => !name.startsWith('VIDSHEET_')),
  );
  Object.assign(env, {
    HOST: '127.0.0.1',
    PORT: String(port),
    VIDSHEET_BASE_URL: `http://127.0.0.1:${port}`,
    VIDSHEET_DATA_DIR: join(root, 'data'),
    TMPDIR: join(root, 'tmp'),
    ...extra,
  });
  mkdirSync(env.TMPDIR, { recursive: true });
  const child = spawn(process.execPath, [SERVER_BIN], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  const exited = new Promise((resolve) => child.on('close', resolve));
  // Should the bench die without stopping it (an error, a kill), the server goes with it. A signal
  // ends Node without 'exit': the server is stopped first, then the signal raised again.
  const onExit = () => child.exitCode === null && child.signalCode === null && child.kill('SIGTERM');
  process.once('exit', onExit);
  const onSignal = (signal) => {
    onExit();
    process.kill(process.pid, signal);
  };
  for (const signal of STOP_SIGNALS) process.once(signal, onSignal);
  const logs = [];
  const waiters = [];
  let raw = '';
  let pending = '';
  child.stdout.on('data', (chunk) => {
    raw = (raw + chunk).slice(-64 * 1024);
    pending += chunk;
    const lines = pending.split('\n');
    pending = lines.pop() ?? '';
    for (const text of lines) {
      let line;
      try {
        line = JSON.parse(text);
      } catch {
        continue; // the worker's own debug output, if any
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
  child.stderr.on('data', (chunk) => {
    raw = (raw + chunk).slice(-64 * 1024);
    process.stderr.write(chunk);
  });
  /** Resolves with the first log line (already seen or still to come) that matches. */
  const waitFor = (match, timeoutMs = 60_000) => {
    const seen = logs.find(match);
    if (seen) return Promise.resolve(seen);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no matching log line; output:\n${raw}`)), timeoutMs);
      waiters.push({
        match,
        resolve: (line) => {
          clearTimeout(timer);
          resolve(line);
        },
      });
      void exited.then(() => reject(new Error(`server exited early; output:\n${raw}`)));
    });
  };
  const listening = await waitFor((l) => l.msg === 'vidsheet-server listening');
  await waitFor((l) => l.msg === 'job worker ready');
  const dataDir = env.VIDSHEET_DATA_DIR;
  /**
   * Runs `vidsheet-server admin ...` on the same data; resolves with its stdout, trimmed. One at a
   * time: side by side on SQLite, one can fail with "database is locked" (seen in the soak's setup).
   */
  let queue = Promise.resolve();
  const admin = (...args) => {
    const run = () =>
      new Promise((resolve, reject) => {
        execFile(process.execPath, [SERVER_BIN, 'admin', ...args], { env }, (error, stdout, stderr) => {
          if (error) reject(new Error(`admin ${args[0]} failed:\n${stderr}`));
          else resolve(stdout.trim());
        });
      });
    const done = queue.then(run, run);
    queue = done.catch(() => {});
    return done;
  };
  let stopping;
  const server = {
    url: String(listening.address),
    port,
    pid: child.pid,
    child,
    env,
    dataDir,
    logs,
    waitFor,
    admin,
    /** A new account with a key and `credits` granted: `{ email, key, credits }`. */
    async account(credits, email = `bench-${randomBytes(4).toString('hex')}@example.com`) {
      const key = await admin('create-key', '--email', email);
      await admin('add-credits', '--email', email, '--credits', String(credits));
      return { email, key, credits };
    },
    /** The worker now running jobs (the latest one started). */
    workerPid: () => logs.findLast((l) => l.msg === 'job worker started')?.workerPid,
    /** Files under `<data>/work`. */
    workFiles: () => readdirSync(join(dataDir, 'work')).length,
    /** SIGTERM, the exit awaited, the directories removed; safe to call twice. */
    stop() {
      stopping ??= (async () => {
        process.removeListener('exit', onExit);
        for (const signal of STOP_SIGNALS) process.removeListener(signal, onSignal);
        if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
        await exited;
        rmSync(root, { recursive: true, force: true });
      })();
      return stopping;
    },
  };
  started.push(server);
  return server;
}

/**
 * POST `path` (default /v1/vidsheet) with a hand-built multipart body: `fields` first, then the
 * `video` part, from `file` (streamed from disk, never held whole) or `bytes`, under `filename`.
 * `truncate: true` announces and sends the body without its closing boundary (a cut multipart).
 * Resolves with `{ status, text, body, start, end, ms }` (epoch ms, comparable to pino `time`);
 * status 0 when the connection failed before an answer.
 */
export function upload(
  server,
  key,
  { file, bytes, filename, fields = {}, path = '/v1/vidsheet', localAddress, truncate = false },
) {
  const boundary = `----vidsheet-bench-${randomBytes(12).toString('hex')}`;
  let head = '';
  for (const [name, value] of Object.entries(fields)) {
    head += `--${boundary}\r\nContent-Disposition: form-data; name="${name}"\r\n\r\n${value}\r\n`;
  }
  head +=
    `--${boundary}\r\nContent-Disposition: form-data; name="video"; filename="${filename ?? basename(file)}"\r\n` +
    'Content-Type: application/octet-stream\r\n\r\n';
  const tail = truncate ? '' : `\r\n--${boundary}--\r\n`;
  const size = file ? statSync(file).size : bytes.length;
  const length = Buffer.byteLength(head) + size + Buffer.byteLength(tail);
  const now = () => performance.timeOrigin + performance.now();
  return new Promise((resolve) => {
    const start = now();
    const failed = (error) =>
      resolve({ status: 0, text: error.message, start, end: now(), ms: now() - start });
    const req = request(`${server.url}${path}`, {
      method: 'POST',
      agent: false,
      localAddress,
      headers: {
        authorization: `Bearer ${key}`,
        'content-type': `multipart/form-data; boundary=${boundary}`,
        'content-length': String(length),
      },
    });
    req.on('error', failed);
    req.on('response', (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('error', failed);
      res.on('end', () => {
        const end = now();
        const text = Buffer.concat(chunks).toString('utf8');
        let body;
        try {
          body = JSON.parse(text);
        } catch {
          body = text;
        }
        resolve({ status: res.statusCode, text, body, start, end, ms: end - start });
      });
    });
    req.write(head);
    if (!file) {
      req.end(Buffer.concat([bytes, Buffer.from(tail)]));
      return;
    }
    const source = createReadStream(file);
    source.on('error', failed);
    source.on('end', () => req.end(tail));
    source.pipe(req, { end: false });
  });
}

/** A `/proc/<pid>/status` field (`VmRSS`, `VmHWM`) in MB, or undefined once the process is gone. */
export function procStatus(pid, field) {
  try {
    const m = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) / 1024 : undefined;
  } catch {
    return undefined;
  }
}

/** Open descriptors of a process, or undefined once it is gone. */
export function openFds(pid) {
  try {
    return readdirSync(`/proc/${pid}/fd`).length;
  } catch {
    return undefined;
  }
}

export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

export const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
