import { describe, expect, it } from 'vitest';
import { cellsPerSheet, DENSITIES } from '../../src/core/density.js';
import { makePlan, sheetCount, TooManySheetsError } from '../../src/core/plan.js';
import { parseTimeMs } from '../../src/core/time.js';

describe('makePlan', () => {
  it('gives one sheet per started 90 s of window, whatever the density', () => {
    expect(sheetCount(90_000)).toBe(1);
    expect(sheetCount(90_001)).toBe(2);
    expect(sheetCount(200_000)).toBe(3);
    for (const density of DENSITIES) {
      const plan = makePlan({ startMs: 0, endMs: 200_000 }, density);
      expect(plan.sheets).toHaveLength(3);
      for (const sheet of plan.sheets) expect(sheet).toHaveLength(cellsPerSheet(density));
    }
  });

  it('samples slot centres and labels in whole seconds when they tell cells apart', () => {
    const plan = makePlan({ startMs: 0, endMs: 90_000 }, '3x3');
    expect(plan.decimals).toBe(0);
    expect(plan.sheets[0]?.map((c) => c.label)).toEqual([
      '0:05',
      '0:15',
      '0:25',
      '0:35',
      '0:45',
      '0:55',
      '1:05',
      '1:15',
      '1:25',
    ]);
  });

  it('adds decimals only as far as needed, and the cell time equals its label', () => {
    const cases: Array<[number, number, string, number]> = [
      [10_000, 10_500, '6x6', 2], // 36 cells in 500 ms: ~13.9 ms apart -> hundredths
      [0, 18, '3x3', 3], // the floor: 2 ms slots need milliseconds
      [0, 5_000, '3x3', 1], // 9 cells ~556 ms apart: whole seconds would repeat
      [60_000, 70_000, '3x3', 0],
    ];
    for (const [startMs, endMs, density, decimals] of cases) {
      const plan = makePlan({ startMs, endMs }, density as '3x3');
      expect(plan.decimals).toBe(decimals);
      const cells = plan.sheets.flat();
      for (const [i, cell] of cells.entries()) {
        expect(parseTimeMs(cell.label)).toBe(cell.timeMs);
        expect(cell.timeMs).toBeGreaterThanOrEqual(startMs);
        expect(cell.timeMs).toBeLessThanOrEqual(endMs);
        if (i > 0) expect(cell.timeMs).toBeGreaterThan(cells[i - 1]?.timeMs as number);
      }
    }
  });

  it('labels a window typed back from a label on the same absolute clock', () => {
    const overview = makePlan({ startMs: 0, endMs: 600_000 }, '3x3');
    const [a, b] = [overview.sheets[2]?.[3], overview.sheets[2]?.[4]];
    const zoom = makePlan(
      {
        startMs: parseTimeMs(a?.label as string) as number,
        endMs: parseTimeMs(b?.label as string) as number,
      },
      '3x3',
    );
    // The zoom stays on the source clock: all of its cells lie between the two labels picked.
    for (const cell of zoom.sheets.flat()) {
      expect(cell.timeMs).toBeGreaterThanOrEqual(a?.timeMs as number);
      expect(cell.timeMs).toBeLessThanOrEqual(b?.timeMs as number);
    }
    expect(zoom.decimals).toBe(0);
  });

  it('enforces a surface sheet cap', () => {
    expect(() => makePlan({ startMs: 0, endMs: 30 * 60_000 + 1 }, '3x3', 20)).toThrow(TooManySheetsError);
    expect(makePlan({ startMs: 0, endMs: 30 * 60_000 }, '3x3', 20).sheets).toHaveLength(20);
  });
});
