#!/usr/bin/env node
/**
 * A stand-in for `apt-get` and `apt-cache` (by the name it is run as) over a made-up mirror, for
 * test/package/ffmpeg-sources.test.ts. STUB_APT_MIRROR names a JSON file: per source package, the
 * versions apt lists and how the mirror serves each (`missing`: 404; `wrong-file`: a file that does
 * not match its .dsc). Every call is appended to STUB_APT_LOG as "<subcommand> [<option>] <package>".
 */
import { createHash } from 'node:crypto';
import { appendFileSync, readFileSync, writeFileSync } from 'node:fs';
import { basename } from 'node:path';

const mirror = JSON.parse(readFileSync(process.env.STUB_APT_MIRROR, 'utf8'));
// Options (-qq, -o X=Y, --only-source) are not this stand-in's business.
const args = process.argv.slice(2).filter((a, i, all) => !a.startsWith('-') && all[i - 1] !== '-o');
const options = process.argv.slice(2).filter((a) => a === '--download-only' || a === '--print-uris');
const log = (line) => appendFileSync(process.env.STUB_APT_LOG, `${line}\n`);
const sha256 = (text) => createHash('sha256').update(text).digest('hex');
const [command, target = ''] = args;
const [pkg, wanted] = target.split('=');
const listed = mirror[pkg] ?? [];
const noEpoch = (version) => version.replace(/^\d+:/, '');

log([command, ...options, target].filter(Boolean).join(' '));
if (basename(process.argv[1]) === 'apt-cache') {
  // showsrc: one record per listed version, in the mirror's order (not sorted)
  for (const { version } of listed) process.stdout.write(`Package: ${pkg}\nVersion: ${version}\n\n`);
} else if (command === 'update') {
  // nothing changes on the made-up mirror
} else if (command === 'source') {
  const entry = wanted ? listed.find((e) => e.version === wanted) : listed[0];
  if (!entry) {
    process.stderr.write(`E: Can not find version '${wanted}' of package '${pkg}'\n`);
    process.exit(100);
  }
  const dsc = `${pkg}_${noEpoch(entry.version)}.dsc`;
  const orig = `${pkg}_${noEpoch(entry.version).replace(/-[^-]*$/, '')}.orig.tar.xz`;
  const origText = `${pkg} ${entry.version} sources\n`;
  const dscText =
    `Format: 3.0 (quilt)\nSource: ${pkg}\nVersion: ${entry.version}\nChecksums-Sha256:\n` +
    ` ${sha256(origText)} ${origText.length} ${orig}\n`;
  if (options.includes('--print-uris')) {
    process.stdout.write(
      `'http://mirror.invalid/${dsc}' ${dsc} ${dscText.length} SHA256:${sha256(dscText)}\n`,
    );
  } else if (entry.serves === 'missing') {
    process.stderr.write(`E: Failed to fetch http://mirror.invalid/${dsc}  404  Not Found\n`);
    process.exit(100);
  } else {
    writeFileSync(dsc, dscText);
    writeFileSync(orig, entry.serves === 'wrong-file' ? `${origText}changed\n` : origText);
  }
} else {
  process.stderr.write(`stub-apt: unexpected call: ${process.argv.slice(2).join(' ')}\n`);
  process.exit(2);
}
