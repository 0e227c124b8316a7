/**
 * The events benchmark on real footage (`npm run bench -- --events --hay real [--only B,C]
 * [--encode scenecut,fixedgop,nobf] [--depths 0.38,0.71] [--engines native,ffmpeg]
 * [--densities 3x3,4x4,6x6]`): per real-footage haystack (bench/hunt/real-haystack.mjs), engine
 * and overview density, where the needle's gap ranks among every gap with a signal (a model sees
 * the first five), and what the five point at: the needle, a join between two pieces of footage (a
 * cut), a look-alike (class C's decoys), or something inside a piece (the footage's own events:
 * motion, an animation's cuts, a visualiser).
 */
import { hay, REAL_FPS, realHaystack, realRecipe } from '../hunt/real-haystack.mjs';
import { changeTimes, gapOf, hintGap } from './match.mjs';

/** Every gap with a signal: a model sees the first five (DESIGN §10). */
const ALL = Number.MAX_SAFE_INTEGER;

/** The known events of a haystack: its needle, its decoys and the joins between its pieces. */
export function hayEvents(r, pieces) {
  const burst = (frame) => ({ kind: 'burst', frame, last: frame + r.brief - 1 });
  const needle =
    r.needleClass === 'B'
      ? { kind: 'flash', frame: r.frame }
      : r.needleClass === 'C'
        ? burst(r.frame)
        : { kind: 'cut', frame: r.frame };
  return [
    { what: 'needle', event: needle },
    ...r.decoys.map((frame) => ({ what: 'decoy', event: burst(frame) })),
    ...pieces.slice(1).map((p) => ({ what: 'join', event: { kind: 'cut', frame: p.at } })),
  ];
}

/**
 * One run read against the events: each gap's kind (the needle's first), the needle's rank among
 * the ranked hints (null: its gap has no signal), whether a cell shows it, the first five's kinds.
 */
export function readRun(events, { labels, times, hints }) {
  const kindOf = new Map();
  for (const { what, event } of events) {
    for (const t of changeTimes(event, REAL_FPS)) {
      const g = gapOf(t, times);
      if (!kindOf.has(g) || what === 'needle') kindOf.set(g, what);
    }
  }
  const kinds = hints.map((h) => kindOf.get(hintGap(h, labels)) ?? 'inside');
  const at = kinds.indexOf('needle');
  const needle = events[0].event;
  const [on, off] = changeTimes(needle, REAL_FPS);
  const shown = off !== undefined && times.some((t) => t >= on - 0.0005 && t < off - 0.0005);
  return { rank: at < 0 ? null : at + 1, shown, five: kinds.slice(0, 5), gaps: labels.length + 1 };
}

/** Runs every haystack asked for and prints the table. `runOnce(file, engine, density, limit)`. */
export async function realHayTable({ classes, encodes, depths, engines, densities, runOnce }) {
  const { pieces } = hay();
  const rows = [];
  for (const c of classes) {
    for (const encode of encodes) {
      for (const depth of depths) {
        const r = realRecipe(c, depth, encode);
        const file = realHaystack(r);
        for (const engine of engines) {
          for (const density of densities) {
            const read = readRun(hayEvents(r, pieces), await runOnce(file, engine, density, ALL));
            rows.push({ c, encode, depth, engine, density, ...read });
            console.error(
              `events: real ${c} ${encode} ${depth} ${engine} ${density}: ${JSON.stringify(read)}`,
            );
          }
        }
      }
    }
  }
  const short = { needle: '**needle**', join: 'join', decoy: 'decoy', inside: 'inside' };
  console.log('\nReal-footage haystacks: the needle gap among the ranked hints (a model sees five)\n');
  console.log(
    '| class | encode | depth | engine | density | gaps | needle rank | a cell shows it | the five |',
  );
  console.log('|---|---|---|---|---|---|---|---|---|');
  for (const w of rows)
    console.log(
      `| ${w.c} | ${w.encode} | ${w.depth} | ${w.engine} | ${w.density} | ${w.gaps} | ${w.rank ?? 'no signal'} | ` +
        `${w.shown ? 'yes' : 'no'} | ${w.five.map((k) => short[k]).join(', ')} |`,
    );
  console.log('\n| class | encode | engine | among the five | the five: needle / join / decoy / inside |');
  console.log('|---|---|---|---|---|');
  const groups = new Map();
  for (const w of rows) {
    const key = `${w.c} | ${w.encode} | ${w.engine}`;
    groups.set(key, [...(groups.get(key) ?? []), w]);
  }
  for (const [key, group] of groups) {
    const five = group.flatMap((w) => w.five);
    const count = (k) => five.filter((x) => x === k).length;
    console.log(
      `| ${key} | ${group.filter((w) => w.rank !== null && w.rank <= 5).length}/${group.length} | ` +
        `${count('needle')} / ${count('join')} / ${count('decoy')} / ${count('inside')} |`,
    );
  }
}
