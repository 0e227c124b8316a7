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
  security: [{ bearer: [] }],
  consumes: ['multipart/form-data'],
  body: {
    type: 'object',
    properties: {
      video: {
        type: 'string',
        format: 'binary',
        description: 'The video file (at most 300 MB, 30 minutes).',
      },
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
  response: {
    200: hostedResultSchema,
    401: error('invalid_key', 'The API key is missing, malformed or revoked; the body was not read.'),
    402: error(
      'insufficient_credits',
      'Balance too low (after the free allowance, for never-purchased accounts).',
    ),
    408: error('bad_request', 'The upload stalled and was cut (DESIGN §5a); nothing was charged.', {
      message: { type: 'string' },
    }),
    413: error('too_large', 'The upload exceeds the cap.', { max_mb: { type: 'integer' } }),
    422: {
      description: 'bad_request, unreadable_video, or too_long (with max_s).',
      type: 'object',
      properties: {
        error: { type: 'string', enum: ['bad_request', 'unreadable_video', 'too_long'] },
        max_s: { type: 'integer' },
      },
      required: ['error'],
    },
    429: error('busy', 'One job runs and the queue is full; retry in 10 to 30 s. Nothing was charged.'),
    500: error('processing_failed', 'The engine failed after the charge.', { refunded: { type: 'boolean' } }),
  },
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
