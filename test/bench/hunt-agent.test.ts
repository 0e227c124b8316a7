/**
 * The hunt agent's policy (bench/hunt/agent.mjs) against a simulated tool: the real sampling plan
 * (src/core/plan.ts) over a 30-minute timeline of frames, each cell showing the frame its time
 * falls in, and zoom hints on the gaps where the picture changes. It checks the policy, not the
 * engines: the benchmark itself runs the real tool.
 */
import { describe, expect, it } from 'vitest';
import { hunt, KIND } from '../../bench/hunt/agent.mjs';
import { cellsPerSheet, type Density } from '../../src/core/density.js';
import { makePlan } from '../../src/core/plan.js';
import { parseWindowArgs } from '../../src/core/request.js';
import { formatLabel, parseTimeMs } from '../../src/core/time.js';
import { resolveWindow } from '../../src/core/window.js';

interface Event {
  from: number;
  /** Last frame shown (inclusive). */
  to: number;
  kind: string;
  /** The score a gap holding its start or end gets as a hint; none: the signals miss it. */
  score?: number;
  /**
   * A click on the sound track during frame `from` (`kind` none: no cell shows it): the one gap
   * whose first cell shows a frame at or before it and whose second a later one gets an `audio` hint.
   */
  sound?: boolean;
}

function simulatedTool(o: { fps: number; frames: number; density: Density; events: Event[] }) {
  const durationMs = (o.frames / o.fps) * 1000;
  const frameAt = (ms: number) => Math.min(o.frames - 1, Math.floor((ms * o.fps) / 1000 + 1e-9));
  const calls: Array<Record<string, unknown>> = [];
  const call = async (args: { start?: number | string; end?: number | string }) => {
    calls.push(args);
    const window = resolveWindow(parseWindowArgs(args), durationMs, o.density);
    const plan = makePlan(window, o.density);
    const cells = plan.sheets.flat();
    const frames = cells.map((c) => frameAt(c.timeMs));
    const kinds = frames.map((f) => o.events.find((e) => f >= e.from && f <= e.to)?.kind ?? KIND.none);
    const edges = [
      { label: formatLabel(window.startMs, plan.decimals), frame: frameAt(window.startMs) },
      ...cells.map((c, i) => ({ label: c.label, frame: frames[i] as number })),
      { label: formatLabel(window.endMs, plan.decimals), frame: frameAt(window.endMs) },
    ];
    const hints = edges
      .slice(1)
      .flatMap((b, i) => {
        const a = edges[i] as { label: string; frame: number };
        const holds = (e: Event) =>
          e.sound
            ? a.frame <= e.from && e.from < b.frame
            : (e.from > a.frame && e.from <= b.frame) || (e.to + 1 > a.frame && e.to + 1 <= b.frame);
        const held = o.events.filter((e) => e.score !== undefined && holds(e));
        const score = Math.max(0, ...held.map((e) => e.score as number));
        const signals = [...new Set(held.map((e) => (e.sound ? 'audio' : 'bitrate')))];
        return score > 0 ? [{ start: a.label, end: b.label, score, signals }] : [];
      })
      .sort((x, y) => y.score - x.score)
      .slice(0, 5);
    const perSheet = cellsPerSheet(o.density);
    const times = frames.map((f) => Math.round((f / o.fps) * 1000) / 1000);
    const report = {
      duration: durationMs / 1000,
      timecodes: plan.sheets.map((s) => s.map((c) => c.label)),
      frame_times: plan.sheets.map((_, s) => times.slice(s * perSheet, (s + 1) * perSheet)),
      zoom_hints: hints,
    };
    return { report, kinds };
  };
  return { call, calls };
}

const HALF_HOUR = 30 * 60 * 30;
const minWindowS = (density: Density) => (2 * cellsPerSheet(density)) / 1000 + 0.002;
/** The simulated tool on a 30-minute clip at 30 fps. */
const halfHour = (events: Event[], density: Density = '4x4') =>
  simulatedTool({ fps: 30, frames: HALF_HOUR, density, events });

describe('hunt policy on a simulated tool', () => {
  it('a state change that stays: bracketed from the overview, named at its first frame', async () => {
    for (const density of ['4x4', '6x6'] as const) {
      const tool = halfHour([{ from: 20_011, to: HALF_HOUR, kind: KIND.needle, score: 0.9 }], density);
      const r = await hunt({ call: tool.call, instant: false, minWindowS: minWindowS(density) });
      expect(r.answer, density).toBeCloseTo(20_011 / 30, 3);
      expect(r.calls).toBeLessThanOrEqual(4);
    }
  });

  it('a one-frame flash between cells: found through the hinted gaps, named when a cell shows it', async () => {
    const tool = halfHour([{ from: 41_234, to: 41_234, kind: KIND.needle, score: 0.8 }]);
    const r = await hunt({ call: tool.call, instant: true, minWindowS: minWindowS('4x4') });
    expect(r.answer).toBeCloseTo(41_234 / 30, 3);
    expect(r.calls).toBeLessThanOrEqual(5);
    expect(tool.calls[1]).toHaveProperty('start'); // the second call opened a hinted gap
  });

  it('decoys ranked above the needle are opened first, seen for what they are, and left', async () => {
    const events = [
      { from: 10_000, to: 10_014, kind: KIND.decoy, score: 0.9 },
      { from: 30_000, to: 30_014, kind: KIND.decoy, score: 0.8 },
      { from: 20_017, to: 20_031, kind: KIND.needle, score: 0.5 },
    ];
    const tool = halfHour(events);
    const r = await hunt({ call: tool.call, instant: false, minWindowS: minWindowS('4x4') });
    expect(r.answer).toBeCloseTo(20_017 / 30, 3);
    expect(r.calls).toBeGreaterThan(3); // the decoys cost calls
  });

  it('an event no cell lands on and no hint points to: the agent gives up rather than guess', async () => {
    const tool = halfHour([{ from: 41_234, to: 41_234, kind: KIND.needle }]);
    const r = await hunt({ call: tool.call, instant: true, minWindowS: minWindowS('4x4') });
    expect(r).toMatchObject({ answer: null, calls: 1 });
  });

  it('a click on the sound track: heard through the audio hints, named at the frame on screen', async () => {
    for (const density of ['4x4', '6x6'] as const) {
      const tool = halfHour(
        [{ from: 41_234, to: 41_234, kind: KIND.none, score: 0.9, sound: true }],
        density,
      );
      const r = await hunt({ call: tool.call, listen: true, minWindowS: minWindowS(density) });
      // The frame on screen when the click sounds; its successor (the gap's second cell) is wrong.
      expect(r.answer, density).toBeCloseTo(41_234 / 30, 3);
      expect(r.trail.at(-1)?.complete).toBe(true); // named only once every frame was shown
      expect(r.calls).toBeLessThanOrEqual(6);
    }
  });

  it('listening, it opens only gaps the audio signal raised, however high the others score', async () => {
    const tool = halfHour([
      { from: 9_000, to: 9_000, kind: KIND.none, score: 0.95 }, // a flash: bitrate only
      { from: 30_001, to: 30_001, kind: KIND.none, score: 0.4, sound: true },
    ]);
    const r = await hunt({ call: tool.call, listen: true, minWindowS: minWindowS('4x4') });
    expect(r.answer).toBeCloseTo(30_001 / 30, 3);
    for (const args of tool.calls.slice(1)) {
      const start = (parseTimeMs(args.start as string | number) as number) / 1000;
      expect(Math.abs(start - 30_001 / 30), JSON.stringify(args)).toBeLessThan(120);
    }
  });

  it('listening with no audio hint: it gives up rather than follow the hints of the picture', async () => {
    const tool = halfHour([{ from: 9_000, to: 9_000, kind: KIND.none, score: 0.95 }]);
    const r = await hunt({ call: tool.call, listen: true, minWindowS: minWindowS('4x4') });
    expect(r).toMatchObject({ answer: null, calls: 1 });
  });
});
