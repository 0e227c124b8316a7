/**
 * A sheet's picture before encoding: the background, each cell's frame at its rectangle, the
 * audio band (raster.ts), and the labels as an ffmpeg filter script (drawbox + drawtext with the
 * bundled font), drawn by the same ffmpeg run that encodes the JPEG (encode.ts).
 */
import { blit, type Canvas, createCanvas, paintBand } from '../raster.js';
import type { LabelPlan, RenderPlan, SheetPlan } from '../types.js';

export interface ComposedSheet {
  canvas: Canvas;
  /** The filter script that draws every label of the sheet. */
  labels: string;
}

/**
 * Paints `sheet`: `frames[c]` is cell c's pixels (exactly its rect's size), undefined for a cell
 * left black; the band from the levels the plan carries.
 */
export function composeSheet(
  plan: RenderPlan,
  sheet: SheetPlan,
  frames: Array<Buffer | undefined>,
): ComposedSheet {
  const canvas = createCanvas(sheet.width, sheet.height, plan.theme.background);
  const labels: LabelPlan[] = [];
  for (const [c, cell] of sheet.cells.entries()) {
    const rgb = frames[c];
    if (rgb) blit(canvas, cell.rect, rgb);
    labels.push(cell.label);
  }
  if (sheet.band) {
    paintBand(canvas, sheet.band, plan.theme);
    if (sheet.band.message) labels.push(sheet.band.message);
  }
  return { canvas, labels: labels.flatMap((l) => labelFilters(l, plan)).join(',\n') };
}

/** drawbox + drawtext for one label, for a filter script (values quoted for the filtergraph). */
function labelFilters(label: LabelPlan, plan: RenderPlan): string[] {
  const [br, bg, bb, ba] = plan.theme.labelBox;
  const hex = (r: number, g: number, b: number) =>
    `0x${[r, g, b].map((v) => v.toString(16).padStart(2, '0')).join('')}`;
  const quote = (v: string) => `'${v.replace(/\\/g, '\\\\').replace(/'/g, "\\'").replace(/:/g, '\\:')}'`;
  const { box } = label;
  return [
    `drawbox=x=${box.x}:y=${box.y}:w=${box.w}:h=${box.h}:color=${hex(br, bg, bb)}@${(ba / 255).toFixed(3)}:t=fill`,
    `drawtext=fontfile=${quote(plan.fontPath)}:text=${quote(label.text)}:fontsize=${label.fontSize}` +
      `:fontcolor=${hex(...plan.theme.labelText)}:x=${label.textX}:y=${label.baselineY}-ascent`,
  ];
}
