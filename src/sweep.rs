//! `c10dsim sweep` and `c10dsim merge`: run a scenario's sweep points in parallel (rayon) into a
//! CSV (docs/sweep-format.md), and join the CSVs of shards.
//!
//! Rows are written as points finish, in point order: workers take points in order, and a
//! reorder buffer holds a finished point until every earlier one of this run is written. So an
//! interrupted sweep keeps a prefix of its rows, and the file is the same bytes whatever the
//! thread count. `--resume` keeps the rows already in the file and runs the rest. `-o -` writes
//! the same bytes to standard output.
//!
//! About 880 lines: the run, its resume and the merge of shards share the CSV's row format
//! and its checks, which split across files would be passed around.

mod output;
mod shard;

use output::{OutputFile, Sink, Stopped};
use shard::{shard, ShardChoice};

use crate::Failure;
use analysis::sweep::{Columns, PointInfo, Provenance};
use analysis::text::counted;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressState, ProgressStyle};
use rayon::iter::{ParallelBridge, ParallelIterator};
use sim::sweep::{point_seed, AxisArg, Shard, Sweep};
use std::collections::{BTreeMap, HashSet};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::mpsc;

/// The most threads `--threads` may ask for.
const MAX_THREADS: usize = 1024;

/// What `c10dsim sweep` was asked to do.
pub struct SweepArgs {
    pub file: PathBuf,
    pub output: PathBuf,
    pub threads: Option<usize>,
    pub axes: Vec<AxisArg>,
    pub shard: Option<Shard>,
    pub resume: bool,
    pub limits: crate::limits::LimitArgs,
}

/// A sweep file as `sweep` reads it: its `--set machine=…` and machine profile applied, its
/// `[sweep]` table and the command line's axes parsed.
pub(crate) struct Plan {
    pub sweep: Sweep,
    pub file: SweepFile,
}

/// The text a sweep is made of, and what places an error of it at the file's line (or the
/// profile's, or the `--set`'s).
pub(crate) struct SweepFile {
    pub with_machine: crate::diff_cmd::WithMachine,
    path: String,
    original: String,
    machine_set: Vec<sim::scenario::Override>,
}

impl SweepFile {
    /// `error`, of the profiled text or of the sweep, rendered at its line.
    pub(crate) fn failure(&self, error: sim::scenario::ScenarioError) -> Failure {
        let located = crate::diagnostic::locate_with_profiles(
            error,
            &self.path,
            &self.original,
            &self.with_machine.text,
            &self.machine_set,
            &self.with_machine.profiles,
        );
        Failure::input(crate::diagnostic::render(&located))
    }
}

impl Plan {
    /// `original`, the text of `file`, with `machine_set` (the `--set machine=NAME`s) and
    /// `machine` (`--machine PROFILE`) applied, and `axes` (the other `--set`s of `sweep`).
    pub(crate) fn read(
        file: &Path,
        original: String,
        machine_set: Vec<sim::scenario::Override>,
        machine: Option<&Path>,
        axes: &[AxisArg],
    ) -> Result<Plan, Failure> {
        let path = file.display().to_string();
        let with_machine_set = sim::sweep::apply_overrides_with_ops(&original, &machine_set)
            .map_err(|error| Failure::input(format!("{path}: {error}")))?;
        // A `machine = …` profile fills in what the scenario does not set, as for `run`.
        let with_machine = crate::diff_cmd::resolve_machine(file, &with_machine_set, machine)?;
        let sweep_file = SweepFile {
            with_machine,
            path,
            original,
            machine_set,
        };
        match Sweep::parse(&sweep_file.path, &sweep_file.with_machine.text, axes) {
            Ok(sweep) => Ok(Plan {
                sweep,
                file: sweep_file,
            }),
            Err(error) => Err(sweep_file.failure(error)),
        }
    }

    /// Whether an axis column has the form of a metric column: only then do the base point's
    /// metrics decide [`Plan::columns`]' refusals.
    pub(crate) fn may_name_a_metric(&self) -> bool {
        (self.sweep.columns().into_iter()).any(analysis::sweep::is_metric_column)
    }

    /// The CSV's columns, the base point's being `metrics` ([`analysis::sweep::metric_columns`]);
    /// refused at the axis's name or key where two would share a name.
    pub(crate) fn columns(&self, metrics: Vec<String>) -> Result<Columns, Failure> {
        let sweep = &self.sweep;
        let columns = Columns::with_metrics(&sweep.columns(), metrics.clone())
            .with_size_axes(&sweep.size_columns());
        let header = columns.header();
        // A zipped axis may be named anything: named like another column (`point`, a metric,
        // `seed`, a size's `_bytes` twin, a `seed` path axis's `scenario.seed`) it would make
        // two columns of one name, which readers of the CSV (pandas, `plot`, `merge`) tell
        // apart by position or not at all.
        let size_twins = (sweep.columns().into_iter())
            .zip(sweep.size_columns())
            .filter(|&(_, size)| size)
            .map(|(axis, _)| format!("{axis}{}", analysis::sweep::SIZE_BYTES_SUFFIX));
        let trailing = analysis::sweep::trailing_columns();
        let renamed_axes = (sweep.columns().into_iter())
            .filter(|axis| trailing.iter().any(|column| column == axis))
            .map(|axis| format!("{}{axis}", analysis::sweep::SCENARIO_PREFIX));
        let written: Vec<String> = (Columns::with_metrics(&[], metrics).header().into_iter())
            .chain(size_twins)
            .chain(renamed_axes)
            .collect();
        sweep
            .check_zip_names(&written)
            .map_err(|error| self.file.failure(error))?;
        // What is left: a path axis named like another's `_bytes` twin (`tensors.x_bytes`
        // beside the size axis `tensors.x`).
        if let Some(twice) = (header.iter().enumerate())
            .find_map(|(index, column)| header[..index].contains(column).then_some(column))
        {
            return Err(self.file.failure(sweep.axis_column_error(
                twice,
                format!(
                    "the CSV would have two columns named {twice:?}: an axis is named like a \
                     column c10dsim writes; rename the axis"
                ),
            )));
        }
        Ok(columns)
    }
}

pub fn sweep(args: &SweepArgs) -> Result<u8, Failure> {
    let path = args.file.display().to_string();
    let original = crate::stdio::read_scenario_text(&args.file)?;
    // `--set machine=NAME` names the profile, so it applies before the profile is read, as for
    // `run`; every point runs on that one profile.
    let (machine_sets, axes): (Vec<AxisArg>, Vec<AxisArg>) = args
        .axes
        .iter()
        .cloned()
        .partition(|axis| axis.path == sim::scenario::MACHINE_KEY);
    let mut machine_set = Vec::new();
    for axis in machine_sets {
        let [value] = axis.values.as_slice() else {
            return Err(Failure::input(format!(
                "--set {axis}: a sweep runs every point on one machine profile; run one sweep \
                 per profile"
            )));
        };
        machine_set.push(sim::scenario::Override {
            path: axis.path,
            value: value.clone(),
        });
    }
    let plan = Plan::read(&args.file, original, machine_set, None, &axes)?;
    let sweep = &plan.sweep;
    let text = &plan.file.with_machine.text;
    let ShardChoice {
        shard,
        source: shard_source,
        notes,
    } = shard(args.shard)?;
    for note in &notes {
        note!("c10dsim: note: {note}");
    }
    let base = sweep.base_scenario().map_err(scenario_failure)?;
    args.limits.caps.check(&args.file, &base, false)?;
    let options = args.limits.engine_options();
    let per_rank = options.per_rank_detail;
    let base_report = analysis::metrics::report(&sim::engine::simulate_with(&base, options).0);
    let columns =
        (plan.columns(analysis::sweep::metric_columns(&base_report))?).with_per_rank(per_rank);
    let header = columns.header();
    // The sweep's identity: the file, and the `--set`s that change its points (a `--resume`
    // file of other values must not be joined). Without `--set`, the file's hash alone, as a
    // Timeline records it.
    let hash = if args.axes.is_empty() {
        sim::scenario::content_hash(text)
    } else {
        let sets: Vec<String> = args.axes.iter().map(ToString::to_string).collect();
        sim::scenario::content_hash(&format!("{text}\n--set {}", sets.join("\n--set ")))
    };
    let provenance = Provenance {
        scenario_hash: &hash,
        sweep_points: sweep.point_count(),
        version: env!("CARGO_PKG_VERSION"),
    };

    // `-o -`: the rows go to standard output as they are written to a file, header first.
    let to_stdout = crate::stdio::is_dash(&args.output);
    if to_stdout && args.resume {
        return Err(Failure::input(
            "--resume keeps the rows already in OUT.csv; `-o -` (standard output) holds none: give a file",
        ));
    }
    let shown = if to_stdout {
        "standard output".to_string()
    } else {
        args.output.display().to_string()
    };
    // Whatever can refuse the sweep does so before the output file is touched.
    crate::stdio::refuse_input(&args.output)?;
    let threads = args.threads.unwrap_or_else(|| {
        std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
    });
    if threads == 0 {
        return Err(Failure::input(
            "--threads 0: give at least 1 (each point runs on one thread)".to_string(),
        ));
    }
    if threads > MAX_THREADS {
        return Err(Failure::input(format!(
            "--threads {threads}: at most {MAX_THREADS} (each point runs on one thread; more \
             threads than cores only share them)"
        )));
    }
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .map_err(|error| Failure::input(format!("cannot start {threads} threads: {error}")))?;
    let Resumed { done, line_end } = if args.resume {
        let this_sweep = ThisSweep {
            header: &header,
            hash: &hash,
            point_count: sweep.point_count(),
            shard,
            base_seed: base.seed,
        };
        resume_rows(&args.output, &this_sweep)?
    } else {
        if !to_stdout {
            write_header(&args.output, &header)?;
        }
        Resumed::default()
    };
    let done_set: HashSet<u64> = done.iter().copied().collect();
    // The points to run, in order, without holding them all (a shard may have millions).
    let pending = || {
        shard
            .indices(sweep.point_count())
            .filter(|index| !done_set.contains(index))
    };
    let pending_count = pending().count() as u64;
    note!(
        "c10dsim: {path}: {}; shard {shard} ({shard_source}) has {}, {} already in {}, {} to run",
        counted(sweep.point_count(), "point"),
        sim::ranks::thousands(shard.len(sweep.point_count())),
        sim::ranks::thousands(done_set.len() as u64),
        shown,
        sim::ranks::thousands(pending_count),
    );

    let sink = if to_stdout {
        Sink::Stdout(std::io::stdout())
    } else {
        Sink::File(OutputFile::open(&args.output)?)
    };
    let mut writer = csv::WriterBuilder::new()
        .terminator(line_end)
        .from_writer(sink);
    if to_stdout {
        writer
            .write_record(&header)
            .and_then(|()| writer.flush().map_err(csv::Error::from))
            .map_err(|error| row_failure(&args.output, error))?;
    }
    let progress = progress_bar(pending_count);
    let (sender, receiver) = mpsc::channel::<(u64, Vec<String>)>();
    let mut failed_points = 0u64;
    let base_seed = base.seed;
    std::thread::scope(|scope| -> Result<(), Failure> {
        let sweep_ref = &sweep;
        let columns_ref = &columns;
        let provenance_ref = &provenance;
        let to_run = pending();
        scope.spawn(move || {
            pool.install(|| {
                // The writer only stops receiving when it failed (a full disk, a reader that
                // went away); it reports why, and the workers take no further point.
                let _ = to_run
                    .par_bridge()
                    .try_for_each_with(sender, |sender, index| {
                        let row = run_point(
                            &PointRun {
                                sweep: sweep_ref,
                                columns: columns_ref,
                                provenance: provenance_ref,
                                limits: &args.limits,
                                base_seed,
                            },
                            index,
                        );
                        sender.send((index, row))
                    });
            });
        });
        // Reorder buffer: write rows in the order the workers took them.
        let error_column = header.iter().position(|h| h == "error").expect("has error");
        let mut waiting: BTreeMap<u64, Vec<String>> = BTreeMap::new();
        let mut expected = pending().peekable();
        let mut written_points = 0u64;
        let stopped = |written_points: u64| Stopped {
            written_points,
            pending_count,
        };
        for (index, row) in receiver {
            progress.inc(1);
            if !row[error_column].is_empty() {
                failed_points += 1;
            }
            waiting.insert(index, row);
            let mut wrote = false;
            while let Some(row) = expected.peek().and_then(|i| waiting.remove(i)) {
                writer
                    .write_record(&row)
                    .map_err(|error| row_failure(&args.output, error))?;
                expected.next();
                written_points += 1;
                wrote = true;
            }
            if wrote {
                writer
                    .flush()
                    .map_err(|error| row_failure(&args.output, error.into()))?;
                writer.get_ref().check(&stopped(written_points))?;
            }
        }
        // Removed or cut short after the last row: the file is no sweep's either.
        writer.get_ref().check(&stopped(written_points))
    })?;
    progress.finish_and_clear();
    drop(writer);
    // Rows out of order, or a point twice (a row duplicated by hand or by a copy), are put
    // in point order, one per point.
    if done.iter().zip(done.iter().skip(1)).any(|(a, b)| a >= b)
        || matches!((done.iter().max(), pending().next()), (Some(&last), Some(first)) if last > first)
    {
        let (header, rows) = read_rows(&args.output)?;
        let rows = analysis::sweep::rows_in_point_order(rows)
            .map_err(|error| in_csv(&args.output, &error))?;
        write_rows((&args.output, true), &header, &rows)?;
    }
    note!(
        "c10dsim: wrote {shown} ({} run, {} with an error or finding)",
        counted(pending_count, "point"),
        sim::ranks::thousands(failed_points),
    );
    Ok(0)
}

/// What every point of a sweep shares.
struct PointRun<'a> {
    sweep: &'a Sweep,
    columns: &'a Columns,
    provenance: &'a Provenance<'a>,
    limits: &'a crate::limits::LimitArgs,
    base_seed: u64,
}

fn run_point(shared: &PointRun, index: u64) -> Vec<String> {
    let PointRun {
        sweep,
        columns,
        provenance,
        limits,
        base_seed,
    } = *shared;
    let point = sweep.point(index);
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let scenario = sweep.scenario(&point).map_err(|error| error.to_string())?;
        // A point over the caps is an error row, not a run that takes the machine.
        limits
            .caps
            .estimate(&scenario)
            .check(&limits.caps.limits())
            .map_err(|message| {
                format!("{message} (raise the caps with --max-events / --max-timeline)")
            })?;
        let (timeline, _) = sim::engine::simulate_with(&scenario, limits.engine_options());
        Ok::<_, String>((scenario.seed, timeline))
    }));
    let info = |seed| PointInfo {
        index,
        values: &point.values,
        seed,
    };
    let fallback_seed = point_seed(base_seed, index);
    match outcome {
        Ok(Ok((seed, timeline))) => columns.row(&info(seed), Ok(&timeline), provenance),
        Ok(Err(error)) => columns.row(&info(fallback_seed), Err(error.as_str()), provenance),
        Err(panic) => {
            let message = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(ToString::to_string))
                .unwrap_or_default();
            columns.row(
                &info(fallback_seed),
                Err(format!("internal error: the simulation panicked: {message}").as_str()),
                provenance,
            )
        }
    }
}

fn progress_bar(length: u64) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::with_draw_target(Some(length), ProgressDrawTarget::stderr());
    bar.set_style(
        ProgressStyle::with_template(
            "{elapsed_precise} [{bar:40}] {pos}/{len} points, {rate}, ETA {eta}",
        )
        .expect("valid template")
        .with_key(
            "rate",
            |state: &ProgressState, out: &mut dyn std::fmt::Write| {
                let _ = write!(out, "{:.0} points/s", state.per_sec());
            },
        )
        .progress_chars("=> "),
    );
    bar
}

fn scenario_failure(error: sim::scenario::ScenarioError) -> Failure {
    Failure::input(error.to_string())
}

fn write_failure(path: &Path, error: impl std::fmt::Display) -> Failure {
    Failure::input(format!("cannot write {}: {error}", path.display()))
}

/// A row not written: on standard output like any output (a reader that went away, `| head`,
/// ends the sweep quietly), else naming the file.
fn row_failure(path: &Path, error: csv::Error) -> Failure {
    match error.kind() {
        csv::ErrorKind::Io(io) if crate::stdio::is_dash(path) => {
            crate::output_failure(std::io::Error::from(io.kind()))
        }
        _ => write_failure(path, error),
    }
}

fn read_failure(path: &Path, error: impl std::fmt::Display) -> Failure {
    Failure::input(format!("cannot read {}: {error}", path.display()))
}

fn write_header(path: &Path, header: &[String]) -> Result<(), Failure> {
    let mut writer = csv::Writer::from_path(path).map_err(|error| write_failure(path, error))?;
    writer
        .write_record(header)
        .map_err(|error| write_failure(path, error))?;
    writer.flush().map_err(|error| write_failure(path, error))
}

/// What a `--resume` file must match: the sweep's columns, its hash, its number of points and
/// the shard this run is.
struct ThisSweep<'a> {
    header: &'a [String],
    hash: &'a str,
    point_count: u64,
    shard: sim::sweep::Shard,
    /// The scenario's seed, `--set`s applied, from which each point's is drawn (`point_seed`).
    base_seed: u64,
}

/// What `--resume` found in the file: the points already in it, in file order, and the line
/// end its rows go on with (the file's own: an editor's CRLF file gets no LF rows).
struct Resumed {
    done: Vec<u64>,
    line_end: csv::Terminator,
}

impl Default for Resumed {
    fn default() -> Self {
        Resumed {
            done: Vec::new(),
            line_end: csv::Terminator::Any(b'\n'),
        }
    }
}

/// `--resume`: the points already in `path` (written by this sweep: same columns, same
/// scenario file, points below its `point_count`, each of this shard's) and its line end. A
/// record cut short by an interruption is dropped; a missing file starts the sweep afresh.
fn resume_rows(path: &Path, sweep: &ThisSweep) -> Result<Resumed, Failure> {
    let ThisSweep {
        header,
        hash,
        point_count,
        shard,
        base_seed,
    } = *sweep;
    let bytes = match crate::stdio::read_file(path) {
        Ok(bytes) => bytes,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            write_header(path, header)?;
            return Ok(Resumed::default());
        }
        Err(error) => return Err(read_failure(path, error)),
    };
    let complete = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    if complete < bytes.len() {
        std::fs::OpenOptions::new()
            .write(true)
            .open(path)
            .and_then(|file| file.set_len(complete as u64))
            .map_err(|error| write_failure(path, error))?;
    }
    if complete == 0 {
        write_header(path, header)?;
        return Ok(Resumed::default());
    }
    if let Some(point) = analysis::sweep::headless_first_point(&bytes[..complete]) {
        return Err(Failure::input(format!(
            "--resume: {}:1 is the row of point {point}, not the header: the file lost its \
             header and the rows before this one (as a file emptied while a sweep appends to it \
             does), so its rows cannot be checked against this sweep's columns; delete it (or \
             move it aside) and run the sweep again",
            path.display()
        )));
    }
    let (existing, rows) = read_rows(path)?;
    if existing != header {
        return Err(Failure::input(format!(
            "--resume: {} has other columns than this sweep (another scenario, other axes or another c10dsim version?); write to a new file",
            path.display()
        )));
    }
    if let Some(other) = other_hash(header, &rows, hash) {
        return Err(Failure::input(format!(
            "--resume: {} holds rows of another sweep: another version of the scenario file, or other --set values (hash {other}, now {hash}); write to a new file",
            path.display(),
        )));
    }
    let done = rows
        .iter()
        .map(|row| point_index(path, row))
        .collect::<Result<Vec<u64>, _>>()?;
    if let Some(past) = done.iter().find(|&&index| index >= point_count) {
        return Err(Failure::input(format!(
            "--resume: {} holds point {past}, but this sweep has {} (0 to {}); write to a new \
             file",
            path.display(),
            counted(point_count, "point"),
            point_count - 1
        )));
    }
    // Points go to shards in turn (shard I of N runs I, I + N, …): a point of another shard
    // means the file is another shard's, or the merged sweep's.
    if let Some(foreign) = done
        .iter()
        .find(|&&index| index % shard.count != shard.index)
    {
        let (first, count) = (shard.index, shard.count);
        return Err(Failure::input(format!(
            "--resume: {} holds point {foreign}, which is not one of shard {shard}'s (points \
             {first}, {}, {}, …): the file is another shard's, or a whole sweep's; resume it \
             with its own --shard, or write to a new file",
            path.display(),
            first + count,
            first + 2 * count
        )));
    }
    refuse_other_seeds(path, header, (&rows, &done), base_seed)?;
    let first_line = &bytes[..bytes.iter().position(|&b| b == b'\n').unwrap_or(0)];
    let line_end = match first_line.ends_with(b"\r") {
        true => csv::Terminator::CRLF,
        false => csv::Terminator::Any(b'\n'),
    };
    Ok(Resumed { done, line_end })
}

/// Refuses a row whose `seed` is not the one this sweep draws for its point: a file a c10dsim
/// before 2026-12-07 wrote (its point seeds could pass 2^63 - 1, `point_seed`), or an edited
/// row. A point's seed is drawn from the scenario's seed, or from its own `scenario.seed` where
/// an axis sweeps the seed; a row of a point that failed is not checked (it gives the drawn
/// seed whatever its axes said).
fn refuse_other_seeds(
    path: &Path,
    header: &[String],
    (rows, points): (&[csv::StringRecord], &[u64]),
    base_seed: u64,
) -> Result<(), Failure> {
    let column = |name: &str| header.iter().position(|h| h == name);
    let (Some(seed_column), Some(error_column)) = (column("seed"), column("error")) else {
        return Ok(());
    };
    let swept_seed = column("scenario.seed");
    for (row, &point) in rows.iter().zip(points) {
        if row.get(error_column).is_some_and(|error| !error.is_empty()) {
            continue;
        }
        let base = swept_seed
            .and_then(|at| row.get(at))
            .and_then(|text| text.parse().ok())
            .unwrap_or(base_seed);
        let expected = point_seed(base, point);
        let found = row.get(seed_column).unwrap_or("");
        if found != expected.to_string() {
            return Err(Failure::input(format!(
                "--resume: {}: point {point}'s seed {found} is not this sweep's, {expected}: the \
                 rows were written by another c10dsim (before 2026-12-07 a point's seed could \
                 pass 2^63 - 1, docs/sweep-format.md) or edited; write to a new file",
                row_place(path, row)
            )));
        }
    }
    Ok(())
}

/// Refuses, for `merge`, a row whose `seed` is past 2^63 - 1, which no sweep draws since
/// 2026-12-07 (`point_seed`) and `run --seed` cannot replay: an older c10dsim's row, whose
/// slices would mix two seeds into one sweep. `merge` reads no scenario, so it cannot check a
/// seed against its point's draw as `--resume` does ([`refuse_other_seeds`]).
fn refuse_seeds_no_sweep_draws(
    path: &Path,
    header: &[String],
    (rows, points): (&[csv::StringRecord], &[u64]),
) -> Result<(), Failure> {
    let Some(seed_column) = header.iter().position(|h| h == "seed") else {
        return Ok(());
    };
    for (row, &point) in rows.iter().zip(points) {
        let found = row.get(seed_column).unwrap_or("");
        if found
            .parse::<u64>()
            .is_ok_and(|seed| seed > i64::MAX as u64)
        {
            return Err(Failure::input(format!(
                "{}: point {point}'s seed {found} is past 2^63 - 1: a c10dsim before 2026-12-07 \
                 wrote this row (docs/sweep-format.md), and its other rows' seeds are the ones \
                 drawn now, so the merged file would mix two; run that slice again with this \
                 c10dsim",
                row_place(path, row)
            )));
        }
    }
    Ok(())
}

/// A row's `scenario_hash` (every sweep CSV has the column).
fn row_hash<'a>(header: &[String], row: &'a csv::StringRecord) -> Option<&'a str> {
    let column = header.iter().position(|h| h == "scenario_hash")?;
    row.get(column)
}

/// The first hash among `rows` other than `hash`: a row of another sweep.
fn other_hash<'a>(header: &[String], rows: &'a [csv::StringRecord], hash: &str) -> Option<&'a str> {
    (rows.iter())
        .filter_map(|row| row_hash(header, row))
        .find(|&row| row != hash)
}

fn point_index(path: &Path, row: &csv::StringRecord) -> Result<u64, Failure> {
    analysis::sweep::point_index(row).map_err(|error| in_csv(path, &error))
}

/// Reads a sweep CSV: its header and rows.
pub fn read_rows(path: &Path) -> Result<(Vec<String>, Vec<csv::StringRecord>), Failure> {
    let text = crate::stdio::read_text(path)?;
    analysis::sweep::read_table(text.as_bytes()).map_err(|error| in_csv(path, &error))
}

/// An error of the sweep CSV `path`, at its line: `FILE:LINE: error: …`.
fn in_csv(path: &Path, error: &analysis::sweep::CsvError) -> Failure {
    Failure::input(error.in_file(&path.display().to_string()))
}

/// Where a row is: `FILE:LINE`.
fn row_place(path: &Path, row: &csv::StringRecord) -> String {
    match row.position() {
        Some(at) => format!("{}:{}", path.display(), at.line()),
        None => path.display().to_string(),
    }
}

/// Writes the header and `rows` through a temporary file renamed over `path`.
fn write_rows(
    (path, own_output): (&Path, bool),
    header: &[String],
    rows: &[csv::StringRecord],
) -> Result<(), Failure> {
    let mut writer = csv::Writer::from_writer(Vec::new());
    writer
        .write_record(header)
        .map_err(|error| write_failure(path, error))?;
    for row in rows {
        writer
            .write_record(row)
            .map_err(|error| write_failure(path, error))?;
    }
    let bytes = writer
        .into_inner()
        .map_err(|error| write_failure(path, error.error()))?;
    // Written whole to a hidden file, then renamed (a device or a pipe written directly, a
    // symbolic link's target replaced): an interrupted merge leaves no half file. A resumed
    // sweep rewrites its own output, which it read.
    if own_output {
        crate::stdio::rewrite_own_output(path, &bytes)?;
    } else {
        crate::stdio::write_bytes(path, &bytes)?;
    }
    Ok(())
}

/// `c10dsim merge`: the rows of every input (same columns), one per point, in point order.
pub fn merge(inputs: &[PathBuf], output: &Path) -> Result<u8, Failure> {
    let mut header: Option<(Vec<String>, &Path)> = None;
    let mut sweep_points: Option<(u64, &Path)> = None;
    // The first row's scenario_hash, and where that row is.
    let mut sweep_hash: Option<(String, String)> = None;
    // Each point's row, and the file it is in.
    let mut by_point: BTreeMap<u64, (csv::StringRecord, &Path)> = BTreeMap::new();
    for input in inputs {
        let (columns, rows) = read_rows(input)?;
        match &header {
            Some((first, first_path)) if *first != columns => {
                return Err(Failure::input(format!(
                    "{} and {} have different columns: not slices of one sweep",
                    first_path.display(),
                    input.display()
                )))
            }
            Some(_) => {}
            None => header = Some((columns, input)),
        }
        let indices = (rows.iter())
            .map(|row| point_index(input, row))
            .collect::<Result<Vec<u64>, _>>()?;
        let columns = &header.as_ref().expect("set above").0;
        let points =
            analysis::sweep::sweep_points(columns, &rows).map_err(|error| in_csv(input, &error))?;
        match (sweep_points, points) {
            (Some((first, first_path)), Some(count)) if first != count => {
                return Err(Failure::input(format!(
                    "{} holds rows of a sweep of {first} points, {} of {count}; merge the slices \
                     of one sweep",
                    first_path.display(),
                    input.display()
                )))
            }
            (None, Some(count)) => sweep_points = Some((count, input)),
            _ => {}
        }
        // Slices of one sweep carry one hash (the file and its --sets): other sweeps' rows with
        // the same columns are refused rather than mixed.
        for row in &rows {
            let Some(hash) = row_hash(columns, row) else {
                continue;
            };
            match &sweep_hash {
                Some((first, first_place)) if first != hash => {
                    return Err(Failure::input(format!(
                        "the files hold rows of two sweeps: scenario_hash {first} at {first_place}, \
                         {hash} at {} (another scenario file or other --set values); merge the \
                         slices of one sweep",
                        row_place(input, row)
                    )))
                }
                Some(_) => {}
                None => sweep_hash = Some((hash.to_string(), row_place(input, row))),
            }
        }
        refuse_seeds_no_sweep_draws(input, columns, (&rows, &indices))?;
        // A point present twice with the same row is kept once (a resumed slice, a file given
        // twice); with different rows, both places are named.
        for (index, row) in indices.into_iter().zip(rows) {
            match by_point.entry(index) {
                std::collections::btree_map::Entry::Vacant(entry) => {
                    entry.insert((row, input));
                }
                std::collections::btree_map::Entry::Occupied(entry) if entry.get().0 != row => {
                    let (first, first_path) = entry.get();
                    return Err(Failure::input(format!(
                        "point {index} appears twice with different rows, at {} and {}; were \
                         these slices of one sweep?",
                        row_place(first_path, first),
                        row_place(input, &row)
                    )));
                }
                std::collections::btree_map::Entry::Occupied(_) => {}
            }
        }
    }
    let (header, _) = header.expect("clap requires an input");
    let sweep_points = sweep_points.map(|(count, _)| count);
    let mut indices: Vec<u64> = by_point.keys().copied().collect();
    let rows: Vec<csv::StringRecord> = by_point.into_values().map(|(row, _)| row).collect();
    write_rows((output, false), &header, &rows)?;
    note!(
        "c10dsim: merged {} from {} into {}",
        counted(rows.len() as u64, "point"),
        counted(inputs.len() as u64, "file"),
        output.display()
    );
    if let Some(missing) = missing_points(&mut indices, sweep_points) {
        note!("c10dsim: warning: {missing}");
    }
    Ok(0)
}

/// [`missing_points`] of one CSV's rows, for a reader of it (`plot`); `None` also where its
/// cells do not say (a point or `sweep_points` cell that is no number: the reader's own checks
/// report those).
pub(crate) fn missing_points_of(header: &[String], rows: &[csv::StringRecord]) -> Option<String> {
    let mut indices = (rows.iter())
        .map(analysis::sweep::point_index)
        .collect::<Result<Vec<u64>, _>>()
        .ok()?;
    let sweep_points = analysis::sweep::sweep_points(header, rows).ok()?;
    missing_points(&mut indices, sweep_points)
}

/// The points of the sweep that no row holds, shown as ranges (`3, 5-9`), when any are
/// missing: shards not merged yet, or not finished (`--resume` finishes them). The sweep's
/// points are `0..sweep_points` where the rows say how many (`c10dsim-sweep/3`), else the ones
/// below the highest index given.
fn missing_points(indices: &mut [u64], sweep_points: Option<u64>) -> Option<String> {
    indices.sort_unstable();
    // One past the last point, counted in u128: a row may hold point u64::MAX.
    let end = match sweep_points {
        Some(count) => u128::from(count),
        None => u128::from(*indices.last()?) + 1,
    };
    let mut ranges = Vec::new();
    let mut missing = 0u128;
    let mut expected = 0u128;
    for index in indices.iter().map(|&index| u128::from(index)).chain([end]) {
        if index > expected {
            missing += index - expected;
            ranges.push(if index - 1 == expected {
                expected.to_string()
            } else {
                format!("{expected}-{}", index - 1)
            });
        }
        expected = expected.max(index + 1);
    }
    if missing == 0 {
        return None;
    }
    let shown = if ranges.len() > 8 {
        format!("{}, … ({} ranges)", ranges[..8].join(", "), ranges.len())
    } else {
        ranges.join(", ")
    };
    let (have, points) = if missing == 1 {
        ("has", "point")
    } else {
        ("have", "points")
    };
    Some(format!(
        "{missing} of the points 0-{} {have} no row ({points} {shown}): a shard not given or not finished",
        end - 1
    ))
}
