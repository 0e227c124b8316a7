/**
 * The oldest glibc the shipped binding loads on (issue 38): scripts/build-native.sh links it with
 * zig against glibc 2.28's symbol versions, so RHEL 8, Debian 10+, Ubuntu 20.04 and Amazon Linux
 * 2023 get the native engine. The dynamic loader refuses a library that needs a symbol version its
 * glibc lacks, so the newest GLIBC_x.y the .node references is the oldest glibc it loads on.
 *
 * Oracle: `objdump -T` on the built .node (binutils), not anything the build script reports.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROOT } from '../global-setup.js';

const BINDING_DIR = join(ROOT, 'npm', 'linux-x64-gnu');
const NODE_FILE = join(BINDING_DIR, 'vidsheet.linux-x64-gnu.node');
/** The oldest glibc the binding must load on: RHEL 8's (and so Rocky and Alma 8's). */
const FLOOR = [2, 28] as const;

interface Undefined {
  name: string;
  version: string | undefined;
  weak: boolean;
}

/** The .node's undefined dynamic symbols: what it needs from libc, libm, ... and Node. */
function undefinedSymbols(): Undefined[] {
  const out = execFileSync('objdump', ['-T', NODE_FILE], { encoding: 'utf8' });
  // "0000000000000000  w   DF *UND*\t0000000000000000 (GLIBC_2.28) statx": 7 flag characters
  // (w: weak), the section, the size, the version when there is one, the name.
  return [...out.matchAll(/^[0-9a-f]+ (.{7}) \*UND\*\s+[0-9a-f]+\s+(?:\(([^)]+)\)\s+)?(\S+)$/gm)].map(
    (m) => ({ name: m[3] as string, version: m[2], weak: (m[1] as string).includes('w') }),
  );
}

const parse = (v: string) => v.split('.').map(Number);
const newer = (a: number[], b: readonly number[]) =>
  (a[0] ?? 0) - (b[0] ?? 0) || (a[1] ?? 0) - (b[1] ?? 0) || (a[2] ?? 0) - (b[2] ?? 0);

describe('the shipped binding and old glibc', () => {
  it(`references no glibc symbol version newer than ${FLOOR.join('.')}`, () => {
    const symbols = undefinedSymbols();
    expect(symbols.length).toBeGreaterThan(100);
    const tooNew = symbols
      .filter((s) => s.version?.startsWith('GLIBC_'))
      .filter((s) => newer(parse((s.version as string).slice('GLIBC_'.length)), FLOOR) > 0)
      .map((s) => `${s.name}@${s.version}`);
    expect(tooNew, 'symbols that need a newer glibc').toEqual([]);
  });

  it('leaves no libc call unversioned (a symbol 2.28 lacks would be, and fail to load there)', () => {
    // Linked against glibc 2.28's symbol lists, a call that 2.28 does not have gets no version: the
    // link succeeds (a shared library may leave symbols to its host) and dlopen fails later. Only
    // Node's own API may be unversioned, and weak symbols (Rust's std probes e.g. gettid, and lives
    // without it).
    const unversioned = undefinedSymbols()
      .filter((s) => s.version === undefined && !s.weak)
      .map((s) => s.name)
      .filter((name) => !/^(napi|node_api)_/.test(name));
    expect(unversioned).toEqual([]);
  });

  it('declares the floor in its package.json and names it in the loader’s fix', () => {
    const floor = FLOOR.join('.');
    const pkg = JSON.parse(readFileSync(join(BINDING_DIR, 'package.json'), 'utf8'));
    expect(pkg.config.glibc).toBe(`>=${floor}`);
    const loader = readFileSync(join(ROOT, 'src', 'engine', 'native-loader.ts'), 'utf8');
    expect(loader).toContain(`glibc ${floor} or newer`);
  });
});
