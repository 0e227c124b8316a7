//! Opening the plan's video stream with its decoder.

use ff::ffi;
use ff::format::context::Input;
use ffmpeg_next as ff;

use super::facts::Facts;
use super::VideoSource;
use super::{clock, late, packets, proofs, pump, recover, refs, seek, skip, watch, witness};
use crate::decode_log::DecodeLog;
use crate::error::{Error, Result};
use crate::media::{self, Decoders, Opening};

/// A decoder for stream `index` of `input` with up to `threads` threads (frame and slice
/// threading when more than one), reporting to `log`.
fn open_decoder(
    input: &Input,
    index: usize,
    threads: usize,
    log: &DecodeLog,
    opening: &Opening,
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
        opening.bound_decoder(raw);
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
        match open_decoder(
            &self.input,
            self.facts.index(),
            self.threads,
            &self.log,
            self.facts.container(),
        ) {
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

    /// Opens the video stream `stream` of `path` (as `opening` allows) with a decoder using up
    /// to `threads` threads (frame and slice threading when more than one).
    pub(crate) fn open(
        path: &str,
        opening: &Opening,
        stream: u32,
        threads: usize,
    ) -> Result<VideoSource> {
        let input = media::open_input(path, opening, Decoders::Streams(&[stream as usize]))?;
        let container = opening.after(&input);
        let st = media::check_video_stream(&input, stream)?;
        let index = stream as usize;
        let facts = Facts::read(path, container.clone(), &input, index, st)?;
        let threads = threads.clamp(1, 16);
        let log = DecodeLog::new();
        let decoder = open_decoder(&input, index, threads, &log, &container)?;
        let decoder_id = decoder.id();
        let codecpar = unsafe { (*st).codecpar };
        let mut src = VideoSource {
            facts,
            input,
            decoder,
            log,
            threads,
            feed: pump::Feed::default(),
            shown: late::Shown::default(),
            clock: clock::Clock::of_stream(decoder_id, codecpar),
            place: seek::Place::at_start(),
            skip: skip::Skipping::of_stream(decoder_id, codecpar),
            refs: refs::RefSkip::of_stream(codecpar),
            watch: watch::Watch::default(),
            recovery: recover::Recovering::default(),
            proving: proofs::Proving::default(),
            part: witness::Part::default(),
            packets: packets::Packets::default(),
        };
        src.discard_other_streams();
        Ok(src)
    }

    pub(super) fn discard_other_streams(&mut self) {
        unsafe {
            let ctx = self.input.as_mut_ptr();
            for i in 0..(*ctx).nb_streams as usize {
                let st = *(*ctx).streams.add(i);
                if !st.is_null() && i != self.facts.index() {
                    (*st).discard = ffi::AVDiscard::AVDISCARD_ALL;
                }
            }
        }
    }
}
