//! `-` as a file name: standard input where a file is read, standard output where one is
//! written (scenario files, Timelines, sweep CSVs, pictures).

use crate::Failure;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The files this process read its inputs from (canonical paths): an output is never written
/// over one of them.
static INPUTS: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// Notes that `path` is one of the command's inputs ([`replace`] refuses to write over it).
pub fn note_input(path: &Path) {
    if let Ok(canonical) = path.canonicalize() {
        if let Ok(mut inputs) = INPUTS.lock() {
            inputs.push(canonical);
        }
    }
}

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
        note_input(path);
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

/// An error when `path` is a file the command read an input from ([`note_input`]): writing an
/// output there would lose the input.
pub fn refuse_input(path: &Path) -> Result<(), Failure> {
    let Ok(canonical) = path.canonicalize() else {
        return Ok(());
    };
    if INPUTS
        .lock()
        .is_ok_and(|inputs| inputs.contains(&canonical))
    {
        return Err(Failure::input(format!(
            "{} is also an input of this command: writing the output there would lose it; \
             name another file",
            path.display()
        )));
    }
    Ok(())
}

/// Writes `bytes` to `path`, or to standard output for `-` ([`replace`]).
pub fn write_bytes(path: &Path, bytes: &[u8]) -> Result<(), Failure> {
    replace(path, |out| out.write_all(bytes))
}

/// Hands `write` a buffered writer on `path` (standard output for `-`), so that the file is
/// either written whole or left as it was: the bytes go to a hidden file beside it, renamed
/// over `path` once complete and removed if anything fails (a full disk, an error half-way).
/// A path that exists and is not a regular file (`/dev/null`, a pipe) is written directly.
/// A path the command read an input from ([`note_input`]) is refused: writing the output there
/// would lose the input.
pub fn replace(
    path: &Path,
    write: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> Result<(), Failure> {
    let cannot = |error: &dyn std::fmt::Display| {
        Failure::input(format!("cannot write {}: {error}", path.display()))
    };
    if is_dash(path) {
        let mut out = std::io::BufWriter::new(std::io::stdout().lock());
        return write(&mut out)
            .and_then(|()| out.flush())
            .map_err(|error| Failure::input(format!("cannot write to standard output: {error}")));
    }
    refuse_input(path)?;
    // A symbolic link keeps pointing where it did: the file it names is the one replaced.
    let linked = std::fs::symlink_metadata(path)
        .is_ok_and(|meta| meta.file_type().is_symlink())
        .then(|| path.canonicalize().ok())
        .flatten();
    let path = linked.as_deref().unwrap_or(path);
    let existing = std::fs::metadata(path).ok();
    let direct = existing.as_ref().is_some_and(|meta| !meta.is_file());
    // The replacement keeps the replaced file's permissions, not the umask's.
    let permissions = existing.map(|meta| meta.permissions());
    let target = if direct {
        path.to_path_buf()
    } else {
        let name = path
            .file_name()
            .map(|name| name.to_string_lossy().into_owned())
            .unwrap_or_default();
        path.with_file_name(format!(".{name}.{}.partial", std::process::id()))
    };
    let result = std::fs::File::create(&target).and_then(|file| {
        let mut out = std::io::BufWriter::new(file);
        write(&mut out)?;
        let file = out
            .into_inner()
            .map_err(std::io::IntoInnerError::into_error)?;
        if direct {
            return Ok(());
        }
        if let Some(permissions) = permissions {
            file.set_permissions(permissions)?;
        }
        // On disk before the rename, so that a crash leaves the old file or the new one.
        file.sync_all()
    });
    let result = result.and_then(|()| {
        if direct {
            Ok(())
        } else {
            std::fs::rename(&target, path)
        }
    });
    if result.is_err() && !direct {
        let _ = std::fs::remove_file(&target);
    }
    result.map_err(|error| cannot(&error))
}
