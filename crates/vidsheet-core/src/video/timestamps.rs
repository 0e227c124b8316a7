//! Packet timestamps both engines compute alike: the untimed-packet clock and the label clock.
//! The rules: fixtures/vectors/timestamps.json.

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

/// A timestamp `ts` in `num/den` units as seconds on the labels' clock, which starts at the
/// container start `start_us` (µs).
pub(crate) fn label_seconds(ts: i64, (num, den): (i64, i64), start_us: i64) -> f64 {
    let scaled = (ts as i128).saturating_mul(num as i128) as f64;
    scaled / den as f64 - start_us as f64 / 1e6
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
}
