#!/usr/bin/env node
/**
 * The hunt benchmark (`npm run bench -- --hunt [--only A,B,C,D,T] [--encode scenecut,fixedgop]
 * [--fps 30,60] [--densities 4x4,6x6] [--hay real [--depths 0.38,0.71]] [--engines native,ffmpeg]`):
 * how many tool calls a model needs to name the exact frame
 * of a needle in a 30-minute haystack, using `frame_times` and `zoom_hints` (DESIGN §10).
 *
 * The model is the scripted agent of bench/hunt/agent.mjs; it calls the local tool exactly as the
 * stdio server does (`callLocalTool`, the vidsheet-mcp-v0 JSON), looks at the sheets' pixels
 * (bench/hunt/cells.mjs) and is told only what the needle looks like. Haystacks and encodes:
 * bench/hunt/haystack.mjs; the set of hunts: bench/hunt/cases.mjs (all by default).
 *
 * What "found" means:
 *   A, B, C, T  the `frame_times` value the agent names is the needle's first frame (within half
 *            a frame: the value is rounded to the ms).
 *   D        (a click on the sound track; no pixel shows it, so the agent hears it through the
 *            `audio` hints alone) the value it names, at a zoom where every frame of the window is
 *            shown, is within one frame of the frame on screen during the click: the audio peaks
 *            are per millisecond and AAC smears a transient over a few, so a click near a frame's
 *            edge may fall in the neighbouring gap.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { cellsPerSheet } from '../dist/core/density.js';
import { callLocalTool } from '../dist/mcp/tool.js';
import { hunt, KIND } from './hunt/agent.mjs';
import { DENSITIES, haystackRecipes, RATES } from './hunt/cases.mjs';
import { classifyCell, readCells } from './hunt/cells.mjs';
import { CLASSES, ENCODES, haystack } from './hunt/haystack.mjs';
import { REAL_ENCODES, REAL_LOOK, realHaystack, realRecipe } from './hunt/real-haystack.mjs';

const argv = process.argv.slice(2).filter((a) => a !== '--hunt');
const flag = (name, fallback) => {
  const i = argv.indexOf(`--${name}`);
  return i >= 0 ? argv[i + 1] : fallback;
};
const list = (name, fallback) => flag(name, fallback.join(',')).split(',');
const real = flag('hay', 'synthetic') === 'real';
const densities = list('densities', DENSITIES);
const classes = list('only', real ? ['A', 'B', 'C'] : CLASSES);
const encodes = list('encode', Object.keys(real ? REAL_ENCODES : ENCODES));
const rates = list('fps', RATES).map(Number);
const depths = list('depths', ['0.38']).map(Number);
const engines = list('engines', [process.env.VIDSHEET_ENGINE ?? 'native']);

if (engines.length > 1) {
  // The engine is chosen once per process: one child per engine.
  for (const engine of engines) {
    const args = [...argv.filter((_, i) => argv[i - 1] !== '--engines' && argv[i] !== '--engines')];
    const r = spawnSync(process.execPath, [process.argv[1], ...args, '--engines', engine], {
      stdio: 'inherit',
      env: { ...process.env, VIDSHEET_ENGINE: engine },
    });
    if (r.status !== 0) process.exit(r.status ?? 1);
  }
  process.exit(0);
}
process.env.VIDSHEET_ENGINE = engines[0];
const engine = engines[0];

async function runHunt(recipe, file, density) {
  const heard = recipe.needleClass === 'D';
  const look = recipe.hay === 'real' ? { look: REAL_LOOK, squareShare: 0.07 } : {};
  const classify = (cell) => (heard ? KIND.none : classifyCell(recipe.needleClass, cell, look));
  let bytes = 0;
  const call = async (args) => {
    const out = mkdtempSync(join(tmpdir(), 'vidsheet-hunt-'));
    try {
      const result = await callLocalTool({ video_path: file, density, out_dir: out, ...args });
      const text = result.content[0]?.text ?? '';
      if (result.isError) throw new Error(`tool error for ${JSON.stringify(args)}: ${text}`);
      const report = JSON.parse(text);
      if (!report.frame_times || !report.zoom_hints)
        throw new Error('the tool returns no frame_times/zoom_hints');
      const kinds = [];
      for (const sheet of report.files) {
        bytes += statSync(sheet).size;
        for (const cell of readCells(sheet, density)) kinds.push(classify(cell));
      }
      return { report, kinds };
    } finally {
      rmSync(out, { recursive: true, force: true });
    }
  };
  const started = performance.now();
  const minWindowS = (2 * cellsPerSheet(density)) / 1000 + 0.002;
  const { answer, calls, trail } = await hunt({
    call,
    instant: recipe.needleClass === 'B',
    listen: heard,
    minWindowS,
  });
  const truth = recipe.frame / recipe.fps;
  const tolerance = heard ? 1 / recipe.fps + 0.0005 : 0.5 / recipe.fps;
  const found = answer !== null && Math.abs(answer - truth) <= tolerance;
  return { calls, found, answer, truth, bytes, ms: performance.now() - started, trail };
}

const recipes = real
  ? encodes.flatMap((e) => classes.flatMap((c) => depths.map((d) => realRecipe(c, d, e))))
  : haystackRecipes({ classes, encodes, rates });
const rows = [];
for (const recipe of recipes) {
  const file = real ? realHaystack(recipe) : haystack(recipe);
  for (const density of densities) {
    const r = await runHunt(recipe, file, density);
    rows.push({ recipe, density, ...r });
    console.error(
      `hunt: ${engine} ${real ? 'real ' : ''}${recipe.needleClass} ${recipe.encode} ${recipe.fps} fps depth ${recipe.depth} ${density}: ` +
        `${r.found ? 'found' : r.answer === null ? 'gave up' : `wrong (${r.answer} s, truth ${r.truth.toFixed(3)} s)`} ` +
        `in ${r.calls} calls, ${(r.bytes / 1e6).toFixed(1)} MB, ${(r.ms / 1000).toFixed(1)} s` +
        ` [${r.trail.map((t) => `${t.args.start ?? 'all'}${t.seen ? '*' : ''}`).join(' > ')}]`,
    );
  }
}

const mb = (b) => `${(b / 1e6).toFixed(2)} MB`;
console.log(
  `\nHunt benchmark: calls until the exact frame is named (scripted agent, local tool, ${engine} engine, ${real ? 'real-footage' : 'synthetic'} haystacks)\n`,
);
console.log('| class | encode | fps | depth | density | result | calls | sheet bytes |');
console.log('|---|---|---|---|---|---|---|---|');
for (const r of rows) {
  const result = r.found ? 'found' : r.answer === null ? 'gave up' : 'wrong frame';
  console.log(
    `| ${r.recipe.needleClass} | ${r.recipe.encode} | ${r.recipe.fps} | ${r.recipe.depth} | ${r.density} | ${result} | ${r.calls} | ${mb(r.bytes)} |`,
  );
}
console.log(
  '\n| class | encode | fps | density | hunts | ≤4 calls | ≤5 calls | ≤6 calls | median calls | mean sheet bytes |',
);
console.log('|---|---|---|---|---|---|---|---|---|---|');
const groups = new Map();
for (const r of rows) {
  const key = `${r.recipe.needleClass} | ${r.recipe.encode} | ${r.recipe.fps} | ${r.density}`;
  groups.set(key, [...(groups.get(key) ?? []), r]);
}
for (const [key, group] of groups) {
  const within = (n) => {
    const k = group.filter((r) => r.found && r.calls <= n).length;
    return `${k}/${group.length} (${Math.round((100 * k) / group.length)} %)`;
  };
  const calls = group.map((r) => r.calls).sort((a, b) => a - b);
  const median = calls[Math.floor((calls.length - 1) / 2)];
  const bytes = group.reduce((s, r) => s + r.bytes, 0) / group.length;
  console.log(
    `| ${key} | ${group.length} | ${within(4)} | ${within(5)} | ${within(6)} | ${median} | ${mb(bytes)} |`,
  );
}
