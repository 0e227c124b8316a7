//! Reading a render plan handed over from JS: every value is checked once, here, and a bad one is
//! rejected with the path of its field (`plan.sheets[0].cells[3].rect.w must be an integer
//! 0..65535, got -4`), never clamped. JS has only one number type, so each rule below is stated
//! on the number as JS gave it: an integer field rejects 2.5 instead of truncating it, a size
//! rejects -4 instead of wrapping it to 4294967292, a time rejects NaN instead of reading 0.
//!
//! The per-field rules are the `deserialize_with` functions named in plan.rs; the rules across
//! fields (a window's end not before its start) run once the plan is read.

use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, SeqAccess, Unexpected, Visitor};
use serde::Deserialize;

use super::RenderPlan;
use crate::error::{Error, Result};

/// Largest magnitude of a plan time, ms (about 31 years). Far beyond any clip, and small enough
/// that a time in microseconds stays an exact integer in f64 (and in i64) wherever the engine
/// converts it.
const MAX_TIME_MS: f64 = 1e12;

/// Largest rectangle or sheet side: a JPEG cannot be wider or taller.
const MAX_SIDE: i64 = 65_535;

/// Largest label coordinate: pixel positions stay exact in the rasteriser's f32.
const MAX_POSITION: f64 = 16_777_216.0;

/// Largest font size, pixels: a glyph larger than any sheet is a planning error, and its
/// rasterisation would take memory and time for nothing.
const MAX_FONT_SIZE: f64 = 4096.0;

impl RenderPlan {
    /// Reads a plan from any serde source (JSON in tests) and checks every value: a value of the
    /// wrong type or out of its range fails with a `render_failed` error that names the field.
    pub fn read<'de, D>(source: D) -> Result<RenderPlan>
    where
        D: Deserializer<'de>,
        D::Error: fmt::Display,
    {
        Self::read_with(source, |e| e.to_string())
    }

    /// [`RenderPlan::read`] with the source's own way of printing its error (napi's adds a status).
    pub(crate) fn read_with<'de, D>(
        source: D,
        message: impl Fn(&D::Error) -> String,
    ) -> Result<RenderPlan>
    where
        D: Deserializer<'de>,
    {
        let plan: RenderPlan = serde_path_to_error::deserialize(source).map_err(|e| {
            let path = e.path().to_string();
            let at = if path == "." {
                "plan".to_string()
            } else {
                format!("plan.{path}")
            };
            rejected(&at, &message(e.inner()))
        })?;
        for (i, sheet) in plan.sheets.iter().enumerate() {
            if let Some(b) = &sheet.band {
                window(&format!("plan.sheets[{i}].band"), b.start_ms, b.end_ms)?;
            }
        }
        Ok(plan)
    }
}

/// The error for a bad value at `at`: "plan.x must be ..." for this module's rules, "plan.x: ..."
/// for the reader's own (a missing field, a string where a number belongs).
fn rejected(at: &str, message: &str) -> Error {
    if message.starts_with("must ") {
        Error::failed(format!("{at} {message}"))
    } else {
        Error::failed(format!("{at}: {message}"))
    }
}

fn window(at: &str, start_ms: f64, end_ms: f64) -> Result<()> {
    if end_ms < start_ms {
        return Err(Error::failed(format!(
            "{at}.endMs must not be before startMs ({}), got {}",
            show(start_ms),
            show(end_ms)
        )));
    }
    Ok(())
}

/// A number as JS prints it (NaN, Infinity, 2.5, 7).
fn show(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        if v > 0.0 { "Infinity" } else { "-Infinity" }.into()
    } else {
        format!("{v}")
    }
}

/// Any JS number, whichever way the source hands it over (integers and floats apart).
struct Number(&'static str);

impl Visitor<'_> for Number {
    type Value = f64;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(self.0)
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> std::result::Result<f64, E> {
        Ok(v as f64)
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> std::result::Result<f64, E> {
        Ok(v as f64)
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> std::result::Result<f64, E> {
        Ok(v)
    }
    // napi hands null and undefined over as unit: say "null", not serde's "unit value".
    fn visit_unit<E: de::Error>(self) -> std::result::Result<f64, E> {
        Err(E::invalid_type(Unexpected::Other("null"), &self))
    }
    fn visit_none<E: de::Error>(self) -> std::result::Result<f64, E> {
        Err(E::invalid_type(Unexpected::Other("null"), &self))
    }
}

/// A number accepted when `ok`, else "must be {rule}, got {value}".
fn number<'de, D: Deserializer<'de>>(
    d: D,
    rule: &'static str,
    ok: impl Fn(f64) -> bool,
) -> std::result::Result<f64, D::Error> {
    let v = d.deserialize_f64(Number(rule))?;
    if ok(v) {
        Ok(v)
    } else {
        Err(de::Error::custom(format!(
            "must be {rule}, got {}",
            show(v)
        )))
    }
}

fn integer<'de, D: Deserializer<'de>>(
    d: D,
    rule: &'static str,
    min: i64,
    max: i64,
) -> std::result::Result<i64, D::Error> {
    let v = number(d, rule, |v| {
        v.fract() == 0.0 && v >= min as f64 && v <= max as f64
    })?;
    // Exact: an integer within i64's range (the bounds are at most u32's).
    Ok(v as i64)
}

pub(super) fn coordinate<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<i32, D::Error> {
    let v = integer(d, "an integer of 32 bits", i32::MIN.into(), i32::MAX.into())?;
    Ok(v as i32)
}

pub(super) fn side<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<u32, D::Error> {
    Ok(integer(d, "an integer 0..65535", 0, MAX_SIDE)? as u32)
}

pub(super) fn stream_index<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<u32, D::Error> {
    Ok(integer(
        d,
        "a stream index (an integer 0..2147483647)",
        0,
        i32::MAX.into(),
    )? as u32)
}

pub(super) fn max_pixels<'de, D: Deserializer<'de>>(
    d: D,
) -> std::result::Result<Option<i64>, D::Error> {
    Ok(Some(integer(
        d,
        "a pixel count (an integer 1..2147483647)",
        1,
        i32::MAX.into(),
    )?))
}

pub(super) fn quality<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<u8, D::Error> {
    Ok(integer(d, "an integer 1..100", 1, 100)? as u8)
}

pub(super) fn time<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<f64, D::Error> {
    number(d, "a finite time in ms within ±1e12", |v| {
        v.is_finite() && v.abs() <= MAX_TIME_MS
    })
}

pub(super) fn times<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<Vec<f64>, D::Error> {
    /// One element, read by `time` (so a bad one is reported with its index).
    struct Time(f64);
    impl<'de> Deserialize<'de> for Time {
        fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
            time(d).map(Time)
        }
    }
    Ok(Vec::<Time>::deserialize(d)?
        .into_iter()
        .map(|t| t.0)
        .collect())
}

/// A band's column levels: absent, or an array of numbers 0..1 (a bad one reported with its index).
pub(super) fn levels<'de, D: Deserializer<'de>>(
    d: D,
) -> std::result::Result<Option<Vec<f64>>, D::Error> {
    struct Level(f64);
    impl<'de> Deserialize<'de> for Level {
        fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
            unit(d).map(Level)
        }
    }
    Ok(Option::<Vec<Level>>::deserialize(d)?.map(|v| v.into_iter().map(|l| l.0).collect()))
}

pub(super) fn position<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<f32, D::Error> {
    let v = number(d, "a finite number within ±16777216", |v| {
        v.is_finite() && v.abs() <= MAX_POSITION
    })?;
    Ok(v as f32)
}

pub(super) fn font_size<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<f32, D::Error> {
    let v = number(d, "a number above 0 and at most 4096", |v| {
        v > 0.0 && v <= MAX_FONT_SIZE
    })?;
    Ok(v as f32)
}

pub(super) fn unit<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<f64, D::Error> {
    number(d, "a number 0..1", |v| (0.0..=1.0).contains(&v))
}

/// An `[r, g, b]` or `[r, g, b, a]` colour: exactly N integers 0..255.
pub(super) fn colour<'de, D: Deserializer<'de>, const N: usize>(
    d: D,
) -> std::result::Result<[u8; N], D::Error> {
    struct Channel;
    impl<'de> DeserializeSeed<'de> for Channel {
        type Value = u8;
        fn deserialize<D: Deserializer<'de>>(self, d: D) -> std::result::Result<u8, D::Error> {
            Ok(integer(d, "an integer 0..255", 0, 255)? as u8)
        }
    }
    struct Channels<const N: usize>;
    impl<'de, const N: usize> Visitor<'de> for Channels<N> {
        type Value = [u8; N];
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            write!(f, "an array of {N} integers 0..255")
        }
        fn visit_seq<A: SeqAccess<'de>>(
            self,
            mut seq: A,
        ) -> std::result::Result<[u8; N], A::Error> {
            let mut out = [0u8; N];
            for (i, slot) in out.iter_mut().enumerate() {
                *slot = seq.next_element_seed(Channel)?.ok_or_else(|| {
                    de::Error::custom(format!(
                        "must be {N} integers 0..255, got {i} value{}",
                        if i == 1 { "" } else { "s" }
                    ))
                })?;
            }
            if seq.next_element::<IgnoredAny>()?.is_some() {
                return Err(de::Error::custom(format!(
                    "must be {N} integers 0..255, got more"
                )));
            }
            Ok(out)
        }
    }
    d.deserialize_seq(Channels::<N>)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::de::IntoDeserializer;
    use serde_json::{json, Value};

    fn valid() -> Value {
        json!({
            "input": "/in.mp4",
            "videoStream": 0,
            "fontPath": "/font.ttf",
            "quality": 70,
            "theme": {
                "background": [0, 0, 0],
                "labelBox": [0, 0, 0, 180],
                "labelText": [255, 255, 255],
                "bandBackground": [10, 10, 10],
                "bandLevel": [0, 200, 0],
                "bandPeak": [200, 0, 0],
                "bandTick": [255, 255, 255],
                "peakThreshold": 0.8
            },
            "sheets": [{
                "path": "/out/a.jpg",
                "width": 640,
                "height": 400,
                "cells": [{
                    "timeMs": 1234.5,
                    "rect": { "x": 0, "y": 40, "w": 320, "h": 180 },
                    "label": {
                        "text": "00:01.234",
                        "box": { "x": 2, "y": 200, "w": 80, "h": 18 },
                        "textX": 6, "baselineY": 214.5, "fontSize": 14
                    }
                }],
                "band": {
                    "rect": { "x": 0, "y": 0, "w": 640, "h": 40 },
                    "startMs": 0, "endMs": 5000, "ticksMs": [1234.5], "message": null
                }
            }],
            "tempDir": "/tmp/x"
        })
    }

    /// The error for `valid()` changed at `pointer` (a JSON pointer) to `value`.
    fn error_with(pointer: &str, value: Value) -> String {
        let mut plan = valid();
        *plan.pointer_mut(pointer).expect("pointer") = value;
        match RenderPlan::read(plan) {
            Ok(_) => panic!("{pointer} accepted"),
            Err(e) => {
                assert_eq!(e.code, crate::ErrorCode::RenderFailed);
                e.message
            }
        }
    }

    #[test]
    fn band_levels_are_absent_or_numbers_0_to_1() {
        let band = |plan: &RenderPlan| plan.sheets[0].band.clone().expect("band");
        assert_eq!(
            band(&RenderPlan::read(valid()).expect("valid")).levels,
            None
        );
        let mut plan = valid();
        plan["sheets"][0]["band"]["levels"] = json!([0, 0.25, 1]);
        let read = RenderPlan::read(plan.clone()).expect("levels");
        assert_eq!(band(&read).levels, Some(vec![0.0, 0.25, 1.0]));
        plan["sheets"][0]["band"]["levels"] = json!([0.5, 1.5]);
        let message = RenderPlan::read(plan).expect_err("1.5 rejected").message;
        assert_eq!(
            message,
            "plan.sheets[0].band.levels[1] must be a number 0..1, got 1.5"
        );
    }

    #[test]
    fn reads_a_valid_plan_exactly() {
        let plan = RenderPlan::read(valid()).expect("valid");
        assert_eq!(plan.quality, 70);
        assert_eq!(plan.theme.label_box, [0, 0, 0, 180]);
        assert_eq!(plan.theme.peak_threshold, 0.8);
        let cell = &plan.sheets[0].cells[0];
        assert_eq!(cell.time_ms, 1234.5);
        assert_eq!(cell.rect.y, 40);
        assert_eq!(cell.label.r#box.w, 80);
        assert_eq!(cell.label.baseline_y, 214.5);
        let band = plan.sheets[0].band.as_ref().expect("band");
        assert_eq!(band.ticks_ms, vec![1234.5]);
        assert_eq!(band.message, None);
    }

    #[test]
    fn null_and_absent_optional_fields_are_none() {
        let mut plan = valid();
        plan["sheets"][0]
            .as_object_mut()
            .expect("sheet")
            .remove("band");
        let plan = RenderPlan::read(plan).expect("valid");
        assert_eq!(plan.sheets[0].band, None);
    }

    #[test]
    fn an_empty_job_is_valid() {
        let mut plan = valid();
        plan["sheets"] = json!([]);
        assert!(RenderPlan::read(plan).expect("valid").sheets.is_empty());
    }

    #[test]
    fn quality_must_be_an_integer_1_to_100() {
        for (bad, shown) in [(json!(0), "0"), (json!(101), "101"), (json!(2.5), "2.5")] {
            assert_eq!(
                error_with("/quality", bad),
                format!("plan.quality must be an integer 1..100, got {shown}")
            );
        }
        assert_eq!(
            error_with("/quality", json!("70")),
            "plan.quality: invalid type: string \"70\", expected an integer 1..100"
        );
        assert_eq!(
            error_with("/quality", Value::Null),
            "plan.quality: invalid type: null, expected an integer 1..100"
        );
    }

    #[test]
    fn sizes_and_coordinates_are_integers_in_range() {
        assert_eq!(
            error_with("/sheets/0/cells/0/rect/w", json!(-4)),
            "plan.sheets[0].cells[0].rect.w must be an integer 0..65535, got -4"
        );
        assert_eq!(
            error_with("/sheets/0/cells/0/label/box/h", json!(65536)),
            "plan.sheets[0].cells[0].label.box.h must be an integer 0..65535, got 65536"
        );
        assert_eq!(
            error_with("/sheets/0/width", json!(640.5)),
            "plan.sheets[0].width must be an integer 0..65535, got 640.5"
        );
        assert_eq!(
            error_with("/sheets/0/band/rect/x", json!(3e9)),
            "plan.sheets[0].band.rect.x must be an integer of 32 bits, got 3000000000"
        );
        assert_eq!(
            error_with("/videoStream", json!(-1)),
            "plan.videoStream must be a stream index (an integer 0..2147483647), got -1"
        );
    }

    #[test]
    fn colours_are_three_or_four_integers_0_to_255() {
        assert_eq!(
            error_with("/theme/background", json!([256, 0, 0])),
            "plan.theme.background[0] must be an integer 0..255, got 256"
        );
        assert_eq!(
            error_with("/theme/bandTick", json!([1, 2.5, 3])),
            "plan.theme.bandTick[1] must be an integer 0..255, got 2.5"
        );
        assert_eq!(
            error_with("/theme/labelBox", json!([0, 0, 0])),
            "plan.theme.labelBox must be 4 integers 0..255, got 3 values"
        );
        assert_eq!(
            error_with("/theme/labelText", json!([0, 0, 0, 255])),
            "plan.theme.labelText must be 3 integers 0..255, got more"
        );
        assert_eq!(
            error_with("/theme/bandPeak", json!("red")),
            "plan.theme.bandPeak: invalid type: string \"red\", expected an array of 3 integers 0..255"
        );
    }

    #[test]
    fn times_are_finite_and_windows_not_reversed() {
        assert_eq!(
            error_with("/sheets/0/band/ticksMs", json!([1.0, 2e12])),
            "plan.sheets[0].band.ticksMs[1] must be a finite time in ms within ±1e12, got 2000000000000"
        );
        assert_eq!(
            error_with("/sheets/0/band/startMs", json!(6000)),
            "plan.sheets[0].band.endMs must not be before startMs (6000), got 5000"
        );
        // JSON cannot carry NaN or Infinity: the rule itself, as napi hands them over.
        for bad in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            let e = time(bad.into_deserializer()).map_err(|e: de::value::Error| e.to_string());
            assert_eq!(
                e,
                Err(format!(
                    "must be a finite time in ms within ±1e12, got {}",
                    show(bad)
                ))
            );
        }
        let nan =
            quality(f64::NAN.into_deserializer()).map_err(|e: de::value::Error| e.to_string());
        assert_eq!(nan, Err("must be an integer 1..100, got NaN".into()));
    }

    #[test]
    fn label_numbers_and_peak_threshold_are_in_range() {
        assert_eq!(
            error_with("/sheets/0/cells/0/label/fontSize", json!(0)),
            "plan.sheets[0].cells[0].label.fontSize must be a number above 0 and at most 4096, got 0"
        );
        assert_eq!(
            error_with("/sheets/0/cells/0/label/textX", json!(1e9)),
            "plan.sheets[0].cells[0].label.textX must be a finite number within ±16777216, got 1000000000"
        );
        assert_eq!(
            error_with("/theme/peakThreshold", json!(1.5)),
            "plan.theme.peakThreshold must be a number 0..1, got 1.5"
        );
    }

    #[test]
    fn missing_fields_are_named() {
        let mut plan = valid();
        plan["sheets"][0]["cells"][0]
            .as_object_mut()
            .expect("cell")
            .remove("label");
        assert_eq!(
            RenderPlan::read(plan).map_err(|e| e.message),
            Err("plan.sheets[0].cells[0]: missing field `label`".into())
        );
        assert_eq!(
            RenderPlan::read(json!(null)).map_err(|e| e.message),
            Err("plan: invalid type: null, expected struct RenderPlan".into())
        );
    }
}
