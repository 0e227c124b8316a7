//! Whether a keyframe is an H.264 recovery point that promises a clean start: a recovery point SEI
//! with `recovery_frame_cnt` 0 (H.264 D.2.8), what x264's open GOPs and broadcast encoders put on
//! the I-frames of open GOPs. Decoding entered there, every picture from it on in output order is
//! correct (its leading pictures, shown before it, are not); the decoder still fills the frame_num
//! gap before it with invented pictures and fails to forget the short-term pictures it never had
//! (`mmco: unref short failure`), which is what entering an open GOP looks like, not trouble (see
//! [`super::recover`]). An I-frame without that promise (one that later pictures reference across)
//! is judged as before.

use ff::ffi;
use ffmpeg_next as ff;

use super::reach::{unescape, Bits};

/// How the stream's H.264 packets frame their NAL units.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum NalFraming {
    /// avcC (MP4, Matroska): each NAL unit after a big-endian length of this many bytes.
    Length(usize),
    /// Annex B (MPEG-TS, raw): NAL units after 00 00 01 start codes.
    AnnexB,
}

/// The framing of the stream's H.264 packets; None for another codec.
pub(super) fn h264_framing(par: *const ffi::AVCodecParameters) -> Option<NalFraming> {
    unsafe {
        if par.is_null() || (*par).codec_id != ffi::AVCodecID::AV_CODEC_ID_H264 {
            return None;
        }
        if !(*par).extradata.is_null() && (*par).extradata_size >= 5 {
            let extradata = std::slice::from_raw_parts((*par).extradata, 5);
            if extradata[0] == 1 {
                return Some(NalFraming::Length((extradata[4] & 3) as usize + 1));
            }
        }
    }
    Some(NalFraming::AnnexB)
}

/// NAL units of one packet (header byte first), as framed.
fn nal_units(data: &[u8], framing: NalFraming) -> Vec<&[u8]> {
    let mut out = Vec::new();
    match framing {
        NalFraming::Length(size) => {
            let mut i = 0;
            while let Some(head) = data.get(i..i + size) {
                let len = head.iter().fold(0usize, |n, &b| (n << 8) | b as usize);
                let Some(nal) = data.get(i + size..(i + size).saturating_add(len)) else {
                    break;
                };
                out.push(nal);
                i += size + len;
            }
        }
        NalFraming::AnnexB => {
            let mut starts = Vec::new();
            let mut i = 0;
            while i + 3 <= data.len() {
                if data[i] == 0 && data[i + 1] == 0 && data[i + 2] == 1 {
                    starts.push(i + 3);
                    i += 3;
                } else {
                    i += 1;
                }
            }
            for (k, &s) in starts.iter().enumerate() {
                let end = starts.get(k + 1).map_or(data.len(), |&n| n - 3);
                // A 4-byte start code leaves a zero at the end of the unit before it.
                let mut unit = data.get(s..end).unwrap_or(&[]);
                while unit.len() > 1 && unit.last() == Some(&0) {
                    unit = &unit[..unit.len() - 1];
                }
                out.push(unit);
            }
        }
    }
    out
}

/// Whether the packet holds a recovery point SEI with `recovery_frame_cnt` 0.
pub(super) fn recovers_at_once(data: &[u8], framing: NalFraming) -> bool {
    nal_units(data, framing)
        .into_iter()
        .filter(|nal| nal.first().is_some_and(|&h| h & 0x1f == 6))
        .any(|nal| sei_recovers_at_once(&unescape(&nal[1..])))
}

/// The SEI messages of one SEI NAL payload (H.264 7.3.2.3): a recovery point (payload type 6)
/// with `recovery_frame_cnt` 0?
fn sei_recovers_at_once(rbsp: &[u8]) -> bool {
    let mut i = 0;
    // Each message: payload type and size as runs of 0xFF plus a last byte, then the payload.
    let read_value = |i: &mut usize| -> Option<usize> {
        let mut v = 0usize;
        loop {
            let b = *rbsp.get(*i)?;
            *i += 1;
            v = v.saturating_add(b as usize);
            if b != 0xFF {
                return Some(v);
            }
        }
    };
    // Stop at the trailing bits (0x80) or the end.
    while rbsp.get(i).is_some_and(|&b| b != 0x80) {
        let (Some(kind), Some(size)) = (read_value(&mut i), read_value(&mut i)) else {
            return false;
        };
        let Some(payload) = rbsp.get(i..i.saturating_add(size)) else {
            return false;
        };
        if kind == 6 {
            let mut b = Bits {
                data: payload,
                pos: 0,
            };
            return b.ue() == Some(0);
        }
        i += size;
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An SEI NAL unit (header 0x06) with a user-data message, then a recovery point of `count`.
    fn sei(count_ue: u8) -> Vec<u8> {
        // user_data_unregistered (type 5) of 17 bytes, then recovery_point (type 6) of 1 byte:
        // ue(v) bits then exact_match 1, broken_link 0, changing_slice_group_idc 00.
        let mut v = vec![0x06, 5, 17];
        v.extend([0xAB; 16]);
        v.push(0x00);
        v.extend([6, 1, count_ue, 0x80]);
        v
    }

    #[test]
    fn finds_a_recovery_point_of_zero_frames_in_either_framing() {
        // ue(0) = "1", then exact_match 1, broken_link 0, idc 00: 0b1100_0000 (+ padding).
        let zero = sei(0b1100_0000);
        // ue(2) = "011", then 1 0 00: 0b0111_0000.
        let two = sei(0b0111_0000);
        let idr_slice = [0x65, 0x88, 0x84];
        for (nal, want) in [(&zero, true), (&two, false)] {
            let mut avcc = Vec::new();
            for unit in [&nal[..], &idr_slice[..]] {
                avcc.extend((unit.len() as u32).to_be_bytes());
                avcc.extend(unit);
            }
            assert_eq!(recovers_at_once(&avcc, NalFraming::Length(4)), want);
            let mut annex_b = vec![0, 0, 0, 1];
            annex_b.extend(nal.iter());
            annex_b.extend([0, 0, 1]);
            annex_b.extend(idr_slice);
            assert_eq!(recovers_at_once(&annex_b, NalFraming::AnnexB), want);
        }
        // A slice alone, a truncated length, garbage: no promise.
        assert!(!recovers_at_once(
            &[0, 0, 0, 3, 0x65, 0x88, 0x84],
            NalFraming::Length(4)
        ));
        assert!(!recovers_at_once(
            &[0, 0, 0, 9, 0x06, 6],
            NalFraming::Length(4)
        ));
        assert!(!recovers_at_once(&[0x06, 6, 200, 0xC0], NalFraming::AnnexB));
        assert!(!recovers_at_once(&[], NalFraming::AnnexB));
    }
}
