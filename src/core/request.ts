/**
 * Request validation, written once and used by every surface: the CLI, the local MCP server, the
 * remote MCP endpoint and the hosted HTTP API. Each surface words a bad value its own way where
 * the spec says so (the CLI's usage errors), but what counts as valid is decided only here.
 */
import { z } from 'zod';
import { DEFAULT_DENSITY, DENSITIES, type Density } from './density.js';
import { hostedErrors, MAX_INPUT_CHARS, runtimeErrors, VidsheetError } from './errors.js';
import { parseTimeMs } from './time.js';

/** `density`: one of the four grids, `3x3` when omitted. */
export const densitySchema = z.enum(DENSITIES).default(DEFAULT_DENSITY);

/** `start`/`end` as a tool receives them: seconds as a number, or a string the time parser reads. */
export const timeValueSchema = z.union([z.number(), z.string()]);

/** The hosted API's `response` field (spec: "Hosted API" form fields). */
export const RESPONSE_MODES = ['json', 'image'] as const;
export type ResponseMode = (typeof RESPONSE_MODES)[number];

/** A density given as text (CLI flag, form field), or null when it is not one of the four. */
export function parseDensity(value: unknown): Density | null {
  const parsed = z.enum(DENSITIES).safeParse(value);
  return parsed.success ? parsed.data : null;
}

/** `start`/`end` in ms, for the tool surfaces; an unparseable value gets the tools' wording. */
export function parseWindowArgs(args: { start?: number | string; end?: number | string }): {
  startMs?: number;
  endMs?: number;
} {
  const parse = (field: 'start' | 'end', value: number | string | undefined) => {
    if (value === undefined) return undefined;
    const ms = parseTimeMs(value);
    if (ms === null) throw runtimeErrors.unparseableTime(field, value);
    return ms;
  };
  return { startMs: parse('start', args.start), endMs: parse('end', args.end) };
}

/**
 * DESIGN §5a "Small inputs stay small": each named input the route reads, when it is text longer than
 * {@link MAX_INPUT_CHARS} characters, is `422 bad_request` naming the first such field (the value is
 * never quoted). Checked before anything parses a value, so no parser or message ever holds it.
 * Fields a route ignores are not passed here, and stay ignored.
 */
export function checkInputLengths(inputs: Record<string, unknown>): void {
  for (const [field, value] of Object.entries(inputs)) {
    if (typeof value === 'string' && value.length > MAX_INPUT_CHARS) throw hostedErrors.inputTooLong(field);
  }
}

export interface HostedFields {
  density: Density;
  response: ResponseMode;
}

/**
 * The hosted form's text fields (multipart, each name with every value it was sent with).
 * `start`/`end` and unknown fields are ignored (a hosted job always covers the whole clip); a
 * field sent twice or a value outside its enum is `422 bad_request`.
 */
export function parseHostedFields(fields: ReadonlyMap<string, string[]>): HostedFields {
  const one = (name: string): string | undefined => {
    const values = fields.get(name) ?? [];
    if (values.length > 1) throw hostedErrors.badRequest(`${name} was sent ${values.length} times`);
    return values[0];
  };
  const densityText = one('density');
  const responseField = one('response');
  checkInputLengths({ density: densityText, response: responseField });
  const density = densityText === undefined ? DEFAULT_DENSITY : parseDensity(densityText);
  if (density === null) throw hostedErrors.badRequest('density must be one of 3x3|4x4|5x5|6x6');
  const responseText = responseField ?? 'json';
  const response = RESPONSE_MODES.find((mode) => mode === responseText);
  if (!response) throw hostedErrors.badRequest('response must be json or image');
  return { density, response };
}

/** A zoom on a kept video (DESIGN §9): its JSON body, every key optional. */
export interface SessionFields extends HostedFields {
  startMs?: number;
  endMs?: number;
}

/**
 * `POST /v1/videos/{video_id}/sheets`'s JSON body `{ density, start, end, response }`. A bad `density`
 * or `response` is `422 bad_request` as on the form; `start`/`end` follow the local tool server's
 * parsing and wording exactly (the message is the body's `message`), the window rules coming after.
 */
export function parseSessionFields(body: unknown): SessionFields {
  if (body === undefined || body === null) body = {};
  if (typeof body !== 'object' || Array.isArray(body))
    throw hostedErrors.badRequest('the body must be a JSON object');
  const fields = body as Record<string, unknown>;
  checkInputLengths({
    start: fields.start,
    end: fields.end,
    density: fields.density,
    response: fields.response,
  });
  const density = fields.density === undefined ? DEFAULT_DENSITY : parseDensity(fields.density);
  if (density === null) throw hostedErrors.badRequest('density must be one of 3x3|4x4|5x5|6x6');
  const response = fields.response === undefined ? 'json' : RESPONSE_MODES.find((m) => m === fields.response);
  if (!response) throw hostedErrors.badRequest('response must be json or image');
  const time = (name: 'start' | 'end') => {
    const parsed = timeValueSchema.optional().safeParse(fields[name]);
    if (!parsed.success) throw hostedErrors.badRequest(`${name} must be a number or a string`);
    return parsed.data;
  };
  const window = asExplained(() => parseWindowArgs({ start: time('start'), end: time('end') }));
  return { density, response, ...window };
}

/**
 * The local surfaces' window and time errors (`bad_time`, `bad_window`) as the hosted API words them
 * (DESIGN §9): `422 bad_request` carrying the local message verbatim. Anything else passes unchanged.
 */
export function asExplained<T>(work: () => T): T {
  try {
    return work();
  } catch (error) {
    throw explainedWindowError(error);
  }
}

export function explainedWindowError(error: unknown): unknown {
  if (error instanceof VidsheetError && (error.code === 'bad_time' || error.code === 'bad_window'))
    return hostedErrors.explained(error.message);
  return error;
}
