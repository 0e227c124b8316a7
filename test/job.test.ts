/**
 * The job runner owns its temporary directory and its child processes: on abort or on a failure in
 * the middle of a render it stops its children, waits for them to exit, and only then removes its
 * directory. The oracle is the operating system: /proc lists this process's children, and the
 * work directory's listing shows what is left.
 */
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ffmpegEngine } from '../src/engine/ffmpeg.js';
import { runJob } from '../src/job.js';
import { plainClip } from './helpers/fixtures.js';

/** Live (not zombie) ffmpeg/ffprobe processes whose parent is this process. */
function ownFfmpegChildren(): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      // pid (comm) state ppid ...: comm may hold spaces, so split after the closing parenthesis.
      const comm = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
      const [state, ppid] = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (Number(ppid) === process.pid && state !== 'Z' && /^ff(mpeg|probe)$/.test(comm)) {
        pids.push(Number(entry));
      }
    } catch {
      // The process ended while we looked.
    }
  }
  return pids;
}

const roots: string[] = [];
const scratch = () => {
  const dir = mkdtempSync(join(tmpdir(), 'vidsheet-jobtest-'));
  roots.push(dir);
  return dir;
};
afterAll(() => {
  for (const dir of roots) rmSync(dir, { recursive: true, force: true });
});

describe('runJob on the ffmpeg engine', () => {
  it('abort mid-render: rejects with the reason, no child left running, work directory empty', async () => {
    const clip = await plainClip(1800);
    const root = scratch();
    const workDir = join(root, 'work');
    const controller = new AbortController();
    const reason = new Error('stop now');
    let progressed = 0;
    const job = runJob(
      { input: clip, density: '6x6', outDir: join(root, 'out') },
      {
        engine: ffmpegEngine,
        audio: true,
        workDir,
        signal: controller.signal,
        onProgress: (done) => {
          progressed = done;
          if (done === 3) controller.abort(reason);
        },
      },
    );
    await expect(job).rejects.toBe(reason);
    expect(progressed).toBeGreaterThanOrEqual(3);
    expect(ownFfmpegChildren()).toEqual([]);
    expect(readdirSync(workDir)).toEqual([]);
    // Nothing starts later either (a queued task recreating the directory, a late spawn).
    await new Promise((r) => setTimeout(r, 500));
    expect(ownFfmpegChildren()).toEqual([]);
    expect(readdirSync(workDir)).toEqual([]);
  });

  it('a failure mid-render (sheet 1 cannot be written) stops the other extractions before cleaning up', async () => {
    const clip = await plainClip(1800);
    const root = scratch();
    const workDir = join(root, 'work');
    const out = join(root, 'out');
    // A directory where sheet 1 must go: its rename fails while later sheets still decode.
    mkdirSync(join(out, 'video.sheet-1.jpg'), { recursive: true });
    const job = runJob(
      { input: clip, density: '6x6', outDir: out },
      { engine: ffmpegEngine, audio: false, workDir, baseName: 'video' },
    );
    await expect(job).rejects.toMatchObject({ code: 'processing_failed' });
    expect(ownFfmpegChildren()).toEqual([]);
    expect(readdirSync(workDir)).toEqual([]);
    await new Promise((r) => setTimeout(r, 500));
    expect(ownFfmpegChildren()).toEqual([]);
    expect(readdirSync(workDir)).toEqual([]);
    // Sheets after the failure were never finished.
    expect(
      readdirSync(out).filter((f) => f.endsWith('.jpg') && f !== 'video.sheet-1.jpg').length,
    ).toBeLessThan(20);
  });

  it('an aborted signal before the start does nothing at all', async () => {
    const clip = await plainClip(200);
    const root = scratch();
    const controller = new AbortController();
    controller.abort(new Error('never mind'));
    await expect(
      runJob(
        { input: clip, density: '3x3', outDir: join(root, 'out') },
        { engine: ffmpegEngine, audio: false, workDir: join(root, 'work'), signal: controller.signal },
      ),
    ).rejects.toThrow('never mind');
    expect(readdirSync(root)).toEqual([]);
  });
});
