#!/usr/bin/env node
/**
 * What the fallback pays to find H.264 field pairs (src/engine/ffmpeg/listing.ts
 * `markSecondFields`): on interlaced H.264 whose SPS allows field pictures, every listed packet's
 * first slice header is read in place. Measured on a 10-minute 576i MPEG-TS (x264 MBAFF, one
 * packet per frame, as broadcast usually is), alternated run by run:
 *   listing     the engine's whole-stream listing (ffprobe, then the marking)
 *   unmarked    the same listing as if the SPS forbade field pictures (no reads)
 * and, for the reads alone, the same packets' leading bytes read with one promise read each
 * (what the marking did before) against synchronous reads (what it does now).
 * Usage: `npm run bench -- --fields [--runs 3]` (or node bench/fields.mjs).
 */
import { closeSync, openSync, readSync } from 'node:fs';
import { open } from 'node:fs/promises';
import { listAllPackets } from '../dist/engine/ffmpeg/packets.js';
import { probeFile, videoDetails } from '../dist/engine/ffmpeg/probe.js';
import { synthesise, x264 } from './clip.mjs';

const argv = process.argv.slice(2);
const runs = Number(argv[argv.indexOf('--runs') + 1] || 3) || 3;
const clip = synthesise('576i-mbaff-10min', {
  what: '10 min 720x576 interlaced H.264 (MBAFF) in MPEG-TS',
  sources: ['testsrc2=size=720x576:rate=25:duration=600'],
  output: [...x264('ultrafast', '-flags', '+ildct+ilme', '-x264opts', 'tff=1', '-g', '50', '-b:v', '3M')],
  ext: 'ts',
});

const probed = await probeFile(clip);
const d = videoDetails(probed, 0);
if (d.h264?.sps?.frameMbsOnly !== false) throw new Error('the clip should allow field pictures');
const unmarked = { ...d, h264: { ...d.h264, sps: { ...d.h264.sps, frameMbsOnly: true } } };

/** Wall and this process's CPU of `fn`, in ms. */
async function timed(fn) {
  const wall = performance.now();
  const cpu = process.cpuUsage();
  const result = await fn();
  const used = process.cpuUsage(cpu);
  return { ms: performance.now() - wall, cpuMs: (used.user + used.system) / 1000, result };
}

const rows = { listing: [], unmarked: [], 'promise reads': [], 'sync reads': [] };
let packets = 0;
for (let r = 0; r < runs; r++) {
  const listed = await timed(() => listAllPackets(clip, d));
  rows.listing.push(listed);
  rows.unmarked.push(await timed(() => listAllPackets(clip, unmarked)));
  packets = listed.result.pts.length;
  // The reads alone: the marking's first read (4 transport packets) at each packet's position.
  const positions = [...listed.result.bytes.values()].map((b) => b.pos);
  rows['promise reads'].push(
    await timed(async () => {
      const file = await open(clip, 'r');
      for (const pos of positions) await file.read(Buffer.alloc(752), 0, 752, pos);
      await file.close();
    }),
  );
  rows['sync reads'].push(
    await timed(() => {
      const fd = openSync(clip, 'r');
      for (const pos of positions) readSync(fd, Buffer.allocUnsafe(752), 0, 752, pos);
      closeSync(fd);
    }),
  );
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
console.log(
  `\n${packets} frames listed, ${runs} alternated runs, medians (CPU is this process's; ffprobe's is not in it)\n`,
);
console.log('| measure | wall | CPU | CPU per packet |');
console.log('|---|---|---|---|');
for (const [name, samples] of Object.entries(rows)) {
  const ms = median(samples.map((s) => s.ms));
  const cpu = median(samples.map((s) => s.cpuMs));
  console.log(
    `| ${name} | ${ms.toFixed(0)} ms | ${cpu.toFixed(0)} ms | ${((cpu * 1000) / packets).toFixed(1)} µs |`,
  );
}
const ratio = median(rows.listing.map((s) => s.ms)) / median(rows.unmarked.map((s) => s.ms));
console.log(`\nlisting with the marking / without: ${ratio.toFixed(2)}x`);
