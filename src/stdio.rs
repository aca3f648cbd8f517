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
    if is_dash(path) {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .map_err(|error| Failure::input(format!("cannot read standard input: {error}")))?;
        return Ok(text);
    }
    std::fs::read_to_string(path)
        .map_err(|error| Failure::input(format!("cannot read {}: {error}", path.display())))
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
