/** The bundled label font (DejaVu Sans Mono from the dejavu-fonts-ttf package): no system fonts. */
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';

let cached: string | undefined;

export function labelFontPath(): string {
  if (!cached) {
    const require = createRequire(import.meta.url);
    cached = join(dirname(require.resolve('dejavu-fonts-ttf/package.json')), 'ttf', 'DejaVuSansMono.ttf');
  }
  return cached;
}
