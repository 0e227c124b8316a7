/**
 * Audio activity through the built CLI on every engine: the `audio` object and the band on the
 * sheet. The clip is silence except a 3 kHz burst at 5.000–5.050 s (0.9), a 1 ms full-scale click
 * at 12.000 s (0.99, the clip peak) and a faint 100 Hz hum at 14.5–15.5 s (0.05).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { computeGrid, THEME } from '../../src/core/layout.js';
import { ENGINES, runCli } from '../helpers/cli.js';
import { AUDIO_EVENTS, audioClip, noAudioClip, silentAudioClip } from '../helpers/fixtures.js';
import { type Image, readJpeg } from '../helpers/frames.js';

interface Sample {
  time: number;
  level: number;
}

let work: string;
beforeAll(() => {
  work = mkdtempSync(join(tmpdir(), 'vs-audio-'));
});
afterAll(() => rmSync(work, { recursive: true, force: true }));

async function report(engine: string, clip: string, ...args: string[]) {
  const r = await runCli([clip, '--json', '--out', join(work, engine), ...args], { engine });
  expect(r.stderr).toBe('');
  expect(r.code).toBe(0);
  return JSON.parse(r.stdout);
}

const inside = (s: Sample, from: number, to: number) => s.time >= from && s.time < to;
const maxLevel = (samples: Sample[], from: number, to: number) =>
  Math.max(0, ...samples.filter((s) => inside(s, from, to)).map((s) => s.level));

/** Band columns painted in the peak colour, as source times. */
function peakTimes(
  sheet: Image,
  band: { x: number; y: number; w: number; h: number },
  startS: number,
  endS: number,
): number[] {
  const y = band.y + band.h - 3; // bars grow from the bottom of the band
  const times: number[] = [];
  for (let x = band.x; x < band.x + band.w; x++) {
    const o = (y * sheet.width + x) * 4;
    const [r, g, b] = [sheet.data[o] as number, sheet.data[o + 1] as number, sheet.data[o + 2] as number];
    const [pr, pg, pb] = THEME.bandPeak;
    if (Math.abs(r - pr) < 40 && Math.abs(g - pg) < 40 && Math.abs(b - pb) < 60) {
      times.push(startS + ((x - band.x + 0.5) / band.w) * (endS - startS));
    }
  }
  return times;
}

const reports = new Map<string, Sample[]>();

describe.each(ENGINES)('engine %s', (engine) => {
  it('keeps a 3 kHz burst and a 1 ms click, relative to the clip peak, and nothing elsewhere', async () => {
    const r = await report(engine, await audioClip());
    expect(Object.keys(r.audio)).toEqual(['present', 'normalization', 'window', 'samples']);
    expect(r.audio).toMatchObject({
      present: true,
      normalization: 'clip_peak',
      window: { start: 0, end: 20 },
    });
    const samples: Sample[] = r.audio.samples;
    reports.set(engine, samples);
    expect(samples).toHaveLength(1000);
    expect(samples[1]?.time).toBe(0.02);
    const { tone, click, hum } = AUDIO_EVENTS;
    const toneLevel = tone.amplitude / click.amplitude;
    expect(maxLevel(samples, 4.98, 5.06)).toBeCloseTo(toneLevel, 1);
    expect(maxLevel(samples, 11.98, 12.02)).toBeGreaterThan(0.95);
    expect(maxLevel(samples, 14.5, 15.5)).toBeCloseTo(hum.amplitude / click.amplitude, 2);
    const quiet = samples.filter(
      (s) => !inside(s, 4.96, 5.08) && !inside(s, 11.96, 12.04) && !inside(s, 14.46, 15.54),
    );
    expect(Math.max(...quiet.map((s) => s.level))).toBeLessThan(0.01);
    for (const s of samples) expect(s.level).toBe(Math.round(s.level * 1000) / 1000);
  });

  it('draws the burst on the band at its own time, between the cells around it', async () => {
    const r = await report(engine, await audioClip(), '--density', '4x4', '--start', '4', '--end', '6');
    const grid = computeGrid(160, 90, '4x4', true);
    const sheet = readJpeg(r.files[0]);
    const peaks = peakTimes(sheet, grid.band as NonNullable<typeof grid.band>, 4, 6);
    expect(peaks.length).toBeGreaterThan(0);
    for (const t of peaks) {
      expect(t).toBeGreaterThan(4.99);
      expect(t).toBeLessThan(5.06);
    }
  });

  it('a windowed call keeps clip-peak levels: the hum stays faint in a 14–16 s zoom', async () => {
    const r = await report(engine, await audioClip(), '--start', '14', '--end', '16');
    expect(r.audio.window).toEqual({ start: 14, end: 16 });
    const samples: Sample[] = r.audio.samples;
    expect(samples).toHaveLength(1000);
    expect(samples[0]?.time).toBe(14);
    const level = maxLevel(samples, 14.5, 15.5);
    expect(level).toBeGreaterThan(0.03);
    expect(level).toBeLessThan(0.08);
  });

  it('a silent track gives zero levels', async () => {
    const r = await report(engine, await silentAudioClip());
    expect(r.audio.present).toBe(true);
    expect(r.audio.samples.length).toBeGreaterThan(0);
    expect(r.audio.samples.every((s: Sample) => s.level === 0)).toBe(true);
  });

  it('no audio track: present false, no samples, sheets still made, the band says so', async () => {
    const r = await report(engine, await noAudioClip());
    expect(r.audio).toEqual({
      present: false,
      normalization: 'clip_peak',
      window: { start: 0, end: 10 },
      samples: [],
    });
    expect(r.sheets).toBe(1);
    const grid = computeGrid(160, 90, '3x3', true);
    const band = grid.band as NonNullable<typeof grid.band>;
    const sheet = readJpeg(r.files[0]);
    // "no audio" is written in light text in the middle of an otherwise dark band.
    let light = 0;
    for (let y = band.y; y < band.y + band.h; y++) {
      for (let x = band.x + band.w / 2 - 80; x < band.x + band.w / 2 + 80; x++) {
        const o = (y * sheet.width + x) * 4;
        if ((sheet.data[o] as number) > 160) light++;
      }
    }
    expect(light).toBeGreaterThan(50);
  });
});

describe.runIf(ENGINES.length > 1)('engines agree', () => {
  it('on every audio sample within 0.02', () => {
    const [a, b] = [...reports.values()];
    expect(a && b, 'both engines ran the audio test first').toBeTruthy();
    expect(a?.length).toBe(b?.length);
    for (const [i, s] of (a as Sample[]).entries()) {
      expect(s.time).toBe(b?.[i]?.time);
      expect(Math.abs(s.level - (b?.[i]?.level as number))).toBeLessThanOrEqual(0.02);
    }
  });
});
