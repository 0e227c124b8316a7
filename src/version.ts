/** The package's version, read from package.json at call time (no work at import time). */
import { createRequire } from 'node:module';

export function packageVersion(): string {
  const require = createRequire(import.meta.url);
  return (require('../package.json') as { version: string }).version;
}
