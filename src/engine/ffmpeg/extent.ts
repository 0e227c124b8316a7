/**
 * Where each stream's data really ends, from ffprobe packet listings (demux only): this file
 * decides the reads and turns their ends into seconds; the rule over a read's packets is
 * packet-ends.ts (fixtures/vectors/readable-end.json). The native engine's twin is
 * crates/vidsheet-core/src/extent.rs.
 */
import { stat } from 'node:fs/promises';
import { extentToleranceMs } from '../../core/probe.js';
import { PacketEnds, type StreamClock } from '../packet-ends.js';
import { pool, run } from '../process.js';
import { frameStep } from '../timestamps.js';
import { input, int, num, type RunBounds, rates, ratio, type StreamJson } from './media.js';

/**
 * Where each stream's data ends (seconds from the container start): the latest pts + duration of
 * its packets, read from 10 s before the declared end (demux only). When that read finds no
 * timestamped packet at all (the seek failed, the index lists data past the end of the file, the
 * declared duration is wrong or missing), the packets are listed from the start instead; so they
 * are when it ends clearly short of the declared end (beyond DESIGN §2's tolerance): the file is
 * cut, and a demuxer whose seek lands past the data may stamp the packets it then reads with the
 * times the seek asked for (MXF does: its index table gives the time, the bytes are the first ones).
 */
export async function readableEnds(
  path: string,
  fixed: string | undefined,
  streams: StreamJson[],
  {
    declared,
    startTime,
    sampleTable,
    bounds,
  }: { declared: number; startTime: number; sampleTable: boolean; bounds?: RunBounds | undefined },
): Promise<Map<number, number>> {
  const wanted = new Map(streams.map((s) => [s.index, s]));
  const at = { startTime, sampleTable, bounds };
  const tail = declared > 10 ? await packetEnds(path, fixed, wanted, at, startTime + declared - 10) : null;
  if (
    tail &&
    tail.size > 0 &&
    Math.max(...tail.values()) >= declared - extentToleranceMs(declared * 1000) / 1000
  )
    return tail;
  return (await packetEnds(path, fixed, wanted, at, null)) ?? new Map();
}

/**
 * The ends one reading gives (see readableEnds), each stream read on its own in MP4/MOV (DESIGN
 * §2): that demuxer hands the samples of all streams out by time, so a read of them all stops at
 * the first sample missing from a cut file, of any stream, though other streams' samples before
 * the cut follow it in time; a read of one stream passes the others' samples over without reading
 * them. Other demuxers read the file in order, and one read serves every stream. Null when a read
 * timed out.
 */
async function packetEnds(
  path: string,
  fixed: string | undefined,
  streams: Map<number, StreamJson>,
  at: { startTime: number; sampleTable: boolean; bounds: RunBounds | undefined },
  from: number | null,
): Promise<Map<number, number> | null> {
  const reads = at.sampleTable ? [...streams].map((s) => new Map([s])) : [streams];
  // Bounded, one ffprobe at a time: each one's stream analysis may cost a picture per stream.
  const ends = await pool(
    reads.map((read) => () => packetRead(path, fixed, read, at, from)),
    at.bounds ? 1 : Math.max(1, reads.length),
  );
  if (ends.some((e) => e === null)) return null;
  return new Map(ends.flatMap((e) => [...(e ?? [])]));
}

/** One ffprobe packet listing of `streams` (all of the file's when more than one is asked for). */
async function packetRead(
  path: string,
  fixed: string | undefined,
  streams: Map<number, StreamJson>,
  { startTime, bounds }: { startTime: number; bounds: RunBounds | undefined },
  from: number | null,
): Promise<Map<number, number> | null> {
  const fileSize = (await stat(path).catch(() => null))?.size ?? Number.POSITIVE_INFINITY;
  const only = streams.size === 1 ? ['-select_streams', String([...streams.keys()][0])] : [];
  const { code, stdout } = await run(
    'ffprobe',
    [
      '-v',
      'quiet',
      // A packet the demuxer flags corrupt (the MP4 sample a cut file ends inside, handed out
      // shortened to the bytes present) is left out: FFmpeg 5.1's ffprobe does not print the flag.
      ...['-fflags', '+discardcorrupt'],
      ...(from === null ? [] : ['-read_intervals', `${from.toFixed(6)}%`]),
      ...only,
      '-show_entries',
      'packet=stream_index,pts,dts,duration,pos,size,flags',
      '-of',
      'compact=p=0',
      ...input(path, fixed, bounds),
    ],
    { timeoutMs: from === null ? 300_000 : 60_000 },
  );
  if (code === null) return null; // timed out: nothing trustworthy
  const timeBases = new Map<number, [bigint, bigint]>();
  const clocks = new Map<number, StreamClock>();
  for (const [index, s] of streams) {
    const tb = ratio(s.time_base);
    if (!tb) continue;
    timeBases.set(index, [BigInt(tb[0]), BigInt(tb[1])]);
    // A read from the start clocks a stream without timestamps from the stream's start.
    const start = from === null ? (int(String(s.start_pts ?? '')) ?? 0n) : null;
    const frame = frameStep(undefined, [BigInt(tb[0]), BigInt(tb[1])], rates(s));
    clocks.set(index, { frame, clock: start });
  }
  const ends = new PacketEnds(fileSize, clocks);
  for (const line of stdout.toString().split('\n')) {
    const fields = new Map(line.split('|').map((kv) => kv.split('=') as [string, string]));
    const flags = fields.get('flags') ?? '';
    ends.add(Number(fields.get('stream_index')), {
      pts: int(fields.get('pts')) ?? null,
      dts: int(fields.get('dts')) ?? null,
      duration: int(fields.get('duration')) ?? null,
      pos: num(fields.get('pos')) ?? null,
      size: num(fields.get('size')) ?? 0,
      // Left out above; an ffprobe that prints the flag says C.
      corrupt: flags.includes('C'),
      discard: flags.includes('D'),
    });
  }
  const out = new Map<number, number>();
  for (const [index, end] of ends.ends) {
    const [num, den] = timeBases.get(index) as [bigint, bigint];
    // Whole microseconds, exactly, before the subtraction (TS timestamps reach 2^33 / 90 kHz).
    const us = (end * num * 1_000_000n) / den;
    out.set(index, Number(us - BigInt(Math.round(startTime * 1e6))) / 1e6);
  }
  return out;
}
