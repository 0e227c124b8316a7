/**
 * CLI-only notions: the usage text and the usage errors (spec: "Errors → Local command line"),
 * which are printed with the usage text after them. Every other message is in core/errors.ts.
 */

export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UsageError';
  }
}

const usage = (message: string) => new UsageError(message);

export const usageErrors = {
  missingInput: () => usage('missing <video> input'),
  secondInput: (arg: string) => usage(`one video per run — got a second input: ${arg}`),
  unknownFlag: (arg: string) => usage(`unknown flag: ${arg}`),
  badDensity: () => usage('--density must be one of 3x3|4x4|5x5|6x6'),
  badTimeFlag: (flag: 'start' | 'end') => usage(`--${flag} needs a time — seconds (90) or a timecode (1:30)`),
  outNeedsDirectory: () => usage('--out needs a directory'),
  mcpTakesNoArguments: () => usage('vidsheet mcp takes no arguments'),
};

export const USAGE = `vidsheet — turn a video into timestamped JPEG contact sheets

Usage:
  vidsheet <video> [--density 3x3|4x4|5x5|6x6] [--start <t>] [--end <t>] [--out <dir>] [--json]
  vidsheet mcp

Options:
  --density <grid>  3x3, 4x4, 5x5 or 6x6 cells per sheet (default 3x3)
  --start <t>       window start on the source clock (default 0)
  --end <t>         window end (default: end of clip; later values are clamped)
  --out <dir>       where sheets go (default: the video's directory; created if missing)
  --json            print the vidsheet-cli-v0 JSON report instead of the summary
  -h, --help        show this help

  <t> is seconds (90, 67.4) or a timecode as printed on a sheet (1:30, 1:07.3, 1:02:03).
  Sheets are written as <basename>.sheet-N.jpg, about one sheet per 90 s of window.

  vidsheet mcp      run the local MCP server on stdio (tool: vidsheet_video)

Navigation: run once for an overview, read the timecodes, run again with --start/--end
set to labels you saw for a finer look. Timecodes are absolute at every depth.
`;
