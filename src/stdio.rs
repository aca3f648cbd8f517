//! `-` as a file name: standard input where a file is read, standard output where one is
//! written (scenario files, Timelines, sweep CSVs, pictures).

use crate::Failure;
use std::io::{Read, Write};
use std::path::Path;

/// Whether `path` is `-`.
pub fn is_dash(path: &Path) -> bool {
    path.as_os_str() == "-"
}

/// The text of `path`, or of standard input for `-`.
pub fn read_text(path: &Path) -> Result<String, Failure> {
    let bytes = if is_dash(path) {
        let mut bytes = Vec::new();
        std::io::stdin()
            .read_to_end(&mut bytes)
            .map_err(|error| Failure::input(format!("cannot read standard input: {error}")))?;
        bytes
    } else {
        std::fs::read(path)
            .map_err(|error| Failure::input(format!("cannot read {}: {error}", path.display())))?
    };
    utf8(path, bytes)
}

/// A file that is not UTF-8 is refused at the line and column of its first byte that is not.
fn utf8(path: &Path, bytes: Vec<u8>) -> Result<String, Failure> {
    String::from_utf8(bytes).map_err(|error| {
        let bytes = error.as_bytes();
        let valid = error.utf8_error().valid_up_to();
        let text = std::str::from_utf8(&bytes[..valid]).unwrap_or_default();
        let line = text.matches('\n').count() + 1;
        let column = text
            .rsplit('\n')
            .next()
            .map_or(0, |last| last.chars().count())
            + 1;
        Failure::input(format!(
            "{}:{line}:{column}: error: not UTF-8 text (byte 0x{:02x}); c10dsim reads UTF-8 files",
            path.display(),
            bytes[valid]
        ))
    })
}

/// Writes `bytes` to `path`, or to standard output for `-`.
pub fn write_bytes(path: &Path, bytes: &[u8]) -> Result<(), Failure> {
    if is_dash(path) {
        let mut out = std::io::stdout().lock();
        return out
            .write_all(bytes)
            .and_then(|()| out.flush())
            .map_err(|error| Failure::input(format!("cannot write to standard output: {error}")));
    }
    std::fs::write(path, bytes)
        .map_err(|error| Failure::input(format!("cannot write {}: {error}", path.display())))
}
