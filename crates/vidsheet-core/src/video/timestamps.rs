//! Packet timestamps both engines compute alike: the untimed-packet clock, the label clock and
//! faulty pts (fixtures/vectors/timestamps.json), and the frame step (fixtures/vectors/frame-step.json).

/// The untimed-packet clock over one packet: `clock` is the decode time the next packet is due
/// at (None when not known). Returns the packet's decode time (its own, else, with neither pts
/// nor dts, the clock's) and the clock after it.
pub(super) fn untimed_decode_time(
    clock: Option<i64>,
    pts: Option<i64>,
    dts: Option<i64>,
    duration: i64,
) -> (Option<i64>, Option<i64>) {
    let dts = dts.or(if pts.is_none() { clock } else { None });
    let step = (duration > 0).then_some(duration);
    (
        dts,
        dts.zip(step).map(|(dts, step)| dts.saturating_add(step)),
    )
}

/// Faulty pts over one packet (fixtures/vectors/timestamps.json, `of: faulty`): faulty once a
/// packet's pts sits below its dts, and for good.
pub(super) fn pts_faulty(faulty: bool, pts: Option<i64>, dts: Option<i64>) -> bool {
    faulty || matches!((pts, dts), (Some(p), Some(d)) if p < d)
}

/// A timestamp `ts` in `num/den` units as seconds on the labels' clock, which starts at the
/// container start `start_us` (µs).
pub(crate) fn label_seconds(ts: i64, (num, den): (i64, i64), start_us: i64) -> f64 {
    let scaled = (ts as i128).saturating_mul(num as i128) as f64;
    scaled / den as f64 - start_us as f64 / 1e6
}

/// The frame step in time base `(num, den)` units (fixtures/vectors/frame-step.json): the
/// packet's own `duration` when above 0, else one frame at the average frame rate `avg`, else at
/// the real one `real` (rates as num/den, unknown at 0 or below), rounded to nearest; None when
/// none is known or the step rounds to 0.
pub(crate) fn frame_step(
    duration: Option<i64>,
    (num, den): (i64, i64),
    avg: (i64, i64),
    real: (i64, i64),
) -> Option<i64> {
    if let Some(d) = duration.filter(|&d| d > 0) {
        return Some(d);
    }
    let known = |(n, d): (i64, i64)| (n > 0 && d > 0).then_some((n, d));
    let (rate_num, rate_den) = known(avg).or(known(real))?;
    if num <= 0 || den <= 0 {
        return None;
    }
    let (n, d) = (
        den as i128 * rate_den as i128,
        num as i128 * rate_num as i128,
    );
    let step = (2 * n + d) / (2 * d);
    (step > 0).then(|| step.min(i64::MAX as i128) as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A case of one of the file's two rules.
    #[derive(serde::Deserialize)]
    #[serde(tag = "of", rename_all = "camelCase")]
    enum Case {
        /// The untimed-packet clock over a read: the clock it starts at, its packets in order.
        Untimed {
            name: String,
            clock: Option<i64>,
            packets: Vec<Packet>,
        },
        /// Faulty pts over a read: the judgement it starts with, its packets in order.
        Faulty {
            name: String,
            faulty: bool,
            packets: Vec<Stamps>,
        },
        /// The label clock.
        #[serde(rename_all = "camelCase")]
        Label {
            name: String,
            ts: i64,
            time_base: (i64, i64),
            start_us: i64,
            expect: String,
        },
    }

    #[derive(serde::Deserialize)]
    struct Packet {
        pts: Option<i64>,
        dts: Option<i64>,
        duration: i64,
        expect: Expect,
    }

    #[derive(serde::Deserialize)]
    struct Stamps {
        pts: Option<i64>,
        dts: Option<i64>,
        expect: bool,
    }

    #[derive(serde::Deserialize, Debug, PartialEq)]
    struct Expect {
        dts: Option<i64>,
        clock: Option<i64>,
    }

    #[test]
    fn the_timestamps_follow_the_shared_vectors() {
        for case in crate::vectors::cases::<Case>("timestamps.json") {
            match case {
                Case::Untimed {
                    name,
                    clock,
                    packets,
                } => {
                    let mut clock = clock;
                    for (i, p) in packets.iter().enumerate() {
                        let (dts, next) = untimed_decode_time(clock, p.pts, p.dts, p.duration);
                        let got = Expect { dts, clock: next };
                        assert_eq!(got, p.expect, "{name}: packet {i}");
                        clock = next;
                    }
                }
                Case::Faulty {
                    name,
                    faulty,
                    packets,
                } => {
                    let mut faulty = faulty;
                    for (i, p) in packets.iter().enumerate() {
                        faulty = pts_faulty(faulty, p.pts, p.dts);
                        assert_eq!(faulty, p.expect, "{name}: packet {i}");
                    }
                }
                Case::Label {
                    name,
                    ts,
                    time_base,
                    start_us,
                    expect,
                } => {
                    let got = label_seconds(ts, time_base, start_us);
                    let expect: f64 = expect.parse().expect("a decimal");
                    assert_eq!(got.to_bits(), expect.to_bits(), "{name}: {got} != {expect}");
                }
            }
        }
    }

    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct StepCase {
        name: String,
        time_base: (i64, i64),
        avg_frame_rate: String,
        r_frame_rate: String,
        duration: Option<i64>,
        expect: Option<i64>,
    }

    /// A rate as ffprobe prints it, num/den.
    fn rate(text: &str) -> (i64, i64) {
        let (num, den) = text.split_once('/').expect("num/den");
        (num.parse().expect("num"), den.parse().expect("den"))
    }

    #[test]
    fn the_frame_step_follows_the_shared_vectors() {
        for c in crate::vectors::cases::<StepCase>("frame-step.json") {
            let (avg, real) = (rate(&c.avg_frame_rate), rate(&c.r_frame_rate));
            let got = frame_step(c.duration, c.time_base, avg, real);
            assert_eq!(got, c.expect, "{}", c.name);
        }
    }
}
