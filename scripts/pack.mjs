#!/usr/bin/env node
/**
 * The three npm packages (DESIGN §11), each a directory with its own package.json that `npm pack`
 * and `npm publish` pack the conventional way: its `prepack` runs `--assemble`, which checks the
 * manifests and copies the built checkout's files in (`npm run build` first).
 *
 *   packages/vidsheet/              the CLI, MCP stdio server and library: bin/vidsheet.js, dist/
 *                                   without dist/server/, README.md, LICENSE
 *   packages/vidsheet-server/       the hosted service: bin/vidsheet-server.js, dist/server/, LICENSE;
 *                                   it reaches the rest of vidsheet through `#vidsheet/*`, which its
 *                                   manifest maps to `vidsheet/internal/*`
 *   npm/linux-x64-gnu/              @vidsheet/binding-linux-x64-gnu, as scripts/build-native.sh left it
 *
 *   node scripts/pack.mjs [--out DIR]   `npm pack` in each, tarballs into DIR (default: the current
 *                                       directory); prints [{ "name", "version", "file" }] as JSON
 *   node scripts/pack.mjs --assemble    (a package's prepack) assemble the current package directory
 *
 * The root package.json is the development checkout (private: it keeps the `vidsheet-server` bin
 * and the server's dependencies so that a checkout runs the service) and the one place versions and
 * dependency pins are written: assembling stops when another manifest disagrees with it.
 */
import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const DIRS = {
  vidsheet: join(ROOT, 'packages', 'vidsheet'),
  server: join(ROOT, 'packages', 'vidsheet-server'),
  binding: join(ROOT, 'npm', 'linux-x64-gnu'),
};

const readJson = (file) => JSON.parse(readFileSync(file, 'utf8'));

/**
 * Where the package manifests disagree with the root package.json (the one place versions and pins
 * are written): one sentence per problem.
 */
function manifestProblems(root, vidsheet, server, binding) {
  const problems = [];
  const pins = { ...root.devDependencies, ...root.dependencies };
  for (const pkg of [vidsheet, server, binding]) {
    if (pkg.version !== root.version) problems.push(`${pkg.name} is ${pkg.version}, not ${root.version}`);
  }
  for (const field of ['dependencies', 'optionalDependencies']) {
    if (JSON.stringify(vidsheet[field]) !== JSON.stringify(root[field])) {
      problems.push(`packages/vidsheet's ${field} differ from the root package.json's`);
    }
  }
  const pinned = root.optionalDependencies?.[binding.name];
  if (pinned !== root.version) problems.push(`vidsheet names ${binding.name}@${pinned}, not ${root.version}`);
  for (const [name, pin] of Object.entries(server.dependencies ?? {})) {
    const want = name === 'vidsheet' ? root.version : pins[name];
    if (pin !== want)
      problems.push(`vidsheet-server depends on ${name}@${pin}, the root package.json on ${want}`);
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

/** Everything that must hold before any package is packed; one sentence per problem. */
function problems() {
  const manifest = (dir) => readJson(join(dir, 'package.json'));
  const found = manifestProblems(
    readJson(join(ROOT, 'package.json')),
    manifest(DIRS.vidsheet),
    manifest(DIRS.server),
    manifest(DIRS.binding),
  );
  const built = ['dist/index.js', 'dist/server/main.js', 'bin/vidsheet.js', 'bin/vidsheet-server.js'];
  const missing = built.filter((p) => !existsSync(join(ROOT, p)));
  if (missing.length > 0) found.push(`${missing.join(', ')} missing: run npm run build first`);
  else
    found.push(
      ...escapingImports(join(ROOT, 'dist', 'server')).map(
        (p) => `${p}: the server reaches the rest of vidsheet only through #vidsheet/*`,
      ),
    );
  const binding = manifest(DIRS.binding);
  for (const file of [binding.main, 'FFMPEG-BUILD-INFO.txt', 'THIRD-PARTY-LICENSES']) {
    if (!existsSync(join(DIRS.binding, file)))
      found.push(`npm/linux-x64-gnu/${file} missing: run npm run build:native first`);
  }
  return found;
}

/** Copies `paths` (relative to the checkout, or [from, to] pairs) into a package directory, afresh. */
function copyInto(dir, paths) {
  for (const path of paths) {
    const [from, to] = Array.isArray(path) ? path : [path, path];
    rmSync(join(dir, to), { recursive: true, force: true });
    cpSync(join(ROOT, from), join(dir, to), { recursive: true });
  }
}

/** The prepack of each package: the files `npm pack` takes from its directory. */
function assemble(dir) {
  const found = problems();
  if (found.length > 0) {
    process.stderr.write(`pack: not packing:\n${found.map((p) => `  - ${p}\n`).join('')}`);
    return 1;
  }
  if (dir === DIRS.vidsheet) {
    copyInto(dir, ['bin/vidsheet.js', 'dist', 'README.md', 'LICENSE']);
    rmSync(join(dir, 'dist', 'server'), { recursive: true, force: true });
  } else if (dir === DIRS.server) {
    copyInto(dir, ['bin/vidsheet-server.js', ['dist/server', 'dist/server'], 'LICENSE']);
  } else if (dir !== DIRS.binding) {
    process.stderr.write(
      `pack: ${relative(ROOT, dir) || 'the repository root'} is not a package: run npm run pack:all, or npm pack in ${Object.values(
        DIRS,
      )
        .map((d) => relative(ROOT, d))
        .join(', ')}\n`,
    );
    return 1;
  }
  return 0;
}

function npmPack(dir, out) {
  const json = execFileSync('npm', ['pack', '--json', '--silent', '--pack-destination', out], {
    cwd: dir,
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const [result] = JSON.parse(json);
  return { name: result.name, version: result.version, file: join(out, result.filename) };
}

function main(argv) {
  if (argv.length === 1 && argv[0] === '--assemble') return assemble(resolve(process.cwd()));
  const outArg = argv[0] === '--out' ? argv[1] : argv.length === 0 ? '.' : undefined;
  if (!outArg || argv.length > 2) {
    process.stderr.write('usage: node scripts/pack.mjs [--out DIR | --assemble]\n');
    return 2;
  }
  const found = problems();
  if (found.length > 0) {
    process.stderr.write(`pack: not packing:\n${found.map((p) => `  - ${p}\n`).join('')}`);
    return 1;
  }
  const out = resolve(outArg);
  mkdirSync(out, { recursive: true });
  const packed = [DIRS.vidsheet, DIRS.server, DIRS.binding].map((dir) => npmPack(dir, out));
  process.stdout.write(`${JSON.stringify(packed, null, 2)}\n`);
  return 0;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) process.exitCode = main(process.argv.slice(2));
