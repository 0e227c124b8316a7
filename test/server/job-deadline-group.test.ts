/**
 * DESIGN §5a "Per-job deadline": a job past `VIDSHEET_JOB_TIMEOUT_S` is killed with its worker *and
 * every child*. A real ffmpeg child dies with its worker anyway (its pipes close, SIGPIPE), so this
 * suite runs the fallback engine with a stand-in `ffmpeg` first on the server's PATH: the job's first
 * call of it ignores SIGPIPE, SIGHUP, SIGTERM, SIGINT and SIGQUIT, writes nothing and sleeps, so only a
 * SIGKILL to the worker's whole process group (worker.ts `killGroup`) ends it. Every other call, and
 * ffprobe, are the real ones, so the job after it runs. A real server on loopback, SQLite.
 */
import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { plainClip } from '../helpers/fixtures.js';
import { processes } from '../helpers/procs.js';
import { postJob, removeServerDirs, startServer, type TestServer, videoForm } from '../helpers/server.js';

const PROCESSING_FAILED = '{"error":"processing_failed","refunded":true}';
/** Long enough for the small clip's whole job on the fallback engine, even on a busy machine. */
const TIMEOUT_S = 8;

/** Finds `tool` on this process's PATH (the stand-in hands every other call to it). */
function onPath(tool: string): string {
  for (const dir of (process.env.PATH ?? '').split(':')) {
    const path = join(dir, tool);
    if (dir && existsSync(path)) return path;
  }
  throw new Error(`${tool} is not on PATH`);
}

const alive = (pid: number) => processes().some((p) => p.pid === pid);

let bin: string;
let server: TestServer;
/** Worker pids seen, so cleanup can end whatever their groups left, whatever the test's outcome. */
const workers = new Set<number>();

beforeAll(async () => {
  bin = mkdtempSync(join(tmpdir(), 'vidsheet-fake-ffmpeg-'));
  // Hangs only once armed (the server may call ffmpeg before the job) and only once (mkdir is atomic).
  // Ignored signals stay ignored across exec, so the `sleep` it becomes is as deaf as the script was.
  writeFileSync(
    join(bin, 'ffmpeg'),
    `#!/bin/sh
if [ -e '${bin}/armed' ] && mkdir '${bin}/hung' 2>/dev/null; then
  trap '' PIPE HUP TERM INT QUIT
  echo $$ > '${bin}/hung/pid'
  exec sleep 300
fi
exec '${onPath('ffmpeg')}' "$@"
`,
  );
  chmodSync(join(bin, 'ffmpeg'), 0o755);
  server = await startServer({
    PATH: `${bin}:${process.env.PATH}`,
    VIDSHEET_ENGINE: 'ffmpeg',
    VIDSHEET_JOB_TIMEOUT_S: String(TIMEOUT_S),
    // No free allowance: balances show exactly what was charged and refunded.
    VIDSHEET_ALLOWANCE_FLOOR: '0',
  });
}, 60_000);

afterAll(async () => {
  // Whatever happened above, nothing this suite started outlives it.
  const hung = join(bin, 'hung', 'pid');
  const strays = processes().filter(
    (p) => workers.has(p.pgrp) || (existsSync(hung) && p.pid === Number(readFileSync(hung, 'utf8'))),
  );
  for (const p of strays) {
    try {
      process.kill(p.pid, 'SIGKILL');
    } catch {
      // gone meanwhile
    }
  }
  await server?.stop();
  rmSync(bin, { recursive: true, force: true });
  removeServerDirs();
});

function workerPid(): number {
  const started = server.logs.filter((l) => l.msg === 'job worker started');
  const pid = Number(started[started.length - 1]?.workerPid);
  workers.add(pid);
  return pid;
}

describe('per-job deadline: the whole process group is killed (DESIGN §5a)', () => {
  it('an ffmpeg child deaf to every signal but SIGKILL dies with its worker; refunded; the next job runs', async () => {
    const small = readFileSync(await plainClip(5));
    const email = `g-${randomBytes(4).toString('hex')}@example.com`;
    const key = (await server.admin('create-key', '--email', email)).stdout.trim();
    expect((await server.admin('add-credits', '--email', email, '--credits', '5')).code).toBe(0);
    const worker = workerPid();

    writeFileSync(join(bin, 'armed'), '');
    const started = Date.now();
    const failed = postJob(server, key, videoForm({ bytes: small, filename: 'small.mp4' }));
    // The stand-in runs: a child of the worker, in the worker's group, alive before the deadline.
    const pidFile = join(bin, 'hung', 'pid');
    const deadline = Date.now() + TIMEOUT_S * 1000 + 5000;
    while (!existsSync(pidFile) || readFileSync(pidFile, 'utf8').trim() === '') {
      if (Date.now() > deadline)
        throw new Error(`the job never called ffmpeg; server output:\n${server.output()}`);
      await sleep(20);
    }
    const hung = Number(readFileSync(pidFile, 'utf8'));
    const proc = processes().find((p) => p.pid === hung);
    expect(proc).toMatchObject({ ppid: worker, pgrp: worker, name: 'sleep' });

    const response = await failed;
    expect(response.status).toBe(500);
    expect(await response.text()).toBe(PROCESSING_FAILED);
    expect(Date.now() - started).toBeLessThan(TIMEOUT_S * 1000 + 3000);
    expect(server.logs.some((l) => l.msg === 'job past its deadline: killing its worker')).toBe(true);
    // SIGKILL is immediate; a moment for the kernel to reap it (zombies do not count as alive).
    const gone = Date.now() + 2000;
    while (alive(hung) && Date.now() < gone) await sleep(20);
    expect(alive(hung)).toBe(false);
    expect(processes().filter((p) => p.pid === worker || p.pgrp === worker)).toEqual([]);

    // The next job runs on a new worker (the real ffmpeg now) and is charged; the failed one was refunded.
    const next = await postJob(server, key, videoForm({ bytes: small, filename: 'small.mp4' }));
    expect(next.status, await next.clone().text()).toBe(200);
    expect(((await next.json()) as { credits_charged: number }).credits_charged).toBe(1);
    expect(workerPid()).not.toBe(worker);
    const shown = JSON.parse((await server.admin('show', '--email', email)).stdout) as {
      balance: number;
      usage: Array<{ refunded: boolean }>;
    };
    expect(shown.balance).toBe(4);
    expect(shown.usage.map((u) => u.refunded).sort()).toEqual([false, true]);
    expect(server.leftovers()).toEqual([]);
  }, 180_000);
});
