use std::fmt;

/// Failure codes shared with TypeScript (`EngineErrorCode` in src/engine/types.ts).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorCode {
    /// The file exists but holds no decodable video (or no usable duration).
    UnreadableVideo,
    /// The input path does not exist.
    InputNotFound,
    /// Anything else: output not writable, font unusable, internal failure.
    RenderFailed,
}

impl ErrorCode {
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::UnreadableVideo => "unreadable_video",
            ErrorCode::InputNotFound => "input_not_found",
            ErrorCode::RenderFailed => "render_failed",
        }
    }
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
