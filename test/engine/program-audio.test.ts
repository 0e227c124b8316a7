/**
 * The audio of the video's program (issue 24): a transport stream of two programs, each its own
 * picture and sound, whose larger picture (the video, by the stream rule) is in the second. The
 * band and the report must measure the second program's sound, not the file's first audio stream.
 * The oracle: ffprobe's program table names the sound of the video's program, and ffmpeg's decode
 * of that stream says where it is loud and where silent; the two programs' sounds differ there.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Engine } from '../../src/engine/types.js';
import { ENGINES, runCli } from '../helpers/cli.js';
import { FFMPEG, TWO_PROGRAMS_AUDIO_TS, twoProgramsAudioTs } from '../helpers/fixtures.js';
import { programTable } from '../helpers/oracle.js';

const execFileP = promisify(execFile);

let work: string;
beforeAll(() => {
  work = mkdtempSync(join(tmpdir(), 'vs-program-audio-'));
});
afterAll(() => rmSync(work, { recursive: true, force: true }));

async function engineNamed(name: string): Promise<Engine> {
  if (name === 'ffmpeg') return (await import('../../dist/engine/ffmpeg.js')).ffmpegEngine;
  const { loadNative } = await import('../../dist/engine/native-loader.js');
  const loaded = loadNative();
  if (!('engine' in loaded)) throw new Error(loaded.error);
  return loaded.engine;
}

/** The peak |sample| (0..1) of audio stream `index` in [from, to) s of its decode, by ffmpeg. */
async function peak(path: string, index: number, from: number, to: number): Promise<number> {
  const { stdout } = await execFileP(
    'ffmpeg',
    [...FFMPEG, '-i', path, '-map', `0:${index}`, '-ac', '1', '-ar', '48000', '-f', 's16le', '-'],
    { encoding: 'buffer', maxBuffer: 1 << 26 },
  );
  const samples = new Int16Array(Buffer.from(stdout).buffer, 0, stdout.length >> 1);
  let max = 0;
  for (let i = Math.floor(from * 48_000); i < Math.min(samples.length, to * 48_000); i++)
    max = Math.max(max, Math.abs(samples[i] as number));
  return max / 32768;
}

describe('the audio of the video’s program', () => {
  const o = TWO_PROGRAMS_AUDIO_TS;

  it('fixture: the video’s program has its own sound, silent where the other program’s is not', async () => {
    const path = await twoProgramsAudioTs();
    const table = await programTable(path);
    // Program one's picture and sound come first; the larger picture and its sound are program two's.
    expect(table.get(1)).toEqual([o.video[0], o.audio[0]]);
    expect(table.get(2)).toEqual([o.video[1], o.audio[1]]);
    const [first, own] = o.audio;
    expect(await peak(path, own, 0.5, o.quietFrom - 0.5)).toBeGreaterThan(0.1);
    expect(await peak(path, own, o.quietFrom + 0.2, o.seconds - 0.5)).toBe(0);
    expect(await peak(path, first, o.quietFrom + 0.2, o.seconds - 0.5)).toBeGreaterThan(0.1);
  }, 120_000);

  it.each(ENGINES)(
    '%s: the probe names each stream’s programs as ffprobe does',
    async (name) => {
      const path = await twoProgramsAudioTs();
      const table = await programTable(path);
      const programsOf = (index: number) => [...table].filter(([, s]) => s.includes(index)).map(([p]) => p);
      const engine = await engineNamed(name);
      const info = await engine.probe(path);
      expect(info.videoStreams.map((v) => [v.index, v.programs])).toEqual(
        o.video.map((i) => [i, programsOf(i)]),
      );
      expect(info.audioStreams).toEqual(o.audio.map((index) => ({ index, programs: programsOf(index) })));
      expect(programsOf(o.audio[1])).toEqual([2]);
    },
    120_000,
  );

  it.each(ENGINES)(
    '%s: the report measures the video’s program’s sound',
    async (engine) => {
      const path = await twoProgramsAudioTs();
      const r = await runCli([path, '--json', '--out', join(work, engine)], { engine });
      expect(r.stderr).toBe('');
      expect(r.code).toBe(0);
      const report = JSON.parse(r.stdout);
      expect(report.audio.present).toBe(true);
      const samples: Array<{ time: number; level: number }> = report.audio.samples;
      const loud = samples.filter((s) => s.time >= 0.5 && s.time < o.quietFrom - 0.5);
      const quiet = samples.filter((s) => s.time >= o.quietFrom + 0.2 && s.time < o.seconds - 0.5);
      expect(loud.length).toBeGreaterThan(10);
      expect(quiet.length).toBeGreaterThan(10);
      // Normalised to the clip's peak: the tone is near 1 and, in the video's program, silence is 0
      // (program one's tone would be near 1 there).
      expect(Math.min(...loud.map((s) => s.level))).toBeGreaterThan(0.5);
      expect(Math.max(...quiet.map((s) => s.level))).toBe(0);
    },
    120_000,
  );
});
