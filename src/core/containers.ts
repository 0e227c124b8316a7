/**
 * The containers a server opens (DESIGN §5a): one rule for both engines.
 *
 * FFmpeg opens much more than videos: an HLS or DASH playlist, a concat list, an image sequence
 * or an SDP session makes the demuxer open whatever it names, and with the `file` protocol that
 * is any video on the server's disk. Uploads and fetched videos are therefore opened only as a
 * demuxer on this list, judged by FFmpeg's own detection (never by bytes or a file name here),
 * and every later open in the same job fixes that demuxer instead of detecting again. The local
 * CLI and MCP stdio open whatever the user's FFmpeg opens: the files are the user's own.
 */

/** FFmpeg demuxer names, exactly as FFmpeg names the demuxer it detected (`format_name`). */
export const SERVER_CONTAINERS: readonly string[] = Object.freeze([
  'mov,mp4,m4a,3gp,3g2,mj2',
  'matroska,webm',
  'avi',
  'mpegts',
  'mpeg',
  'flv',
  'asf',
  'ogg',
  'mxf',
  'nut',
  'rm',
  'wtv',
  'ivf',
  // Raw elementary streams.
  'h264',
  'hevc',
  'm4v',
]);

/** Which containers a job may open: `any` (local surfaces) or `restricted` (the hosted server, the remote endpoint). */
export type Containers = 'any' | 'restricted';

/** The demuxers an engine may let FFmpeg's detection choose; undefined: any. */
export function allowedContainers(containers: Containers = 'any'): readonly string[] | undefined {
  return containers === 'restricted' ? SERVER_CONTAINERS : undefined;
}

/** Whether a detected demuxer may be opened: its whole name is on the list (no list: any). */
export function containerAllowed(format: string, allowed: readonly string[] | undefined): boolean {
  return allowed === undefined || allowed.includes(format);
}
