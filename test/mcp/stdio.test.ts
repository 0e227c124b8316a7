/**
 * The local tool server's contract, spawned as an MCP client runs it (`node bin/vidsheet.js mcp`)
 * and driven with the SDK's own client: one tool and its definition, the vidsheet-mcp-v0 result
 * (key order, timecodes, real sheets), every error as an `isError` result with the spec's exact
 * text, overwrite on rerun, one job at a time, and nothing but JSON-RPC frames on stdout.
 */
import { spawn } from 'node:child_process';
import { copyFileSync, existsSync, mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { isAbsolute, join } from 'node:path';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cellsPerSheet, type Density } from '../../src/core/density.js';
import { ffmpegInstallHint, runtimeErrors } from '../../src/core/errors.js';
import { parseTimeMs } from '../../src/core/time.js';
import { BIN, runCli } from '../helpers/cli.js';
import { plainClip } from '../helpers/fixtures.js';
import { readJpeg } from '../helpers/frames.js';
import { connectMcp, mcpEnv } from '../helpers/mcp.js';
import { expectModelAids } from '../helpers/model-aids.js';
import { AID_KEYS, MCP_KEYS } from '../helpers/result-keys.js';

const TOOL = 'vidsheet_video';
const ENGINE = 'ffmpeg';
// The v0 keys, then the additive ones in their order: `audio`, then DESIGN §10's.
const KEYS = [...MCP_KEYS, 'audio', ...AID_KEYS];
const WINDOW_KEYS = ['input', 'duration', 'window', ...KEYS.slice(2)];

interface Report {
  input: string;
  duration: number;
  window?: { start: number; end: number };
  frames: number;
  sheets: number;
  files: string[];
  timecodes: string[][];
  warnings: string[];
  contract: string;
  audio: {
    present: boolean;
    normalization: string;
    window: { start: number; end: number };
    samples: unknown[];
  };
  frame_times: Array<Array<number | null>>;
  zoom_hints: Array<{ start: string; end: string; score: number; signals: string[] }>;
}

let work: string;
/** 20 s with a 440 Hz tone, copied into `work` so sheets land beside it and nowhere shared. */
let clip: string;
/** 100 s, no audio stream: two sheets. */
let longClip: string;
let client: Client;

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), 'vs-mcp-'));
  const [short, long] = await Promise.all([plainClip(20, { audio: true }), plainClip(100)]);
  clip = join(work, 'clip.mp4');
  longClip = join(work, 'long.mp4');
  copyFileSync(short, clip);
  copyFileSync(long, longClip);
  ({ client } = await connectMcp(ENGINE));
});

afterAll(async () => {
  await client?.close();
  rmSync(work, { recursive: true, force: true });
});

type Args = Record<string, unknown>;

let overviewCall: Promise<Report> | undefined;
/** The plain overview of `clip`, run once and shared by the tests that only need its numbers. */
const overview = () => {
  overviewCall ??= callOk({ video_path: clip });
  return overviewCall;
};

/** One call; every result, success or error, is exactly one text block. */
async function callText(args: Args, c: Client = client): Promise<{ isError: boolean; text: string }> {
  const result = await c.callTool({ name: TOOL, arguments: args });
  const content = result.content as Array<{ type: string; text?: string }>;
  expect(content).toHaveLength(1);
  expect(content[0]?.type).toBe('text');
  return { isError: result.isError === true, text: content[0]?.text ?? '' };
}

async function callOk(args: Args, c: Client = client): Promise<Report> {
  const { isError, text } = await callText(args, c);
  expect(isError, text).toBe(false);
  return JSON.parse(text) as Report;
}

async function callError(args: Args): Promise<string> {
  const { isError, text } = await callText(args);
  expect(isError).toBe(true);
  expect(() => JSON.parse(text)).toThrow(); // a message, never a result object
  return text;
}

/** Structure every successful result shares, whatever the arguments. */
function expectWellFormed(
  r: Report,
  o: { density: Density; startMs: number; endMs: number; windowed: boolean },
) {
  expect(Object.keys(r)).toEqual(o.windowed ? WINDOW_KEYS : KEYS);
  expect(r.contract).toBe('vidsheet-mcp-v0');
  expect(r.sheets).toBe(r.files.length);
  expect(r.timecodes).toHaveLength(r.sheets);
  const cells = cellsPerSheet(o.density);
  for (const sheet of r.timecodes) expect(sheet).toHaveLength(cells);
  expect(r.frames).toBe(r.sheets * cells);
  expect(r.warnings).toEqual([]);

  const times = r.timecodes.flat().map((label) => parseTimeMs(label));
  for (const [i, t] of times.entries()) {
    expect(t, r.timecodes.flat()[i]).not.toBeNull();
    expect(t as number).toBeGreaterThanOrEqual(o.startMs);
    expect(t as number).toBeLessThanOrEqual(o.endMs);
    if (i > 0) expect(t as number).toBeGreaterThan(times[i - 1] as number);
  }

  for (const [i, file] of r.files.entries()) {
    expect(isAbsolute(file)).toBe(true);
    expect(file.endsWith(`.sheet-${i + 1}.jpg`)).toBe(true);
    const sheet = readJpeg(file); // throws unless it is a real JPEG
    expect(sheet.width).toBeGreaterThan(1000);
    expect(sheet.height).toBeGreaterThan(100);
  }
  expect(r.audio.normalization).toBe('clip_peak');
  expect(r.audio.window).toEqual({ start: o.startMs / 1000, end: o.endMs / 1000 });
}

describe('vidsheet mcp', () => {
  it('rejects trailing arguments: message, then usage, on stderr; exit 1', async () => {
    const help = await runCli(['--help']);
    const r = await runCli(['mcp', 'extra']);
    expect(r.code).toBe(1);
    expect(r.stdout).toBe('');
    expect(r.stderr).toBe(`vidsheet mcp takes no arguments\n\n${help.stdout}`);
  });

  it('lists exactly one tool, described for the model, with its annotations and schema', async () => {
    const { tools } = await client.listTools();
    expect(tools).toHaveLength(1);
    const tool = tools[0];
    expect(tool?.name).toBe(TOOL);
    expect(tool?.title).toMatch(/video/i);
    expect(tool?.title).toMatch(/timestamped contact sheet/i);
    // The description teaches the loop and the limits.
    for (const needle of [
      'overview',
      'start',
      'end',
      'timecodes',
      'absolute',
      '3x3',
      '90 s',
      'transcript',
      'zoom_hints',
      'frame_times',
    ]) {
      expect(tool?.description).toContain(needle);
    }
    expect(tool?.annotations).toEqual({
      title: tool?.title,
      readOnlyHint: false,
      destructiveHint: false,
      idempotentHint: true,
      openWorldHint: false,
    });
    const schema = tool?.inputSchema as {
      type: string;
      properties: Record<string, { description?: string; enum?: string[]; default?: unknown }>;
      required?: string[];
    };
    expect(schema.type).toBe('object');
    expect(Object.keys(schema.properties)).toEqual([
      'video_path',
      'density',
      'start',
      'end',
      'out_dir',
      'inline_sheets',
    ]);
    for (const [name, prop] of Object.entries(schema.properties)) {
      expect(prop.description?.length, name).toBeGreaterThan(20);
    }
    expect(schema.required).toEqual(['video_path']);
    expect(schema.properties.density?.enum).toEqual(['3x3', '4x4', '5x5', '6x6']);
    expect(schema.properties.density?.default).toBe('3x3');
  });

  it('overview: the vidsheet-mcp-v0 result, sheets beside the input', async () => {
    const r = await overview();
    expect(r.input).toBe(clip);
    expect(r.duration).toBeCloseTo(20, 0);
    expect(r.sheets).toBe(1);
    expect(r.files).toEqual([join(work, 'clip.sheet-1.jpg')]);
    expect(r.audio.present).toBe(true);
    expect(r.audio.samples.length).toBeGreaterThan(0);
    expectWellFormed(r, { density: '3x3', startMs: 0, endMs: r.duration * 1000, windowed: false });
    await expectModelAids(r, { clip, audio: true });
  });

  it('long clip: several sheets in time order, audio absent', async () => {
    const r = await callOk({ video_path: longClip });
    expect(r.sheets).toBe(2);
    expect(r.audio.present).toBe(false);
    expectWellFormed(r, { density: '3x3', startMs: 0, endMs: r.duration * 1000, windowed: false });
  });

  it('range: start/end as a label and as seconds; window echoed right after duration', async () => {
    const r = await callOk({ video_path: clip, start: '0:05', end: 8.5, density: '4x4' });
    expect(r.window).toEqual({ start: 5, end: 8.5 });
    expectWellFormed(r, { density: '4x4', startMs: 5000, endMs: 8500, windowed: true });
    await expectModelAids(r, { clip, audio: true, window: { start: 5, end: 8.5 } });

    // Any label on a sheet is a valid start/end: zoom again between two of them.
    const labels = r.timecodes[0] as string[];
    const zoom = await callOk({ video_path: clip, start: labels[2], end: labels[5] });
    const [from, to] = [
      parseTimeMs(labels[2] as string) as number,
      parseTimeMs(labels[5] as string) as number,
    ];
    expect(zoom.window).toEqual({ start: from / 1000, end: to / 1000 });
    expectWellFormed(zoom, { density: '3x3', startMs: from, endMs: to, windowed: true });
  });

  it('6x6 gives 36 frames per sheet, written into a new out_dir', async () => {
    const out = join(work, 'nested', 'out');
    const r = await callOk({ video_path: clip, density: '6x6', out_dir: out, end: 1e6 });
    expect(r.window).toEqual({ start: 0, end: r.duration }); // a past-the-end `end` is clamped
    expect(r.frames).toBe(36);
    expect(r.files).toEqual([join(out, 'clip.sheet-1.jpg')]);
    expectWellFormed(r, { density: '6x6', startMs: 0, endMs: r.duration * 1000, windowed: true });
  });

  it('a window exactly at the 2 ms per cell floor is accepted', async () => {
    const r = await callOk({ video_path: clip, start: 1, end: 1.018 });
    expectWellFormed(r, { density: '3x3', startMs: 1000, endMs: 1018, windowed: true });
  });

  describe('errors: isError with the spec text, no result', () => {
    it('missing input', async () => {
      const missing = join(work, 'nope.mp4');
      expect(await callError({ video_path: missing })).toBe(`input not found: ${missing}`);
    });

    it('window rules, in order', async () => {
      const { duration } = await overview();
      expect(await callError({ video_path: clip, start: -1 })).toBe('start must be a time ≥ 0');
      expect(await callError({ video_path: clip, start: '-0:01' })).toBe('start must be a time ≥ 0');
      expect(await callError({ video_path: clip, start: 25 })).toBe(
        `start (25) is at/after the end of the clip (${duration})`,
      );
      expect(await callError({ video_path: clip, start: duration })).toBe(
        `start (${duration}) is at/after the end of the clip (${duration})`,
      );
      expect(await callError({ video_path: clip, start: 5, end: '0:05' })).toBe(
        'window is empty — end (5) must be after start (5)',
      );
      expect(await callError({ video_path: clip, start: 6, end: 4 })).toBe(
        'window is empty — end (4) must be after start (6)',
      );
      expect(await callError({ video_path: clip, start: 1, end: 1.01 })).toBe(
        'window too small to address distinctly: 9 cells across 10 ms (the engine seeks at millisecond precision — minimum ≈ 18 ms at this density); zoom out or lower the density',
      );
      expect(await callError({ video_path: clip, start: 1, end: 1.05, density: '6x6' })).toBe(
        'window too small to address distinctly: 36 cells across 50 ms (the engine seeks at millisecond precision — minimum ≈ 72 ms at this density); zoom out or lower the density',
      );
    });

    it('unparseable start and end', async () => {
      expect(await callError({ video_path: clip, start: 'soon' })).toBe(
        'could not parse start "soon" — use seconds (90) or a timecode (1:30, 1:07.3)',
      );
      expect(await callError({ video_path: clip, end: '1:2:3:4' })).toBe(
        'could not parse end "1:2:3:4" — use seconds (90) or a timecode (1:30, 1:07.3)',
      );
      expect(await callError({ video_path: clip, start: '' })).toBe(
        'could not parse start "" — use seconds (90) or a timecode (1:30, 1:07.3)',
      );
    });

    it('relative paths', async () => {
      expect(await callError({ video_path: 'clip.mp4' })).toBe(
        'video_path must be an absolute path — got "clip.mp4"',
      );
      expect(await callError({ video_path: clip, out_dir: 'sheets' })).toBe(
        'out_dir must be an absolute path — got "sheets"',
      );
      expect(existsSync(join(work, 'sheets'))).toBe(false);
    });

    it('missing ffprobe/ffmpeg: fails fast with the install hint', async () => {
      const emptyPath = mkdtempSync(join(work, 'path-'));
      const bare = await connectMcp(ENGINE, { PATH: emptyPath });
      try {
        const { isError, text } = await callText({ video_path: clip }, bare.client);
        expect(isError).toBe(true);
        expect(text).toBe(runtimeErrors.missingFfmpeg('ffprobe', ffmpegInstallHint()).message);
      } finally {
        await bare.client.close();
      }
    });

    it('arguments outside the schema are refused before any work', async () => {
      const { isError, text } = await callText({ video_path: clip, density: '7x7' });
      expect(isError).toBe(true);
      expect(text).toContain('density');
      expect((await callText({})).isError).toBe(true);
    });
  });

  it('a rerun overwrites the same files and adds none', async () => {
    const out = join(work, 'rerun');
    const first = await callOk({ video_path: clip, out_dir: out });
    const before = readdirSync(out).sort();
    const mtimes = first.files.map((f) => statSync(f).mtimeMs);
    const second = await callOk({ video_path: clip, out_dir: out });
    expect(second.files).toEqual(first.files);
    expect(second.timecodes).toEqual(first.timecodes);
    expect(readdirSync(out).sort()).toEqual(before);
    for (const [i, f] of second.files.entries())
      expect(statSync(f).mtimeMs).toBeGreaterThan(mtimes[i] as number);
  });

  it('concurrent calls both succeed, one job at a time, while the server keeps answering', async () => {
    const events: string[] = [];
    const progress = (name: string) => ({
      onprogress: () => events.push(`${name}:progress`),
      // Progress keeps the request alive however long it waits in the queue.
      resetTimeoutOnProgress: true,
    });
    const call = (name: string, out: string) =>
      client
        .callTool(
          { name: TOOL, arguments: { video_path: clip, out_dir: join(work, out) } },
          undefined,
          progress(name),
        )
        .then((result) => {
          events.push(`${name}:done`);
          return result;
        });
    const a = call('a', 'concurrent-a');
    const b = call('b', 'concurrent-b');
    await client.listTools();
    events.push('list');
    const results = await Promise.all([a, b]);
    for (const result of results) {
      expect(result.isError).not.toBe(true);
      const text = (result.content as Array<{ text: string }>)[0]?.text ?? '';
      expectWellFormed(JSON.parse(text), { density: '3x3', startMs: 0, endMs: 20000, windowed: false });
    }
    // tools/list was answered before either job finished; the jobs did not interleave.
    expect(events.indexOf('list')).toBeLessThan(events.indexOf('a:done'));
    const jobs = events.filter((e) => e !== 'list');
    const firstDone = jobs.findIndex((e) => e.endsWith(':done'));
    const first = jobs[firstDone]?.split(':')[0];
    expect(jobs.slice(0, firstDone).every((e) => e.startsWith(`${first}:`))).toBe(true);
    expect(jobs.filter((e) => e.startsWith(`${first}:`))).toHaveLength(firstDone + 1);
    expect(jobs.filter((e) => e.endsWith(':progress')).length).toBeGreaterThan(2);
  });

  it('stdout carries JSON-RPC frames only; stdin ending lets queued work finish, then exits 0', async () => {
    const child = spawn(process.execPath, [BIN, 'mcp'], {
      env: mcpEnv(ENGINE, { NODE_DEBUG: 'vidsheet' }),
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    const exited = new Promise<number | null>((resolve) => child.on('close', resolve));
    const messages = [
      {
        jsonrpc: '2.0',
        id: 1,
        method: 'initialize',
        params: {
          protocolVersion: '2025-06-18',
          capabilities: {},
          clientInfo: { name: 'raw', version: '0' },
        },
      },
      { jsonrpc: '2.0', method: 'notifications/initialized' },
      { jsonrpc: '2.0', id: 2, method: 'tools/list' },
      {
        jsonrpc: '2.0',
        id: 3,
        method: 'tools/call',
        params: {
          name: TOOL,
          arguments: { video_path: clip, out_dir: join(work, 'raw') },
          _meta: { progressToken: 7 },
        },
      },
      {
        jsonrpc: '2.0',
        id: 4,
        method: 'tools/call',
        params: { name: TOOL, arguments: { video_path: 'x.mp4' } },
      },
    ];
    // Everything at once, then end stdin, as `printf ... | vidsheet mcp` would.
    child.stdin.end(messages.map((m) => `${JSON.stringify(m)}\n`).join(''));
    expect(await exited).toBe(0);

    const lines = stdout.split('\n');
    expect(lines.pop()).toBe(''); // newline-terminated
    const frames = lines.map((line) => JSON.parse(line) as { jsonrpc: string; id?: number; method?: string });
    for (const frame of frames) expect(frame.jsonrpc).toBe('2.0');
    type Reply = { result: { tools?: unknown[]; isError?: boolean; content?: Array<{ text: string }> } };
    const byId = new Map(frames.filter((f) => f.id !== undefined).map((f) => [f.id, f as unknown as Reply]));
    expect([...byId.keys()].sort()).toEqual([1, 2, 3, 4]);
    expect(byId.get(2)?.result.tools).toHaveLength(1);
    const report = JSON.parse(byId.get(3)?.result.content?.[0]?.text ?? '') as Report;
    expect(report.contract).toBe('vidsheet-mcp-v0');
    expect(byId.get(4)?.result.isError).toBe(true);
    expect(frames.some((f) => f.method === 'notifications/progress')).toBe(true);
    expect(stderr).toContain('VIDSHEET'); // the debug log went to stderr
  });
});
