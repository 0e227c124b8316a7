/**
 * A kept video's zooms against the local surfaces on the same real files (DESIGN §9: "Windows follow
 * the local rules exactly"), on both engines: the built server (`POST /v1/videos/{id}/sheets`), the local
 * tool server through the MCP SDK's real client, and the CLI (`--json`). Same window, duration, frames,
 * sheets and labels; the same window messages (the hosted body's `message` equals the tool's error text
 * and, for the runtime rules, the CLI's stderr).
 */
import { copyFileSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ENGINES, runCli } from '../helpers/cli.js';
import { connectMcp } from '../helpers/mcp.js';
import { newAccount, removeServerDirs, startServer, type TestServer, videoForm } from '../helpers/server.js';

const CORPUS = join(
  process.env.VIDSHEET_CORPUS_DIR ?? join(process.env.HOME ?? '', '.cache', 'vidsheet', 'corpus'),
);
const FILES = ['forensics-movie-hello.mp4', 'blupi-play113.mkv'];

/** Windows as a zoom sends them; the CLI gets the same values as flags. */
const OK: Array<{ density: string; start?: number | string; end?: number | string }> = [
  { density: '4x4', start: 1, end: '0:04' },
  { density: '6x6', start: '0:02.5', end: 2.6 },
  { density: '3x3', start: 3, end: 600 },
];
const BAD: Array<{ density: string; start?: number | string; end?: number | string }> = [
  { density: '3x3', start: 'soon' },
  { density: '3x3', start: 4, end: 3 },
  { density: '3x3', start: 60 },
  { density: '6x6', start: 1, end: 1.05 },
];

afterAll(() => removeServerDirs());

describe.each(ENGINES)('engine %s: kept video vs local tool server vs CLI', (engine) => {
  let server: TestServer;
  let key: string;
  let client: Client;
  let work: string;
  beforeAll(async () => {
    work = mkdtempSync(join(tmpdir(), 'vs-sessions-local-'));
    server = await startServer({ VIDSHEET_ENGINE: engine });
    ({ key } = await newAccount(server, 1000));
    ({ client } = await connectMcp(engine));
  }, 120_000);
  afterAll(async () => {
    await client?.close();
    await server?.stop();
    rmSync(work, { recursive: true, force: true });
  });

  const tool = async (args: Record<string, unknown>) => {
    const result = await client.callTool({ name: 'vidsheet_video', arguments: args });
    const text = (result.content as Array<{ text: string }>)[0]?.text ?? '';
    return { isError: Boolean(result.isError), text };
  };
  const zoom = async (videoId: string, body: object) => {
    const res = await fetch(`${server.url}/v1/videos/${videoId}/sheets`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    return { status: res.status, body: await res.json() };
  };
  const cliArgs = (path: string, w: (typeof OK)[number], out: string) => [
    path,
    '--density',
    w.density,
    ...(w.start === undefined ? [] : ['--start', String(w.start)]),
    ...(w.end === undefined ? [] : ['--end', String(w.end)]),
    '--json',
    '--out',
    out,
  ];

  it.each(FILES)('%s: same windows, frames, labels and messages', async (name) => {
    const path = join(work, name);
    copyFileSync(join(CORPUS, name), path);
    const kept = await fetch(`${server.url}/v1/videos`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}` },
      body: videoForm({ bytes: readFileSync(path), filename: name }),
    });
    expect(kept.status).toBe(201);
    const { video_id: videoId, duration } = await kept.json();

    for (const w of OK) {
      const where = `${name} ${JSON.stringify(w)}`;
      const hosted = await zoom(videoId, w);
      expect(hosted.status, `${where}: ${JSON.stringify(hosted.body)}`).toBe(200);
      const out = mkdtempSync(join(work, 'out-'));
      const local = await tool({ video_path: path, out_dir: out, ...w });
      expect(local.isError, `${where}: ${local.text}`).toBe(false);
      const l = JSON.parse(local.text);
      const cli = await runCli(cliArgs(path, w, mkdtempSync(join(work, 'cli-'))), { engine });
      expect(cli.code, cli.stderr).toBe(0);
      const c = JSON.parse(cli.stdout);
      for (const report of [l, c]) {
        expect(hosted.body.window, where).toEqual(report.window);
        expect(hosted.body.duration, where).toBe(report.duration);
        expect(hosted.body.frames, where).toBe(report.frames);
        expect(hosted.body.sheets, where).toBe(report.sheets);
      }
      expect(duration).toBe(l.duration);
      expect(hosted.body.timecodes, where).toEqual(l.timecodes);
      expect(hosted.body.input).toBe(name);
    }

    for (const w of BAD) {
      const where = `${name} ${JSON.stringify(w)}`;
      const hosted = await zoom(videoId, w);
      const local = await tool({ video_path: path, ...w });
      expect(local.isError, where).toBe(true);
      expect(hosted, where).toEqual({ status: 422, body: { error: 'bad_request', message: local.text } });
      if (typeof w.start === 'string' && Number.isNaN(Number(w.start))) continue; // the CLI's usage wording differs
      const cli = await runCli(cliArgs(path, w, work), { engine });
      expect(cli.code, where).toBe(1);
      expect(cli.stderr.trim(), where).toBe(local.text);
    }
  });
});
