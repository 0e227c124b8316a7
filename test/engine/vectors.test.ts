/**
 * The shared test vectors (fixtures/vectors/*.json) against the fallback engine's side of each
 * rule both engines implement; `cargo test -p vidsheet-core` runs the same files against the
 * native side. Inputs and expected outputs are written from the rule each file describes, not
 * captured from either implementation.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { type EntryDecode, provesEntry } from '../../src/core/open-gop.js';
import { PeakBinner } from '../../src/engine/ffmpeg/audio.js';
import { type LogSource, logLine, readLogLine } from '../../src/engine/ffmpeg/decode-log.js';
import {
  extradataSps,
  pairField,
  type SliceInfo,
  type Sps,
  sliceInfo,
} from '../../src/engine/ffmpeg/h264.js';
import { ratio } from '../../src/engine/ffmpeg/media.js';
import { mpeg2LoneField, readLoneField } from '../../src/engine/ffmpeg/mpeg2.js';
import { type Attempt, Ladder } from '../../src/engine/ffmpeg/recovery.js';
import { PacketEnds } from '../../src/engine/packet-ends.js';
import { createCanvas, paintBand } from '../../src/engine/raster.js';
import { referenceReach } from '../../src/engine/reach.js';
import { frameStep, labelSeconds, ptsFaulty, untimedDecodeTime } from '../../src/engine/timestamps.js';
import type { BandPlan, Rgb, Theme } from '../../src/engine/types.js';

/** fixtures/vectors/`name`, parsed. */
function vectors<T>(name: string): T {
  return JSON.parse(readFileSync(new URL(`../../fixtures/vectors/${name}`, import.meta.url), 'utf8')) as T;
}

describe('audio peak binner (audio-binner.json)', () => {
  type Samples = number[] | { n: number; fill?: number; at?: Record<string, number> };
  interface Case {
    name: string;
    startUs: number;
    timeBase: [number, number];
    range: [number, number];
    frames: Array<{ pts: number | null; rate: number; samples: Samples }>;
    expect: { peak: number; bins: Record<string, number> };
  }
  const samples = (s: Samples) => {
    if (Array.isArray(s)) return Float32Array.from(s);
    const out = new Float32Array(s.n).fill(s.fill ?? 0);
    for (const [j, v] of Object.entries(s.at ?? {})) out[Number(j)] = v;
    return out;
  };
  it.each(vectors<{ cases: Case[] }>('audio-binner.json').cases)('$name', (c) => {
    const [startMs, endMs] = c.range;
    const b = new PeakBinner(BigInt(c.startUs), { startMs, endMs }, c.timeBase);
    for (const f of c.frames) b.add(f.pts === null ? null : BigInt(f.pts), f.rate, samples(f.samples));
    expect(b.peak).toBe(Math.fround(c.expect.peak));
    const want = Array.from({ length: endMs - startMs }, (_, i) =>
      Math.fround(c.expect.bins[startMs + i] ?? 0),
    );
    expect([...b.bins]).toEqual(want);
  });
});

describe('audio band painting (band-painting.json)', () => {
  interface Case {
    name: string;
    canvas: [number, number];
    band: Omit<BandPlan, 'message'> & { message?: BandPlan['message'] };
    levels: Array<number | 'NaN'>;
    expect: string[];
  }
  const { theme, cases } = vectors<{ theme: Theme; cases: Case[] }>('band-painting.json');
  const legend: Array<[string, Rgb]> = [
    ['o', theme.background],
    ['.', theme.bandBackground],
    ['l', theme.bandLevel],
    ['p', theme.bandPeak],
    ['t', theme.bandTick],
  ];
  it.each(cases)('$name', (c) => {
    const [w, h] = c.canvas;
    const canvas = createCanvas(w, h, theme.background);
    const levels = c.levels.map((l) => (l === 'NaN' ? Number.NaN : l));
    paintBand(canvas, { ...c.band, message: c.band.message ?? null, levels }, theme);
    const picture = Array.from({ length: h }, (_, y) =>
      Array.from({ length: w }, (_, x) => {
        const o = (y * w + x) * 3;
        const px = [canvas.data[o], canvas.data[o + 1], canvas.data[o + 2]];
        return legend.find(([, rgb]) => rgb.every((v, i) => v === px[i]))?.[0] ?? '?';
      }).join(''),
    );
    expect(picture).toEqual(c.expect);
  });
});

describe('an open-GOP entry proven clean (open-gop-proof.json)', () => {
  type Decode = Omit<EntryDecode, 'print' | 'prints'> & {
    print: number | null;
    prints: Array<[number, number]>;
  };
  interface Case {
    name: string;
    reach: number;
    first: Decode;
    earlier: Decode;
    expect: boolean | null;
  }
  const decode = (d: Decode): EntryDecode => ({
    ...d,
    print: d.print === null ? null : String(d.print),
    prints: d.prints.map(([t, p]) => [t, String(p)] as const),
  });
  it.each(vectors<{ cases: Case[] }>('open-gop-proof.json').cases)('$name', (c) => {
    expect(provesEntry(decode(c.first), decode(c.earlier), c.reach)).toBe(c.expect);
  });
});

describe("reading the decoder's log (decoder-log.json)", () => {
  interface Case {
    source: LogSource;
    level: string;
    message: string;
    expect: 'error' | 'gap' | null;
  }
  it.each(vectors<{ cases: Case[] }>('decoder-log.json').cases)('$source $level: $message', (c) => {
    expect(logLine(c.source, c.level, c.message)).toBe(c.expect);
  });

  it("tells who logged a line of ffmpeg's log (this engine's own reading, not shared)", () => {
    const demuxer = 'mov,mp4,m4a,3gp,3g2,mj2';
    const read = (text: string) => readLogLine(text, demuxer);
    expect(read('[h264 @ 0x55d0c0a1b2c0] [error] Missing reference picture')).toEqual({
      source: 'decoder',
      level: 'error',
      message: 'Missing reference picture',
    });
    expect(read(`[${demuxer} @ 0x55d0c0a1b2c0] [error] stream 0, offset 0x30: partial file`)?.source).toBe(
      'demuxer',
    );
    expect(read('[image2 @ 0x5] [error] Could not open file')?.source).toBe('muxer');
    expect(read('[Parsed_scale_3 @ 0x5] [error] Failed to configure')?.source).toBe('filter');
    expect(read('[error] Error while decoding stream #0:0: Invalid data found')?.source).toBe('decoder');
    expect(read('[error] Conversion failed!')?.source).toBe('other');
    expect(read('[h264 @ 0xabc] [debug] Frame num gap 6 2')).toMatchObject({ level: 'debug' });
    expect(read('not a log line')).toBeNull();
  });
});

describe('the readable end from a packet read (readable-end.json)', () => {
  interface Case {
    name: string;
    fileSize: number;
    fromStart: boolean;
    streams: Record<string, { frame?: number; start?: number }>;
    packets: Array<{
      stream: number;
      pts: number | null;
      dts: number | null;
      duration: number;
      pos: number;
      size: number;
      corrupt?: boolean;
      discard?: boolean;
    }>;
    expect: Record<string, number | null>;
  }
  const big = (v: number | null | undefined) => (v === null || v === undefined ? null : BigInt(v));
  it.each(vectors<{ cases: Case[] }>('readable-end.json').cases)('$name', (c) => {
    const clocks = new Map(
      Object.entries(c.streams).map(([i, s]) => [
        Number(i),
        { frame: big(s.frame), clock: c.fromStart ? BigInt(s.start ?? 0) : null },
      ]),
    );
    const ends = new PacketEnds(c.fileSize, clocks);
    for (const p of c.packets) {
      ends.add(p.stream, {
        ...p,
        pts: big(p.pts),
        dts: big(p.dts),
        duration: big(p.duration),
        corrupt: !!p.corrupt,
        discard: !!p.discard,
      });
    }
    const got = Object.fromEntries(Object.keys(c.expect).map((i) => [i, ends.ends.get(Number(i)) ?? null]));
    expect(got).toEqual(Object.fromEntries(Object.entries(c.expect).map(([i, e]) => [i, big(e)])));
  });
});

describe('field pairing (fields.json)', () => {
  interface Case {
    name: string;
    pictures: Array<{ field: SliceInfo['field']; frame: number } | null>;
    expect: boolean[];
  }
  it.each(vectors<{ cases: Case[] }>('fields.json').cases)('$name', (c) => {
    let open: SliceInfo | null = null;
    const got = c.pictures.map((p) => {
      const paired = pairField(open, p && { idr: false, frameNum: p.frame, field: p.field });
      open = paired.open;
      return paired.second;
    });
    expect(got).toEqual(c.expect);
  });
});

describe('the MPEG-2 picture reader (mpeg2-picture.json)', () => {
  interface Case {
    name: string;
    packet: Array<string | { fill: string; count: number }>;
    expect: { field: 'top' | 'bottom'; frame: number } | null;
  }
  const bytes = (hex: string) => Buffer.from(hex.replace(/\s/g, ''), 'hex');
  it.each(vectors<{ cases: Case[] }>('mpeg2-picture.json').cases)('$name', (c) => {
    const packet = Buffer.concat(
      c.packet.map((p) =>
        typeof p === 'string' ? bytes(p) : Buffer.concat(Array(p.count).fill(bytes(p.fill))),
      ),
    );
    const want = c.expect && { idr: false, frameNum: c.expect.frame, field: c.expect.field };
    expect(mpeg2LoneField(packet)).toEqual(want);
    // Read in place: the leading bytes first, the whole packet when they do not settle it.
    expect(readLoneField((n) => packet.subarray(0, n))).toEqual(want);
  });
});

describe('H.264 headers (h264-headers.json)', () => {
  interface Case {
    name: string;
    avcC: string;
    annexB: string;
    sps: Sps | null;
    slices: Array<{ nal: string; expect: SliceInfo | null }>;
  }
  it.each(vectors<{ cases: Case[] }>('h264-headers.json').cases)('$name', (c) => {
    for (const data of [c.avcC, c.annexB]) expect(extradataSps(Buffer.from(data, 'hex'))).toEqual(c.sps);
    const sps = c.sps;
    if (sps === null) return expect(c.slices).toEqual([]);
    expect(c.slices.map((s) => sliceInfo(Buffer.from(s.nal, 'hex'), sps))).toEqual(
      c.slices.map((s) => s.expect),
    );
  });
});

describe('the reference reach (reference-reach.json)', () => {
  interface Case {
    name: string;
    codec: string;
    spsRefs: number | null;
    delay: number;
    expect: number;
  }
  it.each(vectors<{ cases: Case[] }>('reference-reach.json').cases)('$name', (c) => {
    expect(referenceReach(c.codec, c.spsRefs, c.delay)).toBe(c.expect);
  });
});

describe('packet timestamps (timestamps.json)', () => {
  type Case =
    | {
        of: 'untimed';
        name: string;
        clock: number | null;
        packets: Array<{
          pts: number | null;
          dts: number | null;
          duration: number;
          expect: { dts: number | null; clock: number | null };
        }>;
      }
    | { of: 'label'; name: string; ts: number; timeBase: [number, number]; startUs: number; expect: string }
    | {
        of: 'faulty';
        name: string;
        faulty: boolean;
        packets: Array<{ pts: number | null; dts: number | null; expect: boolean }>;
      };
  const big = (v: number | null) => (v === null ? undefined : BigInt(v));
  const cases = vectors<{ cases: Case[] }>('timestamps.json').cases;

  it.each(cases.filter((c) => c.of === 'untimed'))('the untimed-packet clock: $name', (c) => {
    let clock = c.clock === null ? null : BigInt(c.clock);
    const got = c.packets.map((p) => {
      const timed = untimedDecodeTime(clock, big(p.pts), big(p.dts), BigInt(p.duration));
      clock = timed.clock;
      return { dts: timed.dts ?? null, clock: timed.clock };
    });
    const want = c.packets.map(({ expect: e }) => ({
      dts: e.dts === null ? null : BigInt(e.dts),
      clock: e.clock === null ? null : BigInt(e.clock),
    }));
    expect(got).toEqual(want);
  });

  it.each(cases.filter((c) => c.of === 'faulty'))('faulty pts: $name', (c) => {
    let faulty = c.faulty;
    const got = c.packets.map((p) => {
      faulty = ptsFaulty(faulty, big(p.pts), big(p.dts));
      return faulty;
    });
    expect(got).toEqual(c.packets.map((p) => p.expect));
  });

  it.each(cases.filter((c) => c.of === 'label'))('the label clock: $name', (c) => {
    const [num, den] = c.timeBase;
    expect(labelSeconds(BigInt(c.ts), [BigInt(num), BigInt(den)], BigInt(c.startUs))).toBe(Number(c.expect));
  });
});

describe('the frame step (frame-step.json)', () => {
  interface Case {
    name: string;
    timeBase: [number, number];
    avgFrameRate: string;
    rFrameRate: string;
    duration: number | null;
    expect: number | null;
  }
  it.each(vectors<{ cases: Case[] }>('frame-step.json').cases)('$name', (c) => {
    const [num, den] = c.timeBase;
    const got = frameStep(c.duration === null ? undefined : BigInt(c.duration), [BigInt(num), BigInt(den)], {
      avg: ratio(c.avgFrameRate),
      real: ratio(c.rFrameRate),
    });
    expect(got).toBe(c.expect === null ? null : BigInt(c.expect));
  });
});

describe('the recovery ladder (recovery-ladder.json)', () => {
  interface Case {
    name: string;
    reach: number;
    attempts: Array<
      Omit<Attempt, 'invented' | 'frame' | 'print'> & {
        invented?: boolean;
        frame?: number;
        print: number | null;
        expect: string;
      }
    >;
  }
  it.each(vectors<{ cases: Case[] }>('recovery-ladder.json').cases)('$name', (c) => {
    const ladder = new Ladder(c.reach);
    const verdicts = c.attempts.map((a) => {
      const v = ladder.next({
        start: a.start,
        trouble: a.trouble,
        invented: a.invented ?? false,
        frame: a.frame ?? 0,
        print: a.print === null ? null : String(a.print),
      });
      return typeof v === 'string' ? v : `back ${v.back}`;
    });
    expect(verdicts).toEqual(c.attempts.map((a) => a.expect));
  });
});

describe("the README's engine map", () => {
  const root = new URL('../../', import.meta.url);
  const readme = readFileSync(new URL('README.md', root), 'utf8');
  const section = readme.slice(readme.indexOf('### The engine map'), readme.indexOf('Arrows point one way'));
  /** Each row: the vector file and every `path` symbol pair it names. */
  const rows = [...section.matchAll(/^\|(.+)\|\s*`([\w-]+\.json)`\s*\|$/gm)].map(([, cells = '', file]) => ({
    file,
    names: [...cells.matchAll(/`([^`]+\.(?:ts|rs))` ([\w:]+(?:, [\w:]+)*)/g)].flatMap(
      ([, path = '', symbols = '']) =>
        symbols.split(', ').map((symbol) => ({ path, symbol: symbol.split('::').pop() as string })),
    ),
  }));

  it('lists every vector file once', () => {
    const files = readdirSync(new URL('fixtures/vectors/', root)).filter((f) => f.endsWith('.json'));
    expect(rows.map((r) => r.file).sort()).toEqual(files.sort());
  });

  it.each(rows)('$file: each implementation it names is in its file, which the vector file names', (row) => {
    const named = vectors<{ implementations: string[] }>(row.file as string).implementations.join('\n');
    expect(row.names.length).toBeGreaterThan(0);
    for (const { path, symbol } of row.names) {
      expect(readFileSync(new URL(path, root), 'utf8'), `${path} ${symbol}`).toMatch(
        new RegExp(`\\b(?:class|function|fn|struct)\\s+${symbol}\\b`),
      );
      expect(named, `${row.file} names ${path}`).toContain(path);
    }
  });
});
