/**
 * What a probe's facts mean: which video stream is the video (the stream rule) and how long the
 * clip really is (DESIGN §2, "Clip extent"). Engines report what the file holds
 * (engine/types.ts `ProbeInfo`); these two rules decide, once, for both engines.
 */
import { msToSeconds } from './time.js';
import { durationToMs } from './window.js';

/**
 * One video stream as an engine finds it. This module picks the stream from these facts (the
 * stream rule) and decides the clip's extent (the clip extent rule of DESIGN §2); an engine only
 * reports what the file holds.
 */
export interface VideoStreamFacts {
  /** Stream index in the container. */
  index: number;
  /** Display size in pixels after sample aspect ratio and rotation (display matrix) are applied. */
  width: number;
  height: number;
  /** The container marks the stream as default (disposition `default`). */
  isDefault: boolean;
  /** Cover art or another attached picture (disposition `attached_pic`): never the video. */
  attachedPic: boolean;
  /**
   * Frames the stream holds: the container's count (`nb_frames`, index entries), else an estimate
   * from its duration and average frame rate; null when neither is known.
   */
  frames: number | null;
  /** At least one frame of the stream decoded during the probe (a decoder exists and works). */
  decodes: boolean;
  /**
   * Where the stream's data really ends, seconds from the container start: the latest
   * `pts + duration` of a complete packet present in the file (index and file size for MP4/MOV, a
   * read near the end elsewhere; never a full decode). null when it could not be found.
   */
  readableEnd: number | null;
  /** Ids of the programs (MPEG-TS services) that carry the stream; empty in a file without any. */
  programs: number[];
}

/** One audio stream as an engine finds it: what the audio rule ({@link chooseAudioStream}) reads. */
export interface AudioStreamFacts {
  /** Stream index in the container. */
  index: number;
  /** Ids of the programs (MPEG-TS services) that carry the stream; empty in a file without any. */
  programs: number[];
}

/**
 * Frames that make a stream a moving picture. A stream with fewer is a still, a thumbnail track or
 * a phone's 2-frame "top shot", and loses to one with more (FFmpeg's `av_find_best_stream` draws
 * the same line, at 5 frames). Above it frame counts are not compared: outside MP4 they are
 * estimates (duration x frame rate; packets counted) that differ by a frame or two between two
 * programs of one broadcast and between one way of counting and another, and a higher frame rate is
 * no reason to prefer a stream. Comparing them made both engines show the second of two like
 * programs of a DVB capture (its duration one frame longer) while `ffmpeg -i`, players and the test
 * oracle (which counted packets) showed the first.
 */
export const MOVING_PICTURE_FRAMES = 5;

/**
 * The stream rule: the stream a player shows by default, the same for both engines, the report
 * and the oracle. Never an attached picture (cover art) and never a stream nothing decodes from;
 * then the default disposition (every player honours it); then a moving picture over a still (see
 * {@link MOVING_PICTURE_FRAMES}); then the largest picture (what `ffmpeg -i` maps by default);
 * then the first in stream order (the tie-break of ffmpeg and of players: a broadcast's first
 * program, an MKV's first of two default tracks). Null when no stream qualifies: the file is an
 * unreadable video.
 */
export function chooseVideoStream<S extends VideoStreamFacts>(streams: readonly S[]): S | null {
  return videoCandidates(streams.filter((s) => s.decodes))[0] ?? null;
}

/**
 * The stream rule's order without its first test: every stream that may be the video (not an
 * attached picture, a known size), best first. A bounded probe (DESIGN §5a) tries a frame of each
 * in this order and stops at the first that decodes, so it decodes one stream, not all of them.
 */
export function videoCandidates<S extends VideoStreamFacts>(streams: readonly S[]): S[] {
  const rank = (s: S) => [
    s.isDefault ? 1 : 0,
    Math.min(s.frames ?? 0, MOVING_PICTURE_FRAMES),
    s.width * s.height,
    -s.index,
  ];
  const better = (a: S, b: S) => {
    const x = rank(a);
    const y = rank(b);
    const first = x.findIndex((v, i) => v !== y[i]);
    return first >= 0 ? (y[first] as number) - (x[first] as number) : 0;
  };
  return streams.filter((s) => !s.attachedPic && s.width > 0 && s.height > 0).sort(better);
}

/**
 * The audio rule: the audio stream the band and the report measure, the same for both engines.
 * The first audio stream of the chosen video's program (a transport stream carries several
 * services, each its own picture and sound, and the video may be the second's: FFmpeg's
 * `av_find_best_stream` and players take the sound of the picture's program too); else (no program
 * shared, a file without programs) the file's first audio stream. Null without audio.
 */
export function chooseAudioStream(
  video: Pick<VideoStreamFacts, 'programs'>,
  audio: readonly AudioStreamFacts[],
): number | null {
  const own = audio.find((a) => a.programs.some((p) => video.programs.includes(p)));
  return (own ?? audio[0])?.index ?? null;
}

export interface ClipExtent {
  /** The clip's duration in whole milliseconds: what the window rules and the plan use. */
  durationMs: number;
  /** The report's warning when the readable end replaced the declared duration. */
  warning?: string;
}

/** The tolerance of DESIGN §2: max(1 s, 2 % of the declared duration), in ms. */
export const extentToleranceMs = (declaredMs: number): number => Math.max(1000, declaredMs * 0.02);

/**
 * The clip extent rule: the container's declared duration, unless the readable end of the chosen
 * video stream and the audio (the latest end of data actually present in the file) differs from it
 * by more than the tolerance; then the readable end, with the warning DESIGN gives.
 * Times are seconds from the container start, rounded to whole milliseconds first so the warning
 * quotes exactly the durations compared. A clip of 0 ms (nothing declared, nothing readable) is
 * the caller's `unreadable video`.
 */
export function clipExtent(
  declared: number,
  stream: Pick<VideoStreamFacts, 'readableEnd'>,
  audioEnd: number | null,
): ClipExtent {
  const declaredMs = toMs(declared);
  const ends = [stream.readableEnd, audioEnd].filter((e): e is number => e !== null && Number.isFinite(e));
  if (ends.length === 0) return { durationMs: declaredMs };
  const readableMs = toMs(Math.max(...ends));
  // A container that declares no duration has nothing to contradict: its readable end is the clip.
  if (declaredMs === 0) return { durationMs: readableMs };
  if (readableMs <= 0 || Math.abs(readableMs - declaredMs) <= extentToleranceMs(declaredMs)) {
    return { durationMs: declaredMs };
  }
  return {
    durationMs: readableMs,
    warning: `the container declares ${msToSeconds(declaredMs)} s but the file's audio and video end at ${msToSeconds(readableMs)} s; sheets cover the readable part`,
  };
}

const toMs = (seconds: number): number =>
  Number.isFinite(seconds) && seconds > 0 ? durationToMs(seconds) : 0;
