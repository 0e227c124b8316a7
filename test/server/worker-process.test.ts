/**
 * The job worker's process (worker.ts): its memory limit is the kernel's RLIMIT_DATA, so every
 * allocation past it fails (DESIGN §5a), and it runs with two malloc arenas unless the operator
 * chose a number, so its resident size does not creep up job after job (bench/soak.mjs measures
 * the trend). Read from /proc, as the kernel and glibc see the process.
 */
import { readFileSync, readlinkSync, realpathSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
// The built worker: its child process runs the built child.js.
import { JobWorker } from '../../dist/server/hosted/worker/worker.js';

const log = { info() {}, warn() {}, error() {} };
let worker: JobWorker | undefined;
afterEach(async () => {
  await worker?.close();
  worker = undefined;
});

const NODE = realpathSync(process.execPath);
const exe = (pid: number) => {
  try {
    return readlinkSync(`/proc/${pid}/exe`);
  } catch {
    return undefined;
  }
};

/** A new worker's pid, once it runs node (under a memory limit, a shell sets it and execs node). */
async function started(memoryMb?: number): Promise<number> {
  worker = new JobWorker(log, memoryMb);
  worker.start();
  const pid = worker.pid;
  if (pid === undefined) throw new Error('the worker did not start');
  await expect.poll(() => exe(pid), { timeout: 10_000 }).toBe(NODE);
  return pid;
}

const environment = (pid: number) => readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0');
/** The soft and hard "Max data size" of a process, in bytes. */
function dataLimit(pid: number): string[] {
  const line = readFileSync(`/proc/${pid}/limits`, 'utf8')
    .split('\n')
    .find((l) => l.startsWith('Max data size'));
  return line?.split(/\s{2,}/).slice(1, 3) ?? [];
}

describe('the job worker process', () => {
  it('runs under RLIMIT_DATA of the memory limit, soft and hard', async () => {
    const pid = await started(1536);
    expect(dataLimit(pid)).toEqual([String(1536 * 1024 * 1024), String(1536 * 1024 * 1024)]);
  });

  it('runs with two malloc arenas unless the operator chose', async () => {
    const saved = process.env.MALLOC_ARENA_MAX;
    try {
      delete process.env.MALLOC_ARENA_MAX;
      expect(environment(await started())).toContain('MALLOC_ARENA_MAX=2');
      await worker?.close();
      process.env.MALLOC_ARENA_MAX = '6';
      expect(environment(await started())).toContain('MALLOC_ARENA_MAX=6');
    } finally {
      if (saved === undefined) delete process.env.MALLOC_ARENA_MAX;
      else process.env.MALLOC_ARENA_MAX = saved;
    }
  });
});
