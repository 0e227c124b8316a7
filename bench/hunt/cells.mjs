/**
 * What the scripted agent sees: a sheet's pixels, cut into cells by the sheet layout
 * (src/core/layout.ts), each cell summed up as the share of its pixels close to a given colour.
 * Nothing here reads a label or a frame number off the picture.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { gridSide } from '../../dist/core/density.js';
import { jpegSize } from '../../dist/core/jpeg-size.js';
import { BAND_HEIGHT, cellRect, GUTTER } from '../../dist/core/layout.js';
import { KIND } from './agent.mjs';
import { LOOK, TINY } from './haystack.mjs';

/** Decodes a JPEG to packed RGB (ffmpeg), with its size. */
export function decodeRgb(path) {
  const bytes = readFileSync(path);
  const size = jpegSize(bytes);
  if (!size) throw new Error(`${path} is not a JPEG`);
  const rgb = execFileSync(
    'ffmpeg',
    ['-v', 'error', '-nostdin', '-i', path, '-f', 'rawvideo', '-pix_fmt', 'rgb24', 'pipe:1'],
    {
      maxBuffer: 256 * 1024 * 1024,
    },
  );
  if (rgb.length !== size.width * size.height * 3) throw new Error(`${path}: decoded ${rgb.length} bytes`);
  return { ...size, rgb };
}

/**
 * The grid of a sheet, from its pixel size alone (the layout fixes gutters and the band; the cell
 * size follows): what `cellRect` needs.
 */
export function sheetGrid(width, height, density, withBand) {
  const side = gridSide(density);
  const gridTop = withBand ? GUTTER + BAND_HEIGHT + GUTTER : GUTTER;
  const cellWidth = (width - (side + 1) * GUTTER) / side;
  const cellHeight = (height - gridTop) / side - GUTTER;
  if (!Number.isInteger(cellWidth) || !Number.isInteger(cellHeight) || cellHeight < 16) {
    throw new Error(`a ${width}x${height} sheet is not a ${density} grid${withBand ? ' with a band' : ''}`);
  }
  return { side, cellWidth, cellHeight, gridTop, width, height };
}

/**
 * Each cell of a sheet, in cell order: `share(colour)` is the fraction of the cell's pixels within
 * `tolerance` (Euclidean, sRGB) of `colour`. The label box (bottom-left) is part of the cell and
 * counts as what it is: dark pixels.
 */
export function readCells(path, density, { withBand = true, step = 2 } = {}) {
  const { width, height, rgb } = decodeRgb(path);
  const grid = sheetGrid(width, height, density, withBand);
  const cells = [];
  for (let i = 0; i < grid.side * grid.side; i++) {
    const r = cellRect(grid, i);
    const pixels = [];
    for (let y = r.y + 1; y < r.y + r.h - 1; y += step) {
      for (let x = r.x + 1; x < r.x + r.w - 1; x += step) {
        const at = (y * width + x) * 3;
        pixels.push(rgb[at], rgb[at + 1], rgb[at + 2]);
      }
    }
    const count = pixels.length / 3;
    cells.push({
      share(colour, tolerance = 60) {
        let near = 0;
        for (let k = 0; k < pixels.length; k += 3) {
          const dr = pixels[k] - colour[0];
          const dg = pixels[k + 1] - colour[1];
          const db = pixels[k + 2] - colour[2];
          if (dr * dr + dg * dg + db * db <= tolerance * tolerance) near++;
        }
        return near / count;
      },
    });
  }
  return cells;
}

/**
 * The share of a cell's pixels that makes class T's mark seen: the mark covers about 0.1 % of the
 * picture; nothing in the hay is near its yellow.
 */
const TINY_SHARE = 0.0003;

/**
 * What the agent is told the needle of a class looks like, as a test on one cell: A the orange
 * background, B the white frame, C the red square (a green one is a decoy), T and U the yellow
 * mark (a few pixels of the cell: any cluster of them counts); N (no needle) nothing.
 * `look`: the colours (the real haystacks' REAL_LOOK: orange decoys); `squareShare`: the share of
 * a cell the square's colour must reach (real footage has a few per cent of reddish or orange
 * pixels here and there; the square covers 11 % of the picture).
 */
export function classifyCell(needleClass, cell, { look = LOOK, squareShare = 0.04 } = {}) {
  if (needleClass === 'N') return KIND.none;
  if (needleClass === 'T' || needleClass === 'U')
    return cell.share(TINY.colour, 80) > TINY_SHARE ? KIND.needle : KIND.none;
  if (needleClass === 'A') return cell.share(look.changed) > 0.5 ? KIND.needle : KIND.none;
  if (needleClass === 'B') return cell.share(look.flash) > 0.5 ? KIND.needle : KIND.none;
  if (cell.share(look.needle, 80) > squareShare) return KIND.needle;
  return cell.share(look.decoy, 80) > squareShare ? KIND.decoy : KIND.none;
}
