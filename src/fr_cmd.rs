//! The Flight Recorder's files (docs/flight-recorder.md): `import flight-recorder` reads a
//! job's dump folder, writes the scenario it makes and runs it for the desync report's verdict;
//! `run` writes the simulated ranks' dumps where the scenario's `TORCH_FR_DUMP_TEMP_FILE` or
//! `--fr-dir` says.

use crate::{stdio, Failure};
use analysis::flight_recorder::{self, import};
use analysis::text::counted;
use sim::flight_recorder::DEFAULT_FILE_PREFIX;
use sim::scenario::Scenario;
use sim::timeline::Timeline;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// `c10dsim import flight-recorder`.
#[derive(clap::Args)]
pub struct FlightRecorderArgs {
    /// The folder of per-rank dumps, each named `<prefix><rank>` as PyTorch writes them
    /// (`TORCH_FR_DUMP_TEMP_FILE` + rank; `nccl_trace_rank_<rank>` by default).
    pub dir: PathBuf,
    /// The scenario to write (TOML; `-`: standard output, and the verdict goes to standard
    /// error).
    #[arg(short, long, value_name = "SCENARIO.toml")]
    pub output: PathBuf,
    /// The file names' part before the rank (default: the one prefix every `<name><digits>`
    /// file of the folder shares, as torchfrtrace infers it).
    #[arg(short, long)]
    pub prefix: Option<String>,
    /// The caps the replay's simulation is held to, as `run` holds a scenario.
    #[command(flatten)]
    pub caps: crate::limits::SimulationCaps,
}

/// Why the entry `path`, named as `rank`'s dump, cannot be read as one: a symbolic link to
/// nothing, a FIFO, a socket or a device (reading a FIFO would wait for a writer); `None` for a
/// regular file.
fn unreadable_dump(path: &Path, rank: u32) -> Option<String> {
    use std::os::unix::fs::FileTypeExt;
    let why = match std::fs::metadata(path) {
        Ok(meta) if meta.is_file() => return None,
        Ok(meta) => {
            let kind = meta.file_type();
            let named = if kind.is_fifo() {
                "a FIFO"
            } else if kind.is_socket() {
                "a socket"
            } else if kind.is_char_device() || kind.is_block_device() {
                "a device"
            } else {
                "not a file"
            };
            format!("is not a regular file ({named})")
        }
        Err(error) => match std::fs::read_link(path) {
            Ok(target) => format!(
                "is a symbolic link to {}, which cannot be read ({error})",
                target.display()
            ),
            Err(_) => format!("cannot be read ({error})"),
        },
    };
    Some(format!(
        "{}: the dump of rank {rank} {why}: put the rank's dump there, or move it out of the folder",
        path.display()
    ))
}

/// The dump files of `dir` by rank: `<prefix><rank>`, the prefix given or inferred. Folders
/// and names that end in no digits are not dumps and are skipped; any other entry of a dump's
/// name that is no readable file is refused, naming it.
fn dump_files(dir: &Path, prefix: Option<&str>) -> Result<BTreeMap<u32, PathBuf>, Failure> {
    let listing = std::fs::read_dir(dir)
        .map_err(|e| Failure::input(format!("cannot read the folder {}: {e}", dir.display())))?;
    // Each prefix's files, with the digits their names end in.
    let mut by_prefix: BTreeMap<String, Vec<(String, PathBuf)>> = BTreeMap::new();
    for item in listing {
        let item = item.map_err(|e| Failure::input(format!("{}: {e}", dir.display())))?;
        let path = item.path();
        if path.is_dir() {
            continue;
        }
        let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        let digits = name.len() - name.trim_end_matches(|c: char| c.is_ascii_digit()).len();
        if digits == 0 {
            continue;
        }
        let (stem, rank) = name.split_at(name.len() - digits);
        if prefix.is_none_or(|p| p == stem) {
            by_prefix
                .entry(stem.to_string())
                .or_default()
                .push((rank.to_string(), path.clone()));
        }
    }
    let mut files = match by_prefix.len() {
        1 => by_prefix.into_values().next().expect("one prefix"),
        0 => {
            return Err(Failure::input(format!(
                "no Flight Recorder dumps in {}: expected files named {}<rank>",
                dir.display(),
                prefix.unwrap_or("<prefix>")
            )))
        }
        _ => {
            let names: Vec<String> = by_prefix.keys().map(|p| format!("{p:?}")).collect();
            return Err(Failure::input(format!(
                "{} holds files of several prefixes ({}): name one with --prefix",
                dir.display(),
                names.join(", ")
            )));
        }
    };
    // In name order, so that an error names the same files whatever order the folder lists.
    files.sort_by(|a, b| a.1.cmp(&b.1));
    let mut by_rank: BTreeMap<u32, PathBuf> = BTreeMap::new();
    for (digits, path) in files {
        let rank = digits.parse::<u32>().map_err(|_| {
            Failure::input(format!(
                "{}: rank {digits} (the digits its name ends in) is not a rank",
                path.display()
            ))
        })?;
        if let Some(other) = by_rank.get(&rank) {
            return Err(Failure::input(format!(
                "two dumps of rank {rank} in {}: {} and {} (a leading zero names the same rank)",
                dir.display(),
                other.display(),
                path.display()
            )));
        }
        if let Some(why) = unreadable_dump(&path, rank) {
            return Err(Failure::input(why));
        }
        by_rank.insert(rank, path);
    }
    Ok(by_rank)
}

/// `import flight-recorder DIR -o SCENARIO.toml`.
pub fn import(args: &FlightRecorderArgs) -> Result<u8, Failure> {
    let files = dump_files(&args.dir, args.prefix.as_deref())?;
    let mut dumps = Vec::new();
    for (&rank, path) in &files {
        stdio::note_input(path);
        let bytes = stdio::read_file(path)
            .map_err(|e| Failure::input(format!("cannot read {}: {e}", path.display())))?;
        let dump = flight_recorder::read(&bytes, rank)
            .map_err(|e| Failure::input(format!("{}: {e}", path.display())))?;
        dumps.push(dump);
    }
    let shown = args.dir.display().to_string();
    let text =
        import::scenario(&dumps, &shown).map_err(|e| Failure::input(format!("{shown}: {e}")))?;
    let scenario =
        sim::scenario::parse(&args.output.display().to_string(), &text).map_err(|e| Failure {
            code: 1,
            message: format!("the imported scenario does not parse (a bug in the importer): {e}"),
        })?;
    stdio::replace(&args.output, |out| out.write_all(text.as_bytes()))?;
    let timeline = args.caps.simulate(&args.output, &scenario)?;
    let mut report = format!(
        "c10dsim: imported {} from {shown} into {}\n",
        counted(dumps.len() as u64, "dump"),
        if stdio::is_dash(&args.output) {
            "standard output".to_string()
        } else {
            args.output.display().to_string()
        }
    );
    for line in import::verdict(&timeline)
        .into_iter()
        .chain(import::unreplayed(&dumps))
    {
        report.push_str(&format!("verdict: {line}\n"));
    }
    if stdio::is_dash(&args.output) {
        eprint!("{report}");
    } else {
        out!("{report}")?;
    }
    Ok(0)
}

/// Where `rank`'s dump goes: `--fr-dir`'s folder with the prefix's file name, else the
/// scenario's prefix as written (relative to the working directory, as PyTorch's).
fn dump_path(scenario: &Scenario, fr_dir: Option<&Path>, rank: u32) -> Option<PathBuf> {
    let prefix = scenario.env.dump_file_prefix.as_deref();
    match (fr_dir, prefix) {
        (Some(dir), _) => {
            let name = prefix.map_or(DEFAULT_FILE_PREFIX, |p| {
                p.rsplit_once('/').map_or(p, |(_, name)| name)
            });
            Some(dir.join(format!("{name}{rank}")))
        }
        (None, Some(prefix)) => Some(PathBuf::from(format!("{prefix}{rank}"))),
        (None, None) => None,
    }
}

/// Writes the dumps of the ranks that dumped, where the scenario or `--fr-dir` asks.
pub fn write_dumps(
    scenario: &Scenario,
    timeline: &Timeline,
    fr_dir: Option<&Path>,
) -> Result<(), Failure> {
    if fr_dir.is_some() && timeline.flight_recorder.is_empty() {
        note!("c10dsim: no rank dumped its Flight Recorder (no watchdog timeout or error, or TORCH_NCCL_DUMP_ON_TIMEOUT = 0): --fr-dir wrote nothing");
    }
    // A folded or summarised Timeline holds one dump per class of ranks that behave alike: one
    // file per rank.
    let per_rank;
    let dumps = if (timeline.is_folded() || timeline.has_dumps_for_several_ranks())
        && dump_path(scenario, fr_dir, 0).is_some()
    {
        per_rank = timeline.rank_dumps();
        &per_rank
    } else {
        &timeline.flight_recorder
    };
    let mut written = Vec::new();
    let mut batch = stdio::Batch::default();
    for dump in dumps {
        let Some(path) = dump_path(scenario, fr_dir, dump.rank) else {
            return Ok(());
        };
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            stdio::create_folder(parent)?;
        }
        let bytes = flight_recorder::write(dump);
        batch.add(&path, |out| out.write_all(&bytes))?;
        written.push(path);
    }
    batch.commit()?;
    match written.as_slice() {
        [] => {}
        [one] => note!("c10dsim: wrote 1 Flight Recorder dump ({})", one.display()),
        [first, .., last] => note!(
            "c10dsim: wrote {} Flight Recorder dumps ({} … {})",
            written.len(),
            first.display(),
            last.display()
        ),
    }
    Ok(())
}
