/**
 * DESIGN §10's keys as every surface must show them: `frame_times` parallel to `timecodes` with the
 * frame ffprobe says is displayed at each label (fixtures/oracle.mjs, the frame rule), and
 * `zoom_hints` well formed (at most 5, highest score first, each a gap between consecutive labels
 * or a window edge, signals from the spec's set, `audio` only where the surface measures it).
 */
import { expect } from 'vitest';
import { parseTimeMs } from '../../src/core/time.js';
import { expectedIndex, frameTimes } from './oracle.js';

export interface ModelAids {
  timecodes: string[][];
  frame_times: Array<Array<number | null>>;
  zoom_hints: Array<{ start: string; end: string; score: number; signals: string[] }>;
}

export async function expectModelAids(
  report: ModelAids,
  o: { clip: string; audio: boolean; window?: { start: number; end: number } },
): Promise<void> {
  const ft = await frameTimes(o.clip);
  const expected = report.timecodes.map((sheet) =>
    sheet.map((label) => {
      const t = (parseTimeMs(label) as number) / 1000;
      return Math.round((ft.times[expectedIndex(ft, t)] as number) * 1000) / 1000;
    }),
  );
  expect(report.frame_times).toEqual(expected);

  expect(report.zoom_hints.length).toBeLessThanOrEqual(5);
  const labels = report.timecodes.flat();
  const ms = (label: string) => parseTimeMs(label) as number;
  for (const [i, h] of report.zoom_hints.entries()) {
    expect(Object.keys(h)).toEqual(['start', 'end', 'score', 'signals']);
    expect(h.score).toBeGreaterThanOrEqual(0);
    expect(h.score).toBeLessThanOrEqual(1);
    expect(Math.round(h.score * 100) / 100).toBe(h.score);
    if (i > 0) expect(h.score).toBeLessThanOrEqual(report.zoom_hints[i - 1]?.score as number);
    expect(h.signals.length).toBeGreaterThan(0);
    for (const s of h.signals)
      expect(
        o.audio ? ['keyframe', 'bitrate', 'audio', 'picture'] : ['keyframe', 'bitrate', 'picture'],
      ).toContain(s);
    // Consecutive cells, or a window edge and the first/last cell.
    const a = labels.indexOf(h.start);
    const b = labels.indexOf(h.end);
    if (a >= 0 && b >= 0) expect(b).toBe(a + 1);
    else if (a < 0) {
      expect(b).toBe(0);
      expect(ms(h.start)).toBe(Math.round((o.window?.start ?? 0) * 1000));
    } else {
      expect(a).toBe(labels.length - 1);
      if (o.window) expect(ms(h.end)).toBe(Math.round(o.window.end * 1000));
    }
  }
}
