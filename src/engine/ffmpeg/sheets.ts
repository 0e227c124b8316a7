/**
 * The sheet assembler of a render: each sheet is composed as soon as its cells are in, while later
 * groups still decode. Frames stay in their files until then; a file is removed once every cell
 * showing it is on a canvas.
 */
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { labelSeconds } from '../timestamps.js';
import type { BandLevels, PacketLog, RenderPlan, RenderResult } from '../types.js';
import { composeSheet } from './compose.js';
import { readFrame } from './decode.js';
import { encodeSheet } from './encode.js';
import type { VideoDetails } from './media.js';
import type { Packets } from './packets.js';

/** A cell of the plan: its sheet, its index on the sheet, its plan. */
interface Cell {
  s: number;
  c: number;
  cell: RenderPlan['sheets'][number]['cells'][number];
}

export class Sheets {
  private readonly cells: Cell[];
  /** The size every frame is scaled to (the cells' size). */
  readonly size: { w: number; h: number };
  /** Cells by target time (ms), in plan order. */
  private readonly byTime = new Map<number, number[]>();
  /** Per cell: the pts of the frame it shows. */
  private readonly frameOf: Array<bigint | undefined>;
  /** Per cell: the decode time of its frame's packet (where it stands among the logged packets). */
  private readonly decodeAt: number[];
  private readonly files = new Map<bigint, string>();
  /** Targets shown by the frame before them (their own picture never decoded): for frame_times. */
  readonly shownInstead = new Map<bigint, bigint>();
  private readonly users = new Map<bigint, number>();
  private readonly waiting: number[];
  private readonly firstCell: number[];
  private readonly unreadable: RenderResult['unreadable'][];
  private settled = 0;
  /** A sheet that fails stops the decoding at once, and its error, not the stop, is what is thrown. */
  failure: { error: unknown } | undefined;

  /**
   * Composed sheets are pushed onto `composing`; `stop` is the render's controller, and `abortAll`
   * stops it when a sheet fails.
   */
  constructor(
    private readonly plan: RenderPlan,
    private readonly stop: AbortSignal,
    private readonly abortAll: () => void,
    private readonly composing: Promise<void>[],
    private readonly onProgress: ((done: number, total: number) => void) | undefined,
    private readonly bandLevels: Promise<BandLevels> | undefined,
  ) {
    this.cells = plan.sheets.flatMap((sheet, s) => sheet.cells.map((cell, c) => ({ s, c, cell })));
    this.size = { w: this.cells[0]?.cell.rect.w ?? 0, h: this.cells[0]?.cell.rect.h ?? 0 };
    this.frameOf = this.cells.map(() => undefined);
    this.decodeAt = this.cells.map(() => Number.NaN);
    this.waiting = plan.sheets.map((sheet) => sheet.cells.length);
    this.firstCell = plan.sheets.map((_, s) => this.cells.findIndex((k) => k.s === s));
    this.unreadable = plan.sheets.map(() => []);
    for (const [k, { cell }] of this.cells.entries())
      this.byTime.set(cell.timeMs, [...(this.byTime.get(cell.timeMs) ?? []), k]);
  }

  /** The target times (ms), ascending. */
  times(): number[] {
    return [...this.byTime.keys()].sort((a, b) => a - b);
  }

  /**
   * A part's frames for its target times (`frameIndex`: index into packets.pts, -1: none, whose
   * cells are settled at once); returns the cells of each frame, by that index.
   */
  show(frameIndex: Map<number, number>, packets: Packets): Map<number, number[]> {
    const cellsOfFrame = new Map<number, number[]>();
    for (const [t, f] of frameIndex) {
      const ks = this.byTime.get(t) ?? [];
      if (f < 0) {
        this.settle(ks);
        continue;
      }
      const pts = packets.pts[f] as bigint;
      for (const k of ks) {
        this.frameOf[k] = pts;
        this.decodeAt[k] = packets.decodeTime.get(pts) ?? Number.NaN;
      }
      this.users.set(pts, (this.users.get(pts) ?? 0) + ks.length);
      cellsOfFrame.set(f, [...(cellsOfFrame.get(f) ?? []), ...ks]);
    }
    return cellsOfFrame;
  }

  /** Frame files extracted, by pts (read when their sheet is composed). */
  add(frames: Map<bigint, string>): void {
    for (const [pts, file] of frames) this.files.set(pts, file);
  }

  /** Cells whose frames are in (or never will be): a sheet whose cells all are is composed. */
  settle(ks: number[]): void {
    for (const k of ks) {
      this.onProgress?.(++this.settled, this.cells.length);
      const s = this.cells[k]?.s as number;
      this.waiting[s] = (this.waiting[s] as number) - 1;
      if (this.waiting[s] !== 0) continue;
      const task = this.compose(s);
      task.catch((error: unknown) => {
        this.failure ??= { error };
        this.abortAll();
      });
      this.composing.push(task);
    }
  }

  /** The render's result, once every sheet is composed; `log`: what the hints read. */
  result(d: VideoDetails, log: Omit<PacketLog, 'cells'>): RenderResult {
    return {
      unreadable: this.unreadable.flat(),
      frameTimes: this.cells.map(({ s, c }, k) => {
        const pts = this.frameOf[k];
        const lost = this.unreadable[s]?.some((u) => u.cell === c);
        return pts === undefined || lost
          ? null
          : labelSeconds(this.shownInstead.get(pts) ?? pts, d.timeBase, d.startUs);
      }),
      packets: { ...log, cells: new Float64Array(this.decodeAt) },
    };
  }

  private async release(pts: bigint): Promise<void> {
    const left = (this.users.get(pts) ?? 1) - 1;
    this.users.set(pts, left);
    const file = this.files.get(pts);
    if (left > 0 || file === undefined) return;
    this.files.delete(pts);
    await rm(file, { force: true });
  }

  private async compose(s: number): Promise<void> {
    const { plan } = this;
    const sheet = plan.sheets[s] as RenderPlan['sheets'][number];
    const first = this.firstCell[s] as number;
    const frames: Array<Buffer | undefined> = [];
    for (const [c, cell] of sheet.cells.entries()) {
      const pts = this.frameOf[first + c];
      const file = pts === undefined ? undefined : this.files.get(pts);
      const rgb = file ? await readFrame(file, cell.rect) : null;
      if (!rgb) this.unreadable[s]?.push({ sheet: s, cell: c });
      frames.push(rgb ?? undefined);
    }
    for (const [c] of sheet.cells.entries()) {
      const pts = this.frameOf[first + c];
      if (pts !== undefined) await this.release(pts);
    }
    // Levels measured while the frames decoded: awaited only now, by a sheet that has a band.
    const band =
      sheet.band && !sheet.band.message && this.bandLevels
        ? { ...sheet.band, levels: (await this.bandLevels)[s] }
        : sheet.band;
    const { canvas, labels } = composeSheet(plan, { ...sheet, band }, frames);
    const script = join(plan.tempDir, `sheet-${s + 1}.filter`);
    await encodeSheet(canvas, labels, plan.quality, sheet.path, script, this.stop);
  }
}
