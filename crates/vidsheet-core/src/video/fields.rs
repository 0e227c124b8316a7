//! Field pictures stored as packets of their own: an MPEG-2 field picture in an MP4 sample (some
//! muxers give each field one), H.264 PAFF as broadcast 1080i and AVCHD carry it (each field its
//! own PES packet in a transport stream, often its own sample in MP4). The frame is shown at its
//! first field's time; the second field's packet, timed later, gives no picture of its own, so
//! decisions taken by a packet's time must follow its first field ([`super::skip`]).

use ff::{codec, ffi};
use ffmpeg_next as ff;

use super::h264;

/// How a stream's packets are read for a lone field picture.
pub(super) enum FieldReader {
    /// The stream cannot hold field pictures, or they cannot be read here.
    Never,
    Mpeg2,
    /// An H.264 stream whose SPS allows field pictures; MP4's NAL length size (None: Annex B).
    H264 {
        sps: h264::Sps,
        length_size: Option<usize>,
    },
}

impl FieldReader {
    pub(super) fn of_stream(codec: codec::Id, par: *const ffi::AVCodecParameters) -> FieldReader {
        match codec {
            codec::Id::MPEG2VIDEO => FieldReader::Mpeg2,
            codec::Id::H264 => match h264::stream_sps(par) {
                Some(sps) if !sps.frame_mbs_only => FieldReader::H264 {
                    sps,
                    length_size: h264::avcc_length_size(par),
                },
                _ => FieldReader::Never,
            },
            _ => FieldReader::Never,
        }
    }

    /// The one field picture a packet holds; None for a frame picture, a packet MPEG-2 shows
    /// holds both fields, or anything unreadable. (An H.264 packet is judged by its first slice:
    /// a packet holding both fields reads as a lone first field each time, and none is ever taken
    /// for a second field.)
    pub(super) fn lone_field(&self, data: &[u8]) -> Option<Field> {
        match self {
            FieldReader::Never => None,
            FieldReader::Mpeg2 => mpeg2_lone_field(data),
            FieldReader::H264 { sps, length_size } => {
                let slice = h264::slice_info(h264::first_slice(data, *length_size)?, sps)?;
                slice.field.map(|structure| Field {
                    structure,
                    frame: slice.frame_num,
                })
            }
        }
    }
}

/// A lone field picture as the pairing reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Field {
    /// 1 a top field, 2 a bottom field.
    pub structure: u8,
    /// What both fields of a frame share: H.264's `frame_num`, MPEG-2's `temporal_reference`.
    pub frame: u32,
}

/// The field pairing rule, one packet's picture at a time in decode order: whether `picture` (a
/// lone field, or None for anything else: a frame, a packet of both fields, unreadable) is the
/// second field of the pair `open` opened (a field of the other parity with the same frame
/// number, as FFmpeg's H.264 decoder pairs them in h264_field_start), and the field left open
/// for the next packet (a field that is not second opens a pair; anything else closes it). The
/// fallback's `pairField` in src/engine/ffmpeg/h264.ts; fixtures/vectors/fields.json.
pub(super) fn pair_field(open: Option<Field>, picture: Option<Field>) -> (bool, Option<Field>) {
    let second = matches!(
        (open, picture),
        (Some(o), Some(p)) if o.structure != p.structure && o.frame == p.frame
    );
    (second, picture.filter(|_| !second))
}

/// The field an MPEG-2 packet holding exactly one picture that is a field holds (its
/// temporal_reference as the frame number); None for a frame picture, a packet of two pictures
/// or anything unreadable. The fallback's `mpeg2LoneField` in src/engine/ffmpeg/mpeg2.ts;
/// fixtures/vectors/mpeg2-picture.json.
fn mpeg2_lone_field(data: &[u8]) -> Option<Field> {
    const PICTURE: [u8; 4] = [0, 0, 1, 0x00];
    const EXTENSION: [u8; 4] = [0, 0, 1, 0xb5];
    let find = |from: usize, code: &[u8; 4]| {
        data.get(from..)?
            .windows(4)
            .position(|w| w == code)
            .map(|i| from + i)
    };
    let picture = find(0, &PICTURE)?;
    if find(picture + 4, &PICTURE).is_some() {
        return None;
    }
    // The first picture coding extension (identifier 8) after the picture header.
    let mut ext = find(picture + 4, &EXTENSION)?;
    while data.get(ext + 4)? >> 4 != 8 {
        ext = find(ext + 4, &EXTENSION)?;
    }
    let structure = data.get(ext + 6)? & 3;
    let frame = ((*data.get(picture + 4)? as u32) << 2) | (*data.get(picture + 5)? as u32 >> 6);
    matches!(structure, 1 | 2).then_some(Field { structure, frame })
}

#[cfg(test)]
mod tests {
    use super::{pair_field, Field};
    use crate::vectors::hex;

    #[derive(serde::Deserialize)]
    #[serde(untagged)]
    enum Part {
        Hex(String),
        Fill { fill: String, count: usize },
    }

    #[derive(serde::Deserialize)]
    struct PacketCase {
        name: String,
        packet: Vec<Part>,
        expect: Option<Picture>,
    }

    fn field(p: &Picture) -> Option<Field> {
        Some(Field {
            structure: match p.field.as_deref()? {
                "bottom" => 2,
                _ => 1,
            },
            frame: p.frame,
        })
    }

    #[test]
    fn mpeg2_pictures_read_as_the_shared_vectors_say() {
        for case in crate::vectors::cases::<PacketCase>("mpeg2-picture.json") {
            let packet: Vec<u8> = case
                .packet
                .iter()
                .flat_map(|part| match part {
                    Part::Hex(text) => hex(text),
                    Part::Fill { fill, count } => hex(fill).repeat(*count),
                })
                .collect();
            let want = case.expect.as_ref().and_then(field);
            assert_eq!(super::mpeg2_lone_field(&packet), want, "{}", case.name);
        }
    }

    #[derive(serde::Deserialize)]
    struct Picture {
        field: Option<String>,
        frame: u32,
    }

    #[derive(serde::Deserialize)]
    struct Case {
        name: String,
        pictures: Vec<Option<Picture>>,
        expect: Vec<bool>,
    }

    #[test]
    fn fields_pair_as_the_shared_vectors_say() {
        for case in crate::vectors::cases::<Case>("fields.json") {
            let mut open = None;
            let mut got = Vec::new();
            for p in &case.pictures {
                let picture = p.as_ref().and_then(field);
                let (second, next) = pair_field(open, picture);
                got.push(second);
                open = next;
            }
            assert_eq!(got, case.expect, "{}", case.name);
        }
    }
}
