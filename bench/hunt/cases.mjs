/** The hunts the benchmark runs: every needle class at several depths, at 30 fps, and two at 60 fps. */
import { recipe } from './haystack.mjs';

export const DEPTHS = [0.12, 0.38, 0.63, 0.88];
export const DENSITIES = ['4x4', '6x6'];

export function haystackRecipes() {
  return [
    ...['A', 'B', 'C'].flatMap((c) => DEPTHS.map((d) => recipe(c, 30, d))),
    recipe('A', 60, 0.5),
    recipe('B', 60, 0.5),
  ];
}
