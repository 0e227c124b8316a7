/**
 * What entering a part's open GOPs costs, as the open-GOP cost rule (src/core/open-gop.ts
 * entersOpenGops) reads it: the groups decoding would form from every keyframe, and the frames a
 * group really decodes (a group whose targets are all reference pictures skips the others). The
 * native engine's twin is crates/vidsheet-core/src/video/cost.rs.
 */
import { entersOpenGops, type GopGroup, runSeconds } from '../../core/open-gop.js';
import { groupFrames } from './groups.js';
import type { VideoDetails } from './media.js';
import { pictureHints } from './nal.js';
import { lastAtOrBefore, type Packets, seconds } from './packets.js';

/** What the rule is asked with, the same for every part of a render. */
export interface Costs {
  path: string;
  d: VideoDetails;
  /** Pixels a second of the stream decodes to (the rule's unit of a run's cost). */
  pixelRate: number | null;
  cores: number;
  /** The stream's share of reference pictures (read once a render, see referenceShare). */
  share: (list: Packets) => Promise<number>;
}

/**
 * Whether decoding enters at the entries (`entries`) of `list` to reach the targets `wanted`
 * (ascending indices into list.pts); `guess`: see gopGroups.
 */
export async function paysToEnter(
  costs: Costs,
  list: Packets,
  wanted: number[],
  entries: Set<bigint>,
  guess: boolean,
): Promise<boolean> {
  const { path, d } = costs;
  const hints = await pictureHints(
    path,
    d,
    list,
    wanted.map((f) => list.pts[f] as bigint),
  );
  const reference = new Set(wanted.filter((_, i) => hints[i]?.reference === true));
  // The share is read (once a render) only where some group may skip.
  const skips = groupFrames(wanted, list, list.keyframes).some((g) => g.every((f) => reference.has(f)));
  const share = skips ? await costs.share(list) : 1;
  return entersOpenGops(gopGroups(wanted, list, entries, d, guess, reference, share), {
    reach: d.referenceReach,
    start: d.startTime,
    run: runSeconds(costs.pixelRate),
    cores: costs.cores,
  });
}

/**
 * The groups the targets (`wanted`, ascending indices into packets.pts) would form if decoding
 * started at every keyframe, as the cost rule reads them (seconds); `guess`: the keyframe before
 * each is taken to be as close as the proof allows (the listed packets may not show it).
 */
function gopGroups(
  wanted: number[],
  packets: Packets,
  entries: Set<bigint>,
  d: VideoDetails,
  guess: boolean,
  reference: Set<number>,
  share: number,
): GopGroup[] {
  const all = packets.keyframes;
  return groupFrames(wanted, packets, all).flatMap((group) => {
    const first = packets.pts[group[0] as number] as bigint;
    const k = lastAtOrBefore(all, (p) => p <= first);
    const key = all[k];
    if (key === undefined) return [];
    const previous = all[k - 1];
    const ra = all
      .slice(0, k + 1)
      .reverse()
      .find((p) => !entries.has(p));
    return [
      {
        key: seconds(key, d),
        last: seconds(packets.pts[group[group.length - 1] as number] as bigint, d),
        entry: entries.has(key),
        // A guess: the keyframe before may not be listed, and is at least the reach before.
        previous: guess
          ? seconds(key, d) - d.referenceReach
          : previous === undefined
            ? null
            : seconds(previous, d),
        randomAccess: ra === undefined ? null : seconds(ra, d),
        // As the part's plan decides `skipNonReference`.
        decoded: group.every((f) => reference.has(f)) ? share : 1,
      },
    ];
  });
}

/** Packets sampled for the share of reference pictures (evenly over the listed ones). */
const SHARE_SAMPLE = 200;

/**
 * The share of the stream's pictures that are reference pictures (what `-skip_frame noref` still
 * decodes), from the NAL headers of up to SHARE_SAMPLE listed packets; 1 where they cannot be read.
 */
export async function referenceShare(path: string, d: VideoDetails, packets: Packets): Promise<number> {
  const step = Math.max(1, Math.floor(packets.pts.length / SHARE_SAMPLE));
  const sample = packets.pts.filter((_, i) => i % step === 0).slice(0, SHARE_SAMPLE);
  const hints = await pictureHints(path, d, packets, sample);
  const told = hints.filter((h) => h.reference !== undefined);
  return told.length ? told.filter((h) => h.reference).length / told.length : 1;
}
