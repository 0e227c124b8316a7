use std::fmt;

/// Declares [`ErrorCode`] once: each variant with the code JS sees as `err.code`. With the `napi`
/// feature the enum is the binding's `ErrorCode` too (a string enum in the generated
/// npm/linux-x64-gnu/index.d.ts), which src/engine/native.ts checks `EngineErrorCode` (the
/// TypeScript side, src/engine/types.ts) against at compile time.
macro_rules! error_codes {
    // Attributes (the variants' docs) pass as plain tokens. They are written `#[doc = "..."]`:
    // a `///` comment in a macro call becomes a raw string, which napi copies into the .d.ts as is.
    ($($(#[$($attr:tt)*])* $variant:ident = $code:literal,)+) => {
        /// Failure codes shared with TypeScript (`EngineErrorCode` in src/engine/types.ts).
        // napi reads a variant's value from a plain #[napi] attribute only (not through cfg_attr).
        #[cfg(feature = "napi")]
        #[napi_derive::napi(string_enum)]
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum ErrorCode {
            $($(#[$($attr)*])* #[napi(value = $code)] $variant,)+
        }

        /// Failure codes shared with TypeScript (`EngineErrorCode` in src/engine/types.ts).
        #[cfg(not(feature = "napi"))]
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum ErrorCode {
            $($(#[$($attr)*])* $variant,)+
        }

        impl ErrorCode {
            pub fn as_str(self) -> &'static str {
                match self {
                    $(ErrorCode::$variant => $code,)+
                }
            }
        }
    };
}

error_codes! {
    #[doc = "The file exists but holds no decodable video (or no usable duration)."]
    UnreadableVideo = "unreadable_video",
    #[doc = "The input path does not exist."]
    InputNotFound = "input_not_found",
    #[doc = "Anything else: output not writable, font unusable, internal failure."]
    RenderFailed = "render_failed",
}

/// An engine error: a code JS can switch on plus a short human message (never raw FFmpeg text
/// alone; FFmpeg's wording, when useful, is appended in parentheses).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    pub code: ErrorCode,
    pub message: String,
}

impl Error {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Error {
            code,
            message: message.into(),
        }
    }
    pub fn unreadable(message: impl Into<String>) -> Self {
        Error::new(ErrorCode::UnreadableVideo, message)
    }
    pub fn not_found(message: impl Into<String>) -> Self {
        Error::new(ErrorCode::InputNotFound, message)
    }
    pub fn failed(message: impl Into<String>) -> Self {
        Error::new(ErrorCode::RenderFailed, message)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code.as_str(), self.message)
    }
}

impl std::error::Error for Error {}

pub type Result<T> = std::result::Result<T, Error>;
