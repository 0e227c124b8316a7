#!/usr/bin/env node
/**
 * Both engines over the real-world corpus (fixtures/corpus.json), judged by the same oracle as
 * test/corpus: one Markdown table, a row per file, per engine the exit code, sheets, cells reported
 * unreadable (`sheet S frame F unreadable`), cells whose picture is not the frame the oracle says
 * (the last frame at or before the label time), and the reported duration against the readable end
 * of the packets. Then every problem found, per file and engine.
 *
 * Usage: node bench/corpus-table.mjs [--root <checkout>] [--only <substring>] [--engines native,ffmpeg]
 *        [--jobs 2] [--out table.md] [--density 3x3] [--window 0.3,0.45]
 * `--window a,b`: each run covers that part of the clip (fractions of the duration the oracle
 * expects), as a zoom would; files too short for the density's 2 ms per cell are run whole.
 * `--root` runs another checkout's bin and dist/ (e.g. a worktree of an older commit) with this
 * corpus and oracle. Needs the corpus (`node fixtures/corpus.mjs`) and a built dist/.
 */
import { existsSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { corpusDir, loadManifest } from '../fixtures/corpus.mjs';
import { judgeRun, oracleCache, ROOT, windowOf } from '../fixtures/oracle.mjs';

const argv = process.argv.slice(2);
const flag = (name, fallback) => {
  const i = argv.indexOf(`--${name}`);
  return i >= 0 ? argv[i + 1] : fallback;
};
const root = resolve(flag('root', ROOT));
const only = flag('only', '');
const engines = flag('engines', 'native,ffmpeg').split(',');
const jobs = Number(flag('jobs', '2'));
const outPath = flag('out', '');
const density = flag('density', '3x3');
const window = flag('window', '').split(',').filter(Boolean).map(Number);

const manifest = await loadManifest();
const dir = corpusDir();
const entries = manifest.files.filter((e) => e.name.includes(only));
const absent = entries.filter((e) => !existsSync(join(dir, e.name)));
if (absent.length) {
  console.error(
    `corpus-table: ${absent.length} corpus files are missing from ${dir}; run: node fixtures/corpus.mjs`,
  );
  process.exit(1);
}
if (!existsSync(join(root, 'dist', 'core', 'plan.js'))) {
  console.error(`corpus-table: ${root}/dist is not built; run: npm run build:ts`);
  process.exit(1);
}

const cache = oracleCache();
const tasks = entries.flatMap((entry) => engines.map((engine) => ({ entry, engine })));
const results = new Map();
const started = Date.now();
let next = 0;
async function worker() {
  while (next < tasks.length) {
    const { entry, engine } = tasks[next++];
    const file = join(dir, entry.name);
    const span = window.length === 2 ? await windowOf(cache, file, density, window) : {};
    const r = await judgeRun({ file, engine, cache, root, density, ...span });
    results.set(`${entry.name}|${engine}`, r);
    process.stderr.write(
      `corpus-table: ${entry.name} [${engine}] ${r.problems.length ? `${r.problems.length} problems` : 'ok'}\n`,
    );
  }
}
await Promise.all(Array.from({ length: jobs }, worker));

const fmt = (n) => (n === null || n === undefined ? '—' : String(Math.round(n * 1000) / 1000));
const head = ['file', 'classes'];
for (const e of engines)
  head.push(`${e} exit`, `${e} sheets`, `${e} unreadable`, `${e} differing`, `${e} duration`);
head.push('oracle end (declared)');
const lines = [`| ${head.join(' | ')} |`, `|${head.map(() => '---').join('|')}|`];
let clean = 0;
for (const entry of entries) {
  const row = [entry.name, entry.classes.slice(0, 4).join(', ')];
  let oracle = null;
  for (const engine of engines) {
    const { facts, problems } = results.get(`${entry.name}|${engine}`);
    oracle = facts.oracle ?? oracle;
    if (problems.length === 0) clean++;
    row.push(
      `${facts.exit}${problems.length ? ' ✗' : ''}`,
      String(facts.sheets),
      String(facts.unreadable),
      facts.cells ? `${facts.differing}/${facts.cells}` : '—',
      fmt(facts.duration),
    );
  }
  row.push(oracle ? `${fmt(oracle.readableEnd)} (${fmt(oracle.declared)})` : '—');
  lines.push(`| ${row.join(' | ')} |`);
}
const secs = ((Date.now() - started) / 1000).toFixed(0);
lines.push(
  '',
  `${clean} of ${tasks.length} runs without a problem (✗ marks the others); ${entries.length} files, ${secs} s.`,
  '',
  '## Problems',
  '',
);
for (const entry of entries) {
  for (const engine of engines) {
    const { problems } = results.get(`${entry.name}|${engine}`);
    for (const p of problems) lines.push(`- ${entry.name} [${engine}]: ${p}`);
  }
}
const text = `${lines.join('\n')}\n`;
process.stdout.write(text);
if (outPath) await writeFile(outPath, text);
