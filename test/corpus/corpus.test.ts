/**
 * The real-world corpus (fixtures/corpus.json: video files taken from Debian packages, and damaged
 * copies made from them) through the built CLI, on every engine, judged by an oracle that shares no
 * code with the engines (test/helpers/oracle.ts). For each file and engine, 3x3, `--json`:
 *
 * - the run ends (a per-run timeout kills its whole process group), by exit, not by a signal, and
 *   prints no panic or crash text;
 * - exit 0 with sheets when ffmpeg decodes any frame of the video sequentially; exit 1 with exactly
 *   the `unreadable video: <path> — ...` message when it decodes none;
 * - its TMPDIR (a fresh one per run) is left empty;
 * - `duration` is within max(1 s, 2 % of the declared duration) of the readable end of the packets,
 *   and the "the container declares ..." warning is there when the two clearly disagree (DESIGN §2);
 * - every sheet has the layout of the source's display size;
 * - every cell shows the frame displayed at its label time (the last frame whose presentation time
 *   is <= t, from the container's start), compared by what it shows against that frame and its
 *   neighbours; a cell reported `sheet S frame F unreadable` must be black, and must not be a cell
 *   where ffmpeg's sequential decode shows a frame (damaged files too: a packet that gives no
 *   picture leaves the frame before it on screen).
 * - `frame_times` (DESIGN §10) gives, for every cell, that frame's presentation time (3 decimals),
 *   and null for exactly the cells reported unreadable.
 *
 * Then the same judge on a zoom: 4x4 over 30-45 % of the clip (WINDOW), where the engines seek and
 * list packets near the window rather than from the start.
 *
 * The corpus is fetched by `node fixtures/corpus.mjs` (scripts/setup.sh runs it); without it this
 * suite fails, it does not skip.
 */
import { existsSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { CorpusManifest } from '../../fixtures/corpus.mjs';
import { corpusDir } from '../../fixtures/corpus.mjs';
import { ENGINES } from '../helpers/cli.js';
import { judgeRun, oracleCache, windowOf } from '../helpers/oracle.js';

/** A run that takes longer than this has hung (the slowest file takes a few seconds). */
const RUN_TIMEOUT_MS = 180_000;
/** The zoom each file is also judged on: a density and a part of the clip (fractions). */
const WINDOW = { density: '4x4', fractions: [0.3, 0.45] as [number, number] };
/** At most this many CLI runs at once (2 cores; each run also decodes). */
const PARALLEL_RUNS = 2;

const manifest = JSON.parse(
  readFileSync(new URL('../../fixtures/corpus.json', import.meta.url), 'utf8'),
) as CorpusManifest;
const dir = corpusDir();
const absent = manifest.files.filter((e) => {
  const path = join(dir, e.name);
  return !existsSync(path) || statSync(path).size !== e.size;
});

/** A tiny semaphore: vitest may start more concurrent tests than the machine has cores. */
let running = 0;
const waiting: Array<() => void> = [];
async function slot<T>(work: () => Promise<T>): Promise<T> {
  if (running >= PARALLEL_RUNS) await new Promise<void>((resolve) => waiting.push(resolve));
  running++;
  try {
    return await work();
  } finally {
    running--;
    waiting.shift()?.();
  }
}

describe('real-world corpus', () => {
  it('is fetched', () => {
    expect(
      absent.map((e) => e.name),
      `${absent.length} of ${manifest.files.length} corpus files are missing or of the wrong size in ${dir}; ` +
        'fetch them with: node fixtures/corpus.mjs',
    ).toEqual([]);
  });
});

describe
  .runIf(absent.length === 0)
  .concurrent('real-world corpus, every engine, judged by the oracle', () => {
    for (const entry of manifest.files) {
      const cache = oracleCache(); // probe and frames shared by the engines' runs of this file
      for (const [engine, zoom] of ENGINES.flatMap((e) => [[e, false] as const, [e, true] as const])) {
        const name = `${entry.name} [${engine}]${zoom ? ` ${WINDOW.density} ${WINDOW.fractions.join('-')}` : ''}`;
        it(name, { timeout: RUN_TIMEOUT_MS + 240_000 }, async () => {
          const file = join(dir, entry.name);
          const window = zoom
            ? { density: WINDOW.density, ...(await windowOf(cache, file, WINDOW.density, WINDOW.fractions)) }
            : {};
          const { problems } = await slot(() =>
            judgeRun({ file, engine, timeoutMs: RUN_TIMEOUT_MS, cache, ...window }),
          );
          const context = `${name} (${entry.classes.join(', ')})`;
          const known = entry.knownBugs?.[engine];
          if (known) {
            // A bug on record (fixtures/corpus.json): it must still show, so that fixing it also
            // removes the record and the file is judged like every other again.
            console.warn(`known bug, ${context}: ${known}\n  ${problems.join('\n  ')}`);
            expect(
              problems,
              `${context}: the known bug is gone; remove knownBugs from corpus.json`,
            ).not.toEqual([]);
          } else {
            expect(problems, context).toEqual([]);
          }
        });
      }
    }
  });
