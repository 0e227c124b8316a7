//! What the reference model ([`crate::video::refs`]) reads of an H.264 picture: the parameter sets
//! a stream announces and each picture's slice headers, through its memory management.

use ff::ffi;
use ffmpeg_next as ff;

use super::{annex_b_units, h264_extradata, parse_sps, unescape, Bits, Sps};

/// The picture parameter set fields a slice header's reference syntax depends on (H.264
/// 7.3.2.2). A PPS with slice groups is not read (None): those streams are never modelled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::video) struct Pps {
    pub pps_id: u32,
    pub sps_id: u32,
    /// A frame's slice header then carries `delta_pic_order_cnt_bottom`.
    pub bottom_field_poc_present: bool,
    /// `num_ref_idx_l0/l1_default_active_minus1` + 1.
    pub ref_idx_default: [u32; 2],
    pub weighted_pred: bool,
    /// 2: B pictures are weighted by the order counts of their references (implicit).
    pub weighted_bipred_idc: u32,
    pub redundant_pic_cnt_present: bool,
}

/// The fields of a PPS NAL unit (header byte first, emulation prevention removed) up to
/// `redundant_pic_cnt_present_flag`.
fn parse_pps(nal: &[u8]) -> Option<Pps> {
    let mut b = Bits { data: nal, pos: 8 };
    let pps_id = b.ue()?;
    let sps_id = b.ue()?;
    b.bit()?; // entropy_coding_mode_flag
    let bottom_field_poc_present = b.bit()? == 1;
    if b.ue()? != 0 {
        return None; // slice groups
    }
    let l0 = b.ue()?.checked_add(1).filter(|&n| n <= 32)?;
    let l1 = b.ue()?.checked_add(1).filter(|&n| n <= 32)?;
    let weighted_pred = b.bit()? == 1;
    let weighted_bipred_idc = b.bits(2)?;
    b.se()?; // pic_init_qp_minus26
    b.se()?; // pic_init_qs_minus26
    b.se()?; // chroma_qp_index_offset
    b.bit()?; // deblocking_filter_control_present_flag
    b.bit()?; // constrained_intra_pred_flag
    let redundant_pic_cnt_present = b.bit()? == 1;
    Some(Pps {
        pps_id,
        sps_id,
        bottom_field_poc_present,
        ref_idx_default: [l0, l1],
        weighted_pred,
        weighted_bipred_idc,
        redundant_pic_cnt_present,
    })
}

/// The parameter sets a stream has announced so far (extradata first, then in-band ones as
/// packets are read in decode order), by id.
#[derive(Debug, Clone, Default)]
pub(in crate::video) struct ParamSets {
    sps: Vec<(u32, Sps)>,
    pps: Vec<(u32, Pps)>,
}

impl ParamSets {
    /// The parameter sets of a stream's H.264 extradata (avcC or Annex B); empty for anything else.
    pub(in crate::video) fn of_stream(par: *const ffi::AVCodecParameters) -> ParamSets {
        let mut sets = ParamSets::default();
        let Some(data) = h264_extradata(par) else {
            return sets;
        };
        if data.first() == Some(&1) {
            // avcC: 5 header bytes, then SPS count (low 5 bits) and (u16 len, SPS)*, then PPS
            // count and (u16 len, PPS)*.
            let mut at = 5;
            for mask in [0x1f, 0xff] {
                let Some(&count) = data.get(at) else { break };
                at += 1;
                for _ in 0..count & mask {
                    let Some(len) = data.get(at..at + 2) else {
                        break;
                    };
                    let len = u16::from_be_bytes([len[0], len[1]]) as usize;
                    if let Some(nal) = data.get(at + 2..at + 2 + len) {
                        sets.learn(nal);
                    }
                    at += 2 + len;
                }
            }
        } else {
            for nal in annex_b_units(data) {
                sets.learn(nal);
            }
        }
        sets
    }

    /// Takes in a NAL unit if it is an SPS or a PPS (one that cannot be read replaces an earlier
    /// set of its id with nothing, so slices referring to it are not read either).
    fn learn(&mut self, nal: &[u8]) {
        match nal.first().map(|h| h & 0x1f) {
            // The SPS id follows profile, constraint flags and level; the PPS id comes first.
            Some(7) => learn_set(&mut self.sps, nal, 256, 32, parse_sps),
            Some(8) => learn_set(&mut self.pps, nal, 64, 8, parse_pps),
            _ => {}
        }
    }

    fn pps(&self, id: u32) -> Option<(&Sps, &Pps)> {
        let (_, pps) = self.pps.iter().find(|(i, _)| *i == id)?;
        let (_, sps) = self.sps.iter().find(|(i, _)| *i == pps.sps_id)?;
        Some((sps, pps))
    }
}

/// Replaces the set of `nal`'s id in `sets` (its first `head` bytes unescaped, the id read at bit
/// `id_at`) with what `parse` reads of it, or with nothing.
fn learn_set<T>(
    sets: &mut Vec<(u32, T)>,
    nal: &[u8],
    head: usize,
    id_at: usize,
    parse: fn(&[u8]) -> Option<T>,
) {
    let head = unescape(&nal[..nal.len().min(head)]);
    let Some(id) = (Bits {
        data: &head,
        pos: id_at,
    })
    .ue() else {
        return;
    };
    sets.retain(|(i, _)| *i != id);
    if let Some(set) = parse(&head) {
        sets.push((id, set));
    }
}

/// A slice's prediction type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::video) enum SliceKind {
    I,
    P,
    B,
}

/// What one slice says about the references it predicts from (H.264 7.3.3).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(in crate::video) struct SliceRefs {
    pub kind: SliceKind,
    /// `num_ref_idx_l0/l1_active_minus1` + 1 (0 for lists the slice type has not).
    pub active: [u32; 2],
    /// `ref_pic_list_modification` of each list: (modification_of_pic_nums_idc 0 or 1,
    /// abs_diff_pic_num_minus1), in order.
    pub modifications: [Vec<(u32, u32)>; 2],
    /// A B slice whose direct prediction or weights use the order counts of its references
    /// (temporal direct, implicit weights).
    pub uses_order_counts: bool,
}

/// One coded frame picture, as its slice headers describe it: what the reference model needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(in crate::video) struct Picture {
    pub idr: bool,
    /// `nal_ref_idc` != 0.
    pub reference: bool,
    pub frame_num: u32,
    /// `pic_order_cnt_lsb`, and the frame's order count offset of its bottom field (`min(0,
    /// delta_pic_order_cnt_bottom)`: a frame's count is its smaller field's).
    pub poc_lsb: u32,
    pub bottom_offset: i64,
    /// Memory management operations 1 (`difference_of_pic_nums_minus1` of each): the pictures it
    /// marks unused instead of the sliding window; empty for sliding-window marking.
    pub unmark: Vec<u32>,
    pub slices: Vec<SliceRefs>,
    /// The SPS the picture's slices use (all of them: the same one).
    pub sps: Sps,
}

/// The picture a packet holds, its parameter sets learned on the way (`sets` takes in any SPS or
/// PPS the packet carries); None when anything needed cannot be read, the picture is a field or
/// of an MBAFF-capable stream, its order count is not of type 0, it carries memory management
/// operations other than marking a short-term picture unused, marks itself long-term, or its
/// slices disagree.
pub(in crate::video) fn packet_picture(
    data: &[u8],
    length_size: Option<usize>,
    sets: &mut ParamSets,
) -> Option<Picture> {
    let mut picture: Option<Picture> = None;
    let mut ok = true;
    for_each_nal(data, length_size, |nal| {
        let Some(&header) = nal.first() else { return };
        match header & 0x1f {
            7 | 8 => sets.learn(nal),
            t @ (1 | 5) => {
                let slice = parse_slice(nal, t == 5, header & 0x60 != 0, sets);
                match (slice, picture.as_mut()) {
                    (None, _) => ok = false,
                    (Some(s), None) => picture = Some(s),
                    (Some(s), Some(p)) => {
                        let same = p.idr == s.idr
                            && p.reference == s.reference
                            && p.frame_num == s.frame_num
                            && p.poc_lsb == s.poc_lsb
                            && p.bottom_offset == s.bottom_offset
                            && p.unmark == s.unmark
                            && p.sps == s.sps;
                        if same {
                            p.slices.extend(s.slices);
                        } else {
                            ok = false;
                        }
                    }
                }
            }
            // Slice data partitions, auxiliary or extension slices: not modelled.
            2..=4 | 19 | 20 | 21 => ok = false,
            _ => {}
        }
    });
    picture.filter(|_| ok)
}

/// Calls `f` with each NAL unit of a packet: length-prefixed (exact extents) or Annex B (each to
/// the end of the packet: readers take only a unit's first bytes).
fn for_each_nal(data: &[u8], length_size: Option<usize>, mut f: impl FnMut(&[u8])) {
    let Some(n) = length_size else {
        annex_b_units(data).for_each(f);
        return;
    };
    let mut at = 0usize;
    while at + n <= data.len() {
        let len = data[at..at + n]
            .iter()
            .fold(0usize, |v, &b| (v << 8) | b as usize);
        let Some(nal) = (at + n)
            .checked_add(len)
            .and_then(|end| data.get(at + n..end))
        else {
            // A length running past the packet: what follows cannot be read.
            f(&[0x02]);
            return;
        };
        f(nal);
        at += n + len;
    }
}

/// A slice header (H.264 7.3.3) through `dec_ref_pic_marking`, as a one-slice [`Picture`].
fn parse_slice(nal: &[u8], idr: bool, reference: bool, sets: &ParamSets) -> Option<Picture> {
    let head = unescape(&nal[..nal.len().min(1024)]);
    let mut b = Bits {
        data: &head,
        pos: 8,
    };
    b.ue()?; // first_mb_in_slice
    let kind = match b.ue()? % 5 {
        0 => SliceKind::P,
        1 => SliceKind::B,
        2 => SliceKind::I,
        _ => return None, // SP, SI
    };
    let (sps, pps) = sets.pps(b.ue()?)?;
    if !sps.frame_mbs_only || sps.poc_type != 0 || sps.max_num_ref_frames == 0 {
        return None;
    }
    if sps.separate_colour_plane {
        b.bits(2)?; // colour_plane_id
    }
    let frame_num = b.bits(sps.log2_max_frame_num)?;
    if idr {
        b.ue()?; // idr_pic_id
    }
    let poc_lsb = b.bits(sps.log2_max_poc_lsb)?;
    let bottom_offset = if pps.bottom_field_poc_present {
        b.se()?.min(0)
    } else {
        0
    };
    if pps.redundant_pic_cnt_present && b.ue()? != 0 {
        return None;
    }
    let mut uses_order_counts = false;
    if kind == SliceKind::B {
        uses_order_counts = b.bit()? == 0 || pps.weighted_bipred_idc == 2;
    }
    let lists = match kind {
        SliceKind::I => 0,
        SliceKind::P => 1,
        SliceKind::B => 2,
    };
    let mut active = [0, 0];
    active[..lists].copy_from_slice(&pps.ref_idx_default[..lists]);
    if lists > 0 && b.bit()? == 1 {
        for a in active.iter_mut().take(lists) {
            *a = b.ue()?.checked_add(1).filter(|&n| n <= 32)?;
        }
    }
    let mut modifications = [Vec::new(), Vec::new()];
    for m in modifications.iter_mut().take(lists) {
        if b.bit()? == 1 {
            loop {
                match b.ue()? {
                    idc @ (0 | 1) => m.push((idc, b.ue()?)),
                    3 => break,
                    _ => return None, // long-term pictures
                }
                if m.len() > 33 {
                    return None;
                }
            }
        }
    }
    let weights = (pps.weighted_pred && kind == SliceKind::P)
        || (pps.weighted_bipred_idc == 1 && kind == SliceKind::B);
    if weights {
        b.ue()?; // luma_log2_weight_denom
        if sps.chroma_array_type != 0 {
            b.ue()?; // chroma_log2_weight_denom
        }
        for &n in active.iter().take(lists) {
            for _ in 0..n {
                if b.bit()? == 1 {
                    b.se()?;
                    b.se()?;
                }
                if sps.chroma_array_type != 0 && b.bit()? == 1 {
                    for _ in 0..4 {
                        b.se()?;
                    }
                }
            }
        }
    }
    let mut unmark = Vec::new();
    if reference {
        if idr {
            b.bit()?; // no_output_of_prior_pics_flag
            if b.bit()? == 1 {
                return None; // long_term_reference_flag
            }
        } else if b.bit()? == 1 {
            // adaptive_ref_pic_marking_mode_flag: memory management operations; only "mark a
            // short-term picture unused" (1) is modelled.
            loop {
                match b.ue()? {
                    0 => break,
                    1 => unmark.push(b.ue()?),
                    _ => return None,
                }
                if unmark.len() > 66 {
                    return None;
                }
            }
            if unmark.is_empty() {
                return None;
            }
        }
    }
    Some(Picture {
        idr,
        reference,
        frame_num,
        poc_lsb,
        bottom_offset,
        unmark,
        slices: vec![SliceRefs {
            kind,
            active,
            modifications,
            uses_order_counts,
        }],
        sps: *sps,
    })
}
