/**
 * The error catalog: every failure a user can see, with the spec's exact wording, in one table.
 *
 * Adapters never write messages of their own: the CLI prints `message` (plus usage text when
 * `usage` is true), the MCP server returns it as an `isError` text block, the HTTP server maps the
 * code to a status and body.
 */

export type ErrorCode =
  | 'usage'
  | 'input_not_found'
  | 'bad_time'
  | 'bad_window'
  | 'unreadable_video'
  | 'missing_ffmpeg'
  | 'processing_failed';

export class VidsheetError extends Error {
  constructor(
    readonly code: ErrorCode,
    message: string,
    /** Usage errors are printed with the usage text (CLI). */
    readonly usage = false,
  ) {
    super(message);
    this.name = 'VidsheetError';
  }
}

const usage = (message: string) => new VidsheetError('usage', message, true);

/** Spec: "Errors → Local command line" (usage errors). */
export const usageErrors = {
  missingInput: () => usage('missing <video> input'),
  secondInput: (arg: string) => usage(`one video per run — got a second input: ${arg}`),
  unknownFlag: (arg: string) => usage(`unknown flag: ${arg}`),
  badDensity: () => usage('--density must be one of 3x3|4x4|5x5|6x6'),
  badTimeFlag: (flag: 'start' | 'end') => usage(`--${flag} needs a time — seconds (90) or a timecode (1:30)`),
  outNeedsDirectory: () => usage('--out needs a directory'),
  mcpTakesNoArguments: () => usage('vidsheet mcp takes no arguments'),
};

/** Spec: runtime messages, shared by the command line and the local tool server. */
export const runtimeErrors = {
  inputNotFound: (absolutePath: string) =>
    new VidsheetError('input_not_found', `input not found: ${absolutePath}`),
  negativeStart: () => new VidsheetError('bad_window', 'start must be a time ≥ 0'),
  startAtOrAfterEnd: (start: string, duration: string) =>
    new VidsheetError('bad_window', `start (${start}) is at/after the end of the clip (${duration})`),
  emptyWindow: (end: string, start: string) =>
    new VidsheetError('bad_window', `window is empty — end (${end}) must be after start (${start})`),
  windowTooSmall: (cells: number, windowMs: number) =>
    new VidsheetError(
      'bad_window',
      `window too small to address distinctly: ${cells} cells across ${windowMs} ms (the engine seeks at millisecond precision — minimum ≈ ${2 * cells} ms at this density); zoom out or lower the density`,
    ),
  /** Local tool server wording for an unparseable `start`/`end`. */
  unparseableTime: (field: 'start' | 'end', value: unknown) =>
    new VidsheetError(
      'bad_time',
      `could not parse ${field} "${String(value)}" — use seconds (90) or a timecode (1:30, 1:07.3)`,
    ),
  /** Not worded by the spec; names the file and what to do. */
  unreadableVideo: (absolutePath: string) =>
    new VidsheetError(
      'unreadable_video',
      `unreadable video: ${absolutePath} — no decodable video stream (send a real video in a common container)`,
    ),
  missingFfmpeg: (tool: string, hint: string) =>
    new VidsheetError(
      'missing_ffmpeg',
      `${tool} not found on PATH — vidsheet needs ffmpeg and ffprobe. ${hint}`,
    ),
  processingFailed: (detail: string) =>
    new VidsheetError('processing_failed', `processing failed: ${detail}`),
  /**
   * Local tool server: a relative `video_path`/`out_dir`. Not worded by the spec; the server's working
   * directory is the client's choice, not the caller's, so relative paths are refused, not guessed.
   */
  notAbsolutePath: (field: 'video_path' | 'out_dir', value: string) =>
    new VidsheetError('usage', `${field} must be an absolute path — got "${value}"`),
};

/** Per-OS install hint for ffmpeg/ffprobe. */
export function ffmpegInstallHint(platform: NodeJS.Platform = process.platform): string {
  switch (platform) {
    case 'darwin':
      return 'Install it with: brew install ffmpeg';
    case 'win32':
      return 'Install it with: winget install Gyan.FFmpeg (then open a new terminal)';
    case 'linux':
      return 'Install it with: sudo apt-get install ffmpeg (Debian/Ubuntu), sudo dnf install ffmpeg (Fedora) or sudo pacman -S ffmpeg (Arch)';
    default:
      return 'Install ffmpeg from https://ffmpeg.org/download.html and make sure ffmpeg and ffprobe are on PATH';
  }
}
