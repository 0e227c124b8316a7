/** jpegSize reads the frame header; jpeg-js (an independent encoder) makes the JPEGs it reads. */
import { describe, expect, it } from 'vitest';
import { jpegSize } from '../../src/core/jpeg-size.js';
import { encodeJpeg } from '../helpers/frames.js';

const image = (width: number, height: number) => ({
  width,
  height,
  data: new Uint8Array(width * height * 4),
});

describe('jpegSize', () => {
  it('reads width and height, whatever the aspect', () => {
    for (const [w, h] of [
      [1, 1],
      [1568, 882],
      [36, 2790],
      [300, 17],
    ] as const) {
      expect(jpegSize(encodeJpeg(image(w, h)))).toEqual({ width: w, height: h });
    }
  });

  it('is null for bytes that are not a JPEG or stop before the frame header', () => {
    const jpeg = encodeJpeg(image(64, 48));
    expect(jpegSize(Buffer.from('not a jpeg at all'))).toBeNull();
    expect(jpegSize(new Uint8Array())).toBeNull();
    expect(jpegSize(jpeg.subarray(0, 20))).toBeNull();
    // A scan with no frame header before it.
    expect(jpegSize(Uint8Array.from([0xff, 0xd8, 0xff, 0xda, 0x00, 0x02]))).toBeNull();
  });
});
