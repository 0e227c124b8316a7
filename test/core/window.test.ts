import { describe, expect, it } from 'vitest';
import { resolveWindow } from '../../src/core/window.js';

const D = 200_000; // a 200 s clip

describe('resolveWindow (spec window rules, in order)', () => {
  it('defaults to the whole clip', () => {
    expect(resolveWindow({}, D, '3x3')).toEqual({ startMs: 0, endMs: D });
  });
  it('clamps an end past the clip', () => {
    expect(resolveWindow({ startMs: 10_000, endMs: 999_000 }, D, '3x3')).toEqual({
      startMs: 10_000,
      endMs: D,
    });
  });
  it('rejects a negative start before anything else', () => {
    expect(() => resolveWindow({ startMs: -1, endMs: -5 }, D, '3x3')).toThrow('start must be a time ≥ 0');
  });
  it('rejects a start at or after the clip end', () => {
    expect(() => resolveWindow({ startMs: D }, D, '3x3')).toThrow(
      'start (200) is at/after the end of the clip (200)',
    );
    expect(() => resolveWindow({ startMs: 250_500 }, D, '3x3')).toThrow(
      'start (250.5) is at/after the end of the clip (200)',
    );
  });
  it('rejects an empty window, also after clamping', () => {
    expect(() => resolveWindow({ startMs: 30_000, endMs: 20_000 }, D, '3x3')).toThrow(
      'window is empty — end (20) must be after start (30)',
    );
    expect(() => resolveWindow({ startMs: 30_000, endMs: 30_000 }, D, '3x3')).toThrow(
      'window is empty — end (30) must be after start (30)',
    );
  });
  it('enforces 2 ms per cell, accepting a window exactly at the floor', () => {
    expect(resolveWindow({ startMs: 1_000, endMs: 1_018 }, D, '3x3')).toEqual({
      startMs: 1_000,
      endMs: 1_018,
    });
    expect(() => resolveWindow({ startMs: 1_000, endMs: 1_017 }, D, '3x3')).toThrow(
      'window too small to address distinctly: 9 cells across 17 ms (the engine seeks at millisecond precision — minimum ≈ 18 ms at this density); zoom out or lower the density',
    );
    expect(resolveWindow({ startMs: 0, endMs: 72 }, D, '6x6')).toEqual({ startMs: 0, endMs: 72 });
    expect(() => resolveWindow({ startMs: 0, endMs: 71 }, D, '6x6')).toThrow('36 cells across 71 ms');
  });
});
