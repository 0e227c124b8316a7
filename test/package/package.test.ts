/**
 * The packages as a new user gets them (issue 14): `npm pack` the main package and the binding
 * package, install the tarballs into an empty project outside the repository, and run the installed
 * `vidsheet` on the bundled sample.
 *
 * Oracles: the tarballs' file lists (npm's own `pack --json`), `readelf` on the installed `.node`
 * (NEEDED entries and the glibc symbol versions it binds), and the repository's CLI on the same
 * sample (the installed package must produce the same report and the same sheet bytes).
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROOT } from '../global-setup.js';

const BINDING_DIR = join(ROOT, 'npm', 'linux-x64-gnu');
const BINDING_NAME = '@vidsheet/binding-linux-x64-gnu';
const NODE_FILE = 'vidsheet.linux-x64-gnu.node';
const SAMPLE = join(ROOT, 'fixtures', 'sample.mp4');
/** The C runtime: the only shared libraries a self-contained binding may need. */
const C_RUNTIME = /^(libc|libm|libpthread|libdl|librt|libgcc_s)\.so\.\d+$|^ld-linux-x86-64\.so\.2$/;
const INSTALL_SCRIPTS = ['preinstall', 'install', 'postinstall', 'prepare'];

interface PackResult {
  filename: string;
  files: Array<{ path: string }>;
}

const readJson = (file: string) => JSON.parse(readFileSync(file, 'utf8'));
const mainPkg = readJson(join(ROOT, 'package.json'));
const bindingPkg = readJson(join(BINDING_DIR, 'package.json'));

let work: string;
let mainTarball: PackResult;
let bindingTarball: PackResult;

function pack(dir: string): PackResult {
  const out = execFileSync('npm', ['pack', '--json', '--pack-destination', work], {
    cwd: dir,
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const [result] = JSON.parse(out) as PackResult[];
  if (!result) throw new Error(`npm pack printed nothing in ${dir}`);
  return result;
}

/**
 * npm install into `project`, the way scripts/setup.sh installs, but `--offline`: the packages come
 * from npm's cache, which setup's install filled, so the test talks to no registry (loopback only).
 */
function npmInstall(project: string, args: string[]): void {
  const nodedir = dirname(dirname(process.execPath));
  const result = spawnSync('npm', ['install', '--no-audit', '--no-fund', '--offline', ...args], {
    cwd: project,
    encoding: 'utf8',
    env: { ...process.env, npm_config_build_from_source: 'true', npm_config_nodedir: nodedir },
  });
  if (result.status !== 0) throw new Error(`npm install ${args.join(' ')} failed:\n${result.stderr}`);
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

function readelf(args: string[], file: string): string {
  return execFileSync('readelf', [...args, file], { encoding: 'utf8' });
}

const paths = (p: PackResult) => p.files.map((f) => f.path);
/** `./dist/index.js` -> `dist/index.js`, as npm lists tarball entries. */
const entry = (p: string) => p.replace(/^\.\//, '');

beforeAll(() => {
  work = mkdtempSync(join(tmpdir(), 'vs-package-'));
  mainTarball = pack(ROOT);
  bindingTarball = pack(BINDING_DIR);
});
afterAll(() => rmSync(work, { recursive: true, force: true }));

describe('the packages', () => {
  it('pin the binding to the main package version, with no install scripts in either', () => {
    expect(bindingPkg.version).toBe(mainPkg.version);
    expect(mainPkg.optionalDependencies).toEqual({ [BINDING_NAME]: mainPkg.version });
    expect(bindingPkg.name).toBe(BINDING_NAME);
    for (const pkg of [mainPkg, bindingPkg]) {
      for (const script of INSTALL_SCRIPTS)
        expect(pkg.scripts?.[script], `${pkg.name} ${script}`).toBeUndefined();
    }
  });

  it('declare the platform the binding was built for and the oldest glibc it binds to', () => {
    expect(bindingPkg).toMatchObject({ os: ['linux'], cpu: ['x64'], libc: ['glibc'] });
    const declared = /^>=(\d+)\.(\d+)$/.exec(bindingPkg.config?.glibc ?? '');
    expect(declared, 'config.glibc is ">=X.Y"').not.toBeNull();
    // Every GLIBC_x.y version the .node references: the newest is the oldest glibc it loads on.
    const versions = [
      ...readelf(['-V', '--wide'], join(BINDING_DIR, NODE_FILE)).matchAll(/GLIBC_(\d+)\.(\d+)/g),
    ];
    const newest = versions
      .map((m) => [Number(m[1]), Number(m[2])] as const)
      .sort((a, b) => b[0] - a[0] || b[1] - a[1])[0];
    expect(newest).toBeDefined();
    expect(`${newest?.[0]}.${newest?.[1]}`).toBe(`${declared?.[1]}.${declared?.[2]}`);
  });

  it('ship every file their package.json points at, and the FFmpeg licence and build line', () => {
    const mainFiles = paths(mainTarball);
    const targets = [
      mainPkg.main,
      mainPkg.types,
      mainPkg.exports['.'].types,
      mainPkg.exports['.'].default,
      ...Object.values(mainPkg.bin as Record<string, string>),
    ];
    for (const target of targets) expect(mainFiles).toContain(entry(target));
    expect(mainFiles).toEqual(
      expect.arrayContaining(['LICENSE', 'README.md', 'dist/cli/main.js', 'dist/server/main.js']),
    );
    expect(mainFiles.filter((f) => !/^(bin|dist)\/|^(LICENSE|README\.md|package\.json)$/.test(f))).toEqual(
      [],
    );

    const bindingFiles = paths(bindingTarball);
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

describe('installed into an empty project', () => {
  let project: string;
  /** The repository's own CLI on the sample, per engine: what the installed package must match. */
  const expected: Record<string, { report: Record<string, unknown>; sheets: Buffer[] }> = {};

  beforeAll(() => {
    project = join(work, 'project');
    mkdirSync(project);
    writeFileSync(join(project, 'package.json'), JSON.stringify({ name: 'user-project', private: true }));
    for (const engine of ['native', 'ffmpeg']) {
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
      expected[engine] = {
        report: { ...report, files: undefined },
        sheets: report.files.map((f) => readFileSync(f)),
      };
    }
  }, 300_000);

  /** Same report (but the sheet paths) and the same sheet bytes as the repository's CLI. */
  function expectSameAsRepo(stdout: string, engine: string): void {
    const report = JSON.parse(stdout) as { files: string[] };
    const want = expected[engine];
    expect({ ...report, files: undefined }).toEqual(want?.report);
    expect(report.files.map((f) => readFileSync(f))).toEqual(want?.sheets);
  }

  // The two cases share one install (its dependencies compile once): first without the optional
  // binding, then with it added.
  it('without the binding runs on the fallback engine and says why', () => {
    npmInstall(project, ['--omit=optional', join(work, mainTarball.filename)]);
    expect(existsSync(join(project, 'node_modules', BINDING_NAME))).toBe(false);
    const out = join(work, 'fallback-out');
    const run = runInstalled(project, out);
    expect(run.status, run.stderr).toBe(0);
    expect(run.stderr).toContain('native binding unavailable, using the ffmpeg fallback engine');
    expect(run.stderr).toContain(`${BINDING_NAME}: package not installed`);
    expect(run.stderr).toMatch(/engine: ffmpeg$/m);
    expectSameAsRepo(run.stdout, 'ffmpeg');
  }, 600_000);

  it('with the binding runs on the native engine, whose .node needs only the C runtime', () => {
    npmInstall(project, [join(work, bindingTarball.filename)]);
    const installed = join(project, 'node_modules', BINDING_NAME, NODE_FILE);
    const needed = [...readelf(['-d'], installed).matchAll(/\(NEEDED\)\s+Shared library: \[([^\]]+)\]/g)].map(
      (m) => m[1],
    );
    expect(needed.length).toBeGreaterThan(0);
    expect(needed.filter((lib) => !C_RUNTIME.test(lib ?? ''))).toEqual([]);

    const out = join(work, 'native-out');
    const run = runInstalled(project, out);
    expect(run.status, run.stderr).toBe(0);
    expect(run.stderr).toContain(`native binding: ${installed}`);
    expect(run.stderr).toMatch(/engine: native$/m);
    expectSameAsRepo(run.stdout, 'native');
  }, 600_000);
});
