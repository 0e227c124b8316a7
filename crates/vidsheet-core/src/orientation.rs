//! How a stream's pictures are shown: the display matrix (rotation, mirroring) and the sample
//! aspect ratio.

use std::ptr;

use ff::ffi;
use ffmpeg_next as ff;

/// How decoded pictures are turned upright, mirroring ffmpeg's autorotate (transpose, hflip,
/// vflip chosen from the display matrix). Applied as: transpose first, then flips.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Orientation {
    pub transpose: bool,
    pub hflip: bool,
    pub vflip: bool,
}

impl Orientation {
    pub(crate) fn from_matrix(m: &[i32; 9]) -> Self {
        let angle = unsafe { ffi::av_display_rotation_get(m.as_ptr()) };
        if !angle.is_finite() {
            return Orientation::default();
        }
        let mut theta = -angle.round();
        theta -= 360.0 * (theta / 360.0 + 0.9 / 360.0).floor();
        let near = |a: f64| (theta - a).abs() < 1.0;
        if near(90.0) {
            if m[3] > 0 {
                // transpose=cclock_flip
                Orientation {
                    transpose: true,
                    hflip: false,
                    vflip: false,
                }
            } else {
                // transpose=clock
                Orientation {
                    transpose: true,
                    hflip: true,
                    vflip: false,
                }
            }
        } else if near(180.0) {
            Orientation {
                transpose: false,
                hflip: m[0] < 0,
                vflip: m[4] < 0,
            }
        } else if near(270.0) {
            if m[3] < 0 {
                // transpose=clock_flip
                Orientation {
                    transpose: true,
                    hflip: true,
                    vflip: true,
                }
            } else {
                // transpose=cclock
                Orientation {
                    transpose: true,
                    hflip: false,
                    vflip: true,
                }
            }
        } else if theta.abs() < 1.0 || (theta - 360.0).abs() < 1.0 {
            Orientation {
                transpose: false,
                hflip: false,
                vflip: m[4] < 0,
            }
        } else {
            // Arbitrary angles are not supported; show the picture as stored.
            Orientation::default()
        }
    }

    pub(crate) fn of_stream(st: *const ffi::AVStream) -> Self {
        unsafe {
            let mut size: usize = 0;
            let data = ffi::av_stream_get_side_data(
                st,
                ffi::AVPacketSideDataType::AV_PKT_DATA_DISPLAYMATRIX,
                &mut size,
            );
            if data.is_null() || size < 36 {
                return Orientation::default();
            }
            let mut m = [0i32; 9];
            for (i, v) in m.iter_mut().enumerate() {
                *v = ptr::read_unaligned((data as *const i32).add(i));
            }
            Orientation::from_matrix(&m)
        }
    }
}

fn rational(r: ffi::AVRational) -> Option<(i64, i64)> {
    (r.num > 0 && r.den > 0).then_some((r.num as i64, r.den as i64))
}

/// Display size: width stretched by the sample aspect ratio, then swapped for 90/270 rotations.
pub(crate) fn display_size(st: *const ffi::AVStream) -> Option<(u32, u32)> {
    unsafe {
        let par = (*st).codecpar;
        let (w, h) = ((*par).width, (*par).height);
        if w <= 0 || h <= 0 {
            return None;
        }
        let sar =
            rational((*st).sample_aspect_ratio).or_else(|| rational((*par).sample_aspect_ratio));
        let mut dw = w as i64;
        if let Some((n, d)) = sar {
            if n != d {
                dw = ((w as i64 * n + d / 2) / d).max(1);
            }
        }
        let dw = u32::try_from(dw).ok()?;
        let dh = h as u32;
        if Orientation::of_stream(st).transpose {
            Some((dh, dw))
        } else {
            Some((dw, dh))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rot(deg: f64, hflip: bool) -> [i32; 9] {
        let mut m = [0i32; 9];
        unsafe {
            ffi::av_display_rotation_set(m.as_mut_ptr(), deg);
            ffi::av_display_matrix_flip(m.as_mut_ptr(), hflip as i32, 0);
        }
        m
    }

    #[test]
    fn orientation_follows_ffmpeg_autorotate() {
        // `-display_rotation 90` (counter-clockwise) is shown rotated clockwise: transpose=clock.
        assert_eq!(
            Orientation::from_matrix(&rot(90.0, false)),
            Orientation {
                transpose: true,
                hflip: true,
                vflip: false
            }
        );
        assert_eq!(
            Orientation::from_matrix(&rot(-90.0, false)),
            Orientation {
                transpose: true,
                hflip: false,
                vflip: true
            }
        );
        assert_eq!(
            Orientation::from_matrix(&rot(180.0, false)),
            Orientation {
                transpose: false,
                hflip: true,
                vflip: true
            }
        );
        assert_eq!(
            Orientation::from_matrix(&rot(0.0, false)),
            Orientation::default()
        );
        // A mirrored matrix reads as 180 degrees with m[0] < 0: hflip, as ffmpeg does.
        assert_eq!(
            Orientation::from_matrix(&rot(0.0, true)),
            Orientation {
                transpose: false,
                hflip: true,
                vflip: false
            }
        );
    }
}
