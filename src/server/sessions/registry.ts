/**
 * Kept videos in the database (DESIGN §9): who owns each, until when, and what its probe found. Every
 * use asks here, so a deleted or expired video is gone at once on every instance; the per-account caps
 * (a count, and the bytes of DESIGN §5a "Kept videos cost storage") are counted here too, so they hold
 * across instances. Times come from the injected clock.
 */
import type { ExpressionBuilder, Kysely } from 'kysely';
import type { Clock } from '../billing/ledger.js';
import { serializeOn, writeTransaction } from '../db/open.js';
import type { Database } from '../db/schema.js';

export interface KeptVideo {
  videoId: string;
  accountId: number;
  input: string;
  fileName: string;
  bytes: number;
  durationMs: number;
  /** The engine's ProbeInfo, as stored. */
  probe: unknown;
  expiresAt: string;
}

/** What an account may keep: at most `maxVideos` live videos of at most `maxBytes` in all. */
export interface KeepLimits {
  maxVideos: number;
  maxBytes: number;
}

/** An account's live videos: how many, and their bytes in all. */
export interface KeptUsage {
  count: number;
  bytes: number;
}

export class VideoRegistry {
  constructor(
    private readonly db: Kysely<Database>,
    private readonly clock: Clock,
  ) {}

  private now(): string {
    return this.clock().toISOString();
  }

  /** The account's videos that are neither expired nor deleted: how many, and their bytes. */
  usage(accountId: number): Promise<KeptUsage> {
    return liveUsage(this.db, accountId, this.now());
  }

  /**
   * Records a stored video when the account stays within `limits` with it (counted again here, in one
   * transaction per account, so two uploads finishing together cannot both take the last place or the
   * last bytes). When it would not, nothing is recorded and the answer says which limit: the caller
   * deletes the file and answers 409.
   */
  async add(
    video: Omit<KeptVideo, 'expiresAt'>,
    ttlS: number,
    limits: KeepLimits,
  ): Promise<{ expiresAt: string } | { refused: 'count' | 'bytes' }> {
    const now = this.clock();
    const expiresAt = new Date(now.getTime() + ttlS * 1000).toISOString();
    return writeTransaction(this.db, async (trx) => {
      await serializeOn(trx, `videos:${video.accountId}`);
      const used = await liveUsage(trx, video.accountId, now.toISOString());
      if (used.count >= limits.maxVideos) return { refused: 'count' as const };
      if (used.bytes + video.bytes > limits.maxBytes) return { refused: 'bytes' as const };
      await trx
        .insertInto('videos')
        .values({
          video_id: video.videoId,
          account_id: video.accountId,
          input: video.input,
          file_name: video.fileName,
          bytes: video.bytes,
          duration_ms: video.durationMs,
          probe: JSON.stringify(video.probe),
          created_at: now.toISOString(),
          expires_at: expiresAt,
        })
        .execute();
      return { expiresAt };
    });
  }

  /** The video when it is live and this account's; undefined otherwise (404 to the caller, never 403). */
  async find(videoId: string, accountId: number): Promise<KeptVideo | undefined> {
    const row = await this.db
      .selectFrom('videos')
      .selectAll()
      .where('video_id', '=', videoId)
      .where('account_id', '=', accountId)
      .where('expires_at', '>', this.now())
      .where('deleted_at', 'is', null)
      .executeTakeFirst();
    return (
      row && {
        videoId: row.video_id,
        accountId: row.account_id,
        input: row.input,
        fileName: row.file_name,
        bytes: row.bytes,
        durationMs: row.duration_ms,
        probe: JSON.parse(row.probe),
        expiresAt: row.expires_at,
      }
    );
  }

  /** Whether the video is live for anyone (a cached copy of a dead one is dropped). */
  async isLive(videoId: string): Promise<boolean> {
    const row = await this.db
      .selectFrom('videos')
      .select('video_id')
      .where('video_id', '=', videoId)
      .where('expires_at', '>', this.now())
      .where('deleted_at', 'is', null)
      .executeTakeFirst();
    return row !== undefined;
  }

  /** `DELETE`: true when this account's live video was deleted now. */
  async delete(videoId: string, accountId: number): Promise<boolean> {
    const now = this.now();
    return writeTransaction(this.db, async (trx) => {
      const result = await trx
        .updateTable('videos')
        .set({ deleted_at: now })
        .where('video_id', '=', videoId)
        .where('account_id', '=', accountId)
        .where('expires_at', '>', now)
        .where('deleted_at', 'is', null)
        .executeTakeFirst();
      return Number(result.numUpdatedRows) === 1;
    });
  }

  /** Videos whose file is due for deletion (expired or deleted, not yet swept). */
  async dueForSweep(limit = 100): Promise<string[]> {
    const now = this.now();
    const rows = await this.db
      .selectFrom('videos')
      .select('video_id')
      .where('swept_at', 'is', null)
      .where((eb) => eb.or([eb('expires_at', '<=', now), eb('deleted_at', 'is not', null)]))
      .orderBy('expires_at')
      .limit(limit)
      .execute();
    return rows.map((row) => row.video_id);
  }

  /** Claims a video's sweep: true for the one caller, of any instance, that marks it first. */
  async markSwept(videoId: string): Promise<boolean> {
    const now = this.now();
    return writeTransaction(this.db, async (trx) => {
      const result = await trx
        .updateTable('videos')
        .set({ swept_at: now })
        .where('video_id', '=', videoId)
        .where('swept_at', 'is', null)
        .executeTakeFirst();
      return Number(result.numUpdatedRows) === 1;
    });
  }
}

async function liveUsage(db: Kysely<Database>, accountId: number, now: string): Promise<KeptUsage> {
  const row = await db
    .selectFrom('videos')
    .select((eb: ExpressionBuilder<Database, 'videos'>) => [
      eb.fn.countAll<number>().as('n'),
      eb.fn.coalesce(eb.fn.sum<number | string>('bytes'), eb.lit(0)).as('bytes'),
    ])
    .where('account_id', '=', accountId)
    .where('expires_at', '>', now)
    .where('deleted_at', 'is', null)
    .executeTakeFirstOrThrow();
  return { count: Number(row.n), bytes: Number(row.bytes) };
}
