/**
 * Kept videos' registry, cache and sweep (DESIGN §9) with a clock the test controls: a real SQLite
 * database, a real directory store seen through a copy-only view (as S3 is: no in-place path, so zooms
 * go through the cache), the real sweeper. Expiry is `not found` at the exact instant, the sweep
 * leaves nothing of an expired or deleted video in the store or the cache, and the cache holds at
 * most its budget, least recently used out, never a copy in use.
 */
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Kysely } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Ledger } from '../../src/server/billing/ledger.js';
import { openDatabase } from '../../src/server/db/open.js';
import type { Database } from '../../src/server/db/schema.js';
import { startSweeper } from '../../src/server/hosted/sweeper.js';
import { VideoCache } from '../../src/server/sessions/cache.js';
import { VideoRegistry } from '../../src/server/sessions/registry.js';
import { LocalSheetStorage } from '../../src/server/storage/local.js';
import type { SheetStorage } from '../../src/server/storage/storage.js';

const silent = { info() {}, error() {} };
const clock = { now: new Date('2026-03-01T12:00:00.000Z') };
let dir: string;
let db: Kysely<Database>;
let accountId: number;
let registry: VideoRegistry;
let dirStore: LocalSheetStorage;
/** The store as a bucket looks: put, get, remove; no path on this disk. */
let store: SheetStorage;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'vidsheet-sessions-'));
  db = await openDatabase({ dataDir: dir });
  const ledger = new Ledger(db, { allowanceFloor: 7, clock: () => clock.now });
  accountId = (await ledger.accounts.findOrCreateAccount('kept@example.com')).id;
  registry = new VideoRegistry(db, () => clock.now);
  dirStore = new LocalSheetStorage(join(dir, 'sheets', 'videos'));
  store = {
    put: (id, files) => dirStore.put(id, files),
    get: (id, name) => dirStore.get(id, name),
    remove: (id) => dirStore.remove(id),
  };
});
afterAll(async () => {
  await db.destroy();
  rmSync(dir, { recursive: true, force: true });
});

let made = 0;
async function keepVideo(bytes: number, ttlS = 100) {
  const videoId = `video-${String(++made).padStart(16, '0')}`;
  const file = join(dir, `upload-${made}.mp4`);
  writeFileSync(file, Buffer.alloc(bytes, made));
  await store.put(videoId, [file]);
  const video = {
    videoId,
    accountId,
    input: 'in.mp4',
    fileName: `upload-${made}.mp4`,
    bytes,
    durationMs: 1000,
  };
  expect(
    await registry.add({ ...video, probe: { format: 'mov,mp4,m4a,3gp,3g2,mj2' } }, ttlS, {
      maxVideos: 100,
      maxBytes: 1 << 30,
    }),
  ).toHaveProperty('expiresAt');
  return video;
}
const inStore = () =>
  existsSync(join(dir, 'sheets', 'videos')) ? readdirSync(join(dir, 'sheets', 'videos')) : [];

describe('kept videos with a controlled clock', () => {
  it('expiry is exact; the sweep deletes the file and every cached copy; DELETE likewise', async () => {
    const cache = new VideoCache(join(dir, 'cache-1'), 10_000, store);
    await cache.clear();
    const sweeper = startSweeper({
      registry: { expiredJobs: async () => [], markSwept: async () => false },
      storage: store,
      videos: { registry, store, cache },
      intervalS: 3600,
      log: silent,
    });
    const start = clock.now;
    const expiring = await keepVideo(100, 100);
    const deleted = await keepVideo(100, 1000);
    for (const v of [expiring, deleted])
      await cache.use(v, async (_path, how) => expect(how).toBe('download'));
    expect(cache.cached().sort()).toEqual([expiring.videoId, deleted.videoId].sort());

    clock.now = new Date(start.getTime() + 99_999);
    expect((await registry.find(expiring.videoId, accountId))?.videoId).toBe(expiring.videoId);
    clock.now = new Date(start.getTime() + 100_000);
    expect(await registry.find(expiring.videoId, accountId)).toBeUndefined();
    // Another account never sees (or deletes) it.
    expect(await registry.find(deleted.videoId, accountId + 1)).toBeUndefined();
    expect(await registry.delete(deleted.videoId, accountId + 1)).toBe(false);
    expect(await registry.delete(deleted.videoId, accountId)).toBe(true);
    expect(await registry.find(deleted.videoId, accountId)).toBeUndefined();

    expect(await sweeper.sweep()).toBe(2);
    expect(inStore()).toEqual([]);
    expect(cache.cached()).toEqual([]);
    expect(readdirSync(join(dir, 'cache-1'))).toEqual([]);
    // A second pass (another instance) has nothing left to claim.
    expect(await sweeper.sweep()).toBe(0);
    await sweeper.stop();
  });

  it('the cache holds at most its budget, least recently used out, never a copy in use', async () => {
    const cache = new VideoCache(join(dir, 'cache-2'), 250, store);
    await cache.clear();
    const [v1, v2, v3] = [await keepVideo(100), await keepVideo(100), await keepVideo(100)];
    await cache.use(v1, async () => {});
    await cache.use(v2, async () => {});
    await cache.use(v1, async (_p, how) => expect(how).toBe('hit'));
    // v3 makes 300 > 250: v2, the least recently used, goes.
    await cache.use(v3, async () => {});
    expect(cache.cached()).toEqual([v1.videoId, v3.videoId]);
    expect(readdirSync(join(dir, 'cache-2')).sort()).toEqual([v1.videoId, v3.videoId].sort());
    // While v1 is in use, loading v2 evicts v3 (not v1), and v1's file stays readable.
    await cache.use(v1, async (path) => {
      await cache.use(v2, async () => {});
      expect(existsSync(path)).toBe(true);
    });
    expect(cache.cached().sort()).toEqual([v1.videoId, v2.videoId].sort());
    expect(cache.stats.downloads).toBe(4);
  });
});
