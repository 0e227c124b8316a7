//! What the engine reads of H.264 itself, from bytes (the decoder does not say it, or says it
//! only once the pictures are out): the stream's sequence parameter set (from its extradata, avcC
//! or Annex B) and the first fields of a slice header. Everything returns None on data it cannot
//! read: these are facts for decisions that fall back safely, never a picture's identity.

use ff::ffi;
use ffmpeg_next as ff;
mod picture;

pub(super) use picture::{packet_picture, ParamSets, Picture, SliceKind, SliceRefs};

/// The sequence parameter set fields the engine uses (H.264 7.3.2.1.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Sps {
    pub sps_id: u32,
    pub max_num_ref_frames: u32,
    /// How pictures carry their order count (0: an lsb in each slice header).
    pub poc_type: u32,
    /// Bits of a slice header's `pic_order_cnt_lsb` (poc type 0).
    pub log2_max_poc_lsb: u32,
    /// 0 for monochrome or separate planes: a weight table then has no chroma weights.
    pub chroma_array_type: u32,
    /// `gaps_in_frame_num_value_allowed_flag`.
    pub gaps_allowed: bool,
    /// Bits of a slice header's `frame_num`.
    pub log2_max_frame_num: u32,
    /// A slice header then carries `colour_plane_id` (4:4:4 coded as three planes).
    pub separate_colour_plane: bool,
    /// Pictures may be fields (PAFF) or frames of field macroblock pairs (MBAFF).
    pub frame_mbs_only: bool,
}

/// The extradata of an H.264 stream (`par`: its codec parameters, which outlive the slice); None
/// for another codec or none.
fn h264_extradata<'a>(par: *const ffi::AVCodecParameters) -> Option<&'a [u8]> {
    unsafe {
        if par.is_null()
            || (*par).codec_id != ffi::AVCodecID::AV_CODEC_ID_H264
            || (*par).extradata.is_null()
            || (*par).extradata_size <= 0
        {
            return None;
        }
        Some(std::slice::from_raw_parts(
            (*par).extradata,
            (*par).extradata_size as usize,
        ))
    }
}

/// The first SPS of the stream's H.264 extradata; None for another codec or when it cannot be read.
pub(super) fn stream_sps(par: *const ffi::AVCodecParameters) -> Option<Sps> {
    extradata_sps(h264_extradata(par)?)
}

/// The first SPS of avcC or Annex B extradata; None when there is none or it cannot be read (the
/// fallback's `extradataSps` in src/engine/ffmpeg/h264.ts; fixtures/vectors/h264-headers.json).
pub(super) fn extradata_sps(extradata: &[u8]) -> Option<Sps> {
    first_sps(extradata).and_then(|nal| parse_sps(&unescape(nal)))
}

/// The NAL length size of avcC extradata (packets then hold length-prefixed NAL units); None for
/// Annex B (start codes) or anything else.
pub(super) fn avcc_length_size(par: *const ffi::AVCodecParameters) -> Option<usize> {
    unsafe {
        if par.is_null() || (*par).extradata.is_null() || (*par).extradata_size < 5 {
            return None;
        }
        let data = std::slice::from_raw_parts((*par).extradata, (*par).extradata_size as usize);
        (data[0] == 1).then_some((data[4] & 3) as usize + 1)
    }
}

/// The first SPS NAL unit (header byte first) of avcC or Annex B extradata (Annex B: up to the end
/// of the data).
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
    annex_b_units(data).find(|nal| nal.first().is_some_and(|h| h & 0x1f == 7))
}

/// The NAL units of Annex B data, each as the bytes from its header byte to the end of the data:
/// the readers here take only a unit's first bytes, so nothing scans on to find where it ends.
fn annex_b_units(data: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut from = 0;
    std::iter::from_fn(move || {
        let i = (from..data.len().saturating_sub(2))
            .find(|&i| data[i] == 0 && data[i + 1] == 0 && data[i + 2] == 1)?;
        from = i + 3;
        Some(&data[i + 3..])
    })
}

/// The first coded slice NAL unit (type 1 or 5, header byte first) of a packet: length-prefixed
/// (`length_size` bytes, as MP4 stores it) or Annex B (then up to the end of the packet).
pub(super) fn first_slice(data: &[u8], length_size: Option<usize>) -> Option<&[u8]> {
    let is_slice = |nal: &&[u8]| nal.first().is_some_and(|h| matches!(h & 0x1f, 1 | 5));
    let Some(n) = length_size else {
        return annex_b_units(data).find(is_slice);
    };
    let mut at = 0usize;
    while at + n <= data.len() {
        let len = data[at..at + n]
            .iter()
            .fold(0usize, |v, &b| (v << 8) | b as usize);
        let nal = data.get(at + n..(at + n).checked_add(len)?)?;
        if is_slice(&nal) {
            return Some(nal);
        }
        at += n + len;
    }
    None
}

/// What the first fields of a slice header say (H.264 7.3.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct SliceInfo {
    /// `nal_unit_type` 5.
    pub idr: bool,
    pub frame_num: u32,
    /// The picture structure: 1 a top field, 2 a bottom field; None for a frame.
    pub field: Option<u8>,
}

/// What a slice NAL unit (header byte first) says; None where its header cannot be read. Only its
/// first bytes are read (the fallback's `sliceInfo` in src/engine/ffmpeg/h264.ts;
/// fixtures/vectors/h264-headers.json).
pub(super) fn slice_info(nal: &[u8], sps: &Sps) -> Option<SliceInfo> {
    let head = unescape(&nal[..nal.len().min(32)]);
    let mut b = Bits {
        data: &head,
        pos: 8,
    };
    b.ue()?; // first_mb_in_slice
    b.ue()?; // slice_type
    b.ue()?; // pic_parameter_set_id
    if sps.separate_colour_plane {
        b.bits(2)?; // colour_plane_id
    }
    let frame_num = b.bits(sps.log2_max_frame_num)?;
    // field_pic_flag, then bottom_field_flag.
    let field = match sps.frame_mbs_only {
        true => None,
        false => match b.bit()? {
            1 => Some(1 + b.bit()? as u8),
            _ => None,
        },
    };
    Some(SliceInfo {
        idr: head.first()? & 0x1f == 5,
        frame_num,
        field,
    })
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

/// The fields of an SPS NAL unit (header byte first, emulation prevention removed) up to
/// `frame_mbs_only_flag` (H.264 7.3.2.1.1).
fn parse_sps(nal: &[u8]) -> Option<Sps> {
    let mut b = Bits { data: nal, pos: 8 };
    let profile = b.bits(8)?;
    b.bits(16)?; // constraint flags, level
    let sps_id = b.ue()?;
    let mut separate_colour_plane = false;
    let mut chroma_format = 1;
    if matches!(
        profile,
        100 | 110 | 122 | 244 | 44 | 83 | 86 | 118 | 128 | 138 | 139 | 134 | 135
    ) {
        chroma_format = b.ue()?;
        if chroma_format == 3 {
            separate_colour_plane = b.bit()? == 1;
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
    let log2_max_frame_num = b.ue()?.checked_add(4).filter(|&n| n <= 16)?;
    let poc_type = b.ue()?;
    let mut log2_max_poc_lsb = 0;
    match poc_type {
        0 => {
            log2_max_poc_lsb = b.ue()?.checked_add(4).filter(|&n| n <= 16)?;
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
    let max_num_ref_frames = b.ue()?;
    let gaps_allowed = b.bit()? == 1;
    b.ue()?; // pic_width_in_mbs_minus1
    b.ue()?; // pic_height_in_map_units_minus1
    let frame_mbs_only = b.bit()? == 1;
    Some(Sps {
        sps_id,
        max_num_ref_frames,
        poc_type,
        log2_max_poc_lsb,
        chroma_array_type: if separate_colour_plane {
            0
        } else {
            chroma_format
        },
        gaps_allowed,
        log2_max_frame_num,
        separate_colour_plane,
        frame_mbs_only,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vectors::hex;

    /// The fields both readers expose (h264-headers.json names them as the fallback does).
    #[derive(serde::Deserialize, Debug, PartialEq)]
    #[serde(rename_all = "camelCase")]
    struct SpsFields {
        max_num_ref_frames: u32,
        log2_max_frame_num: u32,
        separate_colour_plane: bool,
        frame_mbs_only: bool,
    }

    #[derive(serde::Deserialize, Debug, PartialEq)]
    #[serde(rename_all = "camelCase")]
    struct SliceFields {
        idr: bool,
        frame_num: u32,
        field: Option<String>,
    }

    #[derive(serde::Deserialize)]
    struct SliceCase {
        nal: String,
        expect: Option<SliceFields>,
    }

    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct HeaderCase {
        name: String,
        #[serde(rename = "avcC")]
        avcc: String,
        annex_b: String,
        sps: Option<SpsFields>,
        slices: Vec<SliceCase>,
    }

    #[test]
    fn the_h264_headers_are_read_as_the_shared_vectors_say() {
        for case in crate::vectors::cases::<HeaderCase>("h264-headers.json") {
            for (form, data) in [("avcC", &case.avcc), ("Annex B", &case.annex_b)] {
                let got = extradata_sps(&hex(data)).map(|s| SpsFields {
                    max_num_ref_frames: s.max_num_ref_frames,
                    log2_max_frame_num: s.log2_max_frame_num,
                    separate_colour_plane: s.separate_colour_plane,
                    frame_mbs_only: s.frame_mbs_only,
                });
                assert_eq!(got, case.sps, "{} ({form})", case.name);
            }
            let Some(fields) = &case.sps else {
                assert!(case.slices.is_empty(), "{}", case.name);
                continue;
            };
            // The SPS the slices are read with: the case's (only these fields are read).
            let sps = Sps {
                sps_id: 0,
                max_num_ref_frames: fields.max_num_ref_frames,
                poc_type: 0,
                log2_max_poc_lsb: 0,
                chroma_array_type: 1,
                gaps_allowed: false,
                log2_max_frame_num: fields.log2_max_frame_num,
                separate_colour_plane: fields.separate_colour_plane,
                frame_mbs_only: fields.frame_mbs_only,
            };
            for (i, slice) in case.slices.iter().enumerate() {
                let got = slice_info(&hex(&slice.nal), &sps).map(|s| SliceFields {
                    idr: s.idr,
                    frame_num: s.frame_num,
                    field: s
                        .field
                        .map(|f| (if f == 2 { "bottom" } else { "top" }).into()),
                });
                assert_eq!(got, slice.expect, "{}, slice {i}", case.name);
            }
        }
    }

    #[test]
    fn reads_the_sps_from_avcc_and_annex_b() {
        // The avcC of `ffmpeg -f lavfi -i testsrc2=s=640x360 -c:v libx264 -x264-params ref=5`
        // (`trace_headers` reads max_num_ref_frames = 5, log2_max_frame_num_minus4 = 0 and
        // frame_mbs_only_flag = 1 from it).
        let avcc = hex(&[
            "0164001effe1001a6764001eacd980a0",
            "2ff97011000003000100000300320f16",
            "2d9a010006 68e978f2c8b0fdf8f800",
        ]
        .concat());
        let sps = first_sps(&avcc).map(<[u8]>::to_vec).unwrap_or_default();
        assert_eq!(sps.len(), 0x1a);
        let progressive = Sps {
            sps_id: 0,
            max_num_ref_frames: 5,
            poc_type: 0,
            log2_max_poc_lsb: 6,
            chroma_array_type: 1,
            gaps_allowed: false,
            log2_max_frame_num: 4,
            separate_colour_plane: false,
            frame_mbs_only: true,
        };
        assert_eq!(parse_sps(&unescape(&sps)), Some(progressive));
        let mut annex_b = vec![0, 0, 0, 1, 0x68, 0xeb, 0, 0, 1];
        annex_b.extend_from_slice(&sps);
        annex_b.extend_from_slice(&[0, 0, 1, 0x68, 0xeb]);
        assert!(first_sps(&annex_b).is_some_and(|nal| nal.starts_with(&sps)));
        assert_eq!(first_sps(&[0, 0, 1, 0x68]), None);
        assert_eq!(parse_sps(&[0x67]), None);
        // A progressive stream has no field pictures, whatever a slice holds.
        assert_eq!(
            slice_info(&[0x65, 0x88, 0x84], &progressive).and_then(|s| s.field),
            None
        );
    }

    #[test]
    fn tells_field_pictures_from_annex_b_and_length_prefixed_packets() {
        // The SPS and the first slice header bytes of test/helpers/h264-fields.ts's stream, in
        // decode order: IDR top field, P bottom field, P top, P bottom, B top (`trace_headers`
        // reads log2_max_frame_num_minus4 0, max_num_ref_frames 2, frame_mbs_only_flag 0, and
        // those field_pic_flag and bottom_field_flag values).
        let sps = hex("674d001ee560a14b011000000300100000030328f0884538");
        let extradata = [&[0, 0, 0, 1][..], &sps].concat();
        let paff = first_sps(&extradata).and_then(|nal| parse_sps(&unescape(nal)));
        let expected = Sps {
            sps_id: 0,
            max_num_ref_frames: 2,
            poc_type: 0,
            log2_max_poc_lsb: 8,
            chroma_array_type: 1,
            gaps_allowed: false,
            log2_max_frame_num: 4,
            separate_colour_plane: false,
            frame_mbs_only: false,
        };
        assert_eq!(paff, Some(expected));
        let slices = [
            "45b850028340101010",
            "41e180e543e0101010",
            "41e3036543e0101010",
            "41e383e543e0101010",
            "01a9405e5418801010",
        ];
        let aud = [0x09, 0x50];
        let mut annex_b = Vec::new();
        let mut prefixed = Vec::new();
        for slice in slices.map(hex) {
            // An access unit delimiter, then the slice.
            let packet = [&[0, 0, 0, 1][..], &aud, &[0, 0, 1], &slice].concat();
            annex_b
                .push(first_slice(&packet, None).and_then(|nal| slice_info(nal, &expected)?.field));
            let packet = [&[0, 0, 0, 2][..], &aud, &[0, 0, 0, 9], &slice].concat();
            prefixed.push(
                first_slice(&packet, Some(4)).and_then(|nal| slice_info(nal, &expected)?.field),
            );
        }
        let fields = vec![Some(1), Some(2), Some(1), Some(2), Some(1)];
        assert_eq!(annex_b, fields);
        assert_eq!(prefixed, fields);
        // No slice, a length running past the packet, a header cut short.
        assert_eq!(first_slice(&[0, 0, 1, 0x09, 0x50], None), None);
        assert_eq!(first_slice(&[0, 0, 0, 9, 0x41, 0xe1], Some(4)), None);
        assert_eq!(slice_info(&[0x41, 0xe1], &expected), None);
    }

    #[test]
    fn emulation_prevention_bytes_are_removed() {
        assert_eq!(unescape(&[0, 0, 3, 1, 0, 0, 3]), vec![0, 0, 1, 0, 0]);
    }
}
