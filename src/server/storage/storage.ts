/**
 * Where finished sheets live until they expire. The local directory is the default; S3-compatible
 * storage implements the same interface when one machine is outgrown (DESIGN §8). Whether a sheet
 * may still be served is the database's decision (expiry), not the storage's.
 */
import type { Readable } from 'node:stream';

/**
 * What `/healthz` may say of a database or a store that is down (DESIGN §5a): fixed words, never a
 * driver's own text (which can name hosts, paths or accounts). The detail goes to the log.
 */
export const HEALTH_REASONS = ['unreachable', 'bucket missing', 'denied'] as const;
export type HealthReason = (typeof HEALTH_REASONS)[number];

export interface SheetStorage {
  /** Takes ownership of the job's rendered files (moved or uploaded), under their own base names. */
  put(jobId: string, files: string[]): Promise<void>;
  /** A stream of one stored sheet, or undefined when it is not there. */
  get(jobId: string, name: string): Promise<Readable | undefined>;
  /** Deletes every sheet of a job; deleting what is already gone is not an error. */
  remove(jobId: string): Promise<void>;
  /**
   * The same store under a sub-area (`videos`: kept videos, DESIGN §9), which sheet job ids (22
   * base64url characters) can never name. Optional: a store without it keeps no videos.
   */
  under?(area: string): SheetStorage;
  /** The path of a stored file on this machine's disk, when the store is a directory (no copy needed). */
  localPath?(jobId: string, name: string): Promise<string | undefined>;
  /**
   * Throws when sheets could not be stored or served now (`/healthz` "storage", and at start), so a
   * load balancer can take the instance out; the error's `health` is the word `/healthz` shows
   * (`unreachable` when it has none). Optional: a store without it is assumed fine.
   */
  check?(): Promise<void>;
}
