import { describe, expect, it } from 'vitest';
import { DENSITIES } from '../../src/core/density.js';
import { cellRect, computeGrid, GUTTER, labelAt, layoutSheets, SHEET_WIDTH } from '../../src/core/layout.js';
import { makePlan } from '../../src/core/plan.js';

const within = (inner: { x: number; y: number; w: number; h: number }, outer: typeof inner) =>
  inner.x >= outer.x &&
  inner.y >= outer.y &&
  inner.x + inner.w <= outer.x + outer.w &&
  inner.y + inner.h <= outer.y + outer.h;

describe('sheet layout', () => {
  it.each(DENSITIES)(
    '%s: cells tile the sheet without overlap, keep the display aspect, labels inside',
    (density) => {
      for (const [w, h] of [
        [1920, 1080],
        [1080, 1920],
        [640, 240],
      ] as const) {
        const grid = computeGrid(w, h, density, true);
        expect(Math.abs(grid.width - SHEET_WIDTH)).toBeLessThan(grid.side + 1);
        expect(Math.abs(grid.cellWidth / grid.cellHeight - w / h)).toBeLessThan(0.02);
        const sheet = { x: 0, y: 0, w: grid.width, h: grid.height };
        const rects = Array.from({ length: grid.side ** 2 }, (_, i) => cellRect(grid, i));
        for (const [i, r] of rects.entries()) {
          expect(within(r, sheet)).toBe(true);
          expect(r.y).toBeGreaterThanOrEqual((grid.band?.y ?? 0) + (grid.band?.h ?? 0) + GUTTER);
          const label = labelAt('12:34.567', r.x, r.y + r.h, grid.fontSize);
          expect(within(label.box, r)).toBe(true);
          for (const other of rects.slice(i + 1)) {
            const apart = other.x >= r.x + r.w || other.y >= r.y + r.h;
            expect(apart).toBe(true);
          }
        }
        // Left to right, then top to bottom.
        expect(rects[1]?.x).toBeGreaterThan(rects[0]?.x as number);
        expect(rects[grid.side]?.y).toBeGreaterThan(rects[0]?.y as number);
      }
    },
  );

  it('labels stay legible at 6x6 (font at least 14 px on a 16:9 source)', () => {
    expect(computeGrid(1920, 1080, '6x6', true).fontSize).toBeGreaterThanOrEqual(14);
  });

  it('each sheet band spans its own slots, with a tick per cell', () => {
    const plan = makePlan({ startMs: 10_000, endMs: 200_000 }, '3x3');
    const grid = computeGrid(1920, 1080, '3x3', true);
    const sheets = layoutSheets({
      grid,
      sheets: plan.sheets,
      window: plan.window,
      paths: plan.sheets.map((_, i) => `/tmp/x.sheet-${i + 1}.jpg`),
      hasAudio: true,
    });
    expect(sheets.map((s) => [s.band?.startMs, s.band?.endMs])).toEqual([
      [10_000, 73_333],
      [73_333, 136_667],
      [136_667, 200_000],
    ]);
    for (const [s, sheet] of sheets.entries()) {
      expect(sheet.band?.ticksMs).toEqual(plan.sheets[s]?.map((c) => c.timeMs));
      expect(sheet.band?.message).toBeNull();
    }
    const silent = layoutSheets({
      grid,
      sheets: plan.sheets,
      window: plan.window,
      paths: ['a', 'b', 'c'],
      hasAudio: false,
    });
    expect(silent[0]?.band?.message?.text).toBe('no audio');
    const visualOnly = computeGrid(1920, 1080, '3x3', false);
    expect(visualOnly.band).toBeNull();
  });
});
