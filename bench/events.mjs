#!/usr/bin/env node
/**
 * The events benchmark (`npm run bench -- --events [--only clip,...] [--engines native,ffmpeg]
 * [--densities 3x3,4x4,6x6] [--corpus name,...] [--no-corpus]`): do the zoom hints (DESIGN §10)
 * point at the gaps where something happens, and not at still ones? With `--hay real`, the same
 * question on the real-footage haystacks, needle by needle (bench/events/real-hay.mjs).
 *
 * Each event clip (bench/events/clips.mjs: one per encode, events at known frames) and each corpus
 * file with visible cuts runs through the real job runner on each engine by name (the local
 * surface: audio on, so a click can be heard) at each overview density. Per run: the events whose
 * gap is among the hints (recall), the hints on gaps where nothing happens (false hints), and the
 * signals that named each event's gap (bench/events/match.mjs says which gap holds what).
 *
 * Corpus files (fixtures/corpus.json, fetched by `node fixtures/corpus.mjs`): where the cuts are is
 * not written anywhere, so an oracle independent of the tool finds them: ffmpeg's scene filter,
 * every frame whose `scene` score exceeds SCENE_THRESHOLD is a cut at its time.
 */
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ffmpegEngine } from '../dist/engine/ffmpeg.js';
import { loadNative } from '../dist/engine/native-loader.js';
import { runJob } from '../dist/job.js';
import { corpusDir } from '../fixtures/corpus.mjs';
import { CLIPS, EVENT_CLIP, eventClip, eventsOf } from './events/clips.mjs';
import { labelSeconds, scoreRun } from './events/match.mjs';
import { sceneCuts } from './events/oracle.mjs';
import { realHayTable } from './events/real-hay.mjs';
import { REAL_ENCODES } from './hunt/real-haystack.mjs';

const argv = process.argv.slice(2).filter((a) => a !== '--events');
const flag = (name, fallback) => {
  const i = argv.indexOf(`--${name}`);
  return i >= 0 ? argv[i + 1] : fallback;
};
const list = (name, fallback) => flag(name, fallback.join(',')).split(',').filter(Boolean);

/**
 * Corpus files with cuts a viewer sees (found with the scene filter at this threshold, then looked
 * at): a trailer's three hard cuts (and its fade-in's first frames), a silent film's title card,
 * a test sequence's last cut. ffmpeg's usual 0.4 finds only the last: the trailer's cuts score
 * 0.35 to 0.39.
 */
export const CORPUS = ['opencv-Megamind.avi', 'nbsphinx-Shepard_Calais_1906.ogv', 'janus-ChID-BLITS-EBU.mp4'];
export const SCENE_THRESHOLD = 0.3;

const densities = list('densities', ['3x3', '4x4', '6x6']);
const engines = list('engines', ['native', 'ffmpeg']);
const clipNames = list('only', Object.keys(CLIPS));
const corpus = argv.includes('--no-corpus') ? [] : list('corpus', CORPUS);

function engineNamed(name) {
  if (name === 'ffmpeg') return ffmpegEngine;
  const native = loadNative();
  if (!('engine' in native)) throw new Error(`the native binding did not load: ${native.error}`);
  return native.engine;
}

async function runOnce(file, engine, density, hintLimit) {
  const outDir = mkdtempSync(join(tmpdir(), 'vidsheet-events-'));
  try {
    const o = await runJob(
      { input: file, density, outDir },
      { engine: engineNamed(engine), audio: true, ...(hintLimit ? { hintLimit } : {}) },
    );
    const labels = o.timecodes.flat();
    const times = o.frameTimes.flat().map((t, i) => t ?? labelSeconds(labels[i]));
    return { labels, times, hints: o.zoomHints };
  } finally {
    rmSync(outDir, { recursive: true, force: true });
  }
}

if (flag('hay', '') === 'real') {
  await realHayTable({
    classes: list('only', ['B', 'C']),
    encodes: list('encode', Object.keys(REAL_ENCODES)),
    depths: list('depths', ['0.38', '0.71']).map(Number),
    engines,
    densities,
    runOnce,
  });
  process.exit(0);
}

const subjects = [
  ...clipNames.map((name) => ({ name, file: eventClip(name), events: eventsOf(name), fps: EVENT_CLIP.fps })),
  ...corpus.flatMap((name) => {
    const file = join(corpusDir(), name);
    if (!existsSync(file)) {
      console.error(`events: ${name} is not in the corpus (node fixtures/corpus.mjs fetches it); skipped`);
      return [];
    }
    const events = sceneCuts(file, SCENE_THRESHOLD);
    console.error(`events: ${name}: the scene filter's cuts at ${events.map((e) => e.seconds).join(', ')} s`);
    return [{ name: `corpus: ${name}`, file, events, fps: 1 }];
  }),
];

const rows = [];
for (const s of subjects) {
  for (const engine of engines) {
    for (const density of densities) {
      const run = await runOnce(s.file, engine, density);
      const score = scoreRun(s.events, s.fps, run);
      rows.push({ s, engine, density, run, score });
      console.error(
        `events: ${s.name} ${engine} ${density}: ${score.events.filter((e) => e.hinted).length}/${s.events.length} hinted, ` +
          `${score.falseHints.length} false; hints ${JSON.stringify(run.hints)}`,
      );
    }
  }
}

const describe = (e) => `${e.kind}: ${e.hinted ? e.signals.join('+') : e.shown ? 'on a cell' : 'missed'}`;
const gap = (h) => `${h.start}..${h.end} (${h.score} ${h.signals.join('+')})`;
console.log('\nZoom hints on known events (local surface, audio on): per clip, engine and overview\n');
console.log(
  '| clip | engine | density | gaps | recall | false hints | each event: signals that named its gap |',
);
console.log('|---|---|---|---|---|---|---|');
for (const { s, engine, density, run, score } of rows) {
  const hit = score.events.filter((e) => e.hinted).length;
  console.log(
    `| ${s.name} | ${engine} | ${density} | ${run.labels.length + 1} | ${hit}/${score.events.length} | ` +
      `${score.falseHints.length}/${score.stillGaps} still${score.falseHints.length ? `: ${score.falseHints.map(gap).join(', ')}` : ''} | ` +
      `${score.events.map(describe).join('; ')} |`,
  );
}
console.log('\n| clip | engine | recall (all overviews) | false hints / still gaps |');
console.log('|---|---|---|---|');
const groups = new Map();
for (const r of rows) {
  const key = `${r.s.name} | ${r.engine}`;
  groups.set(key, [...(groups.get(key) ?? []), r]);
}
for (const [key, group] of groups) {
  const sum = (f) => group.reduce((acc, r) => acc + f(r), 0);
  const hit = sum((r) => r.score.events.filter((e) => e.hinted).length);
  const all = sum((r) => r.score.events.length);
  console.log(
    `| ${key} | ${hit}/${all} | ${sum((r) => r.score.falseHints.length)}/${sum((r) => r.score.stillGaps)} |`,
  );
}
