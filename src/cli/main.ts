/**
 * The command line: `main(argv, io)` returns the exit code. Nothing but the report, the summary or
 * the usage text goes to stdout; messages and progress go to stderr.
 */
import { usageErrors, VidsheetError } from '../core/errors.js';
import { cliReport, humanSummary } from '../core/report.js';
import { abortAllJobs, runJob } from '../job.js';
import { parseCliArgs, USAGE } from './args.js';

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
    const stopInterrupts = onInterrupt(io);
    try {
      const outcome = await runJob(
        {
          input: args.input,
          density: args.density,
          startMs: args.startMs,
          endMs: args.endMs,
          outDir: args.out,
        },
        { audio: true, onProgress: io.stderrIsTty ? progressLine(io) : undefined },
      );
      if (io.stderrIsTty) io.stderr('\r\x1b[K');
      io.stdout(args.json ? `${JSON.stringify(cliReport(outcome), null, 2)}\n` : humanSummary(outcome));
      return 0;
    } finally {
      stopInterrupts();
    }
  } catch (error) {
    if (error instanceof VidsheetError) {
      io.stderr(error.usage ? `${error.message}\n\n${USAGE}` : `${error.message}\n`);
    } else {
      io.stderr(`${error instanceof Error ? error.message : String(error)}\n`);
    }
    return 1;
  }
}

function progressLine(io: Io) {
  return (done: number, total: number) => io.stderr(`\r\x1b[Kextracting frames ${done}/${total}`);
}

/** Ctrl-C: kill ffmpeg children and remove the run's temporary directory before exiting 1. */
function onInterrupt(io: Io): () => void {
  const handler = (signal: NodeJS.Signals) => {
    abortAllJobs();
    io.stderr(`\ninterrupted (${signal}); temporary files removed\n`);
    process.exit(1);
  };
  process.once('SIGINT', handler);
  process.once('SIGTERM', handler);
  return () => {
    process.off('SIGINT', handler);
    process.off('SIGTERM', handler);
  };
}
