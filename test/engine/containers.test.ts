/**
 * The container allow-list inside both engines (DESIGN §5a "Containers a server opens"): a
 * restricted open lets FFmpeg's own detection pick the demuxer, refuses one off the list before it
 * reads the file, and every later open of the job fixes the demuxer it found. Unrestricted (the
 * CLI, MCP stdio) nothing changes: a local playlist still opens, on the built bin.
 *
 * Oracles: the canary (solid magenta, elsewhere on disk) on any sheet; named pipes in its place
 * that count every open for reading; FFmpeg's own answer for each form when nothing is restricted.
 */
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SERVER_CONTAINERS } from '../../src/core/containers.js';
import { ffmpegEngine } from '../../src/engine/ffmpeg.js';
import { loadNative } from '../../src/engine/native-loader.js';
import type { Engine } from '../../src/engine/types.js';
import { runJob } from '../../src/job.js';
import { BIN, ENGINES, runCli } from '../helpers/cli.js';
import { plainClip } from '../helpers/fixtures.js';
import { readJpeg } from '../helpers/frames.js';
import {
  CANARY_SECONDS,
  type CanaryPaths,
  canaryShare,
  type FifoCanary,
  fifoCanary,
  GREEN_RGB,
  type HostileInput,
  hostileInputs,
  makeCanary,
  matroskaWithPlaylist,
  shareNear,
} from '../helpers/hostile-inputs.js';

const execFileP = promisify(execFile);

const engines: Engine[] = [];
if (ENGINES.includes('ffmpeg')) engines.push(ffmpegEngine);
if (ENGINES.includes('native')) {
  const native = loadNative();
  if (!('engine' in native)) throw new Error(`native binding did not load:\n${native.error}`);
  engines.push(native.engine);
}

let root: string;
let canary: CanaryPaths;
let pipes: FifoCanary;
/** The battery written next to the real canary, and next to the pipes. */
let nearCanary: Array<HostileInput & { path: string }>;
let nearPipes: Array<HostileInput & { path: string }>;
let withPlaylist: string;
/** A 2 s clip in each allowed container, by the demuxer name FFmpeg detects for it. */
let allowedClips: Array<{ format: string; path: string }>;

/** ffmpeg output options and file name for a clip that FFmpeg detects as each allowed demuxer. */
const ALLOWED_CLIPS: Array<[format: string, file: string, options: string[]]> = [
  ['mov,mp4,m4a,3gp,3g2,mj2', 'a.mov', ['-c:v', 'mpeg4']],
  ['matroska,webm', 'a.webm', ['-c:v', 'libvpx', '-b:v', '200k']],
  ['avi', 'a.avi', ['-c:v', 'mpeg4']],
  ['mpegts', 'a.ts', ['-c:v', 'mpeg2video']],
  ['mpeg', 'a.mpg', ['-c:v', 'mpeg2video', '-f', 'vob']],
  ['flv', 'a.flv', ['-c:v', 'flv1']],
  ['asf', 'a.wmv', ['-c:v', 'wmv2']],
  ['ogg', 'a.ogv', ['-c:v', 'libtheora']],
  ['mxf', 'a.mxf', ['-c:v', 'mpeg2video', '-r', '25']],
  ['nut', 'a.nut', ['-c:v', 'mpeg4']],
  ['rm', 'a.rm', ['-c:v', 'rv20']],
  ['wtv', 'a.wtv', ['-c:v', 'mpeg2video']],
  ['ivf', 'a.ivf', ['-c:v', 'libvpx', '-b:v', '200k']],
  ['h264', 'a.h264', ['-c:v', 'libx264', '-pix_fmt', 'yuv420p']],
  ['hevc', 'a.hevc', ['-c:v', 'libx265', '-pix_fmt', 'yuv420p', '-x265-params', 'log-level=error']],
  ['m4v', 'a.m4v', ['-c:v', 'mpeg4', '-f', 'm4v']],
];

beforeAll(async () => {
  root = mkdtempSync(join(tmpdir(), 'vs-containers-'));
  canary = await makeCanary(join(root, 'canary'));
  pipes = await fifoCanary(join(root, 'pipes'));
  const place = (dir: string, inputs: HostileInput[]) =>
    inputs.map((input) => {
      const path = join(dir, input.filename);
      writeFileSync(path, input.bytes);
      return { ...input, path };
    });
  nearCanary = place(join(root, 'canary'), await hostileInputs(canary));
  nearPipes = place(join(root, 'pipes'), await hostileInputs(pipes.paths, canary));
  withPlaylist = await matroskaWithPlaylist(join(root, 'mkv'), canary);
  const dir = join(root, 'allowed');
  mkdirSync(dir);
  allowedClips = [];
  for (const [format, file, options] of ALLOWED_CLIPS) {
    const path = join(dir, file);
    const source = ['-f', 'lavfi', '-i', 'color=c=green:s=64x48:r=10:d=2'];
    await execFileP('ffmpeg', ['-v', 'error', '-nostdin', '-y', ...source, ...options, path]);
    allowedClips.push({ format, path });
  }
});

afterAll(() => {
  pipes?.stop();
  rmSync(root, { recursive: true, force: true });
});

/** The demuxer each form opens as when nothing is restricted ('refused': FFmpeg itself fails). */
function unrestricted(engine: Engine['name']): Record<string, string> {
  return {
    'HLS with a control byte': 'hls',
    'HLS, .ts segment': 'hls',
    'HLS, .mp4 segment (file URL)': 'hls',
    'HLS, .mkv segment': 'hls',
    'HLS named .m3u8': 'hls',
    'HLS named .ts': 'hls',
    'HLS with binary bytes': 'hls',
    // The static FFmpeg of the native binding is built without libxml2, so without DASH.
    'DASH manifest': engine === 'ffmpeg' ? 'dash' : 'refused',
    'DASH manifest named .mpd': engine === 'ffmpeg' ? 'dash' : 'refused',
    'ffconcat list': 'concat',
    'ffconcat list named .ffconcat': 'concat',
    'concat list': 'refused',
    // RTP is not a protocol the engines allow (file only).
    'SDP session': 'refused',
    'SDP session named .mp4': 'refused',
    text: 'refused',
    'single JPEG named .mp4': 'jpeg_pipe',
    'single PNG named .mp4': 'png_pipe',
    'single JPEG named .jpg': 'jpeg_pipe',
    'image2 pattern': 'image2',
  };
}

const sheetsShow = (files: string[]) => files.map((f) => canaryShare(readJpeg(f)));

describe.each(engines.map((e) => [e.name, e] as const))('%s engine', (name, engine) => {
  it('opened as any container, the forms are real threats: FFmpeg follows them to the canary', async () => {
    const seen: Record<string, string> = {};
    for (const input of nearCanary) {
      seen[input.kind] = await engine.probe(input.path).then(
        (info) => info.format,
        () => 'refused',
      );
    }
    expect(seen).toEqual(unrestricted(name));
    // The reported bug, locally: the playlist's job shows the canary.
    const bug = nearCanary.find((i) => i.kind === 'HLS with a control byte') as { path: string };
    const outcome = await runJob(
      { input: bug.path, density: '3x3', outDir: join(root, `any-${name}`) },
      { engine, audio: false },
    );
    expect(outcome.duration).toBe(CANARY_SECONDS);
    for (const share of sheetsShow(outcome.files)) expect(share).toBeGreaterThan(0.3);
  });

  it('a restricted probe and job refuse every form with unreadable_video, and open nothing else', async () => {
    expect(nearPipes.length).toBe(19);
    for (const input of nearPipes) {
      const probed = await engine.probe(input.path, SERVER_CONTAINERS).then(
        (info) => `opened as ${info.format}`,
        (error: { code?: string }) => error.code,
      );
      expect([input.kind, probed]).toEqual([input.kind, 'unreadable_video']);
      const outDir = join(root, `restricted-${name}`, input.filename);
      const job = await runJob(
        { input: input.path, density: '3x3', outDir, inputName: input.filename },
        { engine, audio: false, containers: 'restricted' },
      ).then(
        () => 'rendered',
        (error: { code?: string; message?: string }) => `${error.code}: ${error.message}`,
      );
      expect([input.kind, job]).toEqual([
        input.kind,
        `unreadable_video: unreadable video: ${input.filename} — no decodable video stream (send a real video in a common container)`,
      ]);
      expect([input.kind, pipes.opened]).toEqual([input.kind, []]);
    }
    // And with the real canary in place: no sheet at all.
    for (const input of nearCanary) {
      const outDir = join(root, `restricted-real-${name}`, input.filename);
      await expect(
        runJob(
          { input: input.path, density: '3x3', outDir },
          { engine, audio: false, containers: 'restricted' },
        ),
        input.kind,
      ).rejects.toMatchObject({ code: 'unreadable_video' });
      expect(() => readdirSync(outDir), input.kind).toThrow();
    }
    // The pipes do count: unrestricted, the reported playlist opens one of them.
    const bug = nearPipes.find((i) => i.kind === 'HLS with a control byte') as { path: string };
    await engine.probe(bug.path).catch(() => {});
    expect(pipes.opened).toContain(pipes.paths.ts);
    pipes.opened.length = 0;
  });

  it('every allowed container opens restricted, as the demuxer FFmpeg detects, and renders', async () => {
    expect(allowedClips.map((c) => c.format).sort()).toEqual([...SERVER_CONTAINERS].sort());
    for (const clip of allowedClips) {
      const info = await engine.probe(clip.path, SERVER_CONTAINERS);
      expect([clip.path, info.format]).toEqual([clip.path, clip.format]);
      const outcome = await runJob(
        { input: clip.path, density: '3x3', outDir: join(root, `allowed-${name}`) },
        { engine, audio: false, containers: 'restricted', baseName: clip.format.replace(/,/g, '_') },
      );
      expect([clip.path, outcome.files.length]).toEqual([clip.path, 1]);
      const sheet = readJpeg(outcome.files[0] as string);
      expect(canaryShare(sheet)).toBe(0);
      expect(shareNear(sheet, GREEN_RGB)).toBeGreaterThan(0.3);
    }
  });

  it('a playlist inside a Matroska attachment: opened as matroska, only its own picture shown', async () => {
    const info = await engine.probe(withPlaylist, SERVER_CONTAINERS);
    expect(info.format).toBe('matroska,webm');
    const outcome = await runJob(
      { input: withPlaylist, density: '3x3', outDir: join(root, `mkv-${name}`) },
      { engine, audio: false, containers: 'restricted' },
    );
    expect(outcome.duration).toBe(4);
    for (const file of outcome.files) {
      const sheet = readJpeg(file);
      expect(canaryShare(sheet)).toBe(0);
      expect(shareNear(sheet, GREEN_RGB)).toBeGreaterThan(0.3);
    }
  });

  it('later opens fix the demuxer the probe found: a render or audio read never detects again', async () => {
    const clip = await plainClip(5, { audio: true });
    const info = await engine.probe(clip, SERVER_CONTAINERS);
    expect(info.format).toBe('mov,mp4,m4a,3gp,3g2,mj2');
    const range = { startMs: 0, endMs: 5000 };
    const audio = await engine.audioPeaks(clip, range, undefined, info.format);
    expect(audio.present).toBe(true);
    // Another allowed demuxer, fixed: the file is not Matroska, so nothing decodes.
    const wrong = await engine.audioPeaks(clip, range, undefined, 'matroska,webm').then(
      (peaks) => (peaks.present ? 'measured' : 'absent'),
      (error: { code?: string }) => error.code,
    );
    expect(['absent', 'unreadable_video']).toContain(wrong);
    // The render: a probe that names another allowed demuxer makes the job fix that one for the
    // render, which then cannot read the file (a render that detected again would succeed).
    const lying: Engine = {
      ...engine,
      probe: async (path, allowed) => ({ ...(await engine.probe(path, allowed)), format: 'matroska,webm' }),
    };
    const outDir = join(root, `fixed-${name}`);
    const failed = await runJob(
      { input: clip, density: '3x3', outDir },
      { engine: lying, audio: false, containers: 'restricted' },
    ).then(
      () => 'rendered',
      (error: { code?: string }) => error.code,
    );
    expect(['unreadable_video', 'processing_failed']).toContain(failed);
    const honest = await runJob(
      { input: clip, density: '3x3', outDir },
      { engine, audio: false, containers: 'restricted' },
    );
    expect(honest.duration).toBe(5);
  });
});

describe.each(ENGINES)('local surfaces open whatever FFmpeg opens (%s engine)', (engineName) => {
  const env = (): Record<string, string> => {
    const out: Record<string, string> = {};
    for (const [k, v] of Object.entries(process.env)) if (v !== undefined) out[k] = v;
    return { ...out, VIDSHEET_ENGINE: engineName };
  };
  const playlist = () => nearCanary.find((i) => i.kind === 'HLS with a control byte') as { path: string };

  it('the CLI renders a local HLS playlist', async () => {
    const out = join(root, `cli-${engineName}`);
    const r = await runCli([playlist().path, '--density', '3x3', '--json', '--out', out], {
      engine: engineName,
    });
    expect(r.code, r.stderr).toBe(0);
    const report = JSON.parse(r.stdout) as { duration: number; files: string[] };
    expect(report.duration).toBe(CANARY_SECONDS);
    for (const share of sheetsShow(report.files)) expect(share).toBeGreaterThan(0.3);
  });

  it('MCP stdio renders a local HLS playlist', async () => {
    const transport = new StdioClientTransport({ command: process.execPath, args: [BIN, 'mcp'], env: env() });
    const client = new Client({ name: 'vidsheet-test', version: '0' });
    await client.connect(transport);
    try {
      const out = join(root, `mcp-${engineName}`);
      const result = (await client.callTool({
        name: 'vidsheet_video',
        arguments: { video_path: playlist().path, density: '3x3', out_dir: out },
      })) as { isError?: boolean; content: Array<{ text?: string }> };
      expect(result.isError, result.content[0]?.text).toBeFalsy();
      const report = JSON.parse(result.content[0]?.text ?? '{}') as { duration: number; files: string[] };
      expect(report.duration).toBe(CANARY_SECONDS);
      for (const share of sheetsShow(report.files)) expect(share).toBeGreaterThan(0.3);
    } finally {
      await client.close();
    }
  });
});
