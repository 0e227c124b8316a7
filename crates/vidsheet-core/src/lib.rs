//! vidsheet engine: executes a finished render plan.
//!
//! TypeScript decides every rule (window, sampling, layout, labels, colours). This crate only
//! probes a file, finds the frame displayed at each planned time (frame-exact, never a keyframe
//! snap), scales it into its cell, paints labels and the audio band, and encodes JPEGs. It knows
//! nothing of Node: the `vidsheet-node` crate is a thin binding over [`probe`], [`audio_peaks`]
//! and [`render`].

mod audio;
mod canvas;
mod convert;
mod decode_log;
mod error;
mod extent;
mod jpeg;
mod media;
mod memory;
mod orientation;
mod plan;
mod probe;
mod render;
#[cfg(test)]
mod vectors;
// The integration tests' helpers, for the unit tests that encode clips too (loaded once).
#[cfg(test)]
#[path = "../tests/common/mod.rs"]
mod common;
// The integration tests' helpers (tests/common) name the crate; unit tests that use them too.
#[cfg(test)]
extern crate self as vidsheet_core;
mod video;

pub use audio::{audio_peaks, audio_peaks_as};
pub use error::{Error, ErrorCode, Result};
pub use media::{Bounds, Container, Opening, MAX_STREAMS};
pub use plan::{
    AudioPeaks, AudioStreamFacts, BandPlan, CellPlan, CellRef, HintPackets, LabelPlan, PacketLog,
    ProbeInfo, Rect, RenderPlan, RenderResult, RenderStats, SheetPlan, Theme, VideoStreamFacts,
};
pub use probe::{probe, probe_as};
pub use render::{render, render_on};
