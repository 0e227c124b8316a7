/**
 * `vidsheet-server`: assembles the parts from the configuration, recovers from a previous crash,
 * listens, and stops cleanly on SIGTERM/SIGINT (DESIGN §7): it stops accepting at once, lets the
 * running job finish (or, past the deadline, stops the worker, which refunds that job), and exits 0.
 */
import { randomBytes } from 'node:crypto';
import { mkdir, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { type Kysely, sql } from 'kysely';
import { pino } from 'pino';
import { scrubJobIds, shortJobId } from '#vidsheet/core/redact.js';
import { packageVersion } from '#vidsheet/version.js';
import { buildApp } from './app.js';
import { AnonymousLane } from './billing/anonymous-lane.js';
import { type Clock, Ledger } from './billing/ledger.js';
import { Payments } from './billing/payments.js';
import type { ServerConfig } from './config.js';
import { openDatabase } from './db/open.js';
import type { Database } from './db/schema.js';
import { Admission } from './hosted/admission.js';
import { FreeActors } from './hosted/free-actors.js';
import { HostedJobs } from './hosted/jobs.js';
import { startSweeper } from './hosted/sweeper.js';
import { Transfers } from './hosted/transfers.js';
import { JobWorker } from './hosted/worker/worker.js';
import { createMailer } from './keys/mail.js';
import { Sessions } from './keys/sessions.js';
import { SignIn } from './keys/sign-in.js';
import { VideoCache } from './sessions/cache.js';
import { VideoRegistry } from './sessions/registry.js';
import { LocalSheetStorage } from './storage/local.js';
import { S3SheetStorage } from './storage/s3.js';
import type { SheetStorage } from './storage/storage.js';

/** How long a stop waits for the running job before stopping the worker (the contract says 60 s). */
const STOP_DEADLINE_MS = 50_000;

export interface RunningServer {
  app: FastifyInstance;
  /** Where it listens, e.g. `http://127.0.0.1:8080`. */
  address: string;
  worker: JobWorker;
  stop(): Promise<void>;
}

/**
 * This instance's name in the shared database: made once per data directory (each instance has its
 * own), so after a crash the instance refunds the jobs it left running and no other's.
 */
async function instanceId(dataDir: string): Promise<string> {
  const file = join(dataDir, 'instance-id');
  await mkdir(dataDir, { recursive: true });
  await writeFile(file, `${randomBytes(8).toString('hex')}\n`, { flag: 'wx' }).catch(
    (error: NodeJS.ErrnoException) => {
      if (error.code !== 'EEXIST') throw error;
    },
  );
  return (await readFile(file, 'utf8')).trim();
}

/** The ledger over the configured database (SQLite in the data directory, or PostgreSQL). */
export async function openLedger(config: ServerConfig, clock: Clock = () => new Date()) {
  const db: Kysely<Database> = await openDatabase({
    dataDir: config.dataDir,
    databaseUrl: config.databaseUrl,
    poolSize: config.databasePoolSize,
  });
  const instance = await instanceId(config.dataDir);
  return { db, instance, ledger: new Ledger(db, { allowanceFloor: config.allowanceFloor, clock, instance }) };
}

export async function startServer(config: ServerConfig): Promise<RunningServer> {
  const log = pino({
    level: process.env.VIDSHEET_LOG_LEVEL ?? 'info',
    redact: ['req.headers.authorization'],
    // The server logs job ids by their first 8 characters; this catches the ones quoted in text it
    // does not write itself (sheet URLs in request lines, paths in file-system and FFmpeg errors).
    hooks: { streamWrite: scrubJobIds },
  });
  const clock: Clock = () => new Date();
  const workDir = join(config.dataDir, 'work');
  const sheetsDir = join(config.dataDir, 'sheets');
  await mkdir(workDir, { recursive: true });
  await mkdir(sheetsDir, { recursive: true });

  // Leftovers of a crash: uploads and half-made sheets are deleted, charged jobs refunded.
  const leftovers = await readdir(workDir);
  await Promise.all(leftovers.map((entry) => rm(join(workDir, entry), { recursive: true, force: true })));
  const { db, ledger, instance } = await openLedger(config, clock);
  const recovered = await ledger.jobs.recoverInterrupted();
  if (leftovers.length || recovered.length) {
    log.warn(
      { removed: leftovers.length, refundedJobs: recovered.map(shortJobId), instance },
      'recovered from an unclean stop',
    );
  }

  // An unreachable bucket is an error at start, not at the first job.
  const storage: SheetStorage = config.storageUrl
    ? await S3SheetStorage.open(config.storageUrl)
    : new LocalSheetStorage(sheetsDir);
  // Kept videos (DESIGN §9): in the sheet store's `videos` area; this instance's copies in the data dir.
  const videoStore = storage.under?.('videos');
  if (!videoStore) throw new Error('the sheet storage cannot keep videos');
  const sessions = {
    registry: new VideoRegistry(db, clock),
    store: videoStore,
    cache: new VideoCache(join(config.dataDir, 'video-cache'), config.videoCacheMb * 1024 * 1024, videoStore),
  };
  await sessions.cache.clear();
  const worker = new JobWorker(log, config.workerMemoryMb);
  worker.start();
  const admission = new Admission(1 + config.queueLength);
  const transfers = new Transfers(config.maxTransfers, config.transfersPerClient);
  // Credits charged back their account's slot time (transfers.ts `unbacked`).
  const jobs = new HostedJobs({
    config,
    ledger,
    storage,
    worker,
    onCharged: (accountId, credits) => transfers.charged(accountId, credits),
  });
  const freeActors = new FreeActors((accountId) => ledger.credits.livesOnAllowance(accountId));
  const anonymous = new AnonymousLane(db, {
    daily: config.anonDaily,
    perAddress: config.anonPerAddress,
    ceiling: config.anonCeiling,
    clock,
  });
  const sweeper = startSweeper({
    registry: ledger.jobs,
    storage,
    videos: sessions,
    intervalS: config.sweepS,
    log,
  });
  await sweeper.sweep();

  const mailer = createMailer(config, log);
  const keysPage = {
    sessions: new Sessions(db, { clock }),
    signIn: new SignIn({ db, ledger, mailer, clock, log }),
    payments: new Payments({ config, db, ledger, clock, log }),
  };
  const app = await buildApp(
    {
      config,
      ledger,
      storage,
      hosted: { admission, transfers, freeActors, jobs },
      sessions,
      anonymous,
      keysPage,
      checkDatabase: async () => {
        await sql`select 1`.execute(db);
      },
      clock,
      version: packageVersion(),
    },
    { loggerInstance: log },
  );
  const address = await app.listen({ port: config.port, host: config.host });
  log.info({ address, baseUrl: config.baseUrl, dataDir: config.dataDir }, 'vidsheet-server listening');

  let stopping: Promise<void> | undefined;
  const stop = () =>
    (stopping ??= (async () => {
      log.info({}, 'stopping: no new requests; waiting for the running job');
      await sweeper.stop();
      const closed = app.close();
      // Past the deadline nothing is waited for (DESIGN §7: exit within 60 s): the running job is
      // stopped and refunded, and every connection still open (a remote fetch still downloading,
      // say, which is not a job yet) is closed.
      const deadline = setTimeout(() => {
        const jobs = admission.size;
        log.warn(
          { jobs, transfers: transfers.size },
          jobs > 0
            ? 'stop deadline reached: stopping the worker (its running job is refunded), closing every connection'
            : 'stop deadline reached: no job runs; closing every connection',
        );
        void worker.close();
        app.server.closeAllConnections();
      }, STOP_DEADLINE_MS);
      await closed;
      clearTimeout(deadline);
      await worker.close();
      // Sign-in mails still being handed to the SMTP server are not cut off.
      await keysPage.signIn.settled();
      if (storage instanceof S3SheetStorage) storage.destroy();
      await db.destroy();
      log.info({}, 'stopped');
    })());
  return { app, address, worker, stop };
}
