import { describe, expect, it } from 'vitest';
import { formatLabel, parseTimeMs, roundToDecimals } from '../../src/core/time.js';

describe('parseTimeMs', () => {
  it.each([
    ['90', 90_000],
    ['67.4', 67_400],
    ['0.018', 18],
    ['.5', 500],
    ['1:30', 90_000],
    ['0:05', 5_000],
    ['75:03', 4_503_000],
    ['1:07.3', 67_300],
    ['1:07.35', 67_350],
    ['1:07.351', 67_351],
    ['1:02:03', 3_723_000],
    ['1:02:03.5', 3_723_500],
    ['-5', -5_000],
    ['-0:05', -5_000],
    [' 12 ', 12_000],
  ])('%s -> %d ms', (text, ms) => {
    expect(parseTimeMs(text)).toBe(ms);
  });

  it('accepts numbers (MCP) at millisecond precision', () => {
    expect(parseTimeMs(67.4)).toBe(67_400);
    expect(parseTimeMs(0.0186)).toBe(19);
    expect(parseTimeMs(Number.NaN)).toBeNull();
  });

  it.each(['', 'abc', '1:60', '1:2:3', '1:07.1234', '1::2', '10s', '1:30:', '--5', '1e3'])(
    'rejects %j',
    (text) => {
      expect(parseTimeMs(text)).toBeNull();
    },
  );
});

describe('formatLabel', () => {
  it.each([
    [0, 0, '0:00'],
    [5_000, 0, '0:05'],
    [500, 1, '0:00.5'],
    [67_300, 1, '1:07.3'],
    [67_350, 2, '1:07.35'],
    [10_018, 3, '0:10.018'],
    [4_503_000, 0, '75:03'],
    [4_503_000, 2, '75:03.00'],
  ])('%d ms at %d decimals is %s', (ms, d, label) => {
    expect(formatLabel(ms, d)).toBe(label);
  });

  it('round-trips: every label parses back to its own time', () => {
    for (let d = 0; d <= 3; d++) {
      for (let ms = 0; ms < 7_300_000; ms += 997) {
        const t = roundToDecimals(ms, d);
        expect(parseTimeMs(formatLabel(t, d))).toBe(t);
      }
    }
  });
});
