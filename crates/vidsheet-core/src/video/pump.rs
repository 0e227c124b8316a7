//! The packet pump: packets of the stream into the decoder, pictures out in presentation order.
//! Each packet carries a serial (through `reordered_opaque`) so decoder trouble can be traced back
//! to it (see [`super::recover`]).

use ff::ffi;
use ff::util::error::{EAGAIN, ENOMEM};
use ff::{frame, Packet};
use ffmpeg_next as ff;

use super::{Decoded, VideoSource};
use crate::decode_log;

/// Packets of the video stream sent without any frame coming out before the decoder is declared
/// stuck (corrupt data).
const MAX_IDLE_PACKETS: u32 = 4096;
/// Consecutive demuxer errors (other than end of file) tolerated before treating it as the end.
const MAX_READ_ERRORS: u32 = 64;

fn is_eagain(e: &ff::Error) -> bool {
    matches!(e, ff::Error::Other { errno } if *errno == EAGAIN)
}

/// FFmpeg could not allocate (the worker's memory limit, DESIGN §5a): the job's failure, never a
/// cell's. The decoder's picture buffer, a packet, the demuxer's read.
fn is_enomem(e: &ff::Error) -> bool {
    matches!(e, ff::Error::Other { errno } if *errno == ENOMEM)
}

/// The decoder's input and output since the last repositioning.
#[derive(Default)]
pub(super) struct Feed {
    /// The decoder has returned end of stream.
    drained: bool,
    sent_eof: bool,
    /// A packet the decoder could not take yet, its serial and how it is discarded.
    stash: Option<(Packet, u64, ffi::AVDiscard)>,
    /// Packets sent to the decoder (the serial of the latest).
    packet_serial: u64,
    /// Pictures decoded (the serial of the latest).
    decoded: u64,
    /// An allocation failed: decoding stopped, and the job fails (see `is_enomem`).
    out_of_memory: bool,
}

impl Feed {
    pub(super) fn drained(&self) -> bool {
        self.drained
    }

    pub(super) fn decoded(&self) -> u64 {
        self.decoded
    }

    pub(super) fn out_of_memory(&self) -> bool {
        self.out_of_memory
    }

    /// Decoding was repositioned (the decoder flushed).
    pub(super) fn reposition(&mut self) {
        self.drained = false;
        self.sent_eof = false;
        self.stash = None;
    }
}

impl VideoSource {
    /// The next decoded picture in presentation order, or None at the end of the stream (or when
    /// the decoder makes no progress).
    pub(super) fn next_frame(&mut self) -> Option<Decoded> {
        if self.feed.drained || self.feed.out_of_memory || self.place.dead() {
            return None;
        }
        let mut idle = 0u32;
        let mut read_errors = 0u32;
        let mut decode_errors = 0u32;
        loop {
            let mut f = frame::Video::empty();
            match self.decoder.receive_frame(&mut f) {
                Ok(()) => return Some(self.stamp(f)),
                Err(ff::Error::Eof) => {
                    self.feed.drained = true;
                    return None;
                }
                Err(e) if is_eagain(&e) => {}
                Err(e) if is_enomem(&e) => return self.ran_out_of_memory(),
                Err(_) => {
                    // With frame threading, a failure surfaces one packet per other thread later.
                    let lag = self.threads.saturating_sub(1) as u64;
                    self.note_failure(self.feed.packet_serial.saturating_sub(lag));
                    decode_errors += 1;
                    if decode_errors > MAX_IDLE_PACKETS {
                        self.feed.drained = true;
                        return None;
                    }
                    continue;
                }
            }
            if self.feed.sent_eof {
                // EAGAIN after end of stream should not happen; do not spin.
                self.feed.drained = true;
                return None;
            }
            // Feed one packet of our stream.
            loop {
                if let Some((p, serial, discard)) = self.feed.stash.take() {
                    idle += 1;
                    if idle > MAX_IDLE_PACKETS {
                        self.feed.drained = true;
                        return None;
                    }
                    // A referenced picture the model counts as skipped must stay skipped (a
                    // non-reference one may be decoded: nothing predicts from it).
                    let discard = match discard {
                        ffi::AVDiscard::AVDISCARD_NONREF => ffi::AVDiscard::AVDISCARD_DEFAULT,
                        d => d,
                    };
                    unsafe {
                        let raw = self.decoder.as_mut_ptr();
                        (*raw).skip_frame = discard;
                        (*raw).reordered_opaque = serial as i64;
                    }
                    match self.decoder.send_packet(&p) {
                        Ok(()) => {}
                        Err(e) if is_eagain(&e) => self.feed.stash = Some((p, serial, discard)),
                        Err(e) if is_enomem(&e) => return self.ran_out_of_memory(),
                        Err(_) => self.note_failure(serial),
                    }
                    break;
                }
                let read = match self.refs.pop_read() {
                    Some(read) => Ok(read),
                    None => {
                        let mut packet = Packet::empty();
                        packet
                            .read(&mut self.input)
                            .map(|()| self.refs.read(packet, self.skip.referenced_on()))
                    }
                };
                match read {
                    Ok(read) => {
                        read_errors = 0;
                        if read.packet.stream() != self.facts.index() {
                            continue;
                        }
                        let mut packet = read.packet;
                        self.clock.time_untimed(&mut packet);
                        idle += 1;
                        if idle > MAX_IDLE_PACKETS {
                            self.feed.drained = true;
                            return None;
                        }
                        self.clock.read(&packet);
                        let (mut skip, second_field) = self.skip_decision(&packet);
                        // A non-reference picture a referenced one was skipped on the strength
                        // of stays skipped ([`refs`]; the rule only grows more certain).
                        skip |= self.skip.nonref_on() && read.nonref_skip == Some(true);
                        // AVDISCARD_NONREF leaves a referenced picture decoded: it may be
                        // skipped only by the referenced-picture rule.
                        let referenced =
                            self.referenced_discard(&packet, read.picture.as_ref(), read.plan);
                        let discard = match referenced {
                            ffi::AVDiscard::AVDISCARD_DEFAULT if skip => {
                                ffi::AVDiscard::AVDISCARD_NONREF
                            }
                            d => d,
                        };
                        let skipped = discard != ffi::AVDiscard::AVDISCARD_DEFAULT;
                        let not_decoded = referenced != ffi::AVDiscard::AVDISCARD_DEFAULT
                            || (skipped && read.picture.as_ref().is_some_and(|p| !p.reference));
                        let frame_threads = unsafe { (*self.decoder.as_ptr()).active_thread_type }
                            & ffi::FF_THREAD_FRAME
                            != 0;
                        let planned =
                            self.refs
                                .sent(read.picture.as_ref(), not_decoded, frame_threads);
                        self.skip.witness(packet.pts(), self.clock.last_pts());
                        if !skipped && !second_field {
                            self.shown.owe(packet.pts());
                        }
                        self.skip.sent(skipped);
                        self.place.entered(packet.dts().or(packet.pts()));
                        self.feed.packet_serial += 1;
                        let serial = self.feed.packet_serial;
                        self.packets.note(&packet, serial, &self.facts);
                        // The first packet after a seek to an index keyframe is that keyframe,
                        // whatever its flags say.
                        let key = packet.is_key() || self.place.take_landing();
                        self.watch
                            .sent(serial, packet.pts(), packet.position() as i64, key);
                        if key && read.picture.as_ref().is_some_and(|p| p.idr) {
                            self.watch.key_is_idr(serial);
                        }
                        if planned {
                            self.watch.planned(serial);
                        }
                        unsafe {
                            let raw = self.decoder.as_mut_ptr();
                            (*raw).skip_frame = discard;
                            (*raw).reordered_opaque = serial as i64;
                        }
                        match self.decoder.send_packet(&packet) {
                            Ok(()) => {}
                            Err(e) if is_eagain(&e) => {
                                self.feed.stash = Some((packet, serial, discard));
                            }
                            Err(e) if is_enomem(&e) => return self.ran_out_of_memory(),
                            Err(_) => {
                                // Corrupt packet: skip it.
                                self.note_failure(serial);
                                continue;
                            }
                        }
                        break;
                    }
                    // A stream that appears mid-file past `max_streams` is refused "out of memory"
                    // (FFmpeg's stream allocation refuses it): the file's doing, a read error.
                    Err(e) if is_enomem(&e) && !decode_log::streams_exceeded() => {
                        return self.ran_out_of_memory()
                    }
                    Err(ff::Error::Eof) => {
                        self.packets.end();
                        let _ = self.decoder.send_eof();
                        self.feed.sent_eof = true;
                        break;
                    }
                    Err(_) => {
                        read_errors += 1;
                        if read_errors > MAX_READ_ERRORS {
                            let _ = self.decoder.send_eof();
                            self.feed.sent_eof = true;
                            break;
                        }
                    }
                }
            }
        }
    }

    /// Memory ran out: no more pictures from this source, and the job fails
    /// ([`VideoSource::out_of_memory`]).
    fn ran_out_of_memory(&mut self) -> Option<Decoded> {
        self.feed.out_of_memory = true;
        self.feed.drained = true;
        None
    }

    /// The decoder refused or failed on the packet `serial`.
    fn note_failure(&mut self, serial: u64) {
        self.skip.packet_failed();
        self.watch.failed(serial);
    }

    /// A picture out of the decoder, timed ([`super::clock`]) and accounted for.
    fn stamp(&mut self, f: frame::Video) -> Decoded {
        // SAFETY: a frame the decoder just returned.
        let raw_pts = unsafe { (*f.as_ptr()).pts };
        self.shown
            .paid((raw_pts != ffi::AV_NOPTS_VALUE).then_some(raw_pts));
        let from_start = self.place.at_file_start();
        let step = self.facts.step_of(f.packet().duration);
        let pts = self.clock.time(&f, step, from_start);
        if self.watch.active() {
            // SAFETY: a frame the decoder just returned.
            let (flags, errors, serial) = unsafe {
                let raw = f.as_ptr();
                (
                    (*raw).flags,
                    (*raw).decode_error_flags,
                    (*raw).reordered_opaque,
                )
            };
            if flags & ffi::AV_FRAME_FLAG_CORRUPT != 0 || errors != 0 {
                self.watch.flagged(serial.max(0) as u64, pts);
            }
        }
        self.feed.decoded += 1;
        // A frame at or before the file's first pts means this position is the start.
        if !from_start && !self.shown.any() {
            if let Some(first) = self.clock.first_pts() {
                if pts <= first {
                    self.place.found_start();
                }
            }
        }
        // SAFETY: a frame the decoder just returned; the opaque is the serial of its own packet.
        let packet = unsafe { (*f.as_ptr()).reordered_opaque };
        let print = self.print_to_prove(&f, pts);
        let time = self.label_seconds(pts);
        self.packets.picture(time, &f);
        Decoded {
            decode_time: self.packets.decode_time_of(packet),
            frame: f,
            pts,
            serial: self.feed.decoded,
            print,
        }
    }
}
