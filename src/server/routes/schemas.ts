/**
 * JSON schemas of the hosted routes: they document the API (served as OpenAPI at
 * `/v1/openapi.json`) and serialise responses in the spec's key order.
 */
import { DENSITIES } from '#vidsheet/core/density.js';
import { CONTRACTS } from '#vidsheet/core/report.js';
import { RESPONSE_MODES } from '#vidsheet/core/request.js';
import { HEALTH_REASONS } from '../storage/storage.js';

const error = (code: string, description: string, extras: Record<string, object> = {}) => ({
  description,
  type: 'object',
  properties: { error: { type: 'string', enum: [code] }, ...extras },
  required: ['error', ...Object.keys(extras)],
});

const strings = { type: 'array', items: { type: 'string' } } as const;

/** What every upload route declares: the key, and a multipart body whose `video` part is the file. */
const uploadRoute = { security: [{ bearer: [] }], consumes: ['multipart/form-data'] } as const;
const videoPart = {
  type: 'string',
  format: 'binary',
  description: 'The video file (at most 300 MB, 30 minutes).',
} as const;

/**
 * The refusals of every route that runs a job for a key (spec "Errors → Hosted API"). Status keys are
 * integers, so a `response` lists them in numeric order whatever the order they are written in.
 */
const jobErrors = {
  401: error('invalid_key', 'The API key is missing, malformed or revoked; the body was not read.'),
  422: {
    description: 'bad_request, unreadable_video, or too_long (with max_s).',
    type: 'object',
    properties: {
      error: { type: 'string', enum: ['bad_request', 'unreadable_video', 'too_long'] },
      max_s: { type: 'integer' },
      message: { type: 'string', description: 'Why, on some bad_request answers (a malformed body).' },
    },
    required: ['error'],
  },
  429: error('busy', 'One job runs and the queue is full; retry in 10 to 30 s. Nothing was charged.'),
  500: error('processing_failed', 'The engine failed after the charge.', { refunded: { type: 'boolean' } }),
} as const;

/** The refusals of every route that receives an upload, besides `jobErrors` (DESIGN §5a). */
const uploadErrors = {
  408: error(
    'bad_request',
    'The upload stalled, or was not complete within VIDSHEET_UPLOAD_TIMEOUT_S, and was cut (DESIGN §5a); nothing was charged.',
    { message: { type: 'string' } },
  ),
  413: error('too_large', 'The upload exceeds the cap.', { max_mb: { type: 'integer' } }),
} as const;

const insufficientCredits = error(
  'insufficient_credits',
  'Balance too low (after the free allowance, for never-purchased accounts).',
);

export const hostedResultSchema = {
  description: 'The hosted job result (response=json).',
  type: 'object',
  properties: {
    job_id: { type: 'string', description: 'Receipt id; appears in the sheet URLs and the usage table.' },
    input: { type: 'string', description: "The uploaded file's original filename." },
    duration: { type: 'number', description: 'Duration of the clip in seconds.' },
    frames: { type: 'integer', description: 'Frames sampled (sheets times cells per sheet).' },
    sheets: { type: 'integer' },
    density: { type: 'string', enum: [...DENSITIES] },
    credits_charged: { type: 'integer' },
    credits_remaining: { type: 'integer' },
    files: { ...strings, description: 'Capability URLs of the sheets, in time order, valid about 24 hours.' },
    timecodes: { type: 'array', items: strings, description: 'One array per sheet, one label per cell.' },
    warnings: strings,
    contract: { type: 'string', enum: [CONTRACTS.http] },
  },
  required: [
    'job_id',
    'input',
    'duration',
    'frames',
    'sheets',
    'density',
    'credits_charged',
    'credits_remaining',
    'files',
    'timecodes',
    'warnings',
    'contract',
  ],
} as const;

export const hostedJobSchema = {
  summary: 'Turn an uploaded video into contact sheets',
  description:
    'One synchronous request per job; the connection stays open until the sheets are made. Every accepted ' +
    'request is a new job and a new charge (1, 2, 3 or 5 credits per sheet for 3x3, 4x4, 5x5, 6x6). ' +
    'Fields `start` and `end` are ignored: a hosted job always covers the whole clip.',
  ...uploadRoute,
  body: {
    type: 'object',
    properties: {
      video: videoPart,
      density: { type: 'string', enum: [...DENSITIES], default: '3x3' },
      response: {
        type: 'string',
        enum: [...RESPONSE_MODES],
        default: 'json',
        description:
          '`image` returns the first sheet as JPEG, with headers x-vidsheet-job and x-credits-remaining.',
      },
    },
    required: ['video'],
  },
  response: { 200: hostedResultSchema, ...jobErrors, ...uploadErrors, 402: insufficientCredits },
} as const;

export const sheetSchema = {
  summary: 'A sheet JPEG by its capability URL',
  description: 'The URL itself grants access. Valid about 24 hours; then 404.',
  params: {
    type: 'object',
    properties: {
      jobId: { type: 'string', description: 'The job id (22 base64url characters).' },
      name: { type: 'string', description: 'video.sheet-N.jpg' },
    },
  },
  response: {
    404: error('not_found', 'Expired, or never existed.'),
  },
} as const;

function healthResult(description: string) {
  return {
    description,
    type: 'object',
    properties: {
      ok: { type: 'boolean' },
      contract: { type: 'string', enum: [CONTRACTS.http] },
      version: { type: 'string' },
      database: { type: 'string', enum: ['ok', ...HEALTH_REASONS], description: '"ok", or why not' },
      storage: { type: 'string', enum: ['ok', ...HEALTH_REASONS], description: '"ok", or why not' },
    },
    required: ['ok', 'contract', 'version'],
  } as const;
}

export const healthSchema = {
  summary: 'Health',
  description: 'No authentication. Tells an outage of the API from a malformed request.',
  response: {
    200: healthResult('Ready.'),
    503: healthResult('The database or the sheet storage does not answer; `database`/`storage` say which.'),
  },
} as const;

/** DESIGN §9: a kept video, as `POST /v1/videos` (201) and `GET /v1/videos/{video_id}` answer it. */
const keptVideoSchema = {
  description: 'A kept video.',
  type: 'object',
  properties: {
    video_id: { type: 'string', description: '128 random bits, base64url; visible only to its account.' },
    input: { type: 'string', description: "The uploaded file's original filename." },
    duration: { type: 'number', description: 'Duration of the clip in seconds.' },
    expires_at: { type: 'string', format: 'date-time', description: 'When it is deleted (ISO 8601 UTC).' },
    contract: { type: 'string', enum: [CONTRACTS.http] },
  },
  required: ['video_id', 'input', 'duration', 'expires_at', 'contract'],
} as const;

const videoIdParams = {
  type: 'object',
  properties: { videoId: { type: 'string', description: 'The video id from POST /v1/videos.' } },
} as const;

const notYours = error('not_found', 'Unknown, expired or deleted, or another account’s video (never 403).');

export const keepVideoSchema = {
  summary: 'Keep a video for zooming (upload once)',
  description:
    'Uploads a video and keeps it for `VIDSHEET_VIDEO_TTL_S` (default 6 hours) for this account only, ' +
    'so it can be zoomed with POST /v1/videos/{video_id}/sheets without another upload. The one exception ' +
    'to "nothing is kept": it serves this account’s zooms and nothing else, and is deleted on DELETE or ' +
    'at expiry. Nothing is charged. At most `VIDSHEET_MAX_VIDEOS` (default 5) unexpired videos per account ' +
    '(1 while it lives on the free allowance), of at most `VIDSHEET_VIDEO_QUOTA_MB` (default 1024) in all.',
  ...uploadRoute,
  body: { type: 'object', properties: { video: videoPart }, required: ['video'] },
  response: {
    201: keptVideoSchema,
    ...jobErrors,
    ...uploadErrors,
    402: error(
      'insufficient_credits',
      'The balance could not pay even the cheapest zoom; the body was not read.',
    ),
    409: {
      description:
        'too_many_videos (with max_videos): the account already keeps the most videos allowed ' +
        '(VIDSHEET_MAX_VIDEOS; 1 for an account that lives on the free allowance), the body unread. ' +
        'video_quota (with max_mb): its kept videos would total more than VIDSHEET_VIDEO_QUOTA_MB, ' +
        'judged from the declared length before the body and again as it streams; nothing is kept.',
      type: 'object',
      properties: {
        error: { type: 'string', enum: ['too_many_videos', 'video_quota'] },
        max_videos: { type: 'integer' },
        max_mb: { type: 'integer' },
      },
      required: ['error'],
    },
  },
} as const;

/** The zoom's result: the hosted job result with `video_id` and, for a window, `window` (DESIGN §9). */
const { job_id, input, duration, ...afterDuration } = hostedResultSchema.properties;
export const sessionResultSchema = {
  description: 'The hosted job result of a zoom (response=json).',
  type: 'object',
  properties: {
    job_id,
    video_id: { type: 'string' },
    input,
    duration,
    window: {
      type: 'object',
      description: 'Only when start or end was given: the window in seconds, as on the CLI.',
      properties: { start: { type: 'number' }, end: { type: 'number' } },
      required: ['start', 'end'],
    },
    ...afterDuration,
  },
  required: [...hostedResultSchema.required.slice(0, 1), 'video_id', ...hostedResultSchema.required.slice(1)],
} as const;

export const videoSheetsSchema = {
  summary: 'Zoom: contact sheets of a kept video, or of a window of it',
  description:
    'Priced and charged per sheet like POST /v1/vidsheet (1, 2, 3 or 5 credits for 3x3, 4x4, 5x5, 6x6). ' +
    '`start`/`end` follow the local rules: seconds or any label seen on a sheet, absolute on the video ' +
    'clock; the end is clamped to the clip; at least 2 ms per cell. A bad window is 422 bad_request with ' +
    'the local message.',
  security: [{ bearer: [] }],
  params: videoIdParams,
  body: {
    type: 'object',
    properties: {
      density: { type: 'string', enum: [...DENSITIES], default: '3x3' },
      start: { oneOf: [{ type: 'number' }, { type: 'string' }], description: 'Window start (default 0).' },
      end: { oneOf: [{ type: 'number' }, { type: 'string' }], description: 'Window end (default: the end).' },
      response: { type: 'string', enum: [...RESPONSE_MODES], default: 'json' },
    },
  },
  response: {
    200: sessionResultSchema,
    ...jobErrors,
    402: insufficientCredits,
    404: notYours,
    408: error('bad_request', 'The body did not arrive within 30 s (DESIGN §5a); nothing was charged.', {
      message: { type: 'string' },
    }),
    415: error('bad_request', 'The body is not application/json; nothing was charged.', {
      message: { type: 'string' },
    }),
  },
} as const;

export const getVideoSchema = {
  summary: 'A kept video',
  security: [{ bearer: [] }],
  params: videoIdParams,
  response: { 200: keptVideoSchema, 401: jobErrors[401], 404: notYours },
} as const;

export const deleteVideoSchema = {
  summary: 'Delete a kept video now',
  security: [{ bearer: [] }],
  params: videoIdParams,
  response: {
    204: { description: 'Deleted, from storage and every cache.', type: 'null' },
    401: jobErrors[401],
    404: notYours,
  },
} as const;
