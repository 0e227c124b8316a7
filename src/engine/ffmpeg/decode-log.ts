/**
 * Reading a run's log: what the decoder's lines say about the decode (the rule, logLine:
 * fixtures/vectors/decoder-log.json; the native engine's twin is
 * crates/vidsheet-core/src/decode_log.rs), and where that trouble stands against the start point
 * and an open-GOP entry (troubleWatch: how this engine, which sees only a log, tells them).
 */
import type { VideoDetails } from './media.js';

/** Who logged a line (decoder-log.json's sources). */
export type LogSource = 'decoder' | 'demuxer' | 'muxer' | 'filter' | 'other';

/** What one log message says about the decode (decoder-log.json; native: decode_log.rs `classify`). */
export function logLine(source: LogSource, level: string, message: string): 'error' | 'gap' | null {
  if (source !== 'decoder') return null;
  if (level === 'error' || level === 'fatal' || level === 'panic') return 'error';
  return level === 'debug' && message.startsWith('Frame num gap') ? 'gap' : null;
}

/**
 * A line of a run's log (`-loglevel level+debug`: `[name @ 0x...] [level] message`, the tool's own
 * lines without the context) as logLine reads it. A codec's context (the decoder, or its parser:
 * the log does not tell them apart) is any context but the demuxer (named by ffprobe), the image
 * muxer and the filter graph; of the tool's lines only its report of a failed decode call is the
 * decoder's.
 */
export function readLogLine(
  text: string,
  demuxer: string,
): { source: LogSource; level: string; message: string } | null {
  const m = /^(?:\[(.+?) @ 0x[0-9a-f]+\] )?\[(\w+)\] (.*)$/.exec(text);
  if (!m) return null;
  const [, name, level = '', message = ''] = m;
  const source: LogSource =
    name === undefined
      ? /^Error while decoding\b/.test(message)
        ? 'decoder'
        : 'other'
      : name === demuxer
        ? 'demuxer'
        : name === 'image2'
          ? 'muxer'
          : /^(Parsed_|graph |auto_scale|swscaler$|showinfo@)/.test(name)
            ? 'filter'
            : 'decoder';
  return { source, level, message };
}

/** H.264's error when told to forget a short-term picture it does not have (see troubleWatch). */
const MMCO_UNREF = 'mmco: unref short failure';

/**
 * Reads a run's log as it streams (logLine): the decoder's errors and invented reference pictures.
 * After a seek an error counts from the first keyframe read: an indexed demuxer lands on one, a
 * bisecting one may land before it, where packets fail without consequence (`keyframes`, the listed
 * ones, name it then). When no keyframe is recognised, all errors count. Invented pictures stay
 * referenced past any keyframe but an IDR, so they count wherever they appear, except with an IDR
 * entry (`idrEntry`, its pts; decoded with `-debug pict`) whose packet the run reads: the first IDR
 * slice the run's decoder logs is then the entry or one before it, and an IDR drops every
 * reference picture, invented ones too; the gaps logged before it only say that decoding started
 * mid-stream before the entry (a bisecting seek lands in the GOP before it). The packets' lines
 * alone do not tell this: with frame threads the decoder logs a packet's gaps after later packets
 * were read. A seek that lands past the entry never reads it: then every gap counts.
 *
 * Also whether all of it is what entering at a keyframe that is not an IDR produces (`entry`, see
 * src/core/open-gop.ts): references invented while that keyframe decodes, before the next packet
 * is read, and failures to forget pictures that were never there (MMCO_UNREF), nothing else. The
 * log names no packet: one decoding thread logs a packet's lines after it is read and before the
 * next one is; frame threads log later, so there an entry is never recognised (and is verified).
 */
export function troubleWatch(d: VideoDetails, keyframes: Set<bigint> | null, idrEntry: bigint | null) {
  const packetLine = new RegExp(
    `^\\[info\\] demuxer -> ist_index:${d.index} type:video .*\\bpkt_pts:(-?\\d+|NOPTS) `,
  );
  let entered = keyframes === null;
  let before = false;
  let after = false;
  let invented = false;
  // Packets read since the keyframe decoding entered at (0: that keyframe is decoding).
  let sinceKey = keyframes === null ? 1 : -1;
  // Trouble an entry does not produce: other errors, references invented later.
  let other = false;
  // Decoder lines before the run's first packet are the stream probe's own decode.
  let reading = false;
  let pastIdr = idrEntry === null;
  let entryRead = false;
  // Gaps logged before the first IDR slice: they count only if the entry is never read.
  let beforeIdr = false;
  const line = (text: string) => {
    const packet = packetLine.exec(text);
    if (packet) {
      reading = true;
      if (packet[1] !== 'NOPTS' && BigInt(packet[1] as string) === idrEntry) entryRead = true;
      if (!entered) {
        const pts = packet[1] === 'NOPTS' ? undefined : BigInt(packet[1] as string);
        entered = d.indexed || (pts !== undefined && (keyframes as Set<bigint>).has(pts));
      }
      if (entered) sinceKey++;
      return;
    }
    const read = readLogLine(text, d.demuxer);
    if (!pastIdr && reading && read?.source === 'decoder' && IDR_SLICE.test(read.message)) pastIdr = true;
    const said = read && logLine(read.source, read.level, read.message);
    if (said === 'gap') {
      if (pastIdr) {
        invented = true;
        if (sinceKey !== 0) other = true;
      } else beforeIdr = true;
    } else if (said === 'error') {
      if (entered) after = true;
      else before = true;
      if (entered && !read?.message.startsWith(MMCO_UNREF)) other = true;
    }
  };
  return {
    line,
    found: () => {
      const trouble = after || (!entered && before);
      // Gaps before an IDR entry the run never read: invented, and never an open-GOP entry's.
      const lost = beforeIdr && !entryRead;
      return { trouble, invented: invented || lost, entry: entered && invented && !other && !lost };
    },
  };
}

/** The H.264 decoder's `-debug pict` line for an IDR slice (h264_slice.c: "slice:%d %c mb:%d %c%s%s"). */
const IDR_SLICE = /^slice:\d+ \w mb:\d+ \w(?: fix)? IDR /;

/**
 * Tells a bounded run's refused decoders (media.ts `bounded`) from the one it decodes with: a codec
 * context that logs a picture over a `max_pixels` of 0 is refused, and every line it logs from then
 * on (its failed buffer, slice and frame errors) is the refusal's, not the decode's. Its lines
 * before that one are what its analysis logged before the bound existed, and still count.
 * `keep(line)` is false for the refusal's lines.
 */
export function refusedDecoders() {
  const refused = new Set<string>();
  return {
    keep(text: string): boolean {
      const context = /^\[[^\]@]+ @ (0x[0-9a-f]+)\] /.exec(text)?.[1];
      if (context === undefined) return true;
      if (refused.has(context)) return false;
      if (!REFUSAL.test(text)) return true;
      refused.add(context);
      return false;
    },
  };
}

/** A whole log (ffprobe's stderr) without its refused decoders' lines (see refusedDecoders). */
export function withoutRefused(log: string): string {
  const { keep } = refusedDecoders();
  return log
    .split('\n')
    .filter((l) => keep(l))
    .join('\n');
}

/** FFmpeg's words for a picture over `max_pixels` when the bound is 0 (imgutils.c). */
const REFUSAL = /exceeds specified max pixel count 0\b|exceeds max_samples 0\b/;
