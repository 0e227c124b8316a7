/**
 * What text meant for others may show (DESIGN §5a "No secrets or capabilities in text meant for
 * others"): configuration errors and logs are read by operators, support staff and log pipelines,
 * none of whom should learn a password or be able to open someone's sheets.
 *
 * - A URL's password is shown as `***`.
 * - A job id is a capability (whoever has it can fetch the job's sheets until they expire): logs
 *   carry its first 8 characters only, enough to follow one job through the log.
 */

/**
 * DESIGN §5a "Small inputs stay small": how many characters of a caller's input a message or a log
 * line may show. An input is never echoed whole: past this many characters it is cut, with `…`.
 */
export const INPUT_SHOWN = 64;

/**
 * Control characters (C0, DEL, C1), the bidirectional controls that reorder what a reader sees (a
 * file name `é\u202Egpj.mp4` shows as `émp4.jpg`), line and paragraph separators, and the invisible
 * ones (soft hyphen, zero-width space, word joiner, BOM): never quoted as they are. The joiners
 * scripts and emoji need (U+200C, U+200D) stay.
 */
const UNSHOWABLE =
  // biome-ignore lint/suspicious/noControlCharactersInRegex: finding them is the point
  /[\u0000-\u001f\u007f-\u009f\u00ad\u061c\u180e\u200b\u200e\u200f\u2028-\u202e\u2060-\u2064\u2066-\u2069\ufeff]/g;

/**
 * `value` as a message, a log line or a result may quote it: at most {@link INPUT_SHOWN} characters
 * of it, each control character shown as U+FFFD.
 */
export function excerpt(value: unknown): string {
  const text = String(value);
  // By code points, so a cut never splits a surrogate pair (65 of them take at most 130 units).
  const chars = Array.from(text.slice(0, (INPUT_SHOWN + 1) * 2)).slice(0, INPUT_SHOWN + 1);
  const shown = chars.length > INPUT_SHOWN ? `${chars.slice(0, INPUT_SHOWN).join('')}…` : text;
  return shown.replace(UNSHOWABLE, '\ufffd');
}

/** How many characters of a job id a log may carry. */
export const JOB_ID_SHOWN = 8;

/** A job id as a log may carry it: its first {@link JOB_ID_SHOWN} characters. */
export const shortJobId = (jobId: string): string => jobId.slice(0, JOB_ID_SHOWN);

/**
 * A full job id (22 base64url characters) where it names a directory or a URL segment: a sheet URL
 * (`/v1/sheets/<id>/…`), the sheet store (`<data>/sheets/<id>`), a job's work directory
 * (`<data>/work/<id>/…`, which FFmpeg messages and file-system errors quote).
 */
const JOB_ID_IN_PATH = /(\/(?:sheets|work)\/)([A-Za-z0-9_-]{22})(?![A-Za-z0-9_-])/g;

/**
 * `text` with every job id in a sheet URL or a server path cut to its first 8 characters: the last
 * filter on a log line, for the ids quoted in text the server does not write itself (request URLs,
 * file-system errors, FFmpeg messages).
 */
export function scrubJobIds(text: string): string {
  return text.replace(JOB_ID_IN_PATH, (_match, dir: string, id: string) => `${dir}${shortJobId(id)}`);
}

/**
 * A URL as an error message or a log may show it: with `***` for its password. Also for text that is
 * not a valid URL (a typo in the variable is exactly when it gets shown): whatever stands between the
 * scheme (or the start) and the last `@` is user information, and all of it after its first `:` is
 * masked. A URL without a password is returned unchanged.
 */
export function redactUrl(value: string): string {
  const at = value.lastIndexOf('@');
  if (at < 0) return value;
  const scheme = value.indexOf('://');
  const start = scheme >= 0 && scheme < at ? scheme + 3 : 0;
  const colon = value.indexOf(':', start);
  if (colon < 0 || colon > at) return value;
  return `${value.slice(0, colon + 1)}***${value.slice(at)}`;
}
