/**
 * scripts/build-ffmpeg.sh picks its source packages as a fresh machine must (issue 38): the newest
 * version apt lists whose files can be fetched and match the sha256 its .dsc lists, then older
 * ones. apt is stood in for on PATH (`apt-get`, `apt-cache`: test/helpers/stub-apt.mjs), so each
 * case says which versions the "mirror" serves, serves wrongly or lacks; `dpkg --compare-versions`
 * is Debian's own. Oracle: the versions the stand-in was asked for, in order, and the files it served.
 */
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ROOT } from '../global-setup.js';
import { runProcess } from '../helpers/cli.js';

const SCRIPT = join(ROOT, 'scripts', 'build-ffmpeg.sh');
const STUB = join(ROOT, 'test', 'helpers', 'stub-apt.mjs');

/** Per package: the versions apt lists, and how the mirror answers each (default: serves it). */
type Mirror = Record<string, Array<{ version: string; serves?: 'missing' | 'wrong-file' }>>;

const BOOKWORM: Mirror = {
  // The day of issue 38: the security update is listed, its sources are not on the mirror yet.
  zlib: [{ version: '1:1.2.13.dfsg-1' }, { version: '1:1.2.13.dfsg-1+deb12u1', serves: 'missing' }],
  dav1d: [{ version: '1.0.0-2+deb12u1' }, { version: '1.0.0-2' }],
  ffmpeg: [{ version: '7:5.1.6-0+deb12u1' }, { version: '7:5.1.9-0+deb12u1' }],
};

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'vs-ffmpeg-sources-'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

async function run(mirror: Mirror, ...args: string[]) {
  const bin = join(dir, 'bin');
  const mirrorFile = join(dir, 'mirror.json');
  const log = join(dir, 'apt.log');
  writeFileSync(mirrorFile, JSON.stringify(mirror));
  rmSync(bin, { recursive: true, force: true });
  mkdirSync(bin);
  for (const name of ['apt-get', 'apt-cache']) symlinkSync(STUB, join(bin, name));
  const result = await runProcess('bash', [SCRIPT, ...args], {
    env: {
      ...process.env,
      PATH: `${bin}:${process.env.PATH}`,
      VIDSHEET_FFMPEG_CACHE: join(dir, 'cache'),
      STUB_APT_MIRROR: mirrorFile,
      STUB_APT_LOG: log,
    },
  });
  return { ...result, calls: readFileSync(log, 'utf8').trim().split('\n') };
}

/** `--sources` output as { package: version }. */
const versions = (stdout: string) =>
  Object.fromEntries(
    stdout
      .trim()
      .split('\n')
      .map((line) => line.split(' ').slice(0, 2)),
  );

describe('build-ffmpeg.sh: which source versions it builds', () => {
  it('takes the newest listed version the mirror serves, in Debian version order, and says what it skipped', async () => {
    const r = await run(BOOKWORM, '--sources');
    expect(r.stderr).not.toMatch(/no version apt lists/);
    expect(r.code).toBe(0);
    expect(versions(r.stdout)).toEqual({
      zlib: '1:1.2.13.dfsg-1',
      dav1d: '1.0.0-2+deb12u1',
      ffmpeg: '7:5.1.9-0+deb12u1',
    });
    // Each line also names the sha256 of the .dsc that was fetched.
    const served = (pkg: string, version: string) =>
      readFileSync(join(dir, 'cache', 'sources', pkg, version.replace(':', '%3a'), dscName(pkg, version)));
    expect(r.stdout).toContain(`zlib 1:1.2.13.dfsg-1 ${sha256(served('zlib', '1:1.2.13.dfsg-1'))}\n`);
    // Newest first: the security update was tried, then the older version.
    expect(r.calls.filter((c) => c.startsWith('source --download-only'))).toEqual([
      'source --download-only zlib=1:1.2.13.dfsg-1+deb12u1',
      'source --download-only zlib=1:1.2.13.dfsg-1',
      'source --download-only dav1d=1.0.0-2+deb12u1',
      'source --download-only ffmpeg=7:5.1.9-0+deb12u1',
    ]);
    expect(r.stderr).toContain(
      'build-ffmpeg: zlib: using 1:1.2.13.dfsg-1; newer: 1:1.2.13.dfsg-1+deb12u1: could not be fetched',
    );
  });

  it('skips a version whose files do not match its .dsc', async () => {
    const mirror: Mirror = {
      ...BOOKWORM,
      dav1d: [{ version: '1.0.0-2+deb12u1', serves: 'wrong-file' }, { version: '1.0.0-2' }],
    };
    const r = await run(mirror, '--sources');
    expect(r.code).toBe(0);
    expect(versions(r.stdout).dav1d).toBe('1.0.0-2');
    expect(r.stderr).toContain(
      'dav1d: using 1.0.0-2; newer: 1.0.0-2+deb12u1: its files do not match its .dsc',
    );
  });

  it('keys the cache by what was fetched: another version is another key, the same one the same key', async () => {
    const skipped = await run(BOOKWORM, '--key');
    const again = await run(BOOKWORM, '--key');
    const served = await run({ ...BOOKWORM, zlib: [{ version: '1:1.2.13.dfsg-1+deb12u1' }] }, '--key');
    for (const r of [skipped, again, served]) expect(r.stdout).toMatch(/^[0-9a-f]{64}\n$/);
    expect(again.stdout).toBe(skipped.stdout);
    expect(served.stdout).not.toBe(skipped.stdout);
  });

  it('refreshes apt once when no listed version can be fetched, then fails naming the package', async () => {
    const mirror: Mirror = { ...BOOKWORM, ffmpeg: [{ version: '7:5.1.9-0+deb12u1', serves: 'missing' }] };
    const r = await run(mirror, '--sources');
    expect(r.code).toBe(1);
    expect(r.stdout).toBe('');
    expect(r.stderr).toContain(
      'build-ffmpeg: ffmpeg: no version apt lists could be fetched and matched its .dsc (7:5.1.9-0+deb12u1: could not be fetched)',
    );
    expect(r.calls.filter((c) => c === 'update')).toHaveLength(1);
    // Tried before and after the refresh.
    expect(r.calls.filter((c) => c === 'source --download-only ffmpeg=7:5.1.9-0+deb12u1')).toHaveLength(2);
  });
});

const dscName = (pkg: string, version: string) => `${pkg}_${version.replace(/^\d+:/, '')}.dsc`;
const sha256 = (data: Buffer) => createHash('sha256').update(data).digest('hex');
