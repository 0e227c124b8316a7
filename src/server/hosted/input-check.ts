/**
 * A last check on a video that arrived from outside (an upload, a fetched URL) before any engine
 * opens it: text is never a video. Playlists and lists (HLS `#EXTM3U`, `ffconcat`, DASH manifests,
 * SDP) are text, and FFmpeg would follow what they name: with the `file` protocol, any video on the
 * server's disk. Every real container starts with binary header bytes within its first kilobytes.
 */
import { open } from 'node:fs/promises';

const SNIFF_BYTES = 4096;

/** True when the file's first bytes are all text (printable ASCII, whitespace or UTF-8). */
export async function looksLikeText(path: string): Promise<boolean> {
  const file = await open(path, 'r');
  try {
    const head = Buffer.alloc(SNIFF_BYTES);
    const { bytesRead } = await file.read(head, 0, SNIFF_BYTES, 0);
    if (bytesRead === 0) return false;
    for (const byte of head.subarray(0, bytesRead)) {
      const text = byte === 0x09 || byte === 0x0a || byte === 0x0d || (byte >= 0x20 && byte !== 0x7f);
      if (!text) return false;
    }
    return true;
  } finally {
    await file.close();
  }
}
