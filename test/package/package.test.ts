/**
 * The packages as users get them (DESIGN §11, issues 14 and 23): `scripts/pack.mjs` packs
 * `vidsheet`, `vidsheet-server` and the binding; a registry on loopback (test/helpers/registry.ts)
 * serves them with every other package from npm's cache; each is installed by name into an empty
 * project on a clean npm cache, as `npm install vidsheet` would from the public registry.
 *
 * Oracles: the tarballs' own contents (file lists, and the imports their JavaScript makes), npm's
 * own record of the installed tree (node_modules/.package-lock.json: names, hasInstallScript),
 * `readelf` on the installed `.node` (NEEDED entries, glibc symbol versions), the repository's CLI
 * on the same sample (same report, same sheet bytes), the MCP SDK's own client, and for the hosted
 * service an index clip whose frames carry their own number (test/helpers/hosted-smoke.ts).
 *
 * Each install's package count, size on disk and time, and the cold start of `npx vidsheet mcp`,
 * are printed as `measure:` lines.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, lstatSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { builtinModules } from 'node:module';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROOT } from '../global-setup.js';
import { runProcess as run } from '../helpers/cli.js';
import { hostedSmokeJob } from '../helpers/hosted-smoke.js';
import { startRegistry, type TestRegistry, walk } from '../helpers/registry.js';
import { removeServerDirs, startServer } from '../helpers/server.js';

const BINDING_DIR = join(ROOT, 'npm', 'linux-x64-gnu');
const BINDING_NAME = '@vidsheet/binding-linux-x64-gnu';
const NODE_FILE = 'vidsheet.linux-x64-gnu.node';
const SAMPLE = join(ROOT, 'fixtures', 'sample.mp4');
/** The C runtime: the only shared libraries a self-contained binding may need. */
const C_RUNTIME = /^(libc|libm|libpthread|libdl|librt|libgcc_s)\.so\.\d+$|^ld-linux-x86-64\.so\.2$/;
/** Each package's prepack: it assembles the package directory from the built checkout. */
const PREPACK = 'node ../../scripts/pack.mjs --assemble';
/** The scripts npm runs when it installs a package from a registry (`prepare` it does not). */
const INSTALL_SCRIPTS = ['preinstall', 'install', 'postinstall'];
/**
 * What a local user must never pay for (issue 23): databases (kysely, better-sqlite3, pg and its
 * pg-* parts), the web server (fastify and its plugins), mail, payments, the AWS SDK (and Smithy,
 * its runtime).
 */
const SERVER_ONLY =
  /^(fastify|@fastify\/.*|kysely|better-sqlite3|pg|pg-.*|stripe|nodemailer|@aws-sdk\/.*|@smithy\/.*)$/;

const readJson = (file: string) => JSON.parse(readFileSync(file, 'utf8'));
const rootPkg = readJson(join(ROOT, 'package.json'));
const serverPkg = readJson(join(ROOT, 'packages', 'vidsheet-server', 'package.json'));
const bindingPkg = readJson(join(BINDING_DIR, 'package.json'));

interface Packed {
  name: string;
  version: string;
  file: string;
}

let work: string;
let registry: TestRegistry;
const tarball: Record<string, Packed> = {};
/** Each tarball unpacked (its `package/` directory), by package name. */
const unpacked: Record<string, string> = {};

const tarFiles = (name: string) =>
  execFileSync('tar', ['-tzf', tarball[name]?.file as string], { encoding: 'utf8' })
    .split('\n')
    .filter(Boolean)
    .map((f) => f.replace(/^package\//, ''));
/** `./dist/index.js` -> `dist/index.js`, as tar lists entries. */
const entry = (p: string) => p.replace(/^\.\//, '');

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), 'vs-package-'));
  const out = execFileSync(
    process.execPath,
    [join(ROOT, 'scripts', 'pack.mjs'), '--out', join(work, 'tarballs')],
    {
      encoding: 'utf8',
    },
  );
  for (const packed of JSON.parse(out) as Packed[]) {
    tarball[packed.name] = packed;
    const dir = join(work, 'unpacked', packed.name);
    mkdirSync(dir, { recursive: true });
    execFileSync('tar', ['-xzf', packed.file, '-C', dir]);
    unpacked[packed.name] = join(dir, 'package');
  }
  registry = await startRegistry(Object.values(tarball).map((p) => p.file));
}, 120_000);
afterAll(async () => {
  await registry?.close();
  removeServerDirs();
  rmSync(work, { recursive: true, force: true });
});

// ---------------------------------------------------------------------------------------------
// The tarballs

/** A JavaScript file without its comments (JSDoc examples such as `from 'vidsheet'` are not imports). */
const code = (file: string) =>
  readFileSync(file, 'utf8')
    .replace(/\/\*[\s\S]*?\*\//g, '')
    .replace(/^\s*\/\/.*$/gm, '');

/** The packages a package's JavaScript imports or requires by a literal name (builtins aside). */
function importedPackages(dir: string): Set<string> {
  const names = new Set<string>();
  for (const file of walk(dir)) {
    if (!file.endsWith('.js') || file.includes('/node_modules/')) continue;
    const text = code(file);
    const specifiers = text.matchAll(
      /(?:\bfrom\s*|\bimport\s*\(\s*|\bimport\s+|\brequire(?:\.resolve)?\s*\(\s*)['"]([^'"]+)['"]/g,
    );
    for (const [, spec = ''] of specifiers) {
      if (spec.startsWith('.') || spec.startsWith('#') || spec.startsWith('node:')) continue;
      const name = spec.startsWith('@')
        ? spec.split('/').slice(0, 2).join('/')
        : (spec.split('/')[0] as string);
      if (!builtinModules.includes(name)) names.add(name);
    }
  }
  return names;
}

describe('the tarballs', () => {
  it('share one version; vidsheet pins the binding, vidsheet-server pins vidsheet; no install scripts', () => {
    expect(bindingPkg.version).toBe(rootPkg.version);
    expect(serverPkg.version).toBe(rootPkg.version);
    expect(rootPkg.optionalDependencies).toEqual({ [BINDING_NAME]: rootPkg.version });
    expect(serverPkg.dependencies.vidsheet).toBe(rootPkg.version);
    expect(bindingPkg.name).toBe(BINDING_NAME);
    for (const name of ['vidsheet', 'vidsheet-server', BINDING_NAME]) {
      const pkg = readJson(join(unpacked[name] as string, 'package.json'));
      expect({ name: pkg.name, version: pkg.version }).toEqual({ name, version: rootPkg.version });
      // Only the prepack that assembles the package from a checkout (npm runs none on install).
      expect(pkg.scripts, `${name} publishes only its prepack`).toEqual({ prepack: PREPACK });
      expect(existsSync(join(unpacked[name] as string, 'binding.gyp')), `${name} binding.gyp`).toBe(false);
    }
  });

  it('vidsheet-server pins every dependency exactly as the root package.json does (one source of versions)', () => {
    const rootPins = { ...rootPkg.devDependencies, ...rootPkg.dependencies };
    for (const [name, pin] of Object.entries(serverPkg.dependencies as Record<string, string>)) {
      expect(pin, name).toBe(name === 'vidsheet' ? rootPkg.version : rootPins[name]);
    }
  });

  it('declare exactly the packages their code imports: vidsheet the light set, the server the rest', () => {
    const vidsheet = unpacked.vidsheet as string;
    const server = unpacked['vidsheet-server'] as string;
    const published = readJson(join(vidsheet, 'package.json'));
    expect([...importedPackages(vidsheet)].sort()).toEqual(Object.keys(published.dependencies).sort());
    expect(published.optionalDependencies).toEqual({ [BINDING_NAME]: rootPkg.version });
    expect(Object.keys(published.dependencies).filter((n) => SERVER_ONLY.test(n))).toEqual([]);
    expect([...importedPackages(server), 'vidsheet'].sort()).toEqual(
      Object.keys(serverPkg.dependencies).sort(),
    );
  });

  it("vidsheet-server reaches vidsheet's code only through #vidsheet/*, and each such file is in vidsheet", () => {
    const server = unpacked['vidsheet-server'] as string;
    const vidsheetFiles = new Set(tarFiles('vidsheet'));
    const targets = new Set<string>();
    for (const file of walk(join(server, 'dist'))) {
      for (const [, spec = ''] of code(file).matchAll(/(?:\bfrom\s*|\bimport\s*\(\s*)['"]([^'"]+)['"]/g)) {
        if (spec.startsWith('#vidsheet/')) targets.add(spec.slice('#vidsheet/'.length));
        else if (spec.startsWith('.'))
          expect(existsSync(join(dirname(file), spec)), `${file}: ${spec}`).toBe(true);
      }
    }
    expect(targets.size).toBeGreaterThan(0);
    for (const target of targets) expect(vidsheetFiles, target).toContain(`dist/${target}`);
    expect(serverPkg.imports).toEqual({ '#vidsheet/*': 'vidsheet/internal/*' });
    expect(readJson(join(unpacked.vidsheet as string, 'package.json')).exports['./internal/*']).toBe(
      './dist/*',
    );
  });

  it('declare the platform the binding was built for and the oldest glibc it binds to', () => {
    expect(bindingPkg).toMatchObject({ os: ['linux'], cpu: ['x64'], libc: ['glibc'] });
    const declared = /^>=(\d+)\.(\d+)$/.exec(bindingPkg.config?.glibc ?? '');
    expect(declared, 'config.glibc is ">=X.Y"').not.toBeNull();
    // Every GLIBC_x.y version the .node references: the newest is the oldest glibc it loads on.
    const versions = [
      ...execFileSync('readelf', ['-V', '--wide', join(BINDING_DIR, NODE_FILE)], {
        encoding: 'utf8',
      }).matchAll(/GLIBC_(\d+)\.(\d+)/g),
    ];
    const newest = versions
      .map((m) => [Number(m[1]), Number(m[2])] as const)
      .sort((a, b) => b[0] - a[0] || b[1] - a[1])[0];
    expect(newest).toBeDefined();
    expect(`${newest?.[0]}.${newest?.[1]}`).toBe(`${declared?.[1]}.${declared?.[2]}`);
  });

  it('ship every file their package.json points at, the server only in vidsheet-server, and the FFmpeg licence', () => {
    const published = readJson(join(unpacked.vidsheet as string, 'package.json'));
    const mainFiles = tarFiles('vidsheet');
    expect(published.bin).toEqual({ vidsheet: 'bin/vidsheet.js' });
    const targets = [
      published.main,
      published.types,
      published.exports['.'].types,
      published.exports['.'].default,
      ...Object.values(published.bin as Record<string, string>),
    ];
    for (const target of targets) expect(mainFiles).toContain(entry(target));
    expect(mainFiles).toEqual(
      expect.arrayContaining(['LICENSE', 'README.md', 'dist/cli/main.js', 'dist/mcp/stdio.js']),
    );
    expect(
      mainFiles.filter((f) => !/^dist\/|^(bin\/vidsheet\.js|LICENSE|README\.md|package\.json)$/.test(f)),
    ).toEqual([]);
    expect(mainFiles.filter((f) => f.startsWith('dist/server/'))).toEqual([]);

    const serverFiles = tarFiles('vidsheet-server');
    expect(serverPkg.bin).toEqual({ 'vidsheet-server': 'bin/vidsheet-server.js' });
    expect(serverFiles).toEqual(
      expect.arrayContaining(['bin/vidsheet-server.js', 'dist/server/main.js', 'LICENSE', 'README.md']),
    );
    expect(
      serverFiles.filter(
        (f) =>
          !/^dist\/server\/.*\.js$|^(bin\/vidsheet-server\.js|LICENSE|README\.md|package\.json)$/.test(f),
      ),
    ).toEqual([]);

    const bindingFiles = tarFiles(BINDING_NAME);
    expect(bindingFiles).toEqual(
      expect.arrayContaining([
        NODE_FILE,
        entry(bindingPkg.types),
        'LICENSE',
        'THIRD-PARTY-LICENSES/ffmpeg-COPYING.LGPLv2.1',
        'THIRD-PARTY-LICENSES/dav1d-COPYING',
        'THIRD-PARTY-LICENSES/zlib-LICENSE',
        'FFMPEG-BUILD-INFO.txt',
      ]),
    );
    const info = readFileSync(join(BINDING_DIR, 'FFMPEG-BUILD-INFO.txt'), 'utf8');
    expect(info).toMatch(/^ffmpeg: \d+\.\d+\.\d+\S* \(Debian source package/m);
    expect(info).toMatch(/^ffmpeg configure: \.\/configure .*--disable-gpl --disable-nonfree/m);
  });
});

/** A tarball's files and their sha256, as `path -> hash`. */
function tarballContents(file: string): Record<string, string> {
  const dir = mkdtempSync(join(work, 'contents-'));
  execFileSync('tar', ['-xzf', file, '-C', dir]);
  const contents: Record<string, string> = {};
  for (const path of walk(dir)) {
    contents[path.slice(dir.length + 1)] = createHash('sha256').update(readFileSync(path)).digest('hex');
  }
  return contents;
}

describe('packing the conventional way', () => {
  const PACKAGE_DIRS: Record<string, string> = {
    vidsheet: join(ROOT, 'packages', 'vidsheet'),
    'vidsheet-server': join(ROOT, 'packages', 'vidsheet-server'),
    [BINDING_NAME]: BINDING_DIR,
  };

  it.each(Object.keys(PACKAGE_DIRS))(
    '`npm pack` in the %s package directory gives exactly what `npm run pack:all` gives',
    async (name) => {
      const dir = PACKAGE_DIRS[name] as string;
      // As in a fresh checkout: nothing assembled yet, so the prepack must bring every file.
      for (const built of ['bin', 'dist']) rmSync(join(dir, built), { recursive: true, force: true });
      const out = join(work, `conventional-${name.replace('/', '-')}`);
      mkdirSync(out);
      // npm talks to the loopback registry only, as everywhere in these tests.
      const env = registry.env(join(work, 'conventional-npm-cache'));
      const packed = await run('npm', ['pack', '--pack-destination', out], { cwd: dir, env });
      expect(packed.code, packed.stderr).toBe(0);
      const file = join(out, basename(tarball[name]?.file as string));
      expect(tarballContents(file)).toEqual(tarballContents(tarball[name]?.file as string));
      // `npm publish` asks the registry whether the version is out already: one that has nothing.
      const empty = createServer((_req, res) => res.writeHead(404).end());
      await new Promise<void>((resolve) => empty.listen(0, '127.0.0.1', resolve));
      const { port } = empty.address() as AddressInfo;
      const dryRun = await run('npm', ['publish', '--dry-run', '--json'], {
        cwd: dir,
        env: { ...env, npm_config_registry: `http://127.0.0.1:${port}/` },
      }).finally(() => empty.close());
      expect(dryRun.code, dryRun.stderr).toBe(0);
      const published = JSON.parse(dryRun.stdout.slice(dryRun.stdout.indexOf('{')))[name];
      const listed = (published.files as Array<{ path: string }>).map((f) => f.path).sort();
      expect(listed).toEqual(
        Object.keys(tarballContents(file))
          .map((p) => p.replace(/^package\//, ''))
          .sort(),
      );
    },
    120_000,
  );

  it('the repository root is private and refuses to be packed, naming the commands that pack', async () => {
    expect(rootPkg.private).toBe(true);
    const packed = await run('npm', ['pack', '--dry-run'], {
      cwd: ROOT,
      env: registry.env(join(work, 'conventional-npm-cache')),
    });
    expect(packed.code).not.toBe(0);
    expect(packed.stderr).toContain(
      'pack: the repository root is not a package: run npm run pack:all, or npm pack in packages/vidsheet, packages/vidsheet-server, npm/linux-x64-gnu',
    );
  });
});

// ---------------------------------------------------------------------------------------------
// Installs

interface Install {
  project: string;
  /** npm's record of what it installed: `node_modules/<path>` -> entry. */
  tree: Record<string, { name?: string; hasInstallScript?: boolean; optional?: boolean }>;
  stderr: string;
}

/** The installed package names (an entry's path ends with its name unless it is an alias). */
const treeNames = (install: Install) =>
  new Set(Object.entries(install.tree).map(([path, e]) => e.name ?? path.replace(/^.*node_modules\//, '')));

/**
 * `npm install <args>` into a new empty project on a clean npm cache (or `cache`), from the
 * loopback registry; prints the package count, size on disk and time.
 */
async function npmInstall(
  label: string,
  args: string[],
  options: { cache?: string; env?: NodeJS.ProcessEnv } = {},
): Promise<Install> {
  const project = join(work, label);
  mkdirSync(project);
  writeFileSync(join(project, 'package.json'), JSON.stringify({ name: 'user-project', private: true }));
  const cache = options.cache ?? join(work, `${label}-npm-cache`);
  const started = performance.now();
  const result = await run('npm', ['install', ...args], {
    cwd: project,
    env: { ...registry.env(cache), ...options.env },
  });
  const seconds = (performance.now() - started) / 1000;
  if (result.code !== 0) {
    throw new Error(
      `npm install ${args.join(' ')} failed (registry misses: ${registry.misses}):\n${result.stderr}`,
    );
  }
  const tree = readJson(join(project, 'node_modules', '.package-lock.json')).packages as Install['tree'];
  let bytes = 0;
  for (const file of walk(join(project, 'node_modules'))) bytes += lstatSync(file).size;
  console.log(
    `measure: npm install ${args.join(' ')}: ${Object.keys(tree).length} packages, ` +
      `${(bytes / 1e6).toFixed(1)} MB on disk, ${seconds.toFixed(1)} s${options.cache ? '' : ' (clean npm cache)'}`,
  );
  return { project, tree, stderr: result.stderr };
}

/** The repository's own CLI on the sample, per engine: what an installed package must match. */
function repoRun(engine: 'native' | 'ffmpeg') {
  const out = join(work, `repo-${engine}`);
  const run = spawnSync(
    process.execPath,
    [join(ROOT, 'bin', 'vidsheet.js'), SAMPLE, '--out', out, '--json'],
    {
      encoding: 'utf8',
      env: { ...process.env, VIDSHEET_ENGINE: engine },
    },
  );
  if (run.status !== 0) throw new Error(`repository CLI (${engine}) failed: ${run.stderr}`);
  const report = JSON.parse(run.stdout) as { files: string[] };
  return { report: { ...report, files: undefined }, sheets: report.files.map((f) => readFileSync(f)) };
}

/** The installed CLI, the way a user runs it, with the engine-choice log on. */
function runInstalled(project: string, out: string) {
  const env: NodeJS.ProcessEnv = { ...process.env, NODE_DEBUG: 'vidsheet' };
  delete env.VIDSHEET_ENGINE;
  return spawnSync(join(project, 'node_modules', '.bin', 'vidsheet'), [SAMPLE, '--out', out, '--json'], {
    cwd: project,
    encoding: 'utf8',
    env,
    timeout: 120_000,
  });
}

/** Same report (but the sheet paths) and the same sheet bytes as the repository's CLI. */
function expectSameAsRepo(stdout: string, want: ReturnType<typeof repoRun>): void {
  const report = JSON.parse(stdout) as { files: string[] };
  expect({ ...report, files: undefined }).toEqual(want.report);
  expect(report.files.map((f) => readFileSync(f))).toEqual(want.sheets);
}

/** Connects the MCP SDK's client to `command args` over stdio; resolves once `initialize` is answered. */
async function mcpConnect(command: string, args: string[], cwd: string, env: NodeJS.ProcessEnv) {
  const transport = new StdioClientTransport({
    command,
    args,
    cwd,
    env: Object.fromEntries(Object.entries(env).filter((e): e is [string, string] => e[1] !== undefined)),
    stderr: 'pipe',
  });
  let stderr = '';
  transport.stderr?.on('data', (d) => (stderr += d));
  const client = new Client({ name: 'vidsheet-package-test', version: '0' });
  const started = performance.now();
  try {
    await client.connect(transport);
  } catch (error) {
    throw new Error(`${command} ${args.join(' ')}: ${error}\n${stderr}`);
  }
  return { client, seconds: (performance.now() - started) / 1000 };
}

describe('vidsheet, installed by name into an empty project', () => {
  let install: Install;

  beforeAll(async () => {
    install = await npmInstall('vidsheet', ['vidsheet']);
  }, 300_000);

  it('brings the binding and no database, web-server, mail, payment or cloud package', () => {
    const names = treeNames(install);
    expect(names).toContain(BINDING_NAME);
    for (const name of Object.keys(rootPkg.dependencies)) expect(names).toContain(name);
    expect([...names].filter((n) => SERVER_ONLY.test(n))).toEqual([]);
    // The walk agrees with npm's record: not one server-only package on disk either.
    const onDisk = [...walk(join(install.project, 'node_modules'))]
      .filter((f) => f.endsWith('/package.json'))
      .map((f) => readJson(f).name as string | undefined)
      .filter((n): n is string => n !== undefined && SERVER_ONLY.test(n));
    expect(onDisk).toEqual([]);
  });

  it('runs no install script anywhere in its tree, and every package in it accepts this Node', () => {
    expect(Object.entries(install.tree).filter(([, e]) => e.hasInstallScript)).toEqual([]);
    for (const path of Object.keys(install.tree).filter(Boolean)) {
      const pkg = readJson(join(install.project, path, 'package.json'));
      for (const script of INSTALL_SCRIPTS)
        expect(pkg.scripts?.[script], `${path} ${script}`).toBeUndefined();
      expect(existsSync(join(install.project, path, 'binding.gyp')), `${path}/binding.gyp`).toBe(false);
    }
    expect(install.stderr).not.toContain('EBADENGINE');
  });

  it('`vidsheet clip.mp4` runs on the native engine, whose .node needs only the C runtime', () => {
    const installed = join(install.project, 'node_modules', BINDING_NAME, NODE_FILE);
    const needed = [
      ...execFileSync('readelf', ['-d', installed], { encoding: 'utf8' }).matchAll(
        /\(NEEDED\)\s+Shared library: \[([^\]]+)\]/g,
      ),
    ].map((m) => m[1]);
    expect(needed.length).toBeGreaterThan(0);
    expect(needed.filter((lib) => !C_RUNTIME.test(lib ?? ''))).toEqual([]);

    const run = runInstalled(install.project, join(work, 'native-out'));
    expect(run.status, run.stderr).toBe(0);
    expect(run.stderr).toContain(`native binding: ${installed}`);
    expect(run.stderr).toMatch(/engine: native$/m);
    expectSameAsRepo(run.stdout, repoRun('native'));
  });

  it('`npx vidsheet mcp` answers initialize through the MCP SDK client, with the vidsheet tool', async () => {
    const { client, seconds } = await mcpConnect('npx', ['vidsheet', 'mcp'], install.project, {
      ...registry.env(join(work, 'vidsheet-npm-cache')),
      npm_config_offline: 'true',
    });
    try {
      expect(client.getServerVersion()).toMatchObject({ name: 'vidsheet', version: rootPkg.version });
      const { tools } = await client.listTools();
      expect(tools.map((t) => t.name)).toEqual(['vidsheet_video']); // spec: "exactly one tool, vidsheet_video"
      console.log(`measure: npx vidsheet mcp in the project: initialize answered in ${seconds.toFixed(2)} s`);
    } finally {
      await client.close();
    }
  });

  it('cold start: `npx -y vidsheet mcp` on a clean npm cache fetches it and answers initialize', async () => {
    const dir = join(work, 'npx-cold');
    mkdirSync(dir);
    const { client, seconds } = await mcpConnect(
      'npx',
      ['-y', 'vidsheet', 'mcp'],
      dir,
      registry.env(join(dir, 'cache')),
    );
    try {
      expect(client.getServerVersion()).toMatchObject({ name: 'vidsheet', version: rootPkg.version });
      console.log(
        `measure: npx -y vidsheet mcp, clean npm cache: initialize answered in ${seconds.toFixed(2)} s`,
      );
    } finally {
      await client.close();
    }
  });

  it('with --omit=optional runs on the fallback engine and says why', async () => {
    const bare = await npmInstall('vidsheet-no-binding', ['--omit=optional', 'vidsheet'], {
      cache: join(work, 'vidsheet-npm-cache'),
    });
    expect(existsSync(join(bare.project, 'node_modules', BINDING_NAME))).toBe(false);
    const run = runInstalled(bare.project, join(work, 'fallback-out'));
    expect(run.status, run.stderr).toBe(0);
    expect(run.stderr).toContain('native binding unavailable, using the ffmpeg fallback engine');
    expect(run.stderr).toContain(`${BINDING_NAME}: package not installed`);
    expect(run.stderr).toMatch(/engine: ffmpeg$/m);
    expectSameAsRepo(run.stdout, repoRun('ffmpeg'));
  }, 300_000);
});

describe('vidsheet-server, installed by name into an empty project', () => {
  let install: Install;

  beforeAll(async () => {
    // better-sqlite3 compiles from its bundled SQLite against this Node's own headers, as
    // scripts/setup.sh does: no prebuilt binary is downloaded.
    install = await npmInstall('vidsheet-server', ['vidsheet-server'], {
      env: { npm_config_build_from_source: 'true', npm_config_nodedir: dirname(dirname(process.execPath)) },
    });
  }, 600_000);

  it('brings vidsheet at the same version, the binding, and its own dependencies', () => {
    const names = treeNames(install);
    for (const name of Object.keys(serverPkg.dependencies)) expect(names).toContain(name);
    expect(names).toContain(BINDING_NAME);
    expect(install.tree['node_modules/vidsheet']).toMatchObject({ version: rootPkg.version });
  });

  it('runs the hosted service from the install: a real upload, the sheets read back, the balance debited', async () => {
    const installedBinding = join(install.project, 'node_modules', BINDING_NAME, NODE_FILE);
    const server = await startServer(
      { NODE_DEBUG: 'vidsheet' },
      { bin: join(install.project, 'node_modules', '.bin', 'vidsheet-server') },
    );
    try {
      await hostedSmokeJob(server);
      const ready = await server.waitForLog((l) => l.msg === 'job worker ready');
      expect(ready.engine).toBe('native');
      expect(server.output()).toContain(`native binding: ${installedBinding}`);
      expect(server.output()).toMatch(/engine: native$/m);
    } finally {
      expect(await server.stop()).toBe(0);
    }
  }, 300_000);
});
