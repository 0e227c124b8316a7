/**
 * The deploy/ folder, run without containers: its nginx.conf (Debian's nginx, on loopback) in front
 * of two built servers on one PostgreSQL database and one S3 bucket, each configured with the
 * environment deploy/compose.yaml gives them. Proves what the compose file relies on: the balancer
 * spreads jobs over both instances and any instance serves any sheet; the client's own address,
 * and only that, reaches the instances (VIDSHEET_TRUST_PROXY), so nobody escapes a per-address
 * limit by sending an X-Forwarded-For of their choosing.
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Agent, fetch as undiciFetch } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../helpers/net.js';
import { startPostgres, type TestPostgres } from '../helpers/postgres.js';
import { startS3, TEST_AWS_ENV, type TestS3 } from '../helpers/s3.js';
import { removeServerDirs, startServer, type TestServer } from '../helpers/server.js';

const DEPLOY = join(import.meta.dirname, '..', '..', 'deploy');
const SAMPLE = readFileSync(join(import.meta.dirname, '..', '..', 'fixtures', 'sample.mp4'));
const DESIGN_VARIABLES = [
  'PORT',
  'HOST',
  'VIDSHEET_BASE_URL',
  'VIDSHEET_DATA_DIR',
  'VIDSHEET_DATABASE_URL',
  'VIDSHEET_STORAGE_URL',
  'AWS_ACCESS_KEY_ID',
  'AWS_SECRET_ACCESS_KEY',
  'VIDSHEET_SMTP_URL',
  'VIDSHEET_MAIL_FROM',
  'VIDSHEET_STRIPE_SECRET_KEY',
  'VIDSHEET_STRIPE_WEBHOOK_SECRET',
  'VIDSHEET_STRIPE_API_URL',
  'VIDSHEET_ALLOWED_HOSTS',
  'VIDSHEET_ALLOWED_ORIGINS',
  'VIDSHEET_TRUST_PROXY',
  'VIDSHEET_FETCH_ALLOW',
  'VIDSHEET_MAX_UPLOAD_MB',
  'VIDSHEET_MAX_DURATION_S',
  'VIDSHEET_MAX_SHEETS',
  'VIDSHEET_QUEUE_LENGTH',
  'VIDSHEET_SHEET_TTL_S',
  'VIDSHEET_SWEEP_S',
  'VIDSHEET_ALLOWANCE_FLOOR',
  'VIDSHEET_ANON_DAILY',
  'VIDSHEET_ANON_CEILING',
  'VIDSHEET_MCP_FLOOD_PER_MIN',
];

/** The instances' environment in deploy/compose.yaml (the `x-vidsheet` block), as written. */
function composeEnvironment(): Record<string, string> {
  const text = readFileSync(join(DEPLOY, 'compose.yaml'), 'utf8');
  const block = /environment: &vidsheet-env\n((?: {4}\S[^\n]*\n)+)/.exec(text)?.[1] ?? '';
  const env: Record<string, string> = {};
  for (const line of block.split('\n').filter(Boolean)) {
    const m = /^ {4}([A-Z0-9_]+): "?([^"]*)"?$/.exec(line);
    if (m) env[m[1] as string] = m[2] as string;
  }
  return env;
}

const nginxBinary = ['/usr/sbin/nginx', 'nginx'].find((bin) => spawnSync(bin, ['-v']).status === 0);

describe('deploy/: nginx.conf in front of two instances', () => {
  let pg: TestPostgres;
  let s3: TestS3;
  let a: TestServer;
  let b: TestServer;
  let nginx: ChildProcess;
  let proxy: string;
  const dirs: string[] = [];

  beforeAll(async () => {
    if (!nginxBinary) throw new Error('nginx is not installed: run scripts/setup.sh (Debian: nginx-light)');
    [pg, s3] = await Promise.all([startPostgres(), startS3('vidsheet/sheets')]);
    const [portA, portB, portProxy] = await Promise.all([freePort(), freePort(), freePort()]);
    proxy = `http://127.0.0.1:${portProxy}`;
    const compose = composeEnvironment();
    // compose.yaml's own values where they do not name its container network.
    const env = {
      ...compose,
      ...TEST_AWS_ENV,
      HOST: '127.0.0.1',
      VIDSHEET_BASE_URL: proxy,
      VIDSHEET_DATABASE_URL: pg.url,
      VIDSHEET_STORAGE_URL: s3.url,
      VIDSHEET_ALLOWED_HOSTS: `127.0.0.1:${portProxy}`,
      VIDSHEET_ALLOWED_ORIGINS: proxy,
      VIDSHEET_MCP_FLOOD_PER_MIN: '1',
    };
    a = await startServer({ ...env, PORT: String(portA) });
    b = await startServer({ ...env, PORT: String(portB) });

    const dir = mkdtempSync(join(tmpdir(), 'vidsheet-nginx-'));
    dirs.push(dir);
    for (const temp of ['body', 'proxy', 'fastcgi', 'uwsgi', 'scgi']) mkdirSync(join(dir, temp));
    const site = readFileSync(join(DEPLOY, 'nginx.conf'), 'utf8')
      .replace('vidsheet-1:8080', `127.0.0.1:${portA}`)
      .replace('vidsheet-2:8080', `127.0.0.1:${portB}`)
      .replace('listen 8080;', `listen 127.0.0.1:${portProxy};`);
    writeFileSync(join(dir, 'site.conf'), site);
    writeFileSync(
      join(dir, 'nginx.conf'),
      [
        ...(process.getuid?.() === 0 ? ['user root;'] : []),
        'daemon off;',
        'worker_processes 1;',
        `pid ${dir}/nginx.pid;`,
        `error_log ${dir}/error.log;`,
        'events {}',
        'http {',
        '  access_log off;',
        ...['body', 'proxy', 'fastcgi', 'uwsgi', 'scgi'].map(
          (t) => `  ${t === 'body' ? 'client_body' : t}_temp_path ${dir}/${t};`,
        ),
        `  include ${dir}/site.conf;`,
        '}',
      ].join('\n'),
    );
    nginx = spawn(nginxBinary, ['-p', dir, '-e', join(dir, 'error.log'), '-c', join(dir, 'nginx.conf')], {
      stdio: 'ignore',
    });
    const deadline = Date.now() + 10_000;
    while ((await fetch(`${proxy}/healthz`).catch(() => null))?.status !== 200) {
      if (Date.now() > deadline)
        throw new Error(`nginx did not start:\n${readFileSync(join(dir, 'error.log'), 'utf8')}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  });

  afterAll(async () => {
    nginx?.kill('SIGQUIT');
    await a?.stop();
    await b?.stop();
    await Promise.all([pg?.stop(), s3?.stop()]);
    removeServerDirs();
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });

  it('compose.yaml configures the instances only with variables DESIGN §7 names', () => {
    const names = Object.keys(composeEnvironment());
    expect(names).toContain('VIDSHEET_TRUST_PROXY');
    expect(names.filter((n) => !DESIGN_VARIABLES.includes(n))).toEqual([]);
  });

  it('spreads jobs over both instances, and every sheet is served whichever instance answers', async () => {
    const key = (await a.admin('create-key', '--email', 'proxy@example.com')).stdout.trim();
    await a.admin('add-credits', '--email', 'proxy@example.com', '--credits', '20');
    const jobs: string[] = [];
    for (let i = 0; i < 4; i++) {
      const form = new FormData();
      form.append('video', new Blob([SAMPLE]), 'sample.mp4');
      const res = await fetch(`${proxy}/v1/vidsheet`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}` },
        body: form,
      });
      expect(res.status).toBe(200);
      const body = await res.json();
      expect(body.files[0]).toBe(`${proxy}/v1/sheets/${body.job_id}/video.sheet-1.jpg`);
      jobs.push(body.job_id);
    }
    const served = (server: TestServer) =>
      server.logs.filter((l) => (l.req as { url?: string } | undefined)?.url === '/v1/vidsheet').length;
    expect(served(a) + served(b)).toBe(4);
    expect(served(a)).toBeGreaterThan(0);
    expect(served(b)).toBeGreaterThan(0);
    for (const job of jobs) {
      const sheet = async (base: string) =>
        Buffer.from(await (await fetch(`${base}/v1/sheets/${job}/video.sheet-1.jpg`)).arrayBuffer());
      const [viaProxy, direct] = await Promise.all([sheet(proxy), sheet(a.url)]);
      expect(viaProxy.length).toBeGreaterThan(1000);
      expect(viaProxy.equals(direct)).toBe(true);
    }
  });

  it("the instances see the client's own address, and a forged X-Forwarded-For changes nothing", async () => {
    // undici's own fetch: it honours the dispatcher's local address (the client's source address).
    const mcp = (from: string, forged?: string) =>
      undiciFetch(`${proxy}/mcp`, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
          ...(forged ? { 'x-forwarded-for': forged } : {}),
        },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' }),
        dispatcher: new Agent({ localAddress: from }),
      });
    // One /mcp request per address and minute on each instance: 127.0.0.1 spends both instances'
    // allowance, each time claiming another address; the forgeries do not count as other clients.
    // The flood windows are whole wall-clock minutes: start the burst well inside one.
    const intoMinute = Date.now() % 60_000;
    if (intoMinute > 50_000) await new Promise((r) => setTimeout(r, 60_500 - intoMinute));
    const first = await mcp('127.0.0.1', '127.0.0.5');
    const second = await mcp('127.0.0.1', '127.0.0.6');
    const third = await mcp('127.0.0.1', '127.0.0.7');
    expect([first.status, second.status]).not.toContain(429);
    expect(third.status).toBe(429);
    // Another client (another loopback address) is its own client: its address crossed the proxy.
    const other = await mcp('127.0.0.2');
    expect(other.status).not.toBe(429);
    // The instances' request logs (their lines may still be on the way through the pipe).
    const addresses = () =>
      [...a.logs, ...b.logs]
        .map((l) => (l.req as { url?: string; remoteAddress?: string } | undefined) ?? {})
        .filter((req) => req.url === '/mcp')
        .map((req) => req.remoteAddress)
        .sort();
    for (let i = 0; i < 50 && addresses().length < 4; i++) await new Promise((r) => setTimeout(r, 100));
    expect(addresses()).toEqual(['127.0.0.1', '127.0.0.1', '127.0.0.1', '127.0.0.2']);
  });
});
