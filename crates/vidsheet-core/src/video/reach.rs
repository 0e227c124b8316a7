//! How far back a picture may reference: what seek recovery needs to know whether two decodes
//! that started at different places could differ because of the pictures before the later start.
//! H.264 says it in its sequence parameter set (`max_num_ref_frames`); read from the stream's
//! extradata (avcC, or Annex B start codes) because a frame-threaded decoder does not report it.

use ff::ffi;
use ffmpeg_next as ff;

/// Reference pictures a picture may predict from, at most (H.264, HEVC).
pub(super) const MAX_REFERENCES: u32 = 16;

/// The reference pictures of the stream's H.264 sequence parameter set; None for another codec
/// or when it cannot be read.
pub(super) fn h264_references(par: *const ffi::AVCodecParameters) -> Option<u32> {
    let extradata = unsafe {
        if par.is_null()
            || (*par).codec_id != ffi::AVCodecID::AV_CODEC_ID_H264
            || (*par).extradata.is_null()
            || (*par).extradata_size <= 0
        {
            return None;
        }
        std::slice::from_raw_parts((*par).extradata, (*par).extradata_size as usize)
    };
    first_sps(extradata).and_then(|nal| max_num_ref_frames(&unescape(nal)))
}

/// The first SPS NAL unit (header byte included) of avcC or Annex B extradata.
fn first_sps(data: &[u8]) -> Option<&[u8]> {
    if data.first() == Some(&1) {
        // avcC: version, profile, compat, level, length size, then SPS count and (u16 len, SPS)*.
        let count = *data.get(5)? & 0x1f;
        if count == 0 {
            return None;
        }
        let len = u16::from_be_bytes([*data.get(6)?, *data.get(7)?]) as usize;
        return data.get(8..8 + len);
    }
    // Annex B: NAL units after 00 00 01 start codes.
    let mut i = 0;
    while i + 3 < data.len() {
        if data[i] == 0 && data[i + 1] == 0 && data[i + 2] == 1 {
            let start = i + 3;
            if data[start] & 0x1f == 7 {
                let end = (start..data.len().saturating_sub(2))
                    .find(|&j| data[j] == 0 && data[j + 1] == 0 && data[j + 2] <= 1)
                    .unwrap_or(data.len());
                return Some(&data[start..end]);
            }
            i = start;
        } else {
            i += 1;
        }
    }
    None
}

/// The NAL payload without emulation prevention bytes (00 00 03 -> 00 00).
fn unescape(nal: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(nal.len());
    let mut zeros = 0;
    for &b in nal {
        if zeros >= 2 && b == 3 {
            zeros = 0;
            continue;
        }
        zeros = if b == 0 { zeros + 1 } else { 0 };
        out.push(b);
    }
    out
}

struct Bits<'a> {
    data: &'a [u8],
    pos: usize,
}

impl Bits<'_> {
    fn bit(&mut self) -> Option<u32> {
        let byte = *self.data.get(self.pos / 8)?;
        let bit = (byte >> (7 - self.pos % 8)) & 1;
        self.pos += 1;
        Some(bit as u32)
    }

    fn bits(&mut self, n: u32) -> Option<u32> {
        (0..n).try_fold(0u32, |v, _| Some((v << 1) | self.bit()?))
    }

    /// Exp-Golomb unsigned.
    fn ue(&mut self) -> Option<u32> {
        let mut zeros = 0;
        while self.bit()? == 0 {
            zeros += 1;
            if zeros > 31 {
                return None;
            }
        }
        Some(((1u64 << zeros) - 1 + self.bits(zeros)? as u64).min(u32::MAX as u64) as u32)
    }

    fn se(&mut self) -> Option<i64> {
        let k = self.ue()? as i64;
        Some(if k % 2 == 1 { (k + 1) / 2 } else { -(k / 2) })
    }

    fn skip_scaling_list(&mut self, size: usize) -> Option<()> {
        let (mut last, mut next) = (8i64, 8i64);
        for _ in 0..size {
            if next != 0 {
                next = (last + self.se()?).rem_euclid(256);
            }
            if next != 0 {
                last = next;
            }
        }
        Some(())
    }
}

/// `max_num_ref_frames` of an SPS NAL unit (H.264 7.3.2.1.1).
fn max_num_ref_frames(nal: &[u8]) -> Option<u32> {
    let mut b = Bits { data: nal, pos: 8 };
    let profile = b.bits(8)?;
    b.bits(16)?; // constraint flags, level
    b.ue()?; // seq_parameter_set_id
    if matches!(
        profile,
        100 | 110 | 122 | 244 | 44 | 83 | 86 | 118 | 128 | 138 | 139 | 134 | 135
    ) {
        let chroma_format = b.ue()?;
        if chroma_format == 3 {
            b.bit()?; // separate_colour_plane_flag
        }
        b.ue()?; // bit_depth_luma_minus8
        b.ue()?; // bit_depth_chroma_minus8
        b.bit()?; // qpprime_y_zero_transform_bypass_flag
        if b.bit()? == 1 {
            let lists = if chroma_format == 3 { 12 } else { 8 };
            for i in 0..lists {
                if b.bit()? == 1 {
                    b.skip_scaling_list(if i < 6 { 16 } else { 64 })?;
                }
            }
        }
    }
    b.ue()?; // log2_max_frame_num_minus4
    match b.ue()? {
        0 => {
            b.ue()?; // log2_max_pic_order_cnt_lsb_minus4
        }
        1 => {
            b.bit()?; // delta_pic_order_always_zero_flag
            b.se()?; // offset_for_non_ref_pic
            b.se()?; // offset_for_top_to_bottom_field
            for _ in 0..b.ue()?.min(255) {
                b.se()?;
            }
        }
        _ => {}
    }
    let refs = b.ue()?;
    (refs <= MAX_REFERENCES).then_some(refs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_max_num_ref_frames_from_avcc_and_annex_b() {
        // The avcC of `ffmpeg -f lavfi -i testsrc2=s=640x360 -c:v libx264 -x264-params ref=5`
        // (`trace_headers` reads max_num_ref_frames = 5 from it).
        let avcc: Vec<u8> = [
            "0164001effe1001a6764001eacd980a0",
            "2ff97011000003000100000300320f16",
            "2d9a010006 68e978f2c8b0fdf8f800",
        ]
        .concat()
        .replace(' ', "")
        .as_bytes()
        .chunks(2)
        .map(|h| u8::from_str_radix(std::str::from_utf8(h).unwrap_or("00"), 16).unwrap_or(0))
        .collect();
        let sps = first_sps(&avcc).map(<[u8]>::to_vec).unwrap_or_default();
        assert_eq!(sps.len(), 0x1a);
        assert_eq!(max_num_ref_frames(&unescape(&sps)), Some(5));
        let mut annex_b = vec![0, 0, 0, 1, 0x68, 0xeb, 0, 0, 1];
        annex_b.extend_from_slice(&sps);
        annex_b.extend_from_slice(&[0, 0, 1, 0x68, 0xeb]);
        assert_eq!(first_sps(&annex_b), Some(&sps[..]));
        assert_eq!(first_sps(&[0, 0, 1, 0x68]), None);
        assert_eq!(max_num_ref_frames(&[0x67]), None);
    }

    #[test]
    fn emulation_prevention_bytes_are_removed() {
        assert_eq!(unescape(&[0, 0, 3, 1, 0, 0, 3]), vec![0, 0, 1, 0, 0]);
    }
}
