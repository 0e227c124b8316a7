#!/usr/bin/env node
/**
 * Packs the three npm packages from a built checkout (`npm run build`) into tarballs, as they are
 * published (DESIGN §11):
 *
 *   vidsheet                        the CLI, MCP stdio server and library: the root package.json
 *                                   as a user gets it (no `vidsheet-server` bin, no dev fields)
 *   vidsheet-server                 packages/vidsheet-server/package.json, with bin/vidsheet-server.js
 *                                   and dist/server/; it reaches the rest of vidsheet through
 *                                   `#vidsheet/*`, which its manifest maps to `vidsheet/internal/*`
 *   @vidsheet/binding-linux-x64-gnu npm/linux-x64-gnu/ as it is
 *
 *   node scripts/pack.mjs [--out DIR]    tarballs into DIR (default: the current directory);
 *                                        prints [{ "name", "version", "file" }] as JSON
 *
 * The root package.json keeps the `vidsheet-server` bin and the server's dependencies (as
 * devDependencies) so that a checkout runs the service; that is why the two packages are packed
 * from staged copies. Every version and dependency pin comes from the root package.json: packing
 * stops when the other manifests disagree with it.
 */
import { execFileSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const SERVER_DIR = join(ROOT, 'packages', 'vidsheet-server');
const BINDING_DIR = join(ROOT, 'npm', 'linux-x64-gnu');

const readJson = (file) => JSON.parse(readFileSync(file, 'utf8'));

/** The root manifest as the published `vidsheet`: what only the checkout needs is left out. */
function vidsheetManifest(root) {
  const { scripts, devDependencies, napi, imports, ...manifest } = root;
  const { 'vidsheet-server': _server, ...bin } = root.bin;
  return { ...manifest, bin };
}

/**
 * Where the server and binding manifests disagree with the root package.json (the one place
 * versions and pins are written): one sentence per problem.
 */
function manifestProblems(root, server, binding) {
  const problems = [];
  const pins = { ...root.devDependencies, ...root.dependencies };
  for (const pkg of [server, binding]) {
    if (pkg.version !== root.version) problems.push(`${pkg.name} is ${pkg.version}, not ${root.version}`);
  }
  const pinned = root.optionalDependencies?.[binding.name];
  if (pinned !== root.version) problems.push(`vidsheet names ${binding.name}@${pinned}, not ${root.version}`);
  for (const [name, pin] of Object.entries(server.dependencies ?? {})) {
    const want = name === 'vidsheet' ? root.version : pins[name];
    if (pin !== want) problems.push(`vidsheet-server depends on ${name}@${pin}, the root package.json on ${want}`);
  }
  return problems;
}

function* files(dir) {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) yield* files(path);
    else yield path;
  }
}

/**
 * Relative imports in dist/server that leave dist/server: in the vidsheet-server package they would
 * point at files it does not have (the rest of vidsheet comes from the `vidsheet` package).
 */
function escapingImports(serverDist) {
  const found = [];
  for (const file of files(serverDist)) {
    if (!file.endsWith('.js')) continue;
    const text = readFileSync(file, 'utf8');
    for (const m of text.matchAll(/(?:\bfrom\s*|\bimport\s*\(\s*|\bimport\s+)['"](\.{1,2}\/[^'"]+)['"]/g)) {
      const target = resolve(dirname(file), m[1]);
      if (!target.startsWith(serverDist + sep)) found.push(`${relative(ROOT, file)} imports ${m[1]}`);
    }
  }
  return found;
}

function npmPack(dir, out) {
  const json = execFileSync('npm', ['pack', '--json', '--pack-destination', out], {
    cwd: dir,
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const [result] = JSON.parse(json);
  return { name: result.name, version: result.version, file: join(out, result.filename) };
}

function main(argv) {
  const outArg = argv[0] === '--out' ? argv[1] : argv.length === 0 ? '.' : undefined;
  if (!outArg || argv.length > 2) {
    process.stderr.write('usage: node scripts/pack.mjs [--out DIR]\n');
    return 2;
  }
  const out = resolve(outArg);
  const root = readJson(join(ROOT, 'package.json'));
  const server = readJson(join(SERVER_DIR, 'package.json'));
  const binding = readJson(join(BINDING_DIR, 'package.json'));
  const problems = [
    ...manifestProblems(root, server, binding),
    ...escapingImports(join(ROOT, 'dist', 'server')).map(
      (p) => `${p}: the server reaches the rest of vidsheet only through #vidsheet/*`,
    ),
  ];
  if (problems.length > 0) {
    process.stderr.write(`pack: not packing:\n${problems.map((p) => `  - ${p}\n`).join('')}`);
    return 1;
  }

  mkdirSync(out, { recursive: true });
  const stage = mkdtempSync(join(tmpdir(), 'vidsheet-pack-'));
  try {
    const main = join(stage, 'vidsheet');
    for (const path of ['bin', 'dist', 'README.md', 'LICENSE']) {
      cpSync(join(ROOT, path), join(main, path), { recursive: true });
    }
    writeFileSync(join(main, 'package.json'), `${JSON.stringify(vidsheetManifest(root), null, 2)}\n`);

    const hosted = join(stage, 'vidsheet-server');
    cpSync(SERVER_DIR, hosted, { recursive: true });
    cpSync(join(ROOT, 'LICENSE'), join(hosted, 'LICENSE'));
    cpSync(join(ROOT, 'bin', 'vidsheet-server.js'), join(hosted, 'bin', 'vidsheet-server.js'));
    cpSync(join(ROOT, 'dist', 'server'), join(hosted, 'dist', 'server'), { recursive: true });

    const packed = [npmPack(main, out), npmPack(hosted, out), npmPack(BINDING_DIR, out)];
    process.stdout.write(`${JSON.stringify(packed, null, 2)}\n`);
    return 0;
  } finally {
    rmSync(stage, { recursive: true, force: true });
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) process.exitCode = main(process.argv.slice(2));
