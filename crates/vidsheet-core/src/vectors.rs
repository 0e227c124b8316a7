//! The shared test vectors: fixtures/vectors/*.json hold, for each rule both engines implement
//! (this crate and the ffmpeg fallback in src/engine), inputs and expected outputs written from
//! the rule. This crate's unit tests and vitest (test/engine/vectors.test.ts) run the same files.

use serde::de::DeserializeOwned;

/// fixtures/vectors/`file`, whole.
pub(crate) fn file<T: DeserializeOwned>(file: &str) -> T {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/vectors/").to_owned() + file;
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The `cases` of fixtures/vectors/`file`.
pub(crate) fn cases<T: DeserializeOwned>(name: &str) -> Vec<T> {
    #[derive(serde::Deserialize)]
    struct Cases<T> {
        cases: Vec<T>,
    }
    file::<Cases<T>>(name).cases
}
