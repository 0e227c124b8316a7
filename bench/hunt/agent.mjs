/**
 * The scripted agent of the hunt benchmark: it plays the model, knowing only what the tool returns
 * (the JSON and the sheets' pixels) and what the needle looks like, never where it is.
 *
 * Fixed policy:
 *   1. Overview (the whole clip).
 *   2. If a cell shows the needle: zoom between the last cell before it that does not and the first
 *      that does (their labels), until every frame of the window is shown (two cells share a
 *      `frame_times` value, so no frame falls between cells); then name that cell's `frame_times`.
 *      A one-frame event (class B) is named as soon as a cell shows it.
 *   3. Otherwise open the best hinted gap (`zoom_hints`, highest score first) of the latest call,
 *      skipping gaps next to a cell that shows a decoy; when a call's hints are used up, go back to
 *      the previous call's next hint. A window whose every frame was shown and held no needle adds
 *      no hints.
 * A sound (`listen`, class D) shows in no cell: the agent follows only hints whose signals include
 * `audio`, and once a call shows every frame of its window it names the frame on screen when the
 * best such hint's gap begins (`frame_times` of the gap's first cell, or of its second when the
 * gap starts at the window's edge).
 * It stops when it names a frame (right or wrong) or has no gap left to open.
 */

/** How a cell looks to the agent: the needle, a decoy, or neither. */
export const KIND = { needle: 'needle', decoy: 'decoy', none: 'none' };

/** True when the call showed every frame of its window: some consecutive cells share a frame. */
export function everyFrameShown(frameTimes) {
  const flat = frameTimes.flat();
  return flat.some((t, i) => i > 0 && t !== null && t === flat[i - 1]);
}

/**
 * One hunt. `call(args)` runs the tool (`start`/`end` as labels or seconds, nothing for the whole
 * clip) and resolves to `{ report, kinds }`: the tool's JSON and each cell's KIND in cell order
 * (sheet by sheet). `instant`: the needle lasts one frame, so a cell showing it is the answer.
 * `listen`: the needle is a sound, found by the `audio` hints alone.
 * Resolves to `{ answer, calls, trail }` (`answer` null when the agent gave up).
 */
export async function hunt({ call, instant = false, listen = false, minWindowS, maxCalls = 12 }) {
  const trail = [];
  const pending = []; // stack of per-call hint lists, latest call on top
  let args = {};
  let calls = 0;
  let duration;
  while (calls < maxCalls) {
    const { report, kinds } = await call(args);
    calls++;
    duration ??= report.duration;
    const labels = report.timecodes.flat();
    const times = report.frame_times.flat();
    const complete = everyFrameShown(report.frame_times);
    const first = kinds.indexOf(KIND.needle);
    trail.push({ args, seen: first >= 0, complete });
    if (first >= 0) {
      // A cell showing a one-frame needle is the needle; the first cell of a lasting one is its
      // start once no frame can hide between it and the cell before.
      if (instant || complete) return { answer: times[first], calls, trail };
      const from = first > 0 ? labels[first - 1] : (args.start ?? 0);
      args = zoomArgs(from, labels[first], minWindowS, duration);
      pending.length = 0; // the needle is bracketed: no other gap matters now
      continue;
    }
    const heard = listen ? report.zoom_hints.filter((h) => h.signals.includes('audio')) : [];
    if (complete && heard[0]) {
      const at = labels.indexOf(heard[0].start);
      return { answer: times[at >= 0 ? at : labels.indexOf(heard[0].end)] ?? null, calls, trail };
    }
    if (!complete) {
      const decoyLabels = new Set(labels.filter((_, i) => kinds[i] === KIND.decoy));
      const hints = report.zoom_hints.filter((h) => !decoyLabels.has(h.start) && !decoyLabels.has(h.end));
      pending.push(listen ? heard : hints);
    }
    while (pending.length && pending[pending.length - 1].length === 0) pending.pop();
    if (!pending.length) return { answer: null, calls, trail };
    const hint = pending[pending.length - 1].shift();
    args = zoomArgs(hint.start, hint.end, minWindowS, duration);
  }
  return { answer: null, calls, trail };
}

/** Seconds of a label or a number, as the tool reads them (m:ss[.ddd], h:mm:ss, seconds). */
export function seconds(value) {
  if (typeof value === 'number') return value;
  return value.split(':').reduce((acc, part) => acc * 60 + Number(part), 0);
}

/**
 * A zoom between two labels; when they are closer than the grid allows (the tool's 2 ms per cell
 * floor), a window of the smallest allowed length centred on them, in seconds.
 */
export function zoomArgs(start, end, minWindowS, duration) {
  const [a, b] = [seconds(start), seconds(end)];
  if (b - a >= minWindowS) return { start, end };
  const middle = (a + b) / 2;
  const half = minWindowS / 2 + 0.001;
  const from = Math.max(0, Math.min(middle - half, duration - 2 * half));
  return { start: Number(from.toFixed(3)), end: Number((from + 2 * half).toFixed(3)) };
}
