/**
 * What text meant for others may show (DESIGN §5a): URLs with `***` for the password, job ids cut to
 * their first 8 characters where they appear in sheet URLs and server paths.
 */
import { describe, expect, it } from 'vitest';
import { excerpt, INPUT_SHOWN, redactUrl, scrubJobIds, shortJobId } from '../../src/core/redact.js';

const ID = 'AbCdEfGh_jKlMnOpQr-tUv'; // 22 base64url characters, the shape of a job id

describe('redactUrl', () => {
  it.each([
    [
      'postgres://vidsheet:s3cret@db.internal:5432/vidsheet',
      'postgres://vidsheet:***@db.internal:5432/vidsheet',
    ],
    ['smtp://mailer:p%40ss@smtp.example.com:587', 'smtp://mailer:***@smtp.example.com:587'],
    // An unencoded @ or : in the password: everything up to the last @ is masked.
    ['mysql://root:pa:ss@wo@rd@db/x', 'mysql://root:***@db/x'],
    // Not a valid URL (bad port, missing colon, missing slashes): still masked.
    ['postgres://u:hunter2@host:99999/db', 'postgres://u:***@host:99999/db'],
    ['postgres//u:hunter2@host/db', 'postgres//u:***@host/db'],
    ['u:hunter2@host', 'u:***@host'],
    // No password: unchanged.
    ['postgres://vidsheet@db.internal:5432/vidsheet', 'postgres://vidsheet@db.internal:5432/vidsheet'],
    ['https://example.com/a@b', 'https://example.com/a@b'],
    ['http://127.0.0.1:8080', 'http://127.0.0.1:8080'],
    ['ftp://example', 'ftp://example'],
  ])('%s → %s', (url, shown) => {
    expect(redactUrl(url)).toBe(shown);
  });
});

describe('job ids', () => {
  it('a log carries the first 8 characters', () => {
    expect(shortJobId(ID)).toBe('AbCdEfGh');
  });

  it('cuts a job id in a sheet URL, a sheet directory or a work directory, wherever it stands in the text', () => {
    const line = JSON.stringify({
      req: { url: `/v1/sheets/${ID}/video.sheet-1.jpg` },
      err: {
        message: `ENOENT: no such file or directory, rename '/data/work/${ID}/sheets/video.sheet-1.jpg' -> '/data/sheets/${ID}/video.sheet-1.jpg'`,
      },
      detail: `/srv/vidsheet-data/work/${ID}: Invalid data found when processing input`,
    });
    const scrubbed = scrubJobIds(line);
    expect(scrubbed).not.toContain(ID);
    expect(scrubbed).toContain('/v1/sheets/AbCdEfGh/video.sheet-1.jpg');
    expect(scrubbed).toContain("'/data/work/AbCdEfGh/sheets/video.sheet-1.jpg' -> '/data/sheets/AbCdEfGh/");
    expect(scrubbed).toContain('/srv/vidsheet-data/work/AbCdEfGh: Invalid data');
    expect(JSON.parse(scrubbed)).toBeTypeOf('object');
  });

  it('leaves everything else alone: other lengths, other directories, text without ids', () => {
    for (const text of [
      `/v1/sheets/${ID}x/video.sheet-1.jpg`,
      `/v1/sheets/${ID.slice(1)}/video.sheet-1.jpg`,
      `/v1/other/${ID}/x`,
      '{"msg":"job charged","jobId":"AbCdEfGh","price":2}',
      '/v1/sheets/short/video.sheet-1.jpg',
    ]) {
      expect(scrubJobIds(text)).toBe(text);
    }
  });
});

describe('excerpt', () => {
  it('quotes a short input whole and cuts a long one at 64 code points, with …', () => {
    expect(excerpt('clip.mp4')).toBe('clip.mp4');
    expect(excerpt('a'.repeat(64))).toBe('a'.repeat(64));
    expect(excerpt('a'.repeat(65))).toBe(`${'a'.repeat(64)}…`);
    // 64 emoji (two UTF-16 units each) and one more: the cut never splits a pair.
    expect(excerpt('😀'.repeat(65))).toBe(`${'😀'.repeat(INPUT_SHOWN)}…`);
  });

  it('shows control and bidirectional characters as U+FFFD, never as they are', () => {
    expect(excerpt('é\u202egpj.mp4\u0000x')).toBe('é\ufffdgpj.mp4\ufffdx');
    expect(excerpt('a\r\nb\tc\u007f\u0085\u2066d\u2069\u200f')).toBe(
      'a\ufffd\ufffdb\ufffdc\ufffd\ufffd\ufffdd\ufffd\ufffd',
    );
    expect(excerpt('a\u2028b\u2029c\ufeffd\u200be\u2060f\u180eg\u00adh')).toBe(
      'a\ufffdb\ufffdc\ufffdd\ufffde\ufffdf\ufffdg\ufffdh',
    );
    // Letters of any script, and joiners inside emoji, stay.
    expect(excerpt('نام-名前-👩‍👩‍👧.mov')).toBe('نام-名前-👩‍👩‍👧.mov');
  });
});
