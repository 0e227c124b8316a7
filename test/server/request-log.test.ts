/**
 * DESIGN §5a "Small inputs stay small" in the logs and in what the framework answers by itself: at
 * most 64 characters of any input in a log line or a message. In process (`inject`), the log lines
 * collected: Fastify's request lines (URL, Host), an uploaded file's name, the router's own refusals
 * and the MCP SDK's unknown-tool message.
 */
import { describe, expect, it } from 'vitest';
import { inProcessApps, mcpToolCall, multipartUpload } from '../helpers/app.js';

const apps = inProcessApps('sqlite');
/** 65 of one character in a row: more of an input than any line may quote. */
const tooMuch = (c: string) => c.repeat(65);

describe('no input whole in a log line or an answer (DESIGN §5a)', () => {
  it('the request lines quote the URL and the Host by 64 characters', async () => {
    const lines: string[] = [];
    const server = (await apps.build({ log: lines })).app;
    const res = await server.inject({
      method: 'GET',
      url: `/healthz?${'u'.repeat(3000)}`,
      headers: { host: `${'h'.repeat(3000)}.example` },
    });
    expect(res.statusCode).toBe(200);
    const incoming = lines.map((l) => JSON.parse(l)).find((l) => l.msg === 'incoming request');
    expect(incoming.req).toEqual({
      method: 'GET',
      url: `/healthz?${'u'.repeat(55)}…`,
      host: `${'h'.repeat(64)}…`,
      remoteAddress: '127.0.0.1',
    });
    expect(lines.join('\n')).not.toContain(tooMuch('u'));
    expect(lines.join('\n')).not.toContain(tooMuch('h'));
  });

  it("an uploaded file's name is quoted by 64 characters", async () => {
    const lines: string[] = [];
    let runs = 0;
    const built = await apps.build({
      log: lines,
      run: async () => {
        runs++;
        throw new Error('stop here');
      },
    });
    const server = built.app;
    const { key } = await built.account('log-name@example.com');
    const form = multipartUpload();
    const res = await server.inject({
      method: 'POST',
      url: '/v1/vidsheet',
      headers: { ...form.headers, authorization: `Bearer ${key}` },
      payload: form.payload.replace('filename="clip.mp4"', `filename="${'n'.repeat(3000)}.mp4"`),
    });
    expect(res.statusCode).toBe(500);
    expect(runs).toBe(1);
    const received = lines.map((l) => JSON.parse(l)).find((l) => l.msg === 'upload received');
    expect(received.input).toBe(`${'n'.repeat(64)}…`);
    expect(lines.join('\n')).not.toContain(tooMuch('n'));
  });

  it("a path parameter over the router's limit is 404 not_found, the path not quoted", async () => {
    const lines: string[] = [];
    const server = (await apps.build({ log: lines })).app;
    for (const url of [
      `/v1/sheets/${'p'.repeat(3000)}/video.sheet-1.jpg`,
      '/v1/sheets/%zz/video.sheet-1.jpg',
    ]) {
      const res = await server.inject({ method: 'GET', url });
      expect([res.statusCode, res.body]).toEqual([404, '{"error":"not_found"}']);
    }
    expect(lines.join('\n')).not.toContain(tooMuch('p'));
  });

  it('a call of an unknown tool is answered with its name quoted by 64 characters', async () => {
    const lines: string[] = [];
    const server = (await apps.build({ log: lines })).app;
    const res = await server.inject(mcpToolCall({}, undefined, 't'.repeat(3000)));
    expect(res.statusCode).toBe(200);
    expect(res.body).toContain(`${'t'.repeat(64)}…`);
    expect(res.body).not.toContain(tooMuch('t'));
    expect(lines.join('\n')).not.toContain(tooMuch('t'));
  });
});
