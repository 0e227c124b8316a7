/**
 * This instance's local copies of kept videos (DESIGN §9), so a zoom does not download its video
 * again: at most `VIDSHEET_VIDEO_CACHE_MB` on disk, least recently used out, never a copy a running
 * job is reading. A store on this machine's disk (the directory store) is read in place and never
 * copied. Whether a video may still be used is the database's decision, asked by the caller before
 * every use; `retain` drops the copies of videos that are no longer live (the sweeper, each pass).
 */
import { createWriteStream } from 'node:fs';
import { mkdir, rename, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import type { SheetStorage } from '../storage/storage.js';

interface Entry {
  path: string;
  bytes: number;
  /** Jobs reading it now: never evicted while above zero. */
  pins: number;
  /** Resolves when the copy is complete on disk. */
  ready: Promise<void>;
}

export interface CacheStats {
  hits: number;
  downloads: number;
  inPlace: number;
}

export class VideoCache {
  /** Insertion order is recency: a use moves its entry to the end. */
  private readonly entries = new Map<string, Entry>();
  private total = 0;
  readonly stats: CacheStats = { hits: 0, downloads: 0, inPlace: 0 };

  constructor(
    private readonly dir: string,
    private readonly maxBytes: number,
    /** The kept videos' store (the sheet store's `videos` area). */
    private readonly store: SheetStorage,
  ) {}

  /** At start: copies left by an earlier run are not trusted to be complete. */
  async clear(): Promise<void> {
    this.entries.clear();
    this.total = 0;
    await rm(this.dir, { recursive: true, force: true });
    await mkdir(this.dir, { recursive: true });
  }

  /** The ids of the videos with a copy here. */
  cached(): string[] {
    return [...this.entries.keys()];
  }

  /**
   * Runs `work` with a local path of the video, downloading it once if this instance has no copy.
   * The copy is pinned while `work` runs. Throws when the store no longer has the file.
   */
  async use<T>(
    video: { videoId: string; fileName: string; bytes: number },
    work: (path: string, how: 'hit' | 'download' | 'in-place') => Promise<T>,
  ): Promise<T> {
    const inPlace = await this.store.localPath?.(video.videoId, video.fileName);
    if (inPlace) {
      this.stats.inPlace++;
      return work(inPlace, 'in-place');
    }
    let entry = this.entries.get(video.videoId);
    const how = entry ? 'hit' : 'download';
    if (entry) {
      this.entries.delete(video.videoId);
      this.entries.set(video.videoId, entry);
      this.stats.hits++;
    } else {
      entry = this.download(video);
      this.stats.downloads++;
    }
    entry.pins++;
    try {
      await entry.ready;
      return await work(entry.path, how);
    } finally {
      entry.pins--;
      await this.trim();
    }
  }

  private download(video: { videoId: string; fileName: string; bytes: number }): Entry {
    const folder = join(this.dir, video.videoId);
    const path = join(folder, video.fileName);
    const entry: Entry = { path, bytes: video.bytes, pins: 0, ready: Promise.resolve() };
    entry.ready = (async () => {
      await mkdir(folder, { recursive: true });
      const source = await this.store.get(video.videoId, video.fileName);
      if (!source) throw new Error('the kept video is missing from storage');
      const partial = `${path}.part`;
      await pipeline(source, createWriteStream(partial));
      await rename(partial, path);
    })();
    // A failed download leaves no entry behind: the next use tries again.
    entry.ready.catch(() => {
      if (this.entries.get(video.videoId) === entry) {
        this.entries.delete(video.videoId);
        this.total -= entry.bytes;
      }
      void rm(folder, { recursive: true, force: true });
    });
    this.entries.set(video.videoId, entry);
    this.total += entry.bytes;
    return entry;
  }

  /** Drops this instance's copy (after `DELETE`, or found dead); one in use goes when its job ends. */
  async drop(videoId: string): Promise<void> {
    const entry = this.entries.get(videoId);
    if (!entry) return;
    this.entries.delete(videoId);
    this.total -= entry.bytes;
    await entry.ready.catch(() => {});
    if (entry.pins > 0) void this.removeWhenFree(videoId, entry);
    else await this.removeWhenFree(videoId, entry);
  }

  /** Keeps only the copies whose video `isLive` says is still live (the sweeper's pass). */
  async retain(isLive: (videoId: string) => Promise<boolean>): Promise<number> {
    let dropped = 0;
    for (const videoId of this.cached()) {
      if (await isLive(videoId)) continue;
      await this.drop(videoId);
      dropped++;
    }
    return dropped;
  }

  /** Least recently used copies out until the cache fits its budget (pinned ones stay). */
  private async trim(): Promise<void> {
    for (const [videoId, entry] of [...this.entries]) {
      if (this.total <= this.maxBytes) return;
      if (entry.pins > 0) continue;
      await this.drop(videoId);
    }
  }

  private async removeWhenFree(videoId: string, entry: Entry): Promise<void> {
    // A job still reading it keeps the file until it ends (Linux keeps an open file readable anyway,
    // but the job may open it again); its `use` then finds no entry and nothing is left behind.
    while (entry.pins > 0) await new Promise((resolve) => setTimeout(resolve, 50));
    // Only when no newer copy took its place under the same name.
    if (!this.entries.has(videoId)) await rm(join(this.dir, videoId), { recursive: true, force: true });
  }
}
