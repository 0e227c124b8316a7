/**
 * The one definition of the `vidsheet_video` tool, shared by the local stdio server and the remote
 * endpoint: name, title, a description written for the model, the zod input shape and annotations.
 * The two surfaces differ only in how the video gets in (`video_path` + `out_dir` locally,
 * `video_url` remotely) and in what a sheet carries (local sheets have the audio-activity band).
 *
 * Also the local surface's handler: parse the window, run the job, shape the vidsheet-mcp-v0 result.
 */
import { isAbsolute } from 'node:path';
import { debuglog } from 'node:util';
import type { CallToolResult, ToolAnnotations } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import { DEFAULT_DENSITY, type Density } from '../core/density.js';
import { asVidsheetError, runtimeErrors, VidsheetError } from '../core/errors.js';
import { mcpReport } from '../core/report.js';
import { densitySchema, parseWindowArgs, timeValueSchema } from '../core/request.js';
import { runJob } from '../job.js';
import { inlineSheets, MAX_INLINE_SHEETS } from './inline.js';

const debug = debuglog('vidsheet');

/** Frozen by the spec (Versioning rule 3). */
export const TOOL_NAME = 'vidsheet_video';

const TITLE = 'Video to timestamped contact sheet';

/** Fields both surfaces share, defined once. */
const sharedShape = {
  density: densitySchema.describe(
    'Grid per sheet: 3x3 (9 frames, default) to recover what happened; 4x4, 5x5 or 6x6 (16, 25, 36 frames) ' +
      'to recover how it was done. Denser grids put frames closer together in time.',
  ),
  start: timeValueSchema
    .optional()
    .describe(
      'Window start, absolute on the source video clock: seconds (90, 67.4) or any label seen on a sheet ' +
        '("1:30", "1:07.3", "75:03", "1:02:03"). Default 0. Must be at least 0 and before the end of the video.',
    ),
  end: timeValueSchema
    .optional()
    .describe(
      'Window end, same formats as start. Default: the end of the video; later values are clamped to it. ' +
        'Must be after start, and the window needs at least 2 ms per frame of the grid.',
    ),
};

/** Local input (spec: "Local tool server" parameter table), in the table's order. */
export const localInputShape = {
  video_path: z
    .string()
    .describe(
      'Absolute path to a local video file (any format ffmpeg decodes), e.g. "/home/me/clip.mp4". ' +
        'Relative paths are refused.',
    ),
  ...sharedShape,
  out_dir: z
    .string()
    .optional()
    .describe(
      'Absolute path of the directory to write the sheets into; created if missing. Default: beside the video.',
    ),
  inline_sheets: z
    .number()
    .int()
    .min(0)
    .max(MAX_INLINE_SHEETS)
    .optional()
    .describe(
      'How many sheets (0 to 20, default 0) to also attach as images after the JSON, first sheets first. ' +
        'Ask for them (e.g. 1 to 4) whenever you cannot open the files in `files` yourself.',
    ),
};

/** Remote input (spec: "Remote tool endpoint" parameter table): no `out_dir`, the server places output. */
export const remoteInputShape = {
  video_url: z
    .string()
    .describe(
      'Public http(s) URL of a direct video file (e.g. https://example.com/clip.mp4), not a streaming or ' +
        'video-site page. Private and internal addresses are refused.',
    ),
  ...sharedShape,
};

export type LocalInput = z.infer<z.ZodObject<typeof localInputShape>>;
export type RemoteInput = z.infer<z.ZodObject<typeof remoteInputShape>>;

const LOOP = `How to use it (overview → range → moment):
1. Call once with only the video for an overview. Roughly one 3x3 sheet per 90 s of video; long videos give several sheets, in time order.
2. Look at the sheets, find the frames around what matters, and read their labels from \`timecodes\` (one array per sheet, one label per frame, left to right then top to bottom; the same labels are stamped on the frames).
3. Call again with start and end set to labels you saw (e.g. start "1:30", end "2:15") to spread the same grid over just that range. Repeat to narrow down to a moment.
Timecodes are absolute to the source video at every depth, so any label from any sheet, overview or zoom, is a valid start or end. On short windows labels gain decimals (m:ss.d to m:ss.ddd); pass them back as they are.

What a sheet can and cannot tell you: frames are samples, so anything that happens between two frames is unseen. Denser grids shrink those gaps but never remove them; zoom in rather than guess. Use 3x3 for what happened, denser grids (4x4 to 6x6) for how it was done (steps, gestures, on-screen text).

Where to look between frames: \`zoom_hints\` lists up to 5 gaps between two consecutive frames (or a window edge) where the video's data says something changed that the frames may not show (a cut, a flash, a burst of motion, a sound), highest \`score\` first, with its \`signals\` ("keyframe", "bitrate", "audio", "picture"). Its \`start\` and \`end\` are labels: pass them as start and end to open that gap. An empty list means nothing stood out, not that nothing happened; small changes (a few pixels) do not show. \`frame_times\` (parallel to \`timecodes\`) gives the exact time of the frame each cell shows, null where none could be read: use it to name the moment of an event you see.`;

const LOCAL_INTRO = `Turns a local video file into JPEG contact sheets: grids of frames sampled evenly across the video, or across a start/end window, each frame stamped with its absolute timecode. Returns JSON with the absolute paths of the sheet images in \`files\` (open them to see the frames) and every frame's label in \`timecodes\`. Runs on this machine; nothing is uploaded.`;

const LOCAL_OUTPUT = `There is no speech, transcript or sound recognition. The thin band above each grid only shows when sound energy changed (peaks marked, a flat band marked "no audio" when there is none), on the same timeline; \`audio.samples\` gives the same levels as numbers (relative to the loudest moment of the whole video).

Sheets are written as <video name>.sheet-N.jpg beside the video (or into out_dir), so the next call on the same video replaces them (a zoom's sheet 1 overwrites the overview's sheet 1); give each level its own out_dir to keep earlier sheets viewable.

If you cannot open local files (no file tool), set inline_sheets to N: the first N sheets then arrive as images right after the JSON (at most 20 sheets and 900 KB in all; \`warnings\` says when one was reduced or left out, and labels are always exact in \`timecodes\`). Ask for a few at a time and zoom with start/end rather than asking for all sheets of a long video.`;

const REMOTE_INTRO = `Turns a video at a public URL into JPEG contact sheets: grids of frames sampled evenly across the video, or across a start/end window, each frame stamped with its absolute timecode. Returns JSON with sheet image URLs in \`files\` (valid about 24 hours) and every frame's label in \`timecodes\`; the first sheet is also attached as an image, possibly reduced, so read exact labels from \`timecodes\`.`;

const REMOTE_OUTPUT = `Sheets are visual only: no audio, speech or transcript.`;

/** Local: writes only its own sheet files; reruns overwrite them; nothing leaves the machine. */
const LOCAL_ANNOTATIONS: ToolAnnotations = {
  title: TITLE,
  readOnlyHint: false,
  destructiveHint: false,
  idempotentHint: true,
  openWorldHint: false,
};

/** Remote: fetches an outside URL; each call is a new job (and, on the keyed lane, a new charge). */
const REMOTE_ANNOTATIONS: ToolAnnotations = {
  title: TITLE,
  readOnlyHint: true,
  destructiveHint: false,
  idempotentHint: false,
  openWorldHint: true,
};

export interface ToolDefinition<Shape> {
  name: typeof TOOL_NAME;
  title: string;
  description: string;
  inputSchema: Shape;
  annotations: ToolAnnotations;
}

/**
 * The tool as a surface registers it (`server.registerTool(def.name, def, handler)`).
 * `path`: the local stdio server; `url`: the remote endpoint.
 */
export function toolDefinition(options: { source: 'path' }): ToolDefinition<typeof localInputShape>;
export function toolDefinition(options: { source: 'url' }): ToolDefinition<typeof remoteInputShape>;
export function toolDefinition(options: {
  source: 'path' | 'url';
}): ToolDefinition<typeof localInputShape | typeof remoteInputShape> {
  const local = options.source === 'path';
  return {
    name: TOOL_NAME,
    title: TITLE,
    description: local
      ? `${LOCAL_INTRO}\n\n${LOOP}\n\n${LOCAL_OUTPUT}`
      : `${REMOTE_INTRO}\n\n${LOOP}\n\n${REMOTE_OUTPUT}`,
    inputSchema: local ? localInputShape : remoteInputShape,
    annotations: local ? LOCAL_ANNOTATIONS : REMOTE_ANNOTATIONS,
  };
}

/**
 * Any failure as an MCP tool error: the catalog's message, never a raw stack or engine dump. The
 * local server may add detail its own machine produced; the remote endpoint only logs it.
 */
export function toolError(error: unknown, surface: 'local' | 'remote' = 'local'): CallToolResult {
  const known = asVidsheetError(error);
  if (!(error instanceof VidsheetError) || known.detail) debug('tool call failed: %O', error);
  const text = surface === 'local' ? known.localText : known.message;
  return { isError: true, content: [{ type: 'text', text }] };
}

export interface LocalCallOptions {
  /** Frames extracted so far, for MCP progress notifications. */
  onProgress?: (done: number, total: number) => void;
  /** Aborts the job (server shutdown, request cancelled). */
  signal?: AbortSignal;
}

/**
 * Handles one local `vidsheet_video` call: one text block holding the vidsheet-mcp-v0 result, then
 * with `inline_sheets` the first sheets as image blocks (the text block is the same JSON, its
 * `warnings` saying when an image was reduced or left out).
 */
export async function callLocalTool(
  args: LocalInput,
  options: LocalCallOptions = {},
): Promise<CallToolResult> {
  try {
    if (!isAbsolute(args.video_path)) throw runtimeErrors.notAbsolutePath('video_path', args.video_path);
    if (args.out_dir !== undefined && !isAbsolute(args.out_dir)) {
      throw runtimeErrors.notAbsolutePath('out_dir', args.out_dir);
    }
    const { startMs, endMs } = parseWindowArgs(args);
    const density: Density = args.density ?? DEFAULT_DENSITY;
    const outcome = await runJob(
      { input: args.video_path, density, startMs, endMs, outDir: args.out_dir },
      { audio: true, onProgress: options.onProgress, signal: options.signal },
    );
    const inline = args.inline_sheets
      ? await inlineSheets(outcome.files, args.inline_sheets, options.signal)
      : { images: [], warnings: [] };
    const report = mcpReport({ ...outcome, warnings: [...outcome.warnings, ...inline.warnings] });
    return {
      content: [
        { type: 'text', text: JSON.stringify(report) },
        ...inline.images.map((jpeg) => ({
          type: 'image' as const,
          data: jpeg.toString('base64'),
          mimeType: 'image/jpeg',
        })),
      ],
    };
  } catch (error) {
    return toolError(error);
  }
}
