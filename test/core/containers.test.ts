/** The container allow-list rule (DESIGN §5a "Containers a server opens"), on names alone. */
import { describe, expect, it } from 'vitest';
import { allowedContainers, containerAllowed, SERVER_CONTAINERS } from '../../src/core/containers.js';

// DESIGN §5a's list, written out here so the code is checked against the design, not itself.
const DESIGN_LIST = [
  'mov,mp4,m4a,3gp,3g2,mj2',
  'matroska,webm',
  'avi',
  'mpegts',
  'mpeg',
  'flv',
  'asf',
  'ogg',
  'mxf',
  'nut',
  'rm',
  'wtv',
  'ivf',
  'h264',
  'hevc',
  'm4v',
];

describe('the server allow-list', () => {
  it("is DESIGN §5a's list exactly, and cannot be changed at run time", () => {
    expect([...SERVER_CONTAINERS]).toEqual(DESIGN_LIST);
    expect(() => (SERVER_CONTAINERS as string[]).push('hls')).toThrow();
    expect(SERVER_CONTAINERS).not.toContain('hls');
  });

  it('restricted jobs get the list; local jobs (the default) get none', () => {
    expect(allowedContainers('restricted')).toBe(SERVER_CONTAINERS);
    expect(allowedContainers('any')).toBeUndefined();
    expect(allowedContainers()).toBeUndefined();
  });

  it('allows each listed demuxer by its whole name, as FFmpeg names it', () => {
    for (const name of DESIGN_LIST)
      expect([name, containerAllowed(name, SERVER_CONTAINERS)]).toEqual([name, true]);
  });

  it('refuses playlists, lists, pictures, sessions, text and partial names', () => {
    const refused = [
      'hls',
      'dash',
      'concat',
      'image2',
      'image2pipe',
      'jpeg_pipe',
      'png_pipe',
      'sdp',
      'rtsp',
      'rtp',
      'tty',
      'srt',
      'webm_dash_manifest',
      'mpegtsraw',
      'mpegvideo',
      'asf_o',
      'live_flv',
      'lavfi',
      'data',
      // A piece of a listed name is not that name.
      'mp4',
      'mov',
      'matroska',
      'webm',
      'mov,mp4',
      'mov,mp4,m4a,3gp,3g2,mj2,hls',
      'MPEGTS',
      ' avi',
      '',
    ];
    for (const name of refused)
      expect([name, containerAllowed(name, SERVER_CONTAINERS)]).toEqual([name, false]);
  });

  it('without a list, any demuxer FFmpeg detects is opened (local surfaces)', () => {
    for (const name of ['hls', 'concat', 'image2', 'mov,mp4,m4a,3gp,3g2,mj2'])
      expect(containerAllowed(name, undefined)).toBe(true);
  });
});
