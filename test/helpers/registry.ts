/**
 * A package registry on loopback, so that packaging tests install the way a user does
 * (`npm install vidsheet`, `npx vidsheet mcp`, on a clean npm cache) while talking to this machine
 * only. It serves:
 *   - the tarballs it is given (vidsheet, vidsheet-server, the binding), as if published;
 *   - every package version whose tarball is in npm's own cache, which scripts/setup.sh's install
 *     filled: the packument is made from those tarballs' package.json files, as a registry makes it
 *     from what was published.
 * Anything else is a 404, so a dependency that setup never installed fails the install loudly
 * instead of reaching the internet.
 */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { basename, join } from 'node:path';
import { gunzipSync } from 'node:zlib';

/** The public registry whose tarballs npm cached (npm rewrites this host to the configured one). */
const UPSTREAM = 'https://registry.npmjs.org/';

export interface TestRegistry {
  /** `http://127.0.0.1:<port>/` */
  url: string;
  /** Environment for an npm command: this registry, the given cache, no audit, fund or notifier. */
  env(cache: string): NodeJS.ProcessEnv;
  /** Paths of every request answered 404 (a missing dependency shows here). */
  misses: string[];
  close(): Promise<void>;
}

interface Tarball {
  /** Where npm fetched it from (its packument's dist.tarball). */
  url: string;
  integrity: string;
  read(): Buffer;
}

/** npm's cache (cacache): every cached registry tarball, by package name. */
function cachedTarballs(): Map<string, Tarball[]> {
  const root = join(execFileSync('npm', ['config', 'get', 'cache'], { encoding: 'utf8' }).trim(), '_cacache');
  const byKey = new Map<string, string>();
  const index = join(root, 'index-v5');
  for (const bucket of existsSync(index) ? walk(index) : []) {
    for (const line of readFileSync(bucket, 'utf8').split('\n')) {
      try {
        const entry = JSON.parse(line.slice(line.indexOf('\t') + 1)) as {
          key: string;
          integrity: string | null;
        };
        // The newest entry for a key wins; a null integrity is a deletion.
        if (entry.integrity) byKey.set(entry.key, entry.integrity);
        else byKey.delete(entry.key);
      } catch {
        // An empty or torn line (an interrupted write): cacache skips these too.
      }
    }
  }
  const tarballs = new Map<string, Tarball[]>();
  const prefix = `make-fetch-happen:request-cache:${UPSTREAM}`;
  for (const [key, integrity] of byKey) {
    const match = key.startsWith(prefix)
      ? /^((?:@[^/]+\/)?[^/@][^/]*)\/-\/[^/]+\.tgz$/.exec(key.slice(prefix.length))
      : null;
    const sri = /^(sha\d+)-(\S+)$/.exec(integrity.split(' ')[0] ?? '');
    if (!match?.[1] || !sri?.[1] || !sri[2]) continue;
    const hex = Buffer.from(sri[2], 'base64').toString('hex');
    const file = join(root, 'content-v2', sri[1], hex.slice(0, 2), hex.slice(2, 4), hex.slice(4));
    if (!existsSync(file)) continue;
    const list = tarballs.get(match[1]) ?? [];
    list.push({
      url: key.slice('make-fetch-happen:request-cache:'.length),
      integrity,
      read: () => readFileSync(file),
    });
    tarballs.set(match[1], list);
  }
  return tarballs;
}

/** The package.json inside an npm tarball (the first `<top>/package.json` entry). */
function tarballManifest(tgz: Buffer): Record<string, unknown> {
  const tar = gunzipSync(tgz);
  const text = (start: number, length: number) => {
    const field = tar.subarray(start, start + length);
    const end = field.indexOf(0);
    return field.subarray(0, end < 0 ? length : end).toString('utf8');
  };
  for (let offset = 0; offset + 512 <= tar.length; ) {
    const name = text(offset, 100);
    if (!name) break;
    const prefix = text(offset + 345, 155);
    const size = Number.parseInt(text(offset + 124, 12).trim() || '0', 8);
    const path = prefix ? `${prefix}/${name}` : name;
    if (/^[^/]+\/package\.json$/.test(path)) {
      return JSON.parse(tar.subarray(offset + 512, offset + 512 + size).toString('utf8'));
    }
    offset += 512 + Math.ceil(size / 512) * 512;
  }
  throw new Error('no package.json in the tarball');
}

/** 1.2.3 before 1.10.0; a prerelease before its release. */
function compareVersions(a: string, b: string): number {
  const parse = (v: string) => {
    const [core = '', pre] = v.split(/-(.*)/s);
    return { nums: core.split('.').map(Number), pre };
  };
  const x = parse(a);
  const y = parse(b);
  for (let i = 0; i < 3; i++) {
    const d = (x.nums[i] ?? 0) - (y.nums[i] ?? 0);
    if (d !== 0) return d;
  }
  if (x.pre === y.pre) return 0;
  if (x.pre === undefined) return 1;
  if (y.pre === undefined) return -1;
  return x.pre < y.pre ? -1 : 1;
}

/** A packument, as the registry at `base` serves it, for these tarballs of one package. */
function packument(name: string, tarballs: Tarball[], base: string) {
  const versions: Record<string, unknown> = {};
  for (const tarball of tarballs) {
    const manifest = tarballManifest(tarball.read());
    const version = String(manifest.version);
    versions[version] = {
      ...manifest,
      _id: `${name}@${version}`,
      dist: { tarball: tarball.url.replace(UPSTREAM, base), integrity: tarball.integrity },
    };
  }
  const all = Object.keys(versions).sort(compareVersions);
  const releases = all.filter((v) => !v.includes('-'));
  return { name, 'dist-tags': { latest: (releases.at(-1) ?? all.at(-1)) as string }, versions };
}

export async function startRegistry(publish: string[]): Promise<TestRegistry> {
  const tarballs = cachedTarballs();
  const local = new Map<string, string>();
  const packuments = new Map<string, ReturnType<typeof packument>>();
  const misses: string[] = [];

  let url = '';
  const server: Server = createServer((req, res) => {
    const path = decodeURIComponent((req.url ?? '/').split('?')[0] as string).slice(1);
    try {
      const [, name] = /^((?:@[^/]+\/)?[^/]+)$/.exec(path) ?? [];
      const versions = name ? tarballs.get(name) : undefined;
      if (name && versions) {
        if (!packuments.has(name)) packuments.set(name, packument(name, versions, url));
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify(packuments.get(name)));
        return;
      }
      const file = local.get(path);
      const cached = /^((?:@[^/]+\/)?[^/]+)\/-\//.exec(path);
      const tarball = file
        ? readFileSync(file)
        : tarballs
            .get(cached?.[1] ?? '')
            ?.find((t) => t.url === `${UPSTREAM}${path}`)
            ?.read();
      if (tarball) {
        res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': tarball.length });
        res.end(tarball);
        return;
      }
    } catch (error) {
      res.writeHead(500, { 'content-type': 'text/plain' });
      res.end(String(error));
      return;
    }
    misses.push(path);
    res.writeHead(404, { 'content-type': 'application/json' });
    res.end('{"error":"not found"}');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;

  // Published here: tarball URLs on this registry, and only the given versions of those names.
  for (const file of publish) {
    const bytes = readFileSync(file);
    const name = String(tarballManifest(bytes).name);
    const path = `${name}/-/${basename(file)}`;
    local.set(path, file);
    tarballs.set(name, [
      {
        url: `${url}${path}`,
        integrity: `sha512-${createHash('sha512').update(bytes).digest('base64')}`,
        read: () => readFileSync(file),
      },
    ]);
  }

  return {
    url,
    misses,
    env: (npmCache) => ({
      ...process.env,
      npm_config_registry: url,
      npm_config_cache: npmCache,
      npm_config_audit: 'false',
      npm_config_fund: 'false',
      npm_config_update_notifier: 'false',
      npm_config_offline: 'false',
      npm_config_prefer_offline: 'false',
    }),
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** Every file under `dir`, recursively. */
export function* walk(dir: string): Generator<string> {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) yield* walk(path);
    else yield path;
  }
}
