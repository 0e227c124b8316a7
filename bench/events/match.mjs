/**
 * The events benchmark's arithmetic (pure): which gap between cells holds each known event, and
 * which of a run's `zoom_hints` fall on a gap that holds one (DESIGN §10).
 *
 * Gaps of a run with n cells (all sheets, in order): gap 0 from the window's start to cell 0,
 * gap i from cell i-1 to cell i, gap n from the last cell to the window's end. A cell shows the
 * frame whose time is its `frame_times` value, so a change at time t (the first frame that differs)
 * lies in gap i when cell i-1 shows a frame before it and cell i shows it or a later one:
 * `times[i-1] < t <= times[i]` (the edges open to minus and plus infinity). Frame times are
 * rounded to the ms, so t is compared half a millisecond early.
 */

const HALF_MS = 0.0005;

/**
 * The moments an event changes what is seen or heard, in seconds: a cut, a tiny mark or a click
 * once; a one-frame flash and a burst twice (on, and back off on the frame after its last).
 * `event`: `{ kind, frame, last? }` in frames at `fps`, or `{ kind, seconds }` (a click; a corpus
 * cut found by the scene oracle).
 */
export function changeTimes(event, fps) {
  if (event.seconds !== undefined) return [event.seconds];
  const on = event.frame / fps;
  if (event.kind === 'flash') return [on, (event.frame + 1) / fps];
  if (event.kind === 'burst') return [on, (event.last + 1) / fps];
  return [on];
}

/** The gap holding a change at `t` seconds, given each cell's shown time in cell order. */
export function gapOf(t, times) {
  const at = t - HALF_MS;
  const i = times.findIndex((ft) => ft >= at);
  return i < 0 ? times.length : i;
}

/**
 * The gap a hint names, by its labels: an interior gap by both (the cells before and after it),
 * the window's edge gaps by the one cell label they have. -1 when no gap matches.
 */
export function hintGap(hint, labels) {
  const n = labels.length;
  for (let i = 1; i < n; i++) if (labels[i - 1] === hint.start && labels[i] === hint.end) return i;
  if (n && labels[0] === hint.end) return 0;
  if (n && labels[n - 1] === hint.start) return n;
  return -1;
}

/**
 * One run scored against its known events: per event, the gaps it changes (`gaps`), whether one of
 * them is hinted and with which signals, and whether a cell shows it outright (a flash or burst
 * frame sampled by a cell); the run's hints on gaps that hold no event (`falseHints`); and how
 * many gaps hold none (`stillGaps`).
 * `run`: `{ labels, times, hints }`: the labels and shown times of every cell in order (a time
 * may be null for an unreadable cell: its label's seconds are used), and the run's `zoom_hints`.
 */
export function scoreRun(events, fps, { labels, times, hints }) {
  const hinted = new Map(hints.map((h) => [hintGap(h, labels), h]));
  const eventGaps = new Set();
  const scored = events.map((event) => {
    const moments = changeTimes(event, fps);
    const gaps = [...new Set(moments.map((t) => gapOf(t, times)))];
    for (const g of gaps) eventGaps.add(g);
    const hits = gaps.filter((g) => hinted.has(g)).map((g) => hinted.get(g));
    const shown =
      moments.length > 1 && times.some((ft) => ft >= moments[0] - HALF_MS && ft < moments[1] - HALF_MS);
    return {
      kind: event.kind,
      gaps,
      hinted: hits.length > 0,
      signals: [...new Set(hits.flatMap((h) => h.signals))].sort(),
      shown,
    };
  });
  const falseHints = hints.filter((h) => !eventGaps.has(hintGap(h, labels)));
  return { events: scored, falseHints, stillGaps: labels.length + 1 - eventGaps.size };
}

/** Seconds of a label as the tool writes it (m:ss[.ddd], h:mm:ss[.ddd]). */
export const labelSeconds = (label) => label.split(':').reduce((acc, part) => acc * 60 + Number(part), 0);

/**
 * The cut times ffmpeg's scene filter reports for a file (the corpus oracle, independent of the
 * tool): frames whose `scene` score exceeds `threshold`, parsed from `metadata=print` output.
 */
export function parseSceneScores(text, threshold) {
  const cuts = [];
  let time = null;
  for (const line of text.split('\n')) {
    const pts = /pts_time:(-?[\d.]+)/.exec(line);
    if (pts) time = Number(pts[1]);
    const score = /lavfi\.scene_score=([\d.]+)/.exec(line);
    if (score && time !== null && Number(score[1]) > threshold)
      cuts.push({ seconds: time, score: Number(score[1]) });
  }
  return cuts;
}
