/**
 * Time values: parsing what a user types and formatting what a sheet shows.
 *
 * Everything inside vidsheet counts whole milliseconds (the engine seeks at millisecond precision),
 * relative to the container's start time. Input accepts plain seconds (`90`, `67.4`) and every label
 * a sheet can display (`m:ss` with minutes unbounded, `m:ss.d` .. `m:ss.ddd`, `h:mm:ss[.ddd]`), so a
 * label typed back as `start`/`end` means exactly the time it was drawn for.
 */

const SECONDS = /^(-)?(\d+(?:\.\d*)?|\.\d+)$/;
const CLOCK = /^(-)?(\d+):([0-5]?\d)(?::([0-5]\d))?(?:\.(\d{1,3}))?$/;

/**
 * Parses a time value into integer milliseconds, or returns null when it is not one.
 * Negative values parse (the window rules reject them with their own message).
 */
export function parseTimeMs(value: string | number): number | null {
  if (typeof value === 'number') {
    return Number.isFinite(value) ? Math.round(value * 1000) : null;
  }
  const text = value.trim();
  const seconds = SECONDS.exec(text);
  if (seconds) {
    const ms = Math.round(Number(seconds[2]) * 1000);
    return Number.isFinite(ms) ? (seconds[1] ? -ms : ms) : null;
  }
  const clock = CLOCK.exec(text);
  if (!clock) return null;
  const [, sign, first = '0', second = '0', third, fraction] = clock;
  // `a:bb:cc` is h:mm:ss (minutes two digits, below 60); `a:bb` is m:ss with minutes unbounded.
  if (third !== undefined && second.length !== 2) return null;
  const totalSeconds =
    third === undefined
      ? Number(first) * 60 + Number(second)
      : Number(first) * 3600 + Number(second) * 60 + Number(third);
  const ms = totalSeconds * 1000 + (fraction ? Number(fraction.padEnd(3, '0')) : 0);
  return sign ? -ms : ms;
}

/**
 * Formats integer milliseconds as a sheet label: `m:ss` (minutes unbounded, seconds two digits)
 * followed by `decimals` (0..3) fractional digits. `ms` must already be a multiple of the precision.
 */
export function formatLabel(ms: number, decimals: number): string {
  const minutes = Math.floor(ms / 60000);
  const seconds = Math.floor((ms % 60000) / 1000);
  const base = `${minutes}:${String(seconds).padStart(2, '0')}`;
  if (decimals === 0) return base;
  const fraction = String(ms % 1000)
    .padStart(3, '0')
    .slice(0, decimals);
  return `${base}.${fraction}`;
}

/** Rounds milliseconds to `decimals` (0..3) fractional digits of a second, half up. */
export function roundToDecimals(ms: number, decimals: number): number {
  const step = 10 ** (3 - decimals);
  return Math.round(ms / step) * step;
}

/** Milliseconds as plain seconds with at most three decimals (`90`, `67.4`, `0.018`). */
export function msToSeconds(ms: number): number {
  return Math.round(ms) / 1000;
}
