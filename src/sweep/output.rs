//! Where a sweep's rows go, and the check that the file written is still the one its path
//! names and as long as what was written (docs/sweep-format.md).

use super::write_failure;
use crate::Failure;
use analysis::text::counted;
use std::path::{Path, PathBuf};

/// Where a sweep's rows go: standard output, or the file `-o` names.
pub(super) enum Sink {
    Stdout(std::io::Stdout),
    File(OutputFile),
}

impl std::io::Write for Sink {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        match self {
            Sink::Stdout(out) => out.write(bytes),
            Sink::File(file) => file.write(bytes),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Sink::Stdout(out) => out.flush(),
            Sink::File(file) => file.file.flush(),
        }
    }
}

impl Sink {
    /// Whether the rows written so far are where the sweep will say they are (a file is checked;
    /// standard output is not).
    pub(super) fn check(&self, stopped: &Stopped) -> Result<(), Failure> {
        match self {
            Sink::Stdout(_) => Ok(()),
            Sink::File(file) => file.check(stopped),
        }
    }
}

/// How far a sweep got when it stopped: the points whose rows it wrote, of those it had to run.
pub(super) struct Stopped {
    pub written_points: u64,
    pub pending_count: u64,
}

impl std::fmt::Display for Stopped {
    fn fmt(&self, out: &mut std::fmt::Formatter) -> std::fmt::Result {
        write!(
            out,
            "the sweep stopped after writing {} of the {} to run",
            sim::ranks::thousands(self.written_points),
            counted(self.pending_count, "point"),
        )
    }
}

/// The sweep's output file, opened to append its rows, and the bytes it holds by the sweep's
/// count (the header or resumed rows it had, and every row appended since).
pub(super) struct OutputFile {
    file: std::fs::File,
    path: PathBuf,
    written_bytes: u64,
}

impl OutputFile {
    pub(super) fn open(path: &Path) -> Result<OutputFile, Failure> {
        let file = std::fs::OpenOptions::new()
            .append(true)
            .open(path)
            .map_err(|error| write_failure(path, error))?;
        let written_bytes = (file.metadata())
            .map_err(|error| write_failure(path, error))?
            .len();
        Ok(OutputFile {
            file,
            path: path.to_path_buf(),
            written_bytes,
        })
    }

    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        let written = std::io::Write::write(&mut self.file, bytes)?;
        self.written_bytes += written as u64;
        Ok(written)
    }

    /// Refuses what would make the sweep's "wrote FILE" untrue: the path naming another file
    /// than the one written (removed, renamed or replaced while the sweep ran: compared by
    /// device and inode), or the file shorter than what was written to it. A path that is not
    /// a regular file (`/dev/null`, a pipe) is not checked.
    fn check(&self, stopped: &Stopped) -> Result<(), Failure> {
        use std::os::unix::fs::MetadataExt;
        let shown = self.path.display();
        let open = (self.file.metadata()).map_err(|error| write_failure(&self.path, error))?;
        if !open.is_file() {
            return Ok(());
        }
        let named = std::fs::metadata(&self.path).ok();
        if named.map(|named| (named.dev(), named.ino())) != Some((open.dev(), open.ino())) {
            return Err(Failure::input(if open.nlink() == 0 {
                format!(
                    "{shown} was deleted (or replaced by another file) while the sweep wrote \
                     it: the rows written to it went with the deleted file and are lost; \
                     {stopped}; run the sweep again"
                )
            } else {
                format!(
                    "{shown} was renamed (or replaced, the file written being kept under \
                     another name) while the sweep wrote it: the rows written are in that file, \
                     under its other name, not at {shown}; {stopped}; move it back and run the \
                     sweep again with --resume to finish it"
                )
            }));
        }
        if open.len() < self.written_bytes {
            return Err(Failure::input(format!(
                "{shown} was cut short while the sweep wrote it (it holds {} of the {} bytes \
                 written: emptied or truncated by another process?): its header and the rows \
                 before the cut are lost, and the rows appended since start it; {stopped}; \
                 delete it (or move it aside) and run the sweep again",
                sim::ranks::thousands(open.len()),
                sim::ranks::thousands(self.written_bytes),
            )));
        }
        Ok(())
    }
}
