/**
 * The `vidsheet-server` command: `vidsheet-server` runs the service, `vidsheet-server admin …`
 * runs an operator command against the same database. Configuration comes from the environment
 * only (DESIGN §7).
 */
import { ConfigError, loadConfig } from './config.js';

const USAGE = `vidsheet-server — the hosted vidsheet service

Usage:
  vidsheet-server                 run the service (configured by environment variables, see README)
  vidsheet-server admin <command> operator commands; "vidsheet-server admin --help" lists them
`;

export async function main(argv: string[]): Promise<number> {
  if (argv[0] === '--help' || argv[0] === '-h') {
    process.stdout.write(USAGE);
    return 0;
  }
  if (argv.length > 0 && argv[0] !== 'admin') {
    process.stderr.write(`unknown argument: ${argv[0]}\n\n${USAGE}`);
    return 1;
  }
  if (argv[0] === 'admin' && (argv.length === 1 || argv.includes('--help') || argv.includes('-h'))) {
    const { adminUsage } = await import('./admin.js');
    process.stdout.write(adminUsage);
    return argv.length === 1 ? 1 : 0;
  }
  let config: ReturnType<typeof loadConfig>;
  try {
    config = loadConfig();
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    process.stderr.write(`vidsheet-server: ${error.message}\n`);
    return 1;
  }
  const { openLedger, startServer } = await import('./server.js');
  if (argv[0] === 'admin') {
    const { runAdmin } = await import('./admin.js');
    const io = {
      stdout: (s: string) => process.stdout.write(s),
      stderr: (s: string) => process.stderr.write(s),
    };
    const { db, ledger } = await openLedger(config).catch((error: Error) => {
      process.stderr.write(`vidsheet-server: ${error.message}\n`);
      return { db: undefined, ledger: undefined };
    });
    if (!db || !ledger) return 1;
    try {
      return await runAdmin(argv.slice(1), io, ledger);
    } finally {
      await db.destroy();
    }
  }

  let server: Awaited<ReturnType<typeof startServer>>;
  try {
    server = await startServer(config);
  } catch (error) {
    process.stderr.write(`vidsheet-server: ${error instanceof Error ? error.message : String(error)}\n`);
    return 1;
  }
  await new Promise<void>((resolve) => {
    // Once: a second signal gets Node's default, an exit at once (the next start's crash recovery
    // refunds a job it cut), for an operator who will not wait for the stop's deadline.
    const onSignal = () => {
      process.off('SIGTERM', onSignal);
      process.off('SIGINT', onSignal);
      void server.stop().then(resolve);
    };
    process.on('SIGTERM', onSignal);
    process.on('SIGINT', onSignal);
  });
  return 0;
}
