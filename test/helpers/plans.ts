/** Render plans for tests and the scale benchmark, laid out as the job runner lays them out. */
import { JPEG_QUALITY, layoutSheets, THEME } from '../../src/core/layout.js';
import { labelFontPath } from '../../src/engine/font.js';
import type { RenderPlan } from '../../src/engine/types.js';

/** A render plan over `clip` (stream 0, no audio). */
export function renderPlan(
  clip: string,
  tempDir: string,
  layout: Omit<Parameters<typeof layoutSheets>[0], 'hasAudio'>,
): RenderPlan {
  return {
    input: clip,
    videoStream: 0,
    fontPath: labelFontPath(),
    quality: JPEG_QUALITY,
    theme: THEME,
    sheets: layoutSheets({ ...layout, hasAudio: false }),
    tempDir,
  };
}
