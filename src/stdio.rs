//! `-` as a file name: standard input where a file is read, standard output where one is
//! written (scenario files, Timelines, sweep CSVs, pictures).

use crate::Failure;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The files this process read its inputs from (canonical paths): an output is never written
/// over one of them.
static INPUTS: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// The hidden files of outputs being written, until renamed over their names or removed: an
/// interrupted command (Ctrl-C, SIGTERM) removes them ([`remove_partials_and_exit`]).
static PARTIALS: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// The hidden file `path` is gone: renamed over its name or removed.
fn forget_partial(path: &Path) {
    if let Ok(mut partials) = PARTIALS.lock() {
        if let Some(at) = partials.iter().position(|p| p == path) {
            partials.swap_remove(at);
        }
    }
}

/// Removes the hidden files of the outputs being written and ends the process with `code`:
/// the command is interrupted, and the outputs keep their old contents (or stay absent). The
/// list stays locked until the end, so that no hidden file is created after the removal.
pub fn remove_partials_and_exit(code: i32) -> ! {
    let partials = PARTIALS.lock();
    if let Ok(partials) = &partials {
        remove_each(partials, |_| true);
    }
    std::process::exit(code)
}

fn remove_each(partials: &[PathBuf], which: impl Fn(&Path) -> bool) {
    for path in partials.iter().filter(|path| which(path)) {
        let _ = std::fs::remove_file(path);
    }
}

/// The removal of [`remove_partials_and_exit`], for the files `which` picks, without the exit
/// (a test's own files: tests run in parallel).
#[cfg(test)]
fn remove_partials_where(which: impl Fn(&Path) -> bool) {
    if let Ok(partials) = PARTIALS.lock() {
        remove_each(&partials, which);
    }
}

/// Notes that `path` is one of the command's inputs ([`replace`] refuses to write over it).
pub fn note_input(path: &Path) {
    if let Ok(canonical) = path.canonicalize() {
        if let Ok(mut inputs) = INPUTS.lock() {
            inputs.push(canonical);
        }
    }
}

/// The bytes of file `path`, refusing a device (`/dev/zero`, `/dev/full` read without end): an
/// input is a file or a pipe.
pub fn read_file(path: &Path) -> std::io::Result<Vec<u8>> {
    refuse_device(path)?;
    std::fs::read(path)
}

/// An error for a character or block device, which no input of c10dsim is.
fn refuse_device(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::FileTypeExt;
    match std::fs::metadata(path) {
        Ok(meta) if meta.file_type().is_char_device() || meta.file_type().is_block_device() => Err(
            std::io::Error::new(std::io::ErrorKind::InvalidInput, "a device, not a file"),
        ),
        _ => Ok(()),
    }
}

/// Creates folder `dir` and its parents for outputs; a path that exists and is not a folder
/// (`/dev/full`, a file) is named as such, not as the system's "File exists".
pub fn create_folder(dir: &Path) -> Result<(), Failure> {
    if dir.exists() && !dir.is_dir() {
        return Err(Failure::input(format!(
            "cannot create folder {}: it exists and is not a folder",
            dir.display()
        )));
    }
    std::fs::create_dir_all(dir)
        .map_err(|error| Failure::input(format!("cannot create {}: {error}", dir.display())))
}

/// Refused before a run (exit 2), so that a long simulation or a GPU run is not lost at its end:
/// an output file whose folder does not exist, that is a folder, or that is an input read so far
/// ([`refuse_input`]). `-` passes.
pub fn check_output_place(flag: &str, path: &Path) -> Result<(), Failure> {
    if is_dash(path) {
        return Ok(());
    }
    refuse_input(path)?;
    let folder = folder_of(path);
    if !folder.is_dir() {
        return Err(Failure::input(format!(
            "{flag} {}: the folder {} does not exist",
            path.display(),
            folder.display()
        )));
    }
    if path.is_dir() {
        return Err(Failure::input(format!(
            "{flag} {}: it is a folder; name a file",
            path.display()
        )));
    }
    Ok(())
}

/// Refused before anything is written (exit 2): two of a command's outputs, files or folders
/// (`(flag, path)`), that name one place, where the one written last would replace the other.
/// Paths are compared as they resolve: the path itself made canonical where it exists (a
/// symbolic link followed), else its folder made canonical and its name. `-` and a path that
/// exists and is neither a file nor a folder (`/dev/null`, written directly) are left out.
pub fn refuse_shared_outputs(outputs: &[(&str, &Path)]) -> Result<(), Failure> {
    let resolved: Vec<(&str, &Path, PathBuf)> = outputs
        .iter()
        .filter_map(|&(flag, path)| Some((flag, path, resolved_output(path)?)))
        .collect();
    for (at, (flag, path, place)) in resolved.iter().enumerate() {
        let earlier = resolved[..at].iter().find(|(_, _, other)| other == place);
        if let Some((other_flag, other_path, _)) = earlier {
            return Err(Failure::input(format!(
                "{other_flag} {} and {flag} {} name the same place ({}): the one written last \
                 would replace the other; give each its own",
                other_path.display(),
                path.display(),
                place.display()
            )));
        }
    }
    Ok(())
}

/// Where output `path` lands ([`refuse_shared_outputs`]), `None` for `-` and for a path written
/// directly.
fn resolved_output(path: &Path) -> Option<PathBuf> {
    if is_dash(path) {
        return None;
    }
    if let Ok(meta) = std::fs::metadata(path) {
        if !meta.is_file() && !meta.is_dir() {
            return None;
        }
    }
    if let Ok(canonical) = path.canonicalize() {
        return Some(canonical);
    }
    let folder = folder_of(path).canonicalize().ok()?;
    Some(match path.file_name() {
        Some(name) => folder.join(name),
        None => folder,
    })
}

/// The folder a file `path` is in (`.` for a bare name).
pub fn folder_of(path: &Path) -> &Path {
    match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    }
}

/// Refused before a run (exit 2), as [`check_output_place`] does for a file: an output folder
/// (made if missing) that is `-` or an existing file.
pub fn check_folder_place(flag: &str, dir: &Path) -> Result<(), Failure> {
    if is_dash(dir) {
        return Err(Failure::input(format!(
            "{flag} writes a folder with one file per rank; `-` (standard output) cannot hold it"
        )));
    }
    if dir.exists() && !dir.is_dir() {
        return Err(Failure::input(format!(
            "{flag} {}: it exists and is not a folder",
            dir.display()
        )));
    }
    Ok(())
}

/// Whether `path` is `-`.
pub fn is_dash(path: &Path) -> bool {
    path.as_os_str() == "-"
}

/// The text of `path`, or of standard input for `-`.
pub fn read_text(path: &Path) -> Result<String, Failure> {
    read_text_at_most(path, u64::MAX)
}

/// The most a scenario or a machine profile file may hold: far more than any written by hand
/// or generated (100,000 ops take a few MB), so that `/dev/zero` or a wrong file is refused at
/// once instead of read into memory.
pub const MAX_SCENARIO_BYTES: u64 = 64 << 20;

/// The text of a scenario or a machine profile ([`read_text`], at most [`MAX_SCENARIO_BYTES`]).
pub fn read_scenario_text(path: &Path) -> Result<String, Failure> {
    read_text_at_most(path, MAX_SCENARIO_BYTES)
}

/// The text of a file that may be gzip-compressed (a torch.profiler trace exported to
/// `….json.gz`, as `tensorboard_trace_handler(use_gzip=True)` writes it): known by gzip's magic
/// bytes, whatever its name; `-` is standard input.
pub fn read_text_gunzipped(path: &Path) -> Result<String, Failure> {
    let bytes = read_bytes_at_most(path, u64::MAX)?;
    if !bytes.starts_with(&GZIP_MAGIC) {
        return utf8(path, bytes);
    }
    let mut text = Vec::new();
    flate2::read::MultiGzDecoder::new(bytes.as_slice())
        .read_to_end(&mut text)
        .map_err(|error| {
            Failure::input(format!(
                "{}: error: not a readable gzip file: {error}",
                shown_name(path)
            ))
        })?;
    utf8(path, text)
}

/// The first two bytes of every gzip file.
const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];

/// `path` as messages name it: `standard input` for `-`.
pub fn shown_name(path: &Path) -> String {
    if is_dash(path) {
        "standard input".to_string()
    } else {
        path.display().to_string()
    }
}

/// The size of `path` where it is a regular file; none for standard input, a pipe or a device,
/// whose size is known only once read.
pub fn file_size(path: &Path) -> Option<u64> {
    if is_dash(path) {
        return None;
    }
    let metadata = std::fs::metadata(path).ok()?;
    metadata.is_file().then_some(metadata.len())
}

/// The text of `path` (standard input for `-`) where it holds at most `max_bytes`; none, read
/// no further than that, where it holds more.
pub fn read_text_within(path: &Path, max_bytes: u64) -> Result<Option<String>, Failure> {
    read_bytes_within(path, max_bytes)?
        .map(|bytes| utf8(path, bytes))
        .transpose()
}

fn read_text_at_most(path: &Path, max_bytes: u64) -> Result<String, Failure> {
    let bytes = read_bytes_at_most(path, max_bytes)?;
    utf8(path, bytes)
}

/// The bytes of `path` (standard input for `-`), refused past `max_bytes`.
fn read_bytes_at_most(path: &Path, max_bytes: u64) -> Result<Vec<u8>, Failure> {
    read_bytes_within(path, max_bytes)?.ok_or_else(|| {
        Failure::input(format!(
            "{} holds more than {} MiB: not a scenario or profile file",
            shown_name(path),
            max_bytes >> 20
        ))
    })
}

/// The bytes of `path` (standard input for `-`); none, read no further, past `max_bytes`.
fn read_bytes_within(path: &Path, max_bytes: u64) -> Result<Option<Vec<u8>>, Failure> {
    let mut bytes = Vec::new();
    let read = if is_dash(path) {
        std::io::stdin()
            .take(max_bytes.saturating_add(1))
            .read_to_end(&mut bytes)
    } else {
        note_input(path);
        refuse_device(path)
            .and_then(|()| std::fs::File::open(path))
            .and_then(|file| {
                file.take(max_bytes.saturating_add(1))
                    .read_to_end(&mut bytes)
            })
    };
    read.map_err(|error| Failure::input(format!("cannot read {}: {error}", shown_name(path))))?;
    Ok((bytes.len() as u64 <= max_bytes).then_some(bytes))
}

/// A file that is not UTF-8 is refused at the line and column of its first byte that is not.
/// A byte order mark (U+FEFF first, as Windows editors write UTF-8) is skipped, as RFC 8259
/// allows a JSON reader to and the TOML reader did: the readers after it see the text alone.
fn utf8(path: &Path, bytes: Vec<u8>) -> Result<String, Failure> {
    let mut text = String::from_utf8(bytes).map_err(|error| {
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
    })?;
    if text.starts_with(BYTE_ORDER_MARK) {
        text.drain(..BYTE_ORDER_MARK.len_utf8());
    }
    Ok(text)
}

/// U+FEFF, the byte order mark.
const BYTE_ORDER_MARK: char = '\u{feff}';

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

/// Writes `bytes` over `path`, a file this command read as its own earlier output (a resumed
/// sweep's CSV, rewritten in point order): [`write_bytes`] without the refusal to write over an
/// input.
pub fn rewrite_own_output(path: &Path, bytes: &[u8]) -> Result<(), Failure> {
    let mut batch = Batch::default();
    batch.write(path, |out| out.write_all(bytes), (Flush::ThisFile, false))?;
    batch.commit()
}

/// Hands `write` a buffered writer on `path` (standard output for `-`), so that the file is
/// either written whole or left as it was: the bytes go to a hidden file beside it, flushed to
/// disk and renamed over `path` once complete, and removed if anything fails (a full disk, an
/// error half-way). A path that exists and is not a regular file (`/dev/null`, a pipe) is
/// written directly. A path the command read an input from ([`note_input`]) is refused:
/// writing the output there would lose the input.
pub fn replace(
    path: &Path,
    write: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> Result<(), Failure> {
    if is_dash(path) {
        let mut out = std::io::BufWriter::new(std::io::stdout().lock());
        // A reader that went away ends the command quietly, as for every output on stdout.
        return write(&mut out)
            .and_then(|()| out.flush())
            .map_err(crate::output_failure);
    }
    let mut batch = Batch::default();
    batch.write(path, write, (Flush::ThisFile, true))?;
    batch.commit()
}

/// Many outputs written as one ([`replace`] for each): every file goes to its hidden file, the
/// file systems holding them are flushed once, then each is renamed over its name. A folder of
/// per-rank files is written this way, since a flush per file cost seconds per thousand files
/// (docs/perf.md, "Writing many files"). Dropped before [`Batch::commit`], it removes the hidden
/// files and leaves every old file as it was.
#[derive(Default)]
pub struct Batch {
    /// The hidden files written so far and the names they replace.
    pending: Vec<(PathBuf, PathBuf)>,
    /// One open file on each file system the pending files are on, for its flush.
    file_systems: Vec<std::fs::File>,
}

/// When a file of a [`Batch`] reaches the disk.
#[derive(Clone, Copy)]
enum Flush {
    ThisFile,
    WithTheBatch,
}

impl Batch {
    /// Writes one file of the batch to its hidden name, by [`replace`]'s rules for a file
    /// (never over an input; a symbolic link followed; a path that is not a regular file written
    /// directly).
    pub fn add(
        &mut self,
        path: &Path,
        write: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
    ) -> Result<(), Failure> {
        self.write(path, write, (Flush::WithTheBatch, true))
    }

    fn write(
        &mut self,
        path: &Path,
        write: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
        (flush, refuse_inputs): (Flush, bool),
    ) -> Result<(), Failure> {
        let cannot = |error: &dyn std::fmt::Display| {
            Failure::input(format!("cannot write {}: {error}", path.display()))
        };
        if refuse_inputs {
            refuse_input(path)?;
        }
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
        let created = if direct {
            std::fs::File::create(&target)
        } else {
            // Noted and created under one lock: an interruption removes it, or it did not exist.
            let mut partials = PARTIALS
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            partials.push(target.clone());
            std::fs::File::create(&target)
        };
        let result = created.and_then(|file| {
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
            match flush {
                Flush::ThisFile => file.sync_all(),
                Flush::WithTheBatch => self.flush_later(&file),
            }
        });
        if direct {
            return result.map_err(|error| cannot(&error));
        }
        if let Err(error) = result {
            let _ = std::fs::remove_file(&target);
            forget_partial(&target);
            return Err(cannot(&error));
        }
        self.pending.push((target, path.to_path_buf()));
        Ok(())
    }

    /// Notes the file system `file` is on as one the commit flushes.
    fn flush_later(&mut self, file: &std::fs::File) -> std::io::Result<()> {
        use std::os::unix::fs::MetadataExt;
        let device = file.metadata()?.dev();
        for open in &self.file_systems {
            if open.metadata()?.dev() == device {
                return Ok(());
            }
        }
        self.file_systems.push(file.try_clone()?);
        Ok(())
    }

    /// Flushes the batch's file systems, then renames every hidden file over its name.
    pub fn commit(mut self) -> Result<(), Failure> {
        for open in std::mem::take(&mut self.file_systems) {
            rustix::fs::syncfs(&open).map_err(|error| {
                Failure::input(format!("cannot flush the files written to disk: {error}"))
            })?;
        }
        while let Some((target, path)) = self.pending.pop() {
            let renamed = std::fs::rename(&target, &path);
            if renamed.is_err() {
                // The hidden files left are removed when the batch is dropped.
                let _ = std::fs::remove_file(&target);
            }
            forget_partial(&target);
            if let Err(error) = renamed {
                return Err(Failure::input(format!(
                    "cannot write {}: {error}",
                    path.display()
                )));
            }
        }
        Ok(())
    }
}

impl Drop for Batch {
    fn drop(&mut self) {
        for (target, _) in &self.pending {
            let _ = std::fs::remove_file(target);
            forget_partial(target);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn folder(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("c10dsim-stdio-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn names(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|entry| entry.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        names
    }

    /// Adds `dir/name` holding `new <name>` to the batch.
    fn add_new(batch: &mut Batch, dir: &Path, name: &str) {
        let text = format!("new {name}");
        assert!(batch
            .add(&dir.join(name), |out| out.write_all(text.as_bytes()))
            .is_ok());
    }

    #[test]
    fn an_interruption_removes_the_hidden_files_of_outputs_being_written() {
        let dir = folder("interrupted");
        let mut batch = Batch::default();
        assert!(batch
            .add(&dir.join("a"), |out| out.write_all(b"new a"))
            .is_ok());
        assert_eq!(
            names(&dir).len(),
            1,
            "the hidden file of a: {:?}",
            names(&dir)
        );
        remove_partials_where(|path| path.starts_with(&dir));
        assert!(names(&dir).is_empty(), "{:?}", names(&dir));
        // Committed files are no longer the interruption's to remove.
        drop(batch);
        assert!(write_bytes(&dir.join("b"), b"b").is_ok());
        remove_partials_where(|path| path.starts_with(&dir));
        assert_eq!(names(&dir), ["b"]);
    }

    #[test]
    fn a_batch_replaces_its_files_only_when_committed() {
        let dir = folder("commit");
        std::fs::write(dir.join("a"), "old a").unwrap();
        let mut batch = Batch::default();
        add_new(&mut batch, &dir, "a");
        add_new(&mut batch, &dir, "b");
        // Before the commit the old file is there and the new ones are hidden.
        assert_eq!(std::fs::read_to_string(dir.join("a")).unwrap(), "old a");
        assert!(!dir.join("b").exists());
        assert_eq!(names(&dir).len(), 3, "{:?}", names(&dir));
        assert!(batch.commit().is_ok());
        assert_eq!(names(&dir), ["a", "b"]);
        assert_eq!(std::fs::read_to_string(dir.join("a")).unwrap(), "new a");
        assert_eq!(std::fs::read_to_string(dir.join("b")).unwrap(), "new b");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_batch_that_fails_leaves_every_old_file_and_no_hidden_one() {
        let dir = folder("fail");
        std::fs::write(dir.join("a"), "old a").unwrap();
        let mut batch = Batch::default();
        add_new(&mut batch, &dir, "a");
        let failed = batch.add(&dir.join("b"), |out| {
            out.write_all(b"half")?;
            Err(std::io::Error::other("disk full"))
        });
        let message = failed.err().unwrap().message;
        assert!(message.contains("disk full"), "{message}");
        drop(batch);
        assert_eq!(names(&dir), ["a"]);
        assert_eq!(std::fs::read_to_string(dir.join("a")).unwrap(), "old a");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_commit_that_cannot_rename_reports_the_file_and_removes_the_hidden_ones() {
        let dir = folder("rename");
        let mut batch = Batch::default();
        add_new(&mut batch, &dir, "a");
        add_new(&mut batch, &dir, "b");
        // A folder now holds b's name: a file cannot be renamed over it.
        std::fs::create_dir(dir.join("b")).unwrap();
        let message = batch.commit().err().unwrap().message;
        assert!(
            message.contains("cannot write") && message.contains('b'),
            "{message}"
        );
        assert_eq!(names(&dir), ["b"], "a hidden file was left behind");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
