/**
 * The engines' packet log: what each engine hands over, raw, for the zoom hints (./zoom.ts) to
 * read, and which packets go into it.
 *
 * A gap is measured by packets only where the engine listed every packet across it (`spans`), so
 * a partially read gap never looks quiet or busy by accident. A packet without a timestamp of its
 * own (Ogg: only the last packet of a page carries a granule position) cannot be placed, so both
 * engines end a span there: an Ogg stream has no packet signals on either engine (audio only).
 *
 * Where the keyframe rhythm comes from (one rule, both engines; issue 22):
 * - MP4/MOV (and AVI's idx1): the demuxer's index lists every packet, so every packet within
 *   ./zoom.ts PACKET_MARGIN_S of the window is in the log (native: the whole index, read at the
 *   open; the fallback: the same table within that part, RenderPlan `hintPackets`, read itself or,
 *   for a table it does not model, listed by ffprobe), and the interval is counted in packets.
 * - Matroska/WebM: the Cues list every keyframe but no other packet, and the native engine reads
 *   only around the cells; so the rhythm is learnt from `indexKeys`, the keyframes' presentation
 *   times (native: the demuxer's index entries, the Cues; the fallback: the keyframes of its
 *   listing, which are what the muxer cued), the interval counted in frames (seconds over the
 *   stream's frame step, the median step between listed packets). Packets are timed by their
 *   presentation timestamps there (the only ones Matroska stores), and a gap is measured only
 *   within one keyframe interval (no index keyframe in it): that is what the native engine reads
 *   on its way to a cell, whatever more the fallback lists.
 * - AVI and FLV (an index of every packet, or a seek index and a listing of every packet in
 *   the window): the packets listed, as MP4.
 * - No index at all (Ogg, MPEG-TS/PS, elementary streams): no packet signal on either engine, only
 *   audio. Each engine reaches the cells there its own way (the native engine bisects and reads a
 *   GOP or so before each cell, the fallback lists the whole window), so neither the keyframe
 *   rhythm nor a gap's bytes would be the same on both; one answer for both matters more.
 */

/** How a container's packets are used (the rule in the module comment), by FFmpeg's demuxer name. */
export function packetSource(format: string): 'packets' | 'cues' | 'none' {
  const names = format.split(',');
  if (names.includes('matroska') || names.includes('webm')) return 'cues';
  return names.some((n) => ['mov', 'mp4', 'avi', 'flv'].includes(n)) ? 'packets' : 'none';
}

/**
 * The video packets an engine listed while finding the cells' frames (headers only: times, sizes,
 * keyframe flags), in any order, possibly with repeats (a packet read twice after a seek back).
 * Times are seconds on the labels' clock (timestamp minus the container start): the packet's decode
 * timestamp where it has one (the order the encoder wrote them in), else its presentation time;
 * in Matroska always its presentation time (see the module comment).
 */
export interface PacketLog {
  times: Float64Array;
  sizes: Float64Array;
  /** 1 for a keyframe. */
  keys: Uint8Array;
  /**
   * Pairs [start, end] (seconds, same clock): within each, every packet of the stream is listed.
   * Gaps outside every span have no packet signals.
   */
  spans: Float64Array;
  /**
   * Where the container has a keyframe-only index (Matroska/WebM Cues): every keyframe of the
   * stream, as presentation times on this log's clock, in any order, possibly repeated; the
   * keyframe rhythm is then learnt from these (see the module comment). Empty otherwise.
   */
  indexKeys: Float64Array;
  /**
   * Per cell of the run (sheets in order): the time, on this log's clock, of the packet of the
   * frame the cell shows; NaN when unknown. Packets are in decode order and B-frames reorder (by
   * seconds in a variable-rate stream), so a gap's packets are those decoded after the first
   * cell's frame, up to and including the second cell's frame.
   */
  cells: Float64Array;
  /**
   * The pictures the engine decoded on the way to the cells (every one it decoded, the cells' own
   * frames among them): presentation times (seconds, labels' clock), in any order, possibly
   * repeated; NaN for a picture without a time.
   */
  pictures: Float64Array;
  /** Per picture, in the order of `pictures`: its thumbnail (./pictures.ts THUMB), THUMB_BYTES each. */
  thumbs: Uint8Array;
}

/** A packet listing: the log without what a render adds (its cells, its decoded pictures). */
export type ListedPackets = Omit<PacketLog, 'cells' | 'pictures' | 'thumbs'>;

export const emptyPacketLog = (): PacketLog => ({
  times: new Float64Array(0),
  sizes: new Float64Array(0),
  keys: new Uint8Array(0),
  spans: new Float64Array(0),
  indexKeys: new Float64Array(0),
  cells: new Float64Array(0),
  pictures: new Float64Array(0),
  thumbs: new Uint8Array(0),
});
