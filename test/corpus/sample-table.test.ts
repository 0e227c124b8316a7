/**
 * The fallback's own reading of MP4/MOV sample tables for the zoom hints (src/engine/ffmpeg/
 * sample-table.ts) on the real-world corpus: every file it reads lists exactly what ffprobe lists
 * of the stream (FFmpeg's index, less the samples past the end of the file, as the native engine
 * leaves them out), whole and within a span; a file it declines is listed by ffprobe, as before.
 * Most of the corpus's MP4/MOV files must be read, or the hints' cost is back.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { CorpusManifest } from '../../fixtures/corpus.mjs';
import { corpusDir } from '../../fixtures/corpus.mjs';
import type { ListedPackets } from '../../src/core/packet-log.js';
import { sampleTablePackets } from '../../src/engine/ffmpeg/sample-table.js';
import { details, ffprobeListing } from '../helpers/packet-logs.js';

const manifest = JSON.parse(
  readFileSync(new URL('../../fixtures/corpus.json', import.meta.url), 'utf8'),
) as CorpusManifest;

const plain = (l: ListedPackets) => ({ times: [...l.times], sizes: [...l.sizes], keys: [...l.keys] });

describe("the corpus's MP4/MOV sample tables, read by the fallback for the hints", () => {
  it('list what ffprobe lists, whole and within a span, for all but a few declined', async () => {
    const [read, declined]: [string[], string[]] = [[], []];
    for (const { name } of manifest.files) {
      const path = join(corpusDir(), name);
      const d = await details(path).catch(() => undefined);
      if (!d?.sampleTable || d.index < 0) continue;
      const whole = await sampleTablePackets(path, d);
      if (!whole) {
        declined.push(name);
        continue;
      }
      read.push(name);
      expect(plain(whole), name).toEqual(ffprobeListing(path, d));
      const last = Math.max(...whole.times);
      const span = { fromMs: Math.round(last * 300), toMs: Math.round(last * 600) };
      const part = (await sampleTablePackets(path, d, span)) as ListedPackets;
      expect(plain(part), `${name} ${JSON.stringify(span)}`).toEqual(ffprobeListing(path, d, span));
    }
    // Declined when this was written: a fragmented file, negative composition offsets (a fuzzed
    // file), two sample descriptions, an empty sync-sample table, and an outsized stts delta.
    expect(read.length, `read: ${read.join(', ')}; declined: ${declined.join(', ')}`).toBeGreaterThanOrEqual(
      20,
    );
    expect(declined.length).toBeLessThanOrEqual(6);
  }, 300_000);
});
