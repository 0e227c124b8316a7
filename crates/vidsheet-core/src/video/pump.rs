//! The packet pump: packets of the stream into the decoder, pictures out in presentation order.
//! Each packet carries a serial (through `reordered_opaque`) so decoder trouble can be traced back
//! to it (see [`super::recover`]).

use ff::ffi;
use ff::util::error::EAGAIN;
use ff::{frame, Packet};
use ffmpeg_next as ff;

use super::{timestamps, Decoded, VideoSource};

/// Packets of the video stream sent without any frame coming out before the decoder is declared
/// stuck (corrupt data).
const MAX_IDLE_PACKETS: u32 = 4096;
/// Consecutive demuxer errors (other than end of file) tolerated before treating it as the end.
const MAX_READ_ERRORS: u32 = 64;

fn is_eagain(e: &ff::Error) -> bool {
    matches!(e, ff::Error::Other { errno } if *errno == EAGAIN)
}

impl VideoSource {
    /// The next decoded picture in presentation order, or None at the end of the stream (or when
    /// the decoder makes no progress).
    pub(super) fn next_frame(&mut self) -> Option<Decoded> {
        if self.drained || self.dead {
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
                    self.drained = true;
                    return None;
                }
                Err(e) if is_eagain(&e) => {}
                Err(_) => {
                    // With frame threading, a failure surfaces one packet per other thread later.
                    let lag = self.threads.saturating_sub(1) as u64;
                    self.note_failure(self.packet_serial.saturating_sub(lag));
                    decode_errors += 1;
                    if decode_errors > MAX_IDLE_PACKETS {
                        self.drained = true;
                        return None;
                    }
                    continue;
                }
            }
            if self.sent_eof {
                // EAGAIN after end of stream should not happen; do not spin.
                self.drained = true;
                return None;
            }
            // Feed one packet of our stream.
            loop {
                if let Some((p, serial, discard)) = self.stash.take() {
                    idle += 1;
                    if idle > MAX_IDLE_PACKETS {
                        self.drained = true;
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
                        Err(e) if is_eagain(&e) => self.stash = Some((p, serial, discard)),
                        Err(_) => self.note_failure(serial),
                    }
                    break;
                }
                let read = match self.refs.queue.pop_front() {
                    Some(read) => Ok(read),
                    None => {
                        let mut packet = Packet::empty();
                        packet
                            .read(&mut self.input)
                            .map(|()| self.refs.read(packet, self.skip_referenced))
                    }
                };
                match read {
                    Ok(read) => {
                        read_errors = 0;
                        if read.packet.stream() != self.index {
                            continue;
                        }
                        let mut packet = read.packet;
                        self.time_untimed(&mut packet);
                        idle += 1;
                        if idle > MAX_IDLE_PACKETS {
                            self.drained = true;
                            return None;
                        }
                        // Pts below dts: the decoder will call the pts faulty (see `stamp`);
                        // known before the first frame after a seek is stamped.
                        if let (Some(p), Some(d)) = (packet.pts(), packet.dts()) {
                            self.pts_faulty |= p < d;
                        }
                        let (mut skip, second_field) = self.skip_decision(&packet);
                        // A non-reference picture a referenced one was skipped on the strength
                        // of stays skipped ([`refs`]; the rule only grows more certain).
                        skip |= self.skip_nonref && read.nonref_skip == Some(true);
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
                        self.witness(packet.pts());
                        if !skipped && !second_field {
                            self.owe(packet.pts());
                        }
                        self.skippable_sent += skipped as u64;
                        if self.entry.is_none() {
                            self.entry = packet.dts().or(packet.pts());
                        }
                        self.packet_serial += 1;
                        let serial = self.packet_serial;
                        self.note_packet(&packet, serial);
                        // The first packet after a seek to an index keyframe is that keyframe,
                        // whatever its flags say.
                        let key = packet.is_key() || std::mem::take(&mut self.landing);
                        self.watch
                            .sent(serial, packet.pts(), packet.position() as i64, key);
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
                                self.stash = Some((packet, serial, discard));
                            }
                            Err(_) => {
                                // Corrupt packet: skip it.
                                self.note_failure(serial);
                                continue;
                            }
                        }
                        break;
                    }
                    Err(ff::Error::Eof) => {
                        self.note_end();
                        let _ = self.decoder.send_eof();
                        self.sent_eof = true;
                        break;
                    }
                    Err(_) => {
                        read_errors += 1;
                        if read_errors > MAX_READ_ERRORS {
                            let _ = self.decoder.send_eof();
                            self.sent_eof = true;
                            break;
                        }
                    }
                }
            }
        }
    }

    /// Gives a packet without any timestamp the decode time one packet duration after the packet
    /// before it (the rule: fixtures/vectors/timestamps.json, `untimed_decode_time`). Not where a
    /// packet may hold a field picture: the decoder shows a pair whose first field has no
    /// timestamp at its second's.
    fn time_untimed(&mut self, packet: &mut Packet) {
        if !self.times_untimed {
            return;
        }
        let (dts, clock) = timestamps::untimed_decode_time(
            self.clock,
            packet.pts(),
            packet.dts(),
            packet.duration(),
        );
        packet.set_dts(dts);
        self.clock = clock;
    }

    /// The decoder refused or failed on the packet `serial`.
    fn note_failure(&mut self, serial: u64) {
        self.packet_failed = true;
        self.watch.failed(serial);
    }

    /// A frame's presentation time: the decoder's best-effort timestamp, what ffplay and the
    /// ffmpeg CLI show a frame at (its pts while the decoded pts ascend, else its decode time; a
    /// stream whose pts sit below its dts, broken composition offsets, is so shown in decode
    /// order). A sequential decode keeps that judgement from the file's start; after a seek the
    /// decoder holds only what it counted before the flush (FFmpeg 5.1 keeps its counts of faulty
    /// timestamps across one), not what lies before the seek point. So once it has called the pts
    /// faulty, or a packet's pts sits below its dts (which it will call faulty), this source times
    /// frames by their decode timestamps for good, as a sequential decode goes on doing; a decode
    /// restarted from the start forgets the counts (`seek.rs`).
    fn stamp(&mut self, f: frame::Video) -> Decoded {
        let best = f.timestamp();
        // SAFETY: a frame the decoder just returned.
        let (raw_pts, raw_dts) = unsafe { ((*f.as_ptr()).pts, (*f.as_ptr()).pkt_dts) };
        let known = |ts: i64| (ts != ffi::AV_NOPTS_VALUE).then_some(ts);
        self.paid(known(raw_pts));
        if best.is_some() && known(raw_pts).is_some() && best != known(raw_pts) {
            self.pts_faulty = true;
        }
        let by_dts = if self.pts_faulty {
            known(raw_dts)
        } else {
            None
        };
        let pts = by_dts
            .or(best)
            .or_else(|| f.pts())
            .or_else(|| self.last_pts.map(|p| p.saturating_add(self.frame_step)))
            .unwrap_or(0);
        if self.watch.active {
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
        if self.from_start && self.first_pts.is_none() {
            self.first_pts = Some(pts);
        }
        if f.is_key() {
            if let Some(k) = self.last_key_pts {
                if pts > k {
                    self.gop = self.gop.max(pts - k);
                }
            }
            self.last_key_pts = Some(pts);
        }
        self.last_pts = Some(pts);
        self.serial += 1;
        // A frame at or before the file's first pts means this position is the start.
        if !self.from_start && self.cur.is_none() && self.next.is_none() {
            if let Some(first) = self.first_pts {
                if pts <= first {
                    self.from_start = true;
                }
            }
        }
        // SAFETY: a frame the decoder just returned; the opaque is the serial of its own packet.
        let packet = unsafe { (*f.as_ptr()).reordered_opaque };
        let print = self.print_to_prove(&f, pts);
        Decoded {
            decode_time: self.decode_time_of(packet),
            frame: f,
            pts,
            serial: self.serial,
            print,
        }
    }
}
