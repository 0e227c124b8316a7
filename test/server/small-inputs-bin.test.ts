/**
 * DESIGN §5a "Small inputs stay small", black-box on the real bin over PostgreSQL and an
 * S3-compatible store (both on loopback), with each engine: a zoom field over 2048 characters is
 * `422` naming it and never echoed (response and log), a zoom body that is not JSON is `415` and
 * not charged, the hosted form ignores `start` and `end` however long, and a kept video's file name
 * is shown and stored by 64 characters at most. (app.test.ts holds the
 * same sentences through `inject`, with the remote tool's.)
 */
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ENGINES } from '../helpers/cli.js';
import { plainClip } from '../helpers/fixtures.js';
import { newAccount, postJob, removeServerDirs, showAccount, videoForm } from '../helpers/server.js';
import { scaledOutServer } from '../helpers/server-database.js';

afterAll(removeServerDirs);

const NOT_JSON = '{"error":"bad_request","message":"send the body as application/json"}';

let clip: Buffer;
beforeAll(async () => {
  clip = readFileSync(await plainClip(3));
}, 300_000);

describe.each(ENGINES)('small inputs stay small on PostgreSQL + S3 (engine %s)', (engine) => {
  const held = scaledOutServer({ VIDSHEET_ENGINE: engine });

  const auth = (key: string) => ({ authorization: `Bearer ${key}` });
  async function keptVideo() {
    const account = await newAccount(held.server, 50);
    const res = await fetch(`${held.server.url}/v1/videos`, {
      method: 'POST',
      headers: auth(account.key),
      body: videoForm({ bytes: clip, filename: 'clip.mp4' }),
    });
    const text = await res.text();
    expect(res.status, text).toBe(201);
    const balance = (await showAccount(held.server, account.email)).balance;
    return { account, videoId: (JSON.parse(text) as { video_id: string }).video_id, balance };
  }
  async function zoom(key: string, videoId: string, body: string, contentType = 'application/json') {
    const res = await fetch(`${held.server.url}/v1/videos/${videoId}/sheets`, {
      method: 'POST',
      headers: { ...auth(key), 'content-type': contentType },
      body,
    });
    return { status: res.status, body: await res.text() };
  }

  it.each(['start', 'end', 'density', 'response'])(
    'a zoom %s over 2048 characters is 422 naming it, never echoed, not charged',
    async (field) => {
      const { account, videoId, balance } = await keptVideo();
      const huge = `9${'x'.repeat(100_000)}`;
      expect(await zoom(account.key, videoId, JSON.stringify({ [field]: huge }))).toEqual({
        status: 422,
        body: `{"error":"bad_request","message":"${field} is longer than 2048 characters"}`,
      });
      expect(JSON.stringify(held.server.logs)).not.toContain('x'.repeat(65));
      expect((await showAccount(held.server, account.email)).balance).toBe(balance);
    },
    120_000,
  );

  it.each([
    ['a form', 'density=4x4', 'application/x-www-form-urlencoded'],
    ['text', '{"density":"4x4"}', 'text/plain'],
  ])(
    'a zoom sent as %s is 415 and not charged',
    async (_name, body, contentType) => {
      const { account, videoId, balance } = await keptVideo();
      expect(await zoom(account.key, videoId, body, contentType)).toEqual({ status: 415, body: NOT_JSON });
      expect((await showAccount(held.server, account.email)).balance).toBe(balance);
    },
    120_000,
  );

  it("a kept video's file name is shown and stored by 64 characters at most", async () => {
    const account = await newAccount(held.server, 20);
    const name = `${'n'.repeat(60_000)}.mp4`;
    const res = await fetch(`${held.server.url}/v1/videos`, {
      method: 'POST',
      headers: auth(account.key),
      body: videoForm({ bytes: clip, filename: name }),
    });
    const kept = (await res.json()) as { video_id: string; input: string };
    expect(res.status).toBe(201);
    expect(kept.input).toBe(`${'n'.repeat(64)}…`);
    const listed = await fetch(`${held.server.url}/v1/videos/${kept.video_id}`, {
      headers: auth(account.key),
    });
    expect(((await listed.json()) as { input: string }).input).toBe(kept.input);
    expect(JSON.stringify(held.server.logs)).not.toContain('n'.repeat(65));
  }, 120_000);

  it('the hosted form ignores start and end, however long', async () => {
    const account = await newAccount(held.server, 20);
    const form = videoForm(
      { bytes: clip, filename: 'clip.mp4' },
      { start: 'z'.repeat(100_000), end: 'z'.repeat(3000) },
    );
    const res = await postJob(held.server, account.key, form);
    const text = await res.text();
    expect(res.status, text).toBe(200);
    expect(text).not.toContain('z'.repeat(65));
    expect(JSON.stringify(held.server.logs)).not.toContain('z'.repeat(65));
  }, 120_000);
});
