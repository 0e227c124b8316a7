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

/// Bytes written as hex in a vector file (spaces ignored).
pub(crate) fn hex(text: &str) -> Vec<u8> {
    let digits: Vec<u8> = text.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
    let nibble = |d: u8| {
        (d as char)
            .to_digit(16)
            .unwrap_or_else(|| panic!("not hex: {text}")) as u8
    };
    digits
        .chunks(2)
        .map(|p| nibble(p[0]) << 4 | nibble(p[p.len() - 1]))
        .collect()
}
