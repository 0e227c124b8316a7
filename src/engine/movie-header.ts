/**
 * The compressed-movie-header check of a job with the hosted bounds (core/movie-header.ts), over a
 * file on disk: run before either engine opens the file, so FFmpeg never inflates one.
 */
import { open } from 'node:fs/promises';
import { scanMovieHeader } from '../core/movie-header.js';
import { EngineError } from './types.js';

/**
 * Rejects `unreadable_video` (the error of a file over `max_pixels`) when `path` holds a compressed
 * movie header, or is over the scan's bounds; reads box headers only, never the media data.
 */
export async function refuseCompressedMovieHeader(path: string): Promise<void> {
  const handle = await open(path, 'r');
  try {
    const { size } = await handle.stat();
    const scan = await scanMovieHeader({
      size,
      async read(position, length) {
        const bytes = Buffer.alloc(Math.max(0, Math.min(length, size - position)));
        const { bytesRead } = await handle.read(bytes, 0, bytes.length, position);
        return bytes.subarray(0, bytesRead);
      },
    });
    if (scan.kind === 'compressed') {
      throw new EngineError(
        'unreadable_video',
        `compressed movie header (cmov) at byte ${scan.offset} declaring ${scan.declaredBytes} bytes`,
      );
    }
    if (scan.kind === 'over_bounds') throw new EngineError('unreadable_video', scan.reason);
  } finally {
    await handle.close();
  }
}
