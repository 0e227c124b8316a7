#!/usr/bin/env node
/**
 * Captures the inputs and expected values of fixtures/vectors/h264-headers.json, once: for each
 * clip (an MP4 of H.264), its avcC extradata, its Annex B parameter sets (what comes before the
 * first slice once `h264_mp4toannexb` has converted it) and the first bytes of the first slice of
 * its first packets, with what FFmpeg's `trace_headers` bitstream filter reads of each (never
 * what either engine's reader says). Prints the cases as JSON; the clips are made by hand, e.g.
 *
 *   ffmpeg -f lavfi -i testsrc2=s=160x96:r=25:d=1 -c:v libx264 -bf 0 -g 12 progressive.mp4
 *   node scripts/capture-h264-vectors.mjs 'progressive x264' progressive.mp4 ...
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const SLICES = 8;
const SLICE_BYTES = 32;

/** trace_headers' reading of every NAL unit of `path`: [{ section, kind, fields }] in order. */
function trace(path) {
  const { stderr } = spawnSync(
    'ffmpeg',
    [
      ...['-hide_banner', '-nostats', '-loglevel', 'trace', '-i', path, '-map', '0:v', '-c', 'copy'],
      ...['-bsf:v', 'trace_headers', '-f', 'null', '-'],
    ],
    { maxBuffer: 1 << 30, encoding: 'utf8' },
  );
  return stderr;
}

function units(stderr) {
  const list = [];
  let section = null;
  let unit = null;
  for (const line of stderr.split('\n')) {
    const m = /^\[trace_headers @ [^\]]+\] (.*)$/.exec(line);
    if (!m) continue;
    const text = m[1];
    if (text === 'Extradata') section = 'extradata';
    else if (text.startsWith('Packet: ')) section = 'packet';
    const field = /^\d+\s+(\w+(?:\[[^\]]*\])*)\s+[01]+ = (-?\d+)$/.exec(text);
    if (field) {
      if (unit && !(field[1] in unit.fields)) unit.fields[field[1]] = Number(field[2]);
    } else if (/^[A-Z][A-Za-z ]+$/.test(text) && text !== 'Extradata') {
      unit = { section, kind: text, fields: {} };
      list.push(unit);
    }
  }
  return list;
}

function annexBUnits(data) {
  const starts = [];
  for (let i = data.indexOf(START); i >= 0; i = data.indexOf(START, i + 3)) starts.push(i);
  return starts.map((s, k) => ({ at: s, nal: data.subarray(s + 3, starts[k + 1] ?? data.length) }));
}
const START = Buffer.from([0, 0, 1]);

function extradataOf(path) {
  const text = execFileSync(
    'ffprobe',
    ['-v', 'error', '-select_streams', 'v:0', '-show_streams', '-show_data', path],
    { encoding: 'utf8' },
  );
  const dump = text.split('extradata=\n')[1]?.split('\n\n')[0] ?? '';
  return dump
    .split('\n')
    .map((line) => /^[0-9a-f]{8}: ((?:[0-9a-f]{2,4} ?)+)/.exec(line)?.[1] ?? '')
    .join('')
    .replaceAll(' ', '');
}

function sps(f) {
  return {
    maxNumRefFrames: f.max_num_ref_frames,
    log2MaxFrameNum: f.log2_max_frame_num_minus4 + 4,
    separateColourPlane: f.separate_colour_plane_flag === 1,
    frameMbsOnly: f.frame_mbs_only_flag === 1,
  };
}

function slice(f) {
  return {
    idr: f.nal_unit_type === 5,
    frameNum: f.frame_num,
    field: f.field_pic_flag ? (f.bottom_field_flag ? 'bottom' : 'top') : null,
  };
}

const dir = mkdtempSync(join(tmpdir(), 'h264-vectors-'));
const cases = [];
const args = process.argv.slice(2);
for (let a = 0; a < args.length; a += 2) {
  const [name, path] = [args[a], args[a + 1]];
  const traced = units(trace(path));
  const spsUnit = traced.find((u) => u.kind === 'Sequence Parameter Set');
  const es = join(dir, `${a}.h264`);
  execFileSync(
    'ffmpeg',
    ['-v', 'error', '-y', '-i', path, '-map', '0:v', '-c', 'copy'].concat([
      '-bsf:v',
      'h264_mp4toannexb',
      '-f',
      'h264',
      es,
    ]),
  );
  const data = readFileSync(es);
  const nals = annexBUnits(data);
  const firstSlice = nals.find((u) => [1, 5].includes(u.nal[0] & 0x1f));
  // Each packet's first slice, in decode order, against the traced packets' first slice headers.
  const tracedSlices = [];
  for (const u of traced) {
    if (u.section === 'packet' && u.kind === 'Slice Header') tracedSlices.push(u);
  }
  const slices = nals.filter((u) => [1, 5].includes(u.nal[0] & 0x1f));
  if (slices.length !== tracedSlices.length)
    throw new Error(`${name}: ${slices.length} slices, ${tracedSlices.length} traced`);
  const picked = [];
  for (let i = 0; i < slices.length && picked.length < SLICES; i++) {
    if (tracedSlices[i].fields.first_mb_in_slice !== 0) continue;
    picked.push({
      nal: slices[i].nal.subarray(0, SLICE_BYTES).toString('hex'),
      expect: slice(tracedSlices[i].fields),
    });
  }
  cases.push({
    name,
    avcC: extradataOf(path),
    // The parameter sets before the first slice, as probing extracts them from an Annex B stream.
    annexB: Buffer.concat(
      nals
        .filter((u) => u.at < firstSlice.at && [7, 8].includes(u.nal[0] & 0x1f))
        .flatMap((u) => [Buffer.from([0, 0, 0, 1]), u.nal.subarray(0, u.nal.at(-1) === 0 ? -1 : undefined)]),
    ).toString('hex'),
    sps: sps(spsUnit.fields),
    slices: picked,
  });
}
rmSync(dir, { recursive: true, force: true });
console.log(JSON.stringify(cases, null, 2));
