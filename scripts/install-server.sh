#!/usr/bin/env bash
# Installs vidsheet-server from the tarballs scripts/pack.mjs made into PREFIX, as an operator
# installs it from the registry: a fresh project, production dependencies only, vidsheet and the
# native binding at the same version. deploy/Dockerfile runs it in its install stage; the image
# test (test/package/image.test.ts) runs the same line into a directory.
#
#   scripts/install-server.sh PACKAGES_DIR PREFIX     then PREFIX/node_modules/.bin/vidsheet-server
#
# better-sqlite3 (the default ledger) is compiled from its bundled SQLite against this Node's own
# headers, like scripts/setup.sh does: nothing is downloaded from outside the npm registry.
set -euo pipefail
if [ "$#" -ne 2 ]; then
  echo "usage: $0 PACKAGES_DIR PREFIX" >&2
  exit 2
fi
packages="$(cd "$1" && pwd)"
prefix="$2"

tarballs=("$packages"/vidsheet-server-*.tgz "$packages"/vidsheet-[0-9]*.tgz "$packages"/vidsheet-binding-*.tgz)
for t in "${tarballs[@]}"; do
  [ -f "$t" ] || { echo "install-server: $t not found (run node scripts/pack.mjs --out $1)" >&2; exit 1; }
done

mkdir -p "$prefix"
cd "$prefix"
echo '{ "name": "vidsheet-server-install", "private": true }' >package.json
nodedir="$(dirname "$(dirname "$(command -v node)")")"
npm_config_build_from_source=true npm_config_nodedir="$nodedir" \
  npm install --omit=dev --no-audit --no-fund --no-package-lock "${tarballs[@]}"
# The engine the image will run: fail the build here rather than serve on the fallback by surprise.
node --input-type=module -e "
  import { createRequire } from 'node:module';
  const require = createRequire(process.cwd() + '/node_modules/vidsheet/package.json');
  const binding = require('@vidsheet/binding-linux-x64-gnu');
  if (typeof binding.render !== 'function') throw new Error('the native binding does not load');
"
