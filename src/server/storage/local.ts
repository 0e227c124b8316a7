/** Sheets in a directory: `<dir>/<job_id>/video.sheet-N.jpg`. */
import { constants, createReadStream } from 'node:fs';
import { access, copyFile, mkdir, rename, rm, stat, unlink } from 'node:fs/promises';
import { basename, join } from 'node:path';
import type { Readable } from 'node:stream';
import type { HealthReason, SheetStorage } from './storage.js';

export class LocalSheetStorage implements SheetStorage {
  constructor(private readonly dir: string) {}

  async put(jobId: string, files: string[]): Promise<void> {
    const target = join(this.dir, jobId);
    // Makes the store's own directory too (a kept video's area, `videos/`, on first use).
    await mkdir(target, { recursive: true });
    for (const file of files) {
      const to = join(target, basename(file));
      // A rename within one file system; a copy when the work directory is mounted elsewhere.
      await rename(file, to).catch(async (error: NodeJS.ErrnoException) => {
        if (error.code !== 'EXDEV') throw error;
        await copyFile(file, to);
        await unlink(file);
      });
    }
  }

  async get(jobId: string, name: string): Promise<Readable | undefined> {
    const path = join(this.dir, jobId, name);
    const info = await stat(path).catch(() => null);
    return info?.isFile() ? createReadStream(path) : undefined;
  }

  under(area: string): LocalSheetStorage {
    return new LocalSheetStorage(join(this.dir, area));
  }

  async localPath(jobId: string, name: string): Promise<string | undefined> {
    const path = join(this.dir, jobId, name);
    const info = await stat(path).catch(() => null);
    return info?.isFile() ? path : undefined;
  }

  async remove(jobId: string): Promise<void> {
    await rm(join(this.dir, jobId), { recursive: true, force: true });
  }

  /** The directory exists and this process may write in it (a missing or read-only mount would fail every job). */
  async check(): Promise<void> {
    const down = (health: HealthReason, message: string) => Object.assign(new Error(message), { health });
    const info = await stat(this.dir).catch(() => null);
    if (!info?.isDirectory()) throw down('unreachable', `sheet directory ${this.dir} does not exist`);
    await access(this.dir, constants.W_OK).catch(() => {
      throw down('denied', `sheet directory ${this.dir} is not writable`);
    });
  }
}
