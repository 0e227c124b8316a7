//! The `napi` feature's conversions that napi-rs cannot derive from plan.rs: a plan is read
//! strictly (plan/read.rs) instead of through napi's number conversions, which truncate and wrap;
//! and u64 counters and the f32 peaks go to JS as numbers and a Float32Array (napi would make
//! BigInts and a plain array of them). Each impl destructures its struct without `..`, so a field
//! added in plan.rs does not compile until it is converted here too.

use napi::bindgen_prelude::{
    Env, Float32Array, Float64Array, Object, ToNapiValue, Uint8Array, Unknown, ValueType,
};
use napi::{sys, De, JsValue};

use super::{AudioPeaks, PacketLog, RenderPlan, RenderStats, VideoStreamFacts};
use crate::error::{Error, Result};

impl RenderPlan {
    /// Reads the plan JS handed to `render()` ([`RenderPlan::read`]'s rules and messages).
    pub fn from_js(value: Unknown<'_>) -> Result<RenderPlan> {
        let kind = value
            .get_type()
            .map_err(|e| Error::failed(format!("plan: {}", e.reason)))?;
        if kind != ValueType::Object {
            return Err(Error::failed(format!(
                "plan must be an object, got {}",
                format!("{kind:?}").to_lowercase()
            )));
        }
        let raw = value.value();
        let object = Object::from_raw(raw.env, raw.value);
        RenderPlan::read_with(&mut De::new(&object), |e| e.reason.clone())
    }
}

/// Builds a JS object from (name, value) pairs already converted.
unsafe fn object(
    env: sys::napi_env,
    fill: impl FnOnce(&mut Object) -> napi::Result<()>,
) -> napi::Result<sys::napi_value> {
    let mut obj = Object::new(&Env::from_raw(env))?;
    fill(&mut obj)?;
    Ok(obj.raw())
}

/// Counters are far below 2^53: exact as JS numbers.
fn count(v: u64) -> f64 {
    v as f64
}

impl ToNapiValue for VideoStreamFacts {
    unsafe fn to_napi_value(env: sys::napi_env, val: Self) -> napi::Result<sys::napi_value> {
        let VideoStreamFacts {
            index,
            width,
            height,
            is_default,
            attached_pic,
            frames,
            decodes,
            readable_end,
            programs,
        } = val;
        object(env, |o| {
            o.set("index", index)?;
            o.set("width", width)?;
            o.set("height", height)?;
            o.set("isDefault", is_default)?;
            o.set("attachedPic", attached_pic)?;
            o.set("frames", frames.map(count))?;
            o.set("decodes", decodes)?;
            o.set("readableEnd", readable_end)?;
            o.set("programs", programs)
        })
    }
}

impl ToNapiValue for AudioPeaks {
    unsafe fn to_napi_value(env: sys::napi_env, val: Self) -> napi::Result<sys::napi_value> {
        let AudioPeaks {
            present,
            clip_peak,
            start_ms,
            peaks,
        } = val;
        object(env, |o| {
            o.set("present", present)?;
            o.set("clipPeak", clip_peak)?;
            o.set("startMs", start_ms)?;
            o.set("peaks", Float32Array::new(peaks))
        })
    }
}

impl ToNapiValue for RenderStats {
    unsafe fn to_napi_value(env: sys::napi_env, val: Self) -> napi::Result<sys::napi_value> {
        let RenderStats {
            decoded_frames,
            seeks,
            skippable_packets,
            workers,
            proof_waits,
            provisional_cells,
            redone_cells,
        } = val;
        object(env, |o| {
            o.set("decodedFrames", count(decoded_frames))?;
            o.set("seeks", count(seeks))?;
            o.set("skippablePackets", count(skippable_packets))?;
            o.set("workers", count(workers))?;
            o.set("proofWaits", count(proof_waits))?;
            o.set("provisionalCells", count(provisional_cells))?;
            o.set("redoneCells", count(redone_cells))
        })
    }
}

impl ToNapiValue for PacketLog {
    unsafe fn to_napi_value(env: sys::napi_env, val: Self) -> napi::Result<sys::napi_value> {
        let PacketLog {
            times,
            sizes,
            keys,
            spans,
            index_keys,
            cells,
            pictures,
            thumbs,
        } = val;
        object(env, |o| {
            o.set("times", Float64Array::new(times))?;
            o.set("sizes", Float64Array::new(sizes))?;
            o.set("keys", Uint8Array::new(keys))?;
            o.set("spans", Float64Array::new(spans))?;
            o.set("indexKeys", Float64Array::new(index_keys))?;
            o.set("cells", Float64Array::new(cells))?;
            o.set("pictures", Float64Array::new(pictures))?;
            o.set("thumbs", Uint8Array::new(thumbs))
        })
    }
}
