//! Other tools' files turned into scenarios (docs/import.md): [`kineto`] reads torch.profiler
//! (Kineto) Chrome traces; [`replay`] compares a simulated import with the trace it came from
//! (step time and per-stream busy time, the replay error). Pure: every function takes the
//! files' text and returns values; the binary reads and writes the files.

pub mod kineto;
pub mod replay;

use std::fmt;

/// An input an importer refuses: the file, the place where the input has one (line and
/// column of a JSON syntax error, else the event's index in `traceEvents`) and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImportError {
    pub file: String,
    /// `line:column` of a syntax error, or `traceEvents[N]` for a malformed event.
    pub place: Option<String>,
    pub message: String,
}

impl fmt::Display for ImportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.place {
            Some(place) => write!(f, "{}:{place}: error: {}", self.file, self.message),
            None => write!(f, "{}: error: {}", self.file, self.message),
        }
    }
}

impl std::error::Error for ImportError {}
