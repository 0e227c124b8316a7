/**
 * Clips whose audio timestamps are not a plain sample count, for the audio-placement rule
 * (DESIGN §4, core/audio.ts): the samples must land where the file's timestamps put them.
 *
 * Each clip is a 48 kHz mono track of silence with two rectangular pulses (exact sample values,
 * so the oracle needs no decoder) at known source times; then the packets from `cutS` on are
 * re-stamped `shiftS` later with the `setts` bitstream filter (no re-encode), which makes a gap (or
 * with `ts`, a jump the ffmpeg tool would smooth away without -copyts). The expected times are the
 * construction's; `audioPacketGap` measures the gap with ffprobe so a test knows the file has it.
 */
import { execFile } from 'node:child_process';
import { mkdir, rename, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';

const execFileP = promisify(execFile);

export const GAP_RATE = 48_000;

export interface GapClip {
  path: string;
  /** Where each pulse must land, container-relative seconds, and its amplitude. */
  pulses: Array<{ at: number; ms: number; amplitude: number }>;
  /** Where a placement that counts samples from the start would put the second pulse. */
  countedAt: number;
  shiftS: number;
}

export type GapKind = 'mkv-pcm' | 'mp4-aac' | 'ts-mp2-jump';

const SPECS: Record<GapKind, { ext: string; codec: string[]; cutS: number; shiftS: number; video: number }> =
  {
    // A 1 s hole in a Matroska PCM track (1 ms timestamps).
    'mkv-pcm': { ext: 'mkv', codec: ['-c:a', 'pcm_s16le'], cutS: 2, shiftS: 1, video: 6 },
    // The same hole in MP4/AAC: the gap is written as a long sample duration and read back as pts.
    'mp4-aac': { ext: 'mp4', codec: ['-c:a', 'aac', '-b:a', '192k'], cutS: 2, shiftS: 1, video: 6 },
    // An MPEG-TS timestamp jump of 20 s (past the ffmpeg tool's 10 s discontinuity threshold).
    'ts-mp2-jump': { ext: 'ts', codec: ['-c:a', 'mp2', '-b:a', '256k'], cutS: 2, shiftS: 20, video: 26 },
  };

/** Pulses in the source (before the shift): 5 ms at 0.5 before the cut, 5 ms at 0.9 after it. */
const SOURCE_PULSES = [
  { at: 1, ms: 5, amplitude: 0.5 },
  { at: 3, ms: 5, amplitude: 0.9 },
];

const exists = (p: string) =>
  stat(p).then(
    () => true,
    () => false,
  );

async function ffmpeg(args: string[]): Promise<void> {
  await execFileP('ffmpeg', ['-hide_banner', '-v', 'error', '-nostdin', '-y', ...args], {
    maxBuffer: 16 << 20,
  });
}

/** Builds (once per directory) the clip of `kind` in `dir`. */
export async function gapClip(dir: string, kind: GapKind): Promise<GapClip> {
  const spec = SPECS[kind];
  const path = join(dir, `gap-${kind}.${spec.ext}`);
  const pulses = SOURCE_PULSES.map((p) => ({ ...p, at: p.at >= spec.cutS ? p.at + spec.shiftS : p.at }));
  const clip = { path, pulses, countedAt: SOURCE_PULSES[1]?.at ?? 0, shiftS: spec.shiftS };
  if (await exists(path)) return clip;
  await mkdir(dir, { recursive: true });
  const pcm = new Int16Array(5 * GAP_RATE);
  for (const p of SOURCE_PULSES) {
    const from = Math.round(p.at * GAP_RATE);
    for (let i = from; i < from + (p.ms * GAP_RATE) / 1000; i++) pcm[i] = Math.round(p.amplitude * 32767);
  }
  const raw = join(dir, `gap-${kind}.s16le`);
  await writeFile(raw, Buffer.from(pcm.buffer));
  const plain = join(dir, `gap-${kind}.plain.${spec.ext}`);
  await ffmpeg([
    '-f',
    'lavfi',
    '-i',
    `color=c=0x335577:s=64x36:r=25:d=${spec.video}`,
    '-f',
    's16le',
    '-ar',
    String(GAP_RATE),
    '-ac',
    '1',
    '-i',
    raw,
    '-map',
    '0:v',
    '-map',
    '1:a',
    '-c:v',
    'libx264',
    '-preset',
    'ultrafast',
    ...spec.codec,
    plain,
  ]);
  // setts works in the stream's time base: the cut and the shift are converted with TB.
  const partial = `${path}.partial.${spec.ext}`;
  await ffmpeg([
    '-i',
    plain,
    '-map',
    '0',
    '-c',
    'copy',
    '-bsf:a',
    `setts=ts='if(gte(PTS*TB,${spec.cutS}),PTS+${spec.shiftS}/TB,PTS)'`,
    partial,
  ]);
  await rename(partial, path);
  return clip;
}

/**
 * How far the audio packets' timestamps jump past their usual step, seconds (ffprobe): the largest
 * step between consecutive packets minus the median step. (MP4 writes a gap as one long packet
 * duration, so durations cannot tell; timestamps can.)
 */
export async function audioPacketGap(path: string): Promise<number> {
  const { stdout } = await execFileP('ffprobe', [
    '-v',
    'error',
    '-select_streams',
    'a:0',
    '-show_entries',
    'packet=pts_time',
    '-of',
    'csv=p=0',
    path,
  ]);
  const times = stdout
    .trim()
    .split('\n')
    .map(Number)
    .filter(Number.isFinite)
    .sort((a, b) => a - b);
  const steps = times.slice(1).map((t, i) => t - (times[i] as number));
  const sorted = [...steps].sort((a, b) => a - b);
  const median = sorted[Math.floor(sorted.length / 2)] ?? 0;
  return Math.max(0, ...steps) - median;
}
