//! Opening the plan's video stream with its decoder.

use std::collections::{BTreeSet, VecDeque};

use ff::ffi;
use ff::format::context::Input;
use ffmpeg_next as ff;

use super::{fields, h264, recover, refs, VideoSource};
use crate::decode_log::DecodeLog;
use crate::error::{Error, Result};
use crate::media::{self, Container};
use crate::orientation::Orientation;

/// Bytes of one picture of the stream: its size times the bits per pixel of its format (24 when
/// the format is unknown).
unsafe fn picture_bytes(par: *const ffi::AVCodecParameters) -> u64 {
    if par.is_null() {
        return 0;
    }
    let (w, h) = ((*par).width.max(0) as u64, (*par).height.max(0) as u64);
    let nb = ffi::AVPixelFormat::AV_PIX_FMT_NB as i32;
    let bits = if (0..nb).contains(&(*par).format) {
        // SAFETY: AVPixelFormat is a C enum with contiguous values 0..AV_PIX_FMT_NB.
        let format = std::mem::transmute::<i32, ffi::AVPixelFormat>((*par).format);
        let desc = ffi::av_pix_fmt_desc_get(format);
        if desc.is_null() {
            24
        } else {
            ffi::av_get_padded_bits_per_pixel(desc).max(8) as u64
        }
    } else {
        24
    };
    w.saturating_mul(h).saturating_mul(bits) / 8
}

/// A decoder for stream `index` of `input` with up to `threads` threads (frame and slice
/// threading when more than one), reporting to `log`.
fn open_decoder(
    input: &Input,
    index: usize,
    threads: usize,
    log: &DecodeLog,
) -> Result<ff::decoder::Video> {
    let st = media::stream_ptr(input, index)
        .ok_or_else(|| Error::unreadable("the video stream vanished"))?;
    let params = input
        .stream(index)
        .map(|s| s.parameters())
        .ok_or_else(|| Error::unreadable("the video stream vanished"))?;
    let mut ctx = ff::codec::Context::from_parameters(params).map_err(|e| {
        Error::unreadable(format!(
            "the video stream cannot be decoded ({})",
            media::av_error(e.into())
        ))
    })?;
    unsafe {
        let raw = ctx.as_mut_ptr();
        (*raw).pkt_timebase = (*st).time_base;
        (*raw).thread_count = threads as i32;
        (*raw).thread_type = ffi::FF_THREAD_FRAME | ffi::FF_THREAD_SLICE;
        // SAFETY: a fresh, unopened context; nothing else in this crate uses `opaque`.
        log.tag(raw);
    }
    ctx.decoder().video().map_err(|e| {
        Error::unreadable(format!(
            "the video decoder failed to start ({})",
            media::av_error(e.into())
        ))
    })
}

impl VideoSource {
    /// Replaces the decoder with a fresh one: a flush keeps the parameter sets the decoder saw
    /// last (an in-band PPS from later in the stream), which the pictures before them may not
    /// share. False when it cannot be opened again (the old one is kept).
    pub(super) fn renew_decoder(&mut self) -> bool {
        match open_decoder(&self.input, self.index, self.threads, &self.log) {
            Ok(decoder) => {
                self.decoder = decoder;
                true
            }
            Err(_) => false,
        }
    }

    /// Decodes with `threads` threads from now on (a fresh decoder when that changes; call it before
    /// decoding). False when that decoder cannot be opened.
    pub(crate) fn use_threads(&mut self, threads: usize) -> bool {
        let threads = threads.clamp(1, 16);
        if threads == self.threads {
            return true;
        }
        let before = std::mem::replace(&mut self.threads, threads);
        let renewed = self.renew_decoder();
        if !renewed {
            self.threads = before;
        }
        renewed
    }

    /// Opens the video stream `stream` of `path` (as `container` allows) with a decoder using up
    /// to `threads` threads (frame and slice threading when more than one).
    pub(crate) fn open(
        path: &str,
        container: &Container,
        stream: u32,
        threads: usize,
    ) -> Result<VideoSource> {
        let input = media::open_input(path, container)?;
        let container = container.after(&input);
        let st = media::check_video_stream(&input, stream)?;
        let index = stream as usize;
        let (tb, orientation, frame_rate) = unsafe {
            (
                (*st).time_base,
                Orientation::of_stream(st),
                (*st).avg_frame_rate,
            )
        };
        if tb.num <= 0 || tb.den <= 0 {
            return Err(Error::unreadable("the video stream has no time base"));
        }
        let threads = threads.clamp(1, 16);
        let log = DecodeLog::new();
        let decoder = open_decoder(&input, index, threads, &log)?;
        let decoder_id = decoder.id();
        let frame_step = if frame_rate.num > 0 && frame_rate.den > 0 {
            ((tb.den as i64 * frame_rate.den as i64) / (tb.num as i64 * frame_rate.num as i64))
                .max(1)
        } else {
            1
        };
        let start_us = media::start_us(&input);
        let picture_bytes = unsafe { picture_bytes((*st).codecpar) };
        let pixels = unsafe {
            let par = (*st).codecpar;
            (*par).width.max(0) as u64 * (*par).height.max(0) as u64
        };
        let sps_refs =
            h264::stream_sps(unsafe { (*st).codecpar }).map(|sps| sps.max_num_ref_frames);
        let declared_end = unsafe {
            let (start, duration) = ((*st).start_time, (*st).duration);
            (duration != ffi::AV_NOPTS_VALUE && duration > 0).then(|| {
                let start = if start == ffi::AV_NOPTS_VALUE {
                    0
                } else {
                    start
                };
                start.saturating_add(duration)
            })
        };
        let mut src = VideoSource {
            path: path.to_string(),
            container,
            input,
            index,
            decoder,
            log,
            threads,
            tb_num: tb.num as i64,
            tb_den: tb.den as i64,
            orientation,
            start_us,
            picture_bytes,
            pixels,
            frame_step,
            sps_refs,
            declared_end,
            cur: None,
            next: None,
            ahead: VecDeque::new(),
            owed: BTreeSet::new(),
            from_start: true,
            drained: false,
            sent_eof: false,
            stash: None,
            serial: 0,
            packet_serial: 0,
            last_pts: None,
            pts_faulty: false,
            first_pts: None,
            gop: 0,
            last_key_pts: None,
            dead: false,
            seeks: 0,
            targets: Vec::new(),
            target_pos: 0,
            seen_pts: BTreeSet::new(),
            fields: fields::FieldReader::of_stream(decoder_id, unsafe { (*st).codecpar }),
            times_untimed: decoder_id != ff::codec::Id::H264
                || h264::stream_sps(unsafe { (*st).codecpar }).is_some_and(|s| s.frame_mbs_only),
            clock: None,
            first_field: None,
            skip_nonref: true,
            skippable_sent: 0,
            skippable_at_reposition: 0,
            packet_failed: false,
            entry: None,
            landing: false,
            watch: recover::Watch::default(),
            recovery: None,
            verifying: None,
            may_trust_pending: false,
            provisional: false,
            part: None,
            before: None,
            open_gops: Default::default(),
            forward_only: false,
            refs: refs::RefSkip::of_stream(unsafe { (*st).codecpar }),
            skip_referenced: true,
            packets: None,
            recent: Default::default(),
        };
        src.discard_other_streams();
        Ok(src)
    }

    pub(super) fn discard_other_streams(&mut self) {
        unsafe {
            let ctx = self.input.as_mut_ptr();
            for i in 0..(*ctx).nb_streams as usize {
                let st = *(*ctx).streams.add(i);
                if !st.is_null() && i != self.index {
                    (*st).discard = ffi::AVDiscard::AVDISCARD_ALL;
                }
            }
        }
    }
}
