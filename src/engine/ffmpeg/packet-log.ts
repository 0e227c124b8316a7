/**
 * The packets the zoom hints read (src/core/packet-log.ts) and a render's packet lists: the whole
 * stream's, listed once, and the light listing of an MP4/MOV stream made for the hints alone.
 * The native engine's twin is crates/vidsheet-core/src/video/packets.rs.
 */
import type { ListedPackets } from '../../core/packet-log.js';
import type { HintPackets } from '../../core/render-plan.js';
import { labelSeconds } from '../timestamps.js';
import { int, num, probePackets } from './listing.js';
import type { VideoDetails } from './media.js';
import { listAllPackets, type Packets } from './packets.js';
import { sampleTablePackets } from './sample-table.js';

/**
 * A render's packet lists. The hints' packets are what the frame rule's listings read, but MP4/MOV
 * lists only the neighbourhood of each target, which leaves most gaps unseen, so every packet the
 * hints read (the whole stream for an overview, a window's part of it for a zoom, RenderPlan
 * `hintPackets`) comes from the sample table, as the native engine reads it: read here
 * (./sample-table.ts), or, for a table that reading declines, listed by ffprobe alongside the
 * decoding (listHintPackets), also where the frame rule needed the whole stream's list (rare in
 * MP4/MOV: only when its listing near the targets fails).
 */
export class StreamLists {
  private listing: Promise<Packets> | undefined;
  /**
   * The whole stream's list once it is in: set before any `whole()` caller resumes, so a part can
   * tell whether it already has it without waiting for a listing still running for the hints.
   */
  private wholeList: Packets | undefined;
  private readonly logs: Array<ListedPackets> = [];
  private readonly hinting = process.env.VIDSHEET_BENCH_NO_HINTS !== '1';
  private readonly light: Promise<ListedPackets> | undefined;

  constructor(
    private readonly path: string,
    private readonly d: VideoDetails,
    private readonly signal: AbortSignal,
    /** The part of the clip the hints read (RenderPlan `hintPackets`). */
    span?: HintPackets,
  ) {
    this.light =
      this.hinting && d.sampleTable && d.timestamps
        ? sampleTablePackets(path, d, span).then((read) => read ?? listHintPackets(path, d, signal, span))
        : undefined;
    this.light?.catch(() => {});
  }

  /** The whole stream's list, listed once a render. */
  whole(): Promise<Packets> {
    this.listing ??= listAllPackets(this.path, this.d, this.signal).then((list) => {
      this.wholeList = list;
      return list;
    });
    return this.listing;
  }

  /** `list` is the whole stream's. */
  isWhole(list: Packets): boolean {
    return list === this.wholeList;
  }

  /** A list the frame rule read: its packets are the hints' unless the light listing's are. */
  read(list: Packets): void {
    if (this.hinting && !this.light) this.logs.push(list.log);
  }

  /** The hints' packets, once every list is in. */
  async log(): Promise<ListedPackets> {
    if (this.light) {
      // Awaited even when unused (no ffprobe outlives the job); a failed listing costs the hints,
      // not the sheets.
      const light = await this.light.catch(() => undefined);
      const log = light ?? this.wholeList?.log;
      if (log) this.logs.push(log);
    }
    return mergeLogs(this.logs);
  }
}

/**
 * Seconds listed beyond each end of a span: ffprobe ends an interval at the first packet
 * presented past its end, and B-frames decoded before the span's end may be presented after it.
 */
const SPAN_PAD_S = 2;

/**
 * ffprobe's listing of an MP4/MOV stream for the zoom hints, whole or the part `span` names
 * (core/zoom.ts), where ./sample-table.ts declines the table (it reads every packet's bytes):
 * each packet's decode time, size and keyframe flag, parsed straight into the log's arrays. `listAllPackets` keeps an object
 * per packet alive for the whole job (the frame rule's lazy parts close over them); on an hour of
 * video that heap slowed every collection of a render the hints only ride along with (7 % where
 * the target is 5 %: bench/run.mjs --hints). The times are `logTimes`' (the decode time, else the
 * presentation time); a packet with neither is a hole, as there.
 */
export async function listHintPackets(
  path: string,
  d: VideoDetails,
  signal?: AbortSignal,
  span: HintPackets = {},
): Promise<ListedPackets> {
  const at = (ms: number) => (d.startTime + ms / 1000).toFixed(6);
  const { fromMs, toMs } = span;
  const from = fromMs === undefined ? '' : at(Math.max(0, fromMs - SPAN_PAD_S * 1000));
  const to = toMs === undefined ? '' : at(toMs + SPAN_PAD_S * 1000);
  // csv prints ffprobe's own field order whatever the order asked: pts, dts, size, flags.
  // Unparsed: a keyframe is a sync sample of the sample table, as the native engine reads it
  // (FFmpeg's H.264 parser also flags x264's I-frames at a scene cut inside its minimum keyframe
  // interval, which the sample table does not list: 380 keyframes against 359 on a real-footage
  // haystack, and the engines' `keyframe` hints differed). Times and sizes are the table's either way.
  const stdout = await probePackets(
    path,
    d,
    [
      ...(from || to ? ['-read_intervals', `${from}%${to}`] : []),
      '-fflags',
      '+noparse',
      '-show_entries',
      'packet=pts,dts,size,flags',
      '-of',
      'csv=p=0',
    ],
    signal,
  );
  const text = stdout.toString();
  let times = new Float64Array(1024);
  let sizes = new Float64Array(1024);
  let keys = new Uint8Array(1024);
  let n = 0;
  const edges: number[] = [];
  let runFrom = 0;
  let hole = false;
  // Closes the run of packets listed since the last hole: its time range, open at the stream's
  // ends where the listing reached them.
  const closeRun = (toEnd: boolean) => {
    if (n === runFrom) return;
    let lo = Number.POSITIVE_INFINITY;
    let hi = Number.NEGATIVE_INFINITY;
    for (let i = runFrom; i < n; i++) {
      lo = Math.min(lo, times[i] as number);
      hi = Math.max(hi, times[i] as number);
    }
    edges.push(
      runFrom === 0 && !from ? Number.NEGATIVE_INFINITY : lo,
      toEnd && !to ? Number.POSITIVE_INFINITY : hi,
    );
    runFrom = n;
  };
  for (let at = 0; at < text.length; ) {
    const nl = text.indexOf('\n', at);
    const end = nl < 0 ? text.length : nl;
    const fields = text.slice(at, end).split(',');
    at = end + 1;
    const [pts, dts, size, flags] = fields;
    const bytes = num(size);
    // Not a packet line (a packet's side data gets lines of its own).
    if (fields.length !== 4 || bytes === undefined || !/^[K_]/.test(flags ?? '')) continue;
    const time = int(dts) ?? int(pts);
    if (time === undefined) {
      // A hole ends the run before it once a packet follows (trailing packets end none).
      hole = n > 0;
      continue;
    }
    if (hole) closeRun(false);
    hole = false;
    if (n === times.length) {
      const grow = <T extends Float64Array | Uint8Array>(a: T, make: (k: number) => T) => {
        const b = make(a.length * 2);
        b.set(a);
        return b;
      };
      times = grow(times, (k) => new Float64Array(k));
      sizes = grow(sizes, (k) => new Float64Array(k));
      keys = grow(keys, (k) => new Uint8Array(k));
    }
    times[n] = labelSeconds(time, d.timeBase, d.startUs);
    sizes[n] = bytes;
    keys[n] = flags?.startsWith('K') ? 1 : 0;
    n++;
  }
  closeRun(true);
  return {
    times: times.slice(0, n),
    sizes: sizes.slice(0, n),
    keys: keys.slice(0, n),
    spans: new Float64Array(edges),
    indexKeys: new Float64Array(0),
  };
}

/** One log of several (each listing's packets and spans; repeats are the rule's to drop). */
function mergeLogs(logs: Array<ListedPackets>): ListedPackets {
  const join = <T extends Float64Array | Uint8Array>(
    make: (n: number) => T,
    pick: (l: ListedPackets) => T,
  ) => {
    const out = make(logs.reduce((n, l) => n + pick(l).length, 0));
    let at = 0;
    for (const l of logs) {
      out.set(pick(l), at);
      at += pick(l).length;
    }
    return out;
  };
  return {
    times: join(
      (n) => new Float64Array(n),
      (l) => l.times,
    ),
    sizes: join(
      (n) => new Float64Array(n),
      (l) => l.sizes,
    ),
    keys: join(
      (n) => new Uint8Array(n),
      (l) => l.keys,
    ),
    spans: join(
      (n) => new Float64Array(n),
      (l) => l.spans,
    ),
    indexKeys: join(
      (n) => new Float64Array(n),
      (l) => l.indexKeys,
    ),
  };
}
