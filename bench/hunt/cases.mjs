/**
 * The hunts the benchmark runs: every needle class at several depths at 30 fps, and every class at
 * one depth at 60 fps, in each encode asked for. Class D (a sound) runs in the fixed-GOP encode
 * too: its signal is the sound track's, which the video encode should not touch, and the fixed-GOP
 * row shows that it does not.
 */
import { CLASSES, ENCODES, recipe } from './haystack.mjs';

export const DEPTHS = [0.12, 0.38, 0.63, 0.88];
export const DENSITIES = ['4x4', '6x6'];
export const RATES = [30, 60];

export function haystackRecipes({ classes = CLASSES, encodes = Object.keys(ENCODES), rates = RATES } = {}) {
  const out = [];
  for (const encode of encodes) {
    for (const fps of rates) {
      for (const c of classes) {
        for (const depth of fps === 30 ? DEPTHS : [0.5]) out.push(recipe(c, fps, depth, encode));
      }
    }
  }
  return out;
}
