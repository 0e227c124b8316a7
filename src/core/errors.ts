import { excerpt } from './redact.js';

/**
 * The error catalog: every failure a user can see, one row per code, in one table.
 *
 * A row holds the HTTP status and the extras a hosted body carries; the constructors below hold
 * the public messages, quoted verbatim from the spec where it words them. Adapters never write
 * messages of their own: the CLI and the local MCP server print `localText` (the message, plus raw
 * detail the user's own machine produced), the HTTP server answers `status` with `body()`, the
 * remote MCP endpoint returns `message`. Raw detail (paths on the server, FFmpeg stderr) lives in
 * `detail` and `cause`: local surfaces may show it, remote surfaces only log it.
 */

/** Extras a hosted error body carries next to `error` (DESIGN §5). */
export interface ErrorExtras {
  max_mb?: number;
  max_s?: number;
  refunded?: boolean;
  max_videos?: number;
  /** The public message, on the `bad_request` answers that carry one (DESIGN §5a, §9). */
  message?: string;
}

export const CATALOG = {
  // Hosted API (spec: "Errors → Hosted API"), plus DESIGN §5's expired or unknown sheet URL.
  invalid_key: { status: 401 },
  insufficient_credits: { status: 402 },
  not_found: { status: 404 },
  too_large: { status: 413, extras: ['max_mb'] },
  bad_request: { status: 422, extras: ['message'] },
  unreadable_video: { status: 422 },
  too_long: { status: 422, extras: ['max_s'] },
  busy: { status: 429 },
  too_many_videos: { status: 409, extras: ['max_videos'] },
  video_quota: { status: 409, extras: ['max_mb'] },
  processing_failed: { status: 500, extras: ['refunded'] },
  // Remote tool endpoint, at the HTTP level (spec: "Errors → Remote tool endpoint"; bodies not shown).
  forbidden: { status: 403 },
  method_not_allowed: { status: 405 },
  rate_limited: { status: 429 },
  // Remote tool endpoint, as tool results.
  fetch_failed: { status: 422 },
  quota_exhausted: { status: 429 },
  // Local surfaces and the remote tool (window and time errors are the caller's to correct).
  input_not_found: { status: 422 },
  bad_time: { status: 422 },
  bad_window: { status: 422 },
  missing_ffmpeg: { status: 500 },
} as const satisfies Record<string, { status: number; extras?: readonly (keyof ErrorExtras)[] }>;

export type ErrorCode = keyof typeof CATALOG;

export class VidsheetError extends Error {
  constructor(
    readonly code: ErrorCode,
    /** Public text: safe on every surface, never a server path or FFmpeg output. */
    message: string,
    readonly extras: ErrorExtras = {},
    /** Raw detail for the log and for local surfaces (the user's own machine produced it). */
    readonly detail?: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = 'VidsheetError';
  }

  get status(): number {
    return CATALOG[this.code].status;
  }

  /** The hosted JSON body: `{ error, ...extras }`, nothing else. */
  body(): { error: ErrorCode } & ErrorExtras {
    return { error: this.code, ...this.extras };
  }

  /** What the CLI and the local MCP server show. */
  get localText(): string {
    return this.detail ? `${this.message}: ${this.detail}` : this.message;
  }

  /** The same failure with different extras (e.g. `refunded` once the refund is known). */
  withExtras(extras: ErrorExtras): VidsheetError {
    return new VidsheetError(this.code, this.message, { ...this.extras, ...extras }, this.detail, {
      cause: this.cause,
    });
  }
}

/** DESIGN §5a: the longest `start`, `end`, `density`, `response`, video URL or subject id a route reads. */
export const MAX_INPUT_CHARS = 2048;

/**
 * DESIGN §5a: the `bad_request` answers written under a status of their own rather than the catalog's
 * 422, because the HTTP layer, not the request's content, is at fault: a body too slow (408), a zoom
 * body that is not JSON (415), a request Node's parser refused (400, 431). Each body has the catalog's
 * shape, `{ error, message }`; the first three messages are DESIGN's verbatim, the rest worded here
 * (DESIGN and the spec leave them open).
 */
export const transportAnswers = {
  bodyTooSlow: { status: 408, body: { error: 'bad_request', message: 'the request body was too slow' } },
  uploadStalled: { status: 408, body: { error: 'bad_request', message: 'the upload stalled' } },
  notJson: { status: 415, body: { error: 'bad_request', message: 'send the body as application/json' } },
  headersTooSlow: {
    status: 408,
    body: { error: 'bad_request', message: 'the request headers were too slow' },
  },
  headersTooLarge: {
    status: 431,
    body: { error: 'bad_request', message: 'the request headers are too large' },
  },
  bodyCutShort: { status: 400, body: { error: 'bad_request', message: 'the request body was cut short' } },
  malformedRequest: { status: 400, body: { error: 'bad_request', message: 'the request is malformed' } },
  expectationFailed: {
    status: 417,
    body: { error: 'bad_request', message: 'the only expectation served is Expect: 100-continue' },
  },
} as const;

/** Anything thrown, as a catalog error: unknown failures become `processing_failed` with detail. */
export function asVidsheetError(error: unknown): VidsheetError {
  if (error instanceof VidsheetError) return error;
  return runtimeErrors.processingFailed(detailOf(error), error);
}

function detailOf(error: unknown): string | undefined {
  if (error === undefined) return undefined;
  if (error instanceof VidsheetError) return error.localText;
  return error instanceof Error ? error.message : String(error);
}

/** Spec: runtime messages, shared by the command line, the local tool server and the remote tool. */
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
  /** Tool servers' wording for an unparseable `start`/`end`. */
  unparseableTime: (field: 'start' | 'end', value: unknown) =>
    new VidsheetError(
      'bad_time',
      // DESIGN §5a: never the input whole, at most 64 characters of it.
      `could not parse ${field} "${excerpt(value)}" — use seconds (90) or a timecode (1:30, 1:07.3)`,
    ),
  /** Not worded by the spec; names the input as its caller knows it and says what to do. */
  unreadableVideo: (inputName: string) =>
    new VidsheetError(
      'unreadable_video',
      `unreadable video: ${inputName} — no decodable video stream (send a real video in a common container)`,
    ),
  missingFfmpeg: (tool: string, hint: string) =>
    new VidsheetError(
      'missing_ffmpeg',
      `${tool} not found on PATH — vidsheet needs ffmpeg and ffprobe. ${hint}`,
    ),
  processingFailed: (detail?: string, cause?: unknown) =>
    new VidsheetError('processing_failed', 'processing failed', {}, detail, { cause }),
  /**
   * Local tool server: a relative `video_path`/`out_dir`. Not worded by the spec; the server's working
   * directory is the client's choice, not the caller's, so relative paths are refused, not guessed.
   */
  notAbsolutePath: (field: 'video_path' | 'out_dir', value: string) =>
    new VidsheetError('bad_request', `${field} must be an absolute path — got "${excerpt(value)}"`),
};

/**
 * Hosted API errors (spec: "Errors → Hosted API"). The body is `{ error, ...extras }`; the message
 * is for logs and for the remote tool's text, worded after the spec's "Condition" column.
 */
export const hostedErrors = {
  invalidKey: () => new VidsheetError('invalid_key', 'the API key is missing, malformed or revoked'),
  insufficientCredits: () => new VidsheetError('insufficient_credits', 'the balance is too low for this job'),
  tooLarge: (maxMb: number) =>
    new VidsheetError('too_large', `the video is larger than ${maxMb} MB`, { max_mb: maxMb }),
  /**
   * A body that is not an upload (JSON, a form, a Stripe event) over its route's limit: `max_mb` is
   * that limit (in MiB like the upload cap, to 3 decimals: a form's 16 KiB is 0.016), not the upload's.
   */
  bodyTooLarge: (limitBytes: number) => {
    const maxMb = Math.round((limitBytes / 2 ** 20) * 1000) / 1000;
    return new VidsheetError('too_large', `the request body is larger than ${maxMb} MB`, { max_mb: maxMb });
  },
  badRequest: (why: string) => new VidsheetError('bad_request', `bad request: ${why}`),
  /** A `bad_request` whose body says why: §9's window messages (the local wording), §5a's body faults. */
  explained: (message: string) => new VidsheetError('bad_request', message, { message }),
  /**
   * DESIGN §5a "Malformed requests are 4xx": a multipart body cut before its closing boundary or with
   * broken framing. Neither the spec nor DESIGN words it; the body follows the stall answer's shape.
   */
  malformedBody: () => hostedErrors.explained('the multipart body is truncated or malformed'),
  /**
   * DESIGN §5a "Small inputs stay small": a `start`, `end`, `density`, `response`, video URL or subject
   * id longer than {@link MAX_INPUT_CHARS} characters. DESIGN does not word it; the message names the
   * field and never quotes the value.
   */
  inputTooLong: (field: string) =>
    hostedErrors.explained(`${field} is longer than ${MAX_INPUT_CHARS} characters`),
  /** DESIGN §9: one kept video more than `VIDSHEET_MAX_VIDEOS` allows. */
  tooManyVideos: (maxVideos: number) =>
    new VidsheetError('too_many_videos', `at most ${maxVideos} kept videos`, { max_videos: maxVideos }),
  /** DESIGN §5a "Kept videos cost storage": one more would take the account past its kept bytes. */
  videoQuota: (maxMb: number) =>
    new VidsheetError('video_quota', `kept videos would total more than ${maxMb} MB`, { max_mb: maxMb }),
  tooLong: (maxS: number) =>
    new VidsheetError('too_long', `the video is longer than ${maxS} s`, { max_s: maxS }),
  busy: () =>
    new VidsheetError(
      'busy',
      'vidsheet is busy with other videos right now; please retry in about 10 to 30 seconds',
    ),
  notFound: () => new VidsheetError('not_found', 'not found'),
  /** After the charge: the body says whether the refund went through; the cause goes to the log. */
  processingFailed: (refunded: boolean, cause?: unknown) =>
    new VidsheetError('processing_failed', 'processing failed', { refunded }, detailOf(cause), { cause }),
};

/** The remote tool endpoint's own failures (DESIGN §6). */
export const remoteErrors = {
  /** Host or Origin not allowed: refused before any MCP processing. */
  forbidden: (what: 'Host' | 'Origin') => new VidsheetError('forbidden', `this ${what} is not allowed`),
  methodNotAllowed: () =>
    new VidsheetError('method_not_allowed', 'the endpoint is POST-only (stateless, no streams)'),
  rateLimited: (retryAfterS: number) =>
    new VidsheetError('rate_limited', `too many requests; retry in ${retryAfterS} s`),
  /** Why a video URL could not be fetched, never echoing an internal address or a server's banner. */
  fetchFailed: (why: string) => new VidsheetError('fetch_failed', `could not fetch the video: ${why}`),
};

/** The keys page's own refusal: a form without a valid CSRF token (stale page, or another site). */
export const webErrors = {
  staleForm: () =>
    new VidsheetError(
      'forbidden',
      'this form has expired or did not come from the keys page; reload the page',
    ),
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
