/**
 * Audio activity through the built CLI on every engine: the `audio` object and the band on the
 * sheet. The clip is silence except a 3 kHz burst at 5.000–5.050 s (0.9), a 1 ms full-scale click
 * at 12.000 s (0.99, the clip peak) and a faint 100 Hz hum at 14.5–15.5 s (0.05).
 *
 * Then the placement rule on every engine: `audioPeaks` puts samples where the file's timestamps
 * put them (a gap stays a gap, an MPEG-TS jump stays a jump), checked against the clips'
 * construction (pulses at known times, the gap measured by ffprobe), never against the other
 * engine; and the band a sheet shows is the levels core/audio.ts computes from those peaks.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type AudioPeaks, bandLevels } from '../../src/core/audio.js';
import { computeGrid, layoutSheets, THEME } from '../../src/core/layout.js';
import { makePlan } from '../../src/core/plan.js';
import type { Engine } from '../../src/engine/types.js';
import { audioPacketGap, type GapKind, gapClip } from '../helpers/audio-gaps.js';
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

/**
 * The audio clip's whole-clip report from `engine`, made once per engine and shared by the tests
 * that read it, whichever of them run and in whatever order.
 */
const clipReports = new Map<string, ReturnType<typeof report>>();
function clipReport(engine: string) {
  let r = clipReports.get(engine);
  if (!r) {
    r = audioClip().then((clip) => report(engine, clip));
    clipReports.set(engine, r);
  }
  return r;
}

describe.each(ENGINES)('engine %s', (engine) => {
  it('keeps a 3 kHz burst and a 1 ms click, relative to the clip peak, and nothing elsewhere', async () => {
    const r = await clipReport(engine);
    expect(Object.keys(r.audio)).toEqual(['present', 'normalization', 'window', 'samples']);
    expect(r.audio).toMatchObject({
      present: true,
      normalization: 'clip_peak',
      window: { start: 0, end: 20 },
    });
    const samples: Sample[] = r.audio.samples;
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
  it('on every audio sample within 0.02', async () => {
    const [a, b]: Sample[][] = await Promise.all(
      ENGINES.map(async (engine) => (await clipReport(engine)).audio.samples),
    );
    expect(a?.length).toBe(1000);
    expect(a?.length).toBe(b?.length);
    for (const [i, s] of (a as Sample[]).entries()) {
      expect(s.time).toBe(b?.[i]?.time);
      expect(Math.abs(s.level - (b?.[i]?.level as number))).toBeLessThanOrEqual(0.02);
    }
  });
});

/** The engine under test, as the built package loads it. */
async function engineNamed(name: 'native' | 'ffmpeg'): Promise<Engine> {
  if (name === 'ffmpeg') return (await import('../../dist/engine/ffmpeg.js')).ffmpegEngine;
  const { loadNative } = await import('../../dist/engine/native-loader.js');
  const loaded = loadNative();
  if (!('engine' in loaded)) throw new Error(loaded.error);
  return loaded.engine;
}

/** Bins at or above `threshold`, as container-relative ms. */
const loudBins = (p: AudioPeaks, threshold: number) =>
  [...p.peaks.entries()].filter(([, v]) => v >= threshold).map(([i]) => p.startMs + i);

/** Codec delay each clip's audio codec may add to a pulse (PCM: none). */
const CODEC_DELAY_MS: Record<GapKind, number> = { 'mkv-pcm': 0, 'mp4-aac': 3, 'ts-mp2-jump': 12 };

describe.each(ENGINES)('engine %s: audio peaks placed by timestamp', (name) => {
  it.each<GapKind>(['mkv-pcm', 'mp4-aac', 'ts-mp2-jump'])(
    '%s: each pulse where the timestamps put it',
    async (kind) => {
      const clip = await gapClip(join(work, 'gaps'), kind);
      // The oracle's side: the file really jumps by the shift (ffprobe's packet timestamps).
      expect(await audioPacketGap(clip.path)).toBeGreaterThan(clip.shiftS - 0.05);
      const engine = await engineNamed(name);
      const last = Math.ceil((clip.pulses.at(-1)?.at ?? 0) * 1000) + 500;
      const peaks = await engine.audioPeaks(clip.path, { startMs: 0, endMs: last });
      expect(peaks.present).toBe(true);
      expect(peaks.startMs).toBe(0);
      expect(peaks.peaks).toHaveLength(last);
      // Lossy codecs ring around a rectangular pulse (MP2 overshoots by ~10 %).
      expect(peaks.clipPeak).toBeGreaterThan(0.85);
      expect(peaks.clipPeak).toBeLessThan(1.01);
      const delay = CODEC_DELAY_MS[kind];
      for (const pulse of clip.pulses) {
        const from = pulse.at * 1000;
        const bins = loudBins(peaks, pulse.amplitude / 2).filter((ms) => Math.abs(ms - from) < 100);
        expect(bins.length, `${kind} pulse at ${pulse.at} s`).toBeGreaterThanOrEqual(pulse.ms - 1);
        expect(Math.min(...bins)).toBeGreaterThanOrEqual(from - 1);
        expect(Math.max(...bins)).toBeLessThanOrEqual(from + pulse.ms + delay + 1);
      }
      // Nothing where counting samples from the start would have put the second pulse, nothing
      // anywhere else either.
      expect(
        loudBins(peaks, 0.2).every((ms) => clip.pulses.some((p) => Math.abs(ms - p.at * 1000) < 30)),
      ).toBe(true);
      expect(
        Math.max(...peaks.peaks.subarray(clip.countedAt * 1000 - 20, clip.countedAt * 1000 + 30)),
      ).toBeLessThan(0.05);
    },
  );

  it("a windowed call keeps the whole clip's peak", async () => {
    const clip = await gapClip(join(work, 'gaps'), 'mkv-pcm');
    const engine = await engineNamed(name);
    const peaks = await engine.audioPeaks(clip.path, { startMs: 900, endMs: 1100 });
    expect(peaks.startMs).toBe(900);
    expect(peaks.peaks).toHaveLength(200);
    expect(peaks.clipPeak).toBeCloseTo(0.9, 3);
    expect(Math.max(...peaks.peaks)).toBeCloseTo(0.5, 3);
  });

  it('the band on the sheet is the levels core/audio.ts computes from those peaks', async () => {
    const clip = await gapClip(join(work, 'gaps'), 'mkv-pcm');
    // 30 ms around the pulse that follows the gap: about 50 px per ms, so JPEG blur is no issue.
    const window = { startMs: 3990, endMs: 4020 };
    const r = await report(name, clip.path, '--start', '3.99', '--end', '4.02');
    const grid = computeGrid(64, 36, '3x3', true);
    const [sheet] = layoutSheets({
      grid,
      sheets: makePlan(window, '3x3').sheets,
      window,
      paths: ['x'],
      hasAudio: true,
    });
    const band = sheet?.band as NonNullable<NonNullable<typeof sheet>['band']>;
    const engine = await engineNamed(name);
    const peaks = await engine.audioPeaks(clip.path, window);
    const levels = bandLevels(band, peaks);
    expect(Math.max(...levels)).toBe(1);
    expect(levels.filter((l) => l === 0).length).toBeGreaterThan(100);
    const img = readJpeg(r.files[0]);
    const { rect } = band;
    /** Rows from the bottom of the band painted in a bar colour (not background), column x. */
    const barHeight = (x: number) => {
      let h = 0;
      for (let y = rect.y + rect.h - 1; y >= rect.y; y--) {
        const o = (y * img.width + x) * 4;
        const [r0, g0, b0] = [img.data[o] as number, img.data[o + 1] as number, img.data[o + 2] as number];
        const [br, bg, bb] = THEME.bandBackground;
        if (Math.abs(r0 - br) + Math.abs(g0 - bg) + Math.abs(b0 - bb) < 90) break;
        h++;
      }
      return h;
    };
    let checked = 0;
    // Columns away from a change of level (and from the tick marks), so each is a clean bar.
    const ticks = band.ticksMs.map((t) =>
      Math.floor(((t - band.startMs) * rect.w) / (band.endMs - band.startMs)),
    );
    for (let c = 8; c < rect.w - 8; c += 7) {
      const level = levels[c] as number;
      if (levels.slice(c - 4, c + 5).some((l) => l !== level)) continue;
      if (ticks.some((t) => Math.abs(t - c) < 4)) continue;
      const expected = Math.round(level * (rect.h - 4));
      const got = barHeight(rect.x + c);
      // A peak column also has its 3 px marker on top; a full bar then meets it.
      const tolerance = level >= THEME.peakThreshold ? 4 : 2;
      expect(Math.abs(got - expected), `column ${c}: level ${level}`).toBeLessThanOrEqual(tolerance);
      checked++;
    }
    expect(checked).toBeGreaterThan(100);
  });
});
