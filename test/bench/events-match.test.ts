/**
 * The events benchmark's arithmetic (bench/events/match.mjs) on runs written out by hand: which gap
 * holds a change, which gap a hint names, recall and false hints; and its corpus oracle
 * (bench/events/oracle.mjs) against a clip made here with a cut at a known frame.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { changeTimes, gapOf, hintGap, scoreRun } from '../../bench/events/match.mjs';
import { sceneCuts } from '../../bench/events/oracle.mjs';

// Four cells at 30 fps showing frames 90, 333 (11.1 s), 600 and 1333 (44.4333.. s, reported 44.433).
const labels = ['0:03', '0:11.1', '0:20', '0:44.433'];
const times = [3, 11.1, 20, 44.433];
const hint = (start: string, end: string, signals = ['bitrate']) => ({ start, end, score: 0.5, signals });

describe('which gap holds a change', () => {
  it('a change shown by a cell lies in the gap before it; one just after, in the next', () => {
    expect(gapOf(333 / 30, times)).toBe(1); // cell 1 shows the first changed frame
    expect(gapOf(334 / 30, times)).toBe(2);
    // The reported time is rounded to the ms (44.433 for 44.4333..): still that cell's frame.
    expect(gapOf(1333 / 30, times)).toBe(3);
    expect(gapOf(1334 / 30, times)).toBe(4);
  });

  it('before the first cell: the window-start gap; after the last: the window-end gap', () => {
    expect(gapOf(1, times)).toBe(0);
    expect(gapOf(50, times)).toBe(4);
  });

  it('a flash and a burst change twice (on, and off on the frame after); a cut or a click once', () => {
    expect(changeTimes({ kind: 'flash', frame: 300 }, 30)).toEqual([10, 301 / 30]);
    expect(changeTimes({ kind: 'burst', frame: 300, last: 314 }, 30)).toEqual([10, 315 / 30]);
    expect(changeTimes({ kind: 'cut', frame: 300 }, 30)).toEqual([10]);
    expect(changeTimes({ kind: 'click', seconds: 12.345 }, 30)).toEqual([12.345]);
  });
});

describe('which gap a hint names', () => {
  it('interior gaps by both labels, the edges by their one cell label', () => {
    expect(hintGap(hint('0:11.1', '0:20'), labels)).toBe(2);
    expect(hintGap(hint('0:00', '0:03'), labels)).toBe(0);
    expect(hintGap(hint('0:44.433', '0:50'), labels)).toBe(4);
    expect(hintGap(hint('0:03', '0:20'), labels)).toBe(-1);
  });
});

describe('a run scored against its events', () => {
  it('recall, the signals that named each event, false hints and still gaps', () => {
    const events = [
      { kind: 'click', seconds: 1.5 }, // gap 0
      { kind: 'cut', frame: 400 }, // 13.33 s: gap 2
      { kind: 'burst', frame: 1330, last: 1340 }, // spans cell 3 (frame 1333): gaps 3 and 4, shown
    ];
    const hints = [
      hint('0:03', '0:11.1'), // gap 1: nothing happens there
      hint('0:00', '0:03', ['audio']),
      hint('0:44.433', '0:50', ['bitrate', 'keyframe']), // the burst's end
    ];
    const s = scoreRun(events, 30, { labels, times, hints });
    expect(s.events).toEqual([
      { kind: 'click', gaps: [0], hinted: true, signals: ['audio'], shown: false },
      { kind: 'cut', gaps: [2], hinted: false, signals: [], shown: false },
      { kind: 'burst', gaps: [3, 4], hinted: true, signals: ['bitrate', 'keyframe'], shown: true },
    ]);
    expect(s.falseHints).toEqual([hints[0]]);
    expect(s.stillGaps).toBe(1); // 5 gaps, 4 hold an event
  });

  it('a one-frame flash between cells is not shown by any cell', () => {
    const s = scoreRun([{ kind: 'flash', frame: 450 }], 30, { labels, times, hints: [] });
    expect(s.events[0]).toMatchObject({ gaps: [2], hinted: false, shown: false });
    expect(s.stillGaps).toBe(4);
  });
});

describe('the corpus oracle (the scene filter)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'vs-events-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('finds a hard cut made at a known frame, and nothing in a still scene', () => {
    // 3 s at 25 fps: a textured still picture, another from frame 40 (1.6 s).
    const file = join(dir, 'cut.mp4');
    execFileSync('ffmpeg', [
      ...['-v', 'error', '-nostdin', '-f', 'lavfi'],
      '-i',
      'testsrc=s=160x90:r=25:d=1,trim=end_frame=1,loop=loop=-1:size=1,setpts=N/25/TB,trim=duration=3[a];' +
        "smptebars=s=160x90:r=25:d=3[b];[a][b]overlay=enable='gte(n\\,40)'",
      ...['-c:v', 'libx264', '-preset', 'ultrafast', '-pix_fmt', 'yuv420p', file],
    ]);
    expect(sceneCuts(file, 0.3)).toEqual([{ kind: 'cut', seconds: 1.6 }]);
  });
});
