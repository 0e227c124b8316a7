/**
 * The test tiers (vitest projects, vitest.config.ts): each test file runs in exactly one, which
 * test/tiers.test.ts checks. An entry is a directory (ending in `/`: every test file under it) or
 * one file; `unit` files are taken out of the other tiers' directories.
 *
 *   unit     rules, vectors, readers, the CLI's main(argv, io), the server's inject tests: in-process,
 *            no encoder, no spawned server, browser or PostgreSQL (`npm run test:unit`, under a minute)
 *   engine   both engines on encoded clips: frame truth, hints, audio, the CLI and MCP stdio contracts
 *   server   the hosted service run as its bin: HTTP, keys page (Chromium), PostgreSQL, S3, deploy
 *   corpus   both engines on the real-file corpus against the sequential-decode oracle
 *   package  the packed packages installed from a loopback registry, the image's steps
 */
export const TIERS = {
  unit: [
    'test/core/',
    'test/engine/vectors.test.ts',
    'test/engine/process.test.ts',
    'test/engine/decoder-stamps.test.ts',
    'test/engine/thumb-stamps.test.ts',
    'test/engine/sample-table-bytes.test.ts',
    'test/bench/hunt-agent.test.ts',
    'test/bench/picture-math.test.ts',
    'test/bench/events-match.test.ts',
    'test/bench/soak-checks.test.ts',
    'test/cli/main.test.ts',
    'test/server/app.test.ts',
    'test/server/config-edge.test.ts',
    'test/server/early-answer.test.ts',
    'test/server/free-actors.test.ts',
    'test/server/hosted-jobs.test.ts',
    'test/server/request-log.test.ts',
    'test/server/sessions-store.test.ts',
    'test/server/billing/anonymous-address.test.ts',
    'test/server/billing/anonymous-lane.test.ts',
    'test/server/billing/payments.test.ts',
    'test/server/keys/sign-in.test.ts',
    'test/server/keys/sign-in-address.test.ts',
    'test/server/remote/fetch-policy.test.ts',
    'test/package/ffmpeg-sources.test.ts',
    'test/tiers.test.ts',
  ],
  engine: [
    'test/engine/',
    'test/job.test.ts',
    'test/job-audio.test.ts',
    'test/job-hints.test.ts',
    'test/mcp/',
    'test/cli/',
    'test/bench/',
    'test/helpers/',
  ],
  server: ['test/server/'],
  corpus: ['test/corpus/'],
  package: ['test/package/'],
} as const;

export type Tier = keyof typeof TIERS;

/** An entry as a vitest glob. */
export const glob = (entry: string) => (entry.endsWith('/') ? `${entry}**/*.test.ts` : entry);

/** The tier a test file (a path from the repository root) runs in. */
export function tierOf(file: string): Tier[] {
  const matches = (entry: string) => (entry.endsWith('/') ? file.startsWith(entry) : file === entry);
  if (TIERS.unit.some(matches)) return ['unit'];
  return (Object.keys(TIERS) as Tier[]).filter((tier) => tier !== 'unit' && TIERS[tier].some(matches));
}
