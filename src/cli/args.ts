/**
 * Strict argv parsing for `vidsheet <video> [flags]`. Hand-rolled on purpose: the contract needs the
 * exact literal of an unknown flag, "missing value" errors for `--out --json`, and negative numbers
 * as values (`--start -5` reaches the window rule "start must be a time ≥ 0").
 */
import { DEFAULT_DENSITY, type Density } from '../core/density.js';
import { parseDensity } from '../core/request.js';
import { parseTimeMs } from '../core/time.js';
import { usageErrors } from './usage.js';

export interface CliArgs {
  help: boolean;
  input?: string;
  density: Density;
  startMs?: number;
  endMs?: number;
  out?: string;
  json: boolean;
}

const VALUE_FLAGS = ['density', 'start', 'end', 'out'] as const;
type ValueFlag = (typeof VALUE_FLAGS)[number];

function missingValue(flag: ValueFlag): Error {
  if (flag === 'density') return usageErrors.badDensity();
  if (flag === 'out') return usageErrors.outNeedsDirectory();
  return usageErrors.badTimeFlag(flag);
}

/** A token that can serve as a flag's value: anything but another long flag (negative numbers pass). */
const isValue = (token: string | undefined): token is string =>
  token !== undefined && !token.startsWith('--');

export function parseCliArgs(argv: string[]): CliArgs {
  const args: CliArgs = { help: false, density: DEFAULT_DENSITY, json: false };
  let positionalOnly = false;
  for (let i = 0; i < argv.length; i++) {
    const token = argv[i] as string;
    if (positionalOnly || token === '-' || !token.startsWith('-')) {
      if (args.input !== undefined) throw usageErrors.secondInput(token);
      args.input = token;
      continue;
    }
    if (token === '--') {
      positionalOnly = true;
      continue;
    }
    if (token === '--help' || token === '-h') {
      args.help = true;
      continue;
    }
    if (token === '--json') {
      args.json = true;
      continue;
    }
    const [name, inline] = token.startsWith('--') ? splitOnce(token.slice(2)) : [token, undefined];
    const flag = VALUE_FLAGS.find((f) => f === name);
    if (!flag) throw usageErrors.unknownFlag(token);
    let value = inline;
    if (value === undefined && isValue(argv[i + 1])) value = argv[++i];
    if (value === undefined || value === '') throw missingValue(flag);
    setValue(args, flag, value);
  }
  return args;
}

function splitOnce(text: string): [string, string | undefined] {
  const eq = text.indexOf('=');
  return eq < 0 ? [text, undefined] : [text.slice(0, eq), text.slice(eq + 1)];
}

function setValue(args: CliArgs, flag: ValueFlag, value: string): void {
  switch (flag) {
    case 'density': {
      const density = parseDensity(value);
      if (density === null) throw usageErrors.badDensity();
      args.density = density;
      return;
    }
    case 'out':
      args.out = value;
      return;
    case 'start':
    case 'end': {
      const ms = parseTimeMs(value);
      if (ms === null) throw usageErrors.badTimeFlag(flag);
      args[flag === 'start' ? 'startMs' : 'endMs'] = ms;
    }
  }
}
