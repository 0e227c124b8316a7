/**
 * The audio envelope of the fallback engine: ffmpeg decodes the whole first audio track to raw
 * float PCM through a pipe; the per-millisecond peaks of the mono downmix are built while it
 * streams (memory is one float per ms of the window, no temporary WAV). Levels are relative to
 * the peak of the whole track, as DESIGN §4 asks (a quiet window stays quiet).
 */
import { type AudioDetails, input } from '../ffprobe.js';
import { run } from '../process.js';
import type { AudioPlan } from '../types.js';

/**
 * Peaks per ms over the plan's window (index 0 = plan.startMs), normalised to the whole track's
 * peak; null when no audio decodes.
 */
export async function audioEnvelope(
  path: string,
  audio: AudioDetails | null,
  containerStart: number,
  plan: AudioPlan,
  signal: AbortSignal,
): Promise<Float32Array | null> {
  if (!audio) return null;
  const { channels, sampleRate } = audio;
  const bins = new Float32Array(Math.max(0, plan.endMs - plan.startMs));
  // Sample i lands at this many ms after the window start: samples are placed by the stream's
  // start time on the container clock, like the cells' frames.
  const offsetMs = (audio.startTime - containerStart) * 1000 - plan.startMs;
  const frameBytes = 4 * channels;
  let peak = 0;
  let carry = Buffer.alloc(0);
  let index = 0;
  const { code } = await run(
    'ffmpeg',
    [
      '-v',
      'error',
      '-nostdin',
      ...input(path),
      '-map',
      `0:${audio.index}`,
      '-vn',
      '-f',
      'f32le',
      '-c:a',
      'pcm_f32le',
      'pipe:1',
    ],
    {
      timeoutMs: 30 * 60_000,
      signal,
      onStdout: (chunk) => {
        const data = carry.length ? Buffer.concat([carry, chunk]) : chunk;
        const whole = data.length - (data.length % frameBytes);
        // An aligned float view (pipe chunks start at any byte offset); little-endian like f32le.
        const samples = new Float32Array(data.buffer.slice(data.byteOffset, data.byteOffset + whole));
        for (let o = 0; o < samples.length; o += channels, index++) {
          let sum = 0;
          for (let c = 0; c < channels; c++) sum += samples[o + c] as number;
          const amplitude = Math.abs(sum / channels);
          if (!(amplitude <= 1e6)) continue; // NaN or absurd values from a broken decoder
          if (amplitude > peak) peak = amplitude;
          const bin = Math.floor(offsetMs + (index * 1000) / sampleRate);
          if (bin >= 0 && bin < bins.length && amplitude > (bins[bin] as number)) bins[bin] = amplitude;
        }
        carry = Buffer.from(data.subarray(whole));
      },
    },
  );
  if (code !== 0 && index === 0) return null;
  if (peak > 0) for (let i = 0; i < bins.length; i++) bins[i] = (bins[i] as number) / peak;
  return bins;
}
