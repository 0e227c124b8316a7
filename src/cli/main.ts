/**
 * The command line: `main(argv, io)` returns the exit code. Nothing but the report, the summary or
 * the usage text goes to stdout; messages and progress go to stderr.
 */
import { asVidsheetError } from '../core/errors.js';
import { cliReport, humanSummary } from '../core/report.js';
import { runJob } from '../job.js';
import { parseCliArgs } from './args.js';
import { USAGE, UsageError, usageErrors } from './usage.js';

export interface Io {
  stdout: (text: string) => void;
  stderr: (text: string) => void;
  /** Progress is drawn only on an interactive stderr. */
  stderrIsTty: boolean;
}

const processIo: Io = {
  stdout: (text) => process.stdout.write(text),
  stderr: (text) => process.stderr.write(text),
  stderrIsTty: Boolean(process.stderr.isTTY),
};

export async function main(argv: string[], io: Io = processIo): Promise<number> {
  if (argv.length === 0) {
    io.stdout(USAGE);
    return 1;
  }
  try {
    if (argv[0] === 'mcp') {
      if (argv.length > 1) throw usageErrors.mcpTakesNoArguments();
      const { serveStdio } = await import('../mcp/stdio.js');
      await serveStdio();
      return 0;
    }
    const args = parseCliArgs(argv);
    if (args.help) {
      io.stdout(USAGE);
      return 0;
    }
    if (args.input === undefined) throw usageErrors.missingInput();
    const interrupt = onInterrupt();
    try {
      const outcome = await runJob(
        {
          input: args.input,
          density: args.density,
          startMs: args.startMs,
          endMs: args.endMs,
          outDir: args.out,
        },
        {
          audio: true,
          onProgress: io.stderrIsTty ? progressLine(io) : undefined,
          signal: interrupt.signal,
        },
      );
      if (io.stderrIsTty) io.stderr('\r\x1b[K');
      io.stdout(args.json ? `${JSON.stringify(cliReport(outcome), null, 2)}\n` : humanSummary(outcome));
      return 0;
    } catch (error) {
      if (!(error instanceof Interrupted)) throw error;
      // runJob settled: the job's children have exited and its temporary directory is gone.
      io.stderr(`\n${error.message}; temporary files removed\n`);
      // A native render cannot be interrupted mid-call and would keep the process alive.
      process.exit(1);
    } finally {
      interrupt.dispose();
    }
  } catch (error) {
    if (error instanceof UsageError) io.stderr(`${error.message}\n\n${USAGE}`);
    else io.stderr(`${asVidsheetError(error).localText}\n`);
    return 1;
  }
}

function progressLine(io: Io) {
  return (done: number, total: number) => io.stderr(`\r\x1b[Kextracting frames ${done}/${total}`);
}

class Interrupted extends Error {}

/** Ctrl-C (or SIGTERM) aborts the job; the job then kills its children and removes its files. */
function onInterrupt(): { signal: AbortSignal; dispose: () => void } {
  const controller = new AbortController();
  const handler = (signal: NodeJS.Signals) => controller.abort(new Interrupted(`interrupted (${signal})`));
  process.once('SIGINT', handler);
  process.once('SIGTERM', handler);
  return {
    signal: controller.signal,
    dispose: () => {
      process.off('SIGINT', handler);
      process.off('SIGTERM', handler);
    },
  };
}
