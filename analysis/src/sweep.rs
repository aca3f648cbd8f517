//! Sweep CSV rows (`docs/sweep-format.md`): the column set of a sweep and one row of cells per
//! point, from the point's Timeline or its error.
//!
//! The metric columns come from the base scenario's report (the file's own values), so every
//! row of one sweep has the same columns whatever its point did; a metric that a point does
//! not have is an empty cell.
//!
//! About 850 lines with its unit tests, over 800: the columns, the rows and the reading of a
//! CSV back are one wire format, kept in one file so that they change together.
//!
//! ```
//! let text = "repeat = 2\n[cluster]\nranks = 2\n[tensors]\nx = \"1MiB\"\n\
//!             [[op]]\nlabel = \"ar\"\nall_reduce = \"x\"\n";
//! let scenario = sim::scenario::parse("doc.toml", text).unwrap();
//! let timeline = sim::engine::simulate(&scenario);
//! let base = analysis::metrics::report(&timeline);
//! let columns = analysis::sweep::Columns::new(&["tensors.x"], &base);
//! assert_eq!(columns.header()[..3], ["point", "tensors.x", "ar.host_call_us"]);
//! let row = columns.row(
//!     &analysis::sweep::PointInfo { index: 0, values: &["1MiB".to_string()], seed: 9 },
//!     Ok(&timeline),
//!     &analysis::sweep::Provenance { scenario_hash: "abc", sweep_points: 1, version: "0.1.0" },
//! );
//! assert_eq!(row.len(), columns.header().len());
//! ```

use crate::metrics::{report, Report};
use sim::timeline::{FindingKind, Timeline};
use std::collections::HashMap;

/// The first column: the point's index in the full sweep.
pub const POINT_COLUMN: &str = "point";
/// The suffixes of the per-collective columns, in order (R3).
pub const COLLECTIVE_SUFFIXES: [&str; 5] = [
    "host_call_us",
    "wait_us",
    "stream_interval_us",
    "kernel_us",
    "completed_at_wait_share",
];
/// Every finding kind, in the order of their `findings.<kind>` columns.
pub const FINDING_KINDS: [FindingKind; 13] = [
    FindingKind::Deadlock,
    FindingKind::TimeCap,
    FindingKind::WaitTimeout,
    FindingKind::WatchdogTimeout,
    FindingKind::AsyncError,
    FindingKind::HeartbeatAbort,
    FindingKind::StoreTimeout,
    FindingKind::Mismatch,
    FindingKind::Race,
    FindingKind::OutOfMemory,
    FindingKind::MemoryCap,
    FindingKind::ExitFailure,
    FindingKind::ProgramError,
];

/// The position of a kind in [`FINDING_KINDS`]; a new kind fails to compile here until it has
/// a column.
fn finding_column(kind: FindingKind) -> usize {
    match kind {
        FindingKind::Deadlock => 0,
        FindingKind::TimeCap => 1,
        FindingKind::WaitTimeout => 2,
        FindingKind::WatchdogTimeout => 3,
        FindingKind::AsyncError => 4,
        FindingKind::HeartbeatAbort => 5,
        FindingKind::StoreTimeout => 6,
        FindingKind::Mismatch => 7,
        FindingKind::Race => 8,
        FindingKind::OutOfMemory => 9,
        FindingKind::MemoryCap => 10,
        FindingKind::ExitFailure => 11,
        FindingKind::ProgramError => 12,
    }
}

/// The caching allocator's figures (R17–R20): the largest peak over ranks, the cache
/// releases summed over ranks.
pub const MEMORY_COLUMNS: [&str; 3] = [
    "memory.peak_reserved_bytes",
    "memory.peak_allocated_bytes",
    "memory.cache_releases",
];

/// The column that holds the number of points of the whole sweep, every shard's, in every row:
/// `merge` names the points no slice holds, above the highest one given too.
pub const SWEEP_POINTS_COLUMN: &str = "sweep_points";

/// The columns after the metrics, memory and findings, in order.
pub const PROVENANCE_COLUMNS: [&str; 5] = [
    "error",
    "seed",
    "scenario_hash",
    SWEEP_POINTS_COLUMN,
    "c10dsim_version",
];

/// An error in a sweep CSV: the message, and the line of the file it is on where one is
/// known (a row's; the csv reader's).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CsvError {
    pub line: Option<u64>,
    pub message: String,
}

impl CsvError {
    fn at_row(row: &csv::StringRecord, message: String) -> CsvError {
        CsvError {
            line: row.position().map(csv::Position::line),
            message,
        }
    }

    /// `FILE:LINE: error: message`, as the other readers place an error; `FILE: message` where
    /// no line is known.
    pub fn in_file(&self, file: &str) -> String {
        match self.line {
            Some(line) => format!("{file}:{line}: error: {}", self.message),
            None => format!("{file}: {}", self.message),
        }
    }
}

/// The csv reader's error in the words of the other readers: its line, and what is wrong
/// without the reader's own record and byte counts.
fn csv_error(error: &csv::Error) -> CsvError {
    let line = error.position().map(csv::Position::line);
    let message = match error.kind() {
        csv::ErrorKind::UnequalLengths {
            expected_len, len, ..
        } => format!("a row of {len} cells, but the header has {expected_len} columns"),
        csv::ErrorKind::Utf8 { err, .. } => {
            format!("cell {} is not UTF-8 text", err.field() + 1)
        }
        _ => error.to_string(),
    };
    CsvError { line, message }
}

/// Reads a sweep CSV (`c10dsim sweep`'s output): its header and rows. The first column must
/// be [`POINT_COLUMN`]; every row has the header's length (the `csv` reader checks). A file
/// with Windows (`\r\n`) line ends reads as the same file with `\n` ones.
pub fn read_table(bytes: &[u8]) -> Result<(Vec<String>, Vec<csv::StringRecord>), CsvError> {
    // The csv reader places every row of a `\r\n` file one line early (line 1 for the row on
    // line 2), so its line ends are made `\n` first: errors then name the row's own line.
    let bytes = without_carriage_returns(bytes);
    let mut reader = csv::Reader::from_reader(bytes.as_ref());
    let header: Vec<String> = reader
        .headers()
        .map_err(|error| csv_error(&error))?
        .iter()
        .map(ToString::to_string)
        .collect();
    if header.first().map(String::as_str) != Some(POINT_COLUMN) {
        let message = match headless_first_point(&bytes) {
            Some(point) => format!(
                "not a c10dsim sweep CSV: line 1 is the row of point {point}, not the header \
                 ({POINT_COLUMN:?} first): the file lost its header, as one emptied while a \
                 sweep appends to it does"
            ),
            None => {
                format!(
                    "not a c10dsim sweep CSV (its first column is not {POINT_COLUMN:?}): plot, \
                     merge and --resume read the CSVs of `c10dsim sweep` and plot those of \
                     `bench --scaling` too, not that of `bench --repeat`"
                )
            }
        };
        return Err(CsvError {
            line: Some(1),
            message,
        });
    }
    let rows = reader
        .records()
        .collect::<Result<Vec<_>, _>>()
        .map_err(|error| csv_error(&error))?;
    Ok((header, rows))
}

/// The point of the row on line 1 of `bytes`, a sweep CSV whose first line is a row rather
/// than the header (its first cell a point index, not `point`), else `None`.
pub fn headless_first_point(bytes: &[u8]) -> Option<u64> {
    let line = bytes.split(|&byte| byte == b'\n').next()?;
    let cell = line.split(|&byte| byte == b',').next()?;
    std::str::from_utf8(cell)
        .ok()?
        .trim_end_matches('\r')
        .parse()
        .ok()
}

/// `bytes` with each `\r\n` made `\n` (a copy only where the file has one).
fn without_carriage_returns(bytes: &[u8]) -> std::borrow::Cow<'_, [u8]> {
    if !bytes.windows(2).any(|pair| pair == b"\r\n") {
        return std::borrow::Cow::Borrowed(bytes);
    }
    let mut unix = Vec::with_capacity(bytes.len());
    for (at, &byte) in bytes.iter().enumerate() {
        if !(byte == b'\r' && bytes.get(at + 1) == Some(&b'\n')) {
            unix.push(byte);
        }
    }
    std::borrow::Cow::Owned(unix)
}

/// A row's point index (its first cell); an error names the row's line in the file.
pub fn point_index(row: &csv::StringRecord) -> Result<u64, CsvError> {
    let cell = row.get(0).unwrap_or_default();
    cell.parse().map_err(|_| {
        CsvError::at_row(
            row,
            format!("the point cell {cell:?} is not a point index (a whole number)"),
        )
    })
}

/// The number of points of the sweep the rows belong to (their [`SWEEP_POINTS_COLUMN`]), or
/// `None` for a table without the column (a `c10dsim-sweep/2` file) or without rows. Rows that
/// disagree, a cell that is not a count, or a point index at or past the count, are errors,
/// at the row's line.
pub fn sweep_points(
    header: &[String],
    rows: &[csv::StringRecord],
) -> Result<Option<u64>, CsvError> {
    let Some(column) = header.iter().position(|h| h == SWEEP_POINTS_COLUMN) else {
        return Ok(None);
    };
    let mut points = None;
    for row in rows {
        let cell = row.get(column).unwrap_or_default();
        let count: u64 = cell.parse().map_err(|_| {
            CsvError::at_row(
                row,
                format!("a row's {SWEEP_POINTS_COLUMN} is not a count of points: {cell:?}"),
            )
        })?;
        match points {
            Some(first) if first != count => {
                return Err(CsvError::at_row(
                    row,
                    format!(
                        "the rows are of sweeps of {first} and of {count} points; merge the slices of one sweep"
                    ),
                ))
            }
            _ => points = Some(count),
        }
        let index = point_index(row)?;
        if index >= count {
            return Err(CsvError::at_row(
                row,
                format!(
                    "point {index} is not one of its sweep's {count} points (0 to {})",
                    count.saturating_sub(1)
                ),
            ));
        }
    }
    Ok(points)
}

/// Rows in point order, one per point: a point present twice with the same row is kept once
/// (a resumed or merged sweep may hold it twice); twice with different rows is an error.
pub fn rows_in_point_order(
    rows: Vec<csv::StringRecord>,
) -> Result<Vec<csv::StringRecord>, CsvError> {
    let mut by_point: std::collections::BTreeMap<u64, csv::StringRecord> =
        std::collections::BTreeMap::new();
    for row in rows {
        let index = point_index(&row)?;
        if let Some(previous) = by_point.insert(index, row.clone()) {
            if previous != row {
                return Err(CsvError::at_row(
                    &row,
                    format!(
                        "point {index} appears twice with different rows; were these slices of one sweep?"
                    ),
                ));
            }
        }
    }
    Ok(by_point.into_values().collect())
}

/// The columns after the metrics: memory, finding counts (total, then by kind), error and
/// provenance.
pub fn trailing_columns() -> Vec<String> {
    MEMORY_COLUMNS
        .iter()
        .map(ToString::to_string)
        .chain(std::iter::once("findings".to_string()))
        .chain(
            FINDING_KINDS
                .iter()
                .map(|kind| format!("findings.{}", kind.as_str())),
        )
        .chain(PROVENANCE_COLUMNS.iter().map(ToString::to_string))
        .collect()
}

/// What identifies a point in its row.
pub struct PointInfo<'a> {
    pub index: u64,
    /// One cell per axis column.
    pub values: &'a [String],
    pub seed: u64,
}

/// Where every row of a sweep came from.
pub struct Provenance<'a> {
    /// `sim::scenario::content_hash` of the scenario file.
    pub scenario_hash: &'a str,
    /// How many points the whole sweep has (every shard's).
    pub sweep_points: u64,
    /// The c10dsim version that ran the sweep.
    pub version: &'a str,
}

/// The prefix of an axis column whose key is also the name of a trailing column
/// ([`Columns::header`]).
pub const SCENARIO_PREFIX: &str = "scenario.";

/// The suffix of the column that follows a size axis (`tensors.buf` → `tensors.buf_bytes`): the
/// size as an integer count of bytes, beside the label as written (`25MiB`).
pub const SIZE_BYTES_SUFFIX: &str = "_bytes";

/// The indices of a table's input columns: in a sweep CSV (first column `point`), the axis
/// columns (with their `_bytes` twins) between `point` and the first metric or memory column;
/// in any other table, every column.
pub fn axis_columns(header: &[String]) -> std::ops::Range<usize> {
    if header.first().map(String::as_str) != Some(POINT_COLUMN) {
        return 0..header.len();
    }
    let is_metric = |name: &String| is_metric_column(name) || name == MEMORY_COLUMNS[0];
    let end = header.iter().position(is_metric).unwrap_or(header.len());
    1..end
}

/// Whether `name` has the form of a metric column: an op's, measure's, overlap's or query's
/// name and one of their suffixes (`ar.kernel_us`, `step.median_us`, `killed.overlap`,
/// `q.is_completed_share`). Only such a name can be one of [`metric_columns`].
pub fn is_metric_column(name: &str) -> bool {
    COLLECTIVE_SUFFIXES
        .iter()
        .chain(&["median_us", "overlap", "is_completed_share"])
        .any(|suffix| name.ends_with(&format!(".{suffix}")))
}

/// The metric columns of a sweep whose base point reported `base`, in order.
pub fn metric_columns(base: &Report) -> Vec<String> {
    metric_cells(base)
        .into_iter()
        .map(|(name, _)| name)
        .collect()
}

/// The column set of one sweep.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Columns {
    axes: Vec<String>,
    /// Per axis: whether its values are sizes, which gain a `…_bytes` column.
    size_axes: Vec<bool>,
    metrics: Vec<String>,
    /// Whether the findings are counted and named one per rank (`--detail ranks`), not as
    /// `run`'s report lists them.
    per_rank: bool,
}

impl Columns {
    /// Axis columns as given, metric columns from the base scenario's report.
    pub fn new(axes: &[&str], base: &Report) -> Columns {
        Columns::with_metrics(axes, metric_columns(base))
    }

    /// Axis columns as given, then `metrics` ([`metric_columns`]).
    pub fn with_metrics(axes: &[&str], metrics: Vec<String>) -> Columns {
        Columns {
            axes: axes.iter().map(ToString::to_string).collect(),
            size_axes: vec![false; axes.len()],
            metrics,
            per_rank: false,
        }
    }

    /// Counts and names the findings one per rank, as `run --detail ranks` lists them; without
    /// it, as `run` lists them: the findings of ranks that found the same are one, whether the
    /// ranks were folded into one class or each simulated on its own (docs/scale.md).
    pub fn with_per_rank(mut self, per_rank: bool) -> Columns {
        self.per_rank = per_rank;
        self
    }

    /// Marks the axes whose values are sizes (`sim::sweep::Sweep::size_columns`): each is
    /// followed by a `<axis>_bytes` column holding the size in bytes.
    pub fn with_size_axes(mut self, size_axes: &[bool]) -> Columns {
        self.size_axes = self
            .axes
            .iter()
            .enumerate()
            .map(|(index, _)| size_axes.get(index).copied().unwrap_or(false))
            .collect();
        self
    }

    /// `point`, the axes (a size axis followed by its `_bytes` column), the metrics, then
    /// [`trailing_columns`]. An axis named like a trailing column (`seed`: the scenario's seed
    /// swept, beside each point's own `seed`) is written `scenario.<axis>`, so that no two
    /// columns share a name.
    pub fn header(&self) -> Vec<String> {
        let trailing = trailing_columns();
        let axes = self
            .axes
            .iter()
            .zip(&self.size_axes)
            .flat_map(|(axis, &size)| {
                let column = if trailing.contains(axis) {
                    format!("{SCENARIO_PREFIX}{axis}")
                } else {
                    axis.clone()
                };
                std::iter::once(column).chain(size.then(|| format!("{axis}{SIZE_BYTES_SUFFIX}")))
            })
            .collect::<Vec<_>>();
        std::iter::once(POINT_COLUMN.to_string())
            .chain(axes)
            .chain(self.metrics.iter().cloned())
            .chain(trailing_columns())
            .collect()
    }

    /// One row: the point's metrics from its Timeline, or its error (a scenario that could not
    /// be built). A run with findings (a deadlock, the time cap) keeps its metrics and names
    /// the first finding in `error`.
    pub fn row(
        &self,
        point: &PointInfo,
        outcome: Result<&Timeline, &str>,
        provenance: &Provenance,
    ) -> Vec<String> {
        let mut row = Vec::with_capacity(self.axes.len() + self.metrics.len() + 20);
        row.push(point.index.to_string());
        for (index, value) in point.values.iter().enumerate() {
            row.push(value.clone());
            if self.size_axes.get(index).copied().unwrap_or(false) {
                let bytes = sim::units::parse_size_bytes(value);
                row.push(bytes.map_or(String::new(), |bytes| bytes.to_string()));
            }
        }
        let (cells, memory, findings, error) = match outcome {
            Ok(timeline) => {
                let metrics = report(timeline);
                let cells: HashMap<String, String> = metric_cells(&metrics).into_iter().collect();
                // The findings as `run`'s report lists them.
                let findings = crate::text::merge_by_rank(
                    metrics.findings.iter().map(|finding| {
                        (
                            finding.kind,
                            finding.rank,
                            &finding.stands_for,
                            finding.message.as_str(),
                        )
                    }),
                    self.per_rank,
                );
                let error = findings.first().map_or(String::new(), |(kind, message)| {
                    let more = findings.len() - 1;
                    let kind = kind.as_str();
                    if more == 0 {
                        format!("{kind}: {message}")
                    } else {
                        format!(
                            "{kind}: {message} (and {})",
                            crate::text::counted(more as u64, "more finding")
                        )
                    }
                });
                (cells, Some(metrics.memory), Some(findings), error)
            }
            Err(message) => (HashMap::new(), None, None, message.to_string()),
        };
        row.extend(
            self.metrics
                .iter()
                .map(|name| cells.get(name).cloned().unwrap_or_default()),
        );
        // The report's figures: a folded class's cache releases count once per rank it
        // stands for.
        match memory {
            Some(memory) => row.extend(
                [
                    memory.peak_reserved_bytes,
                    memory.peak_allocated_bytes,
                    memory.cache_releases,
                ]
                .map(|value| value.to_string()),
            ),
            None => row.extend(MEMORY_COLUMNS.iter().map(|_| String::new())),
        }
        match &findings {
            Some(all) => {
                let mut by_kind = [0usize; FINDING_KINDS.len()];
                for (kind, _) in all {
                    by_kind[finding_column(*kind)] += 1;
                }
                row.push(all.len().to_string());
                row.extend(by_kind.iter().map(ToString::to_string));
            }
            None => row.extend((0..=FINDING_KINDS.len()).map(|_| String::new())),
        }
        row.push(one_line(&error));
        row.push(point.seed.to_string());
        row.push(provenance.scenario_hash.to_string());
        row.push(provenance.sweep_points.to_string());
        row.push(provenance.version.to_string());
        row
    }
}

/// Errors on one line, so that every CSV record is one line of the file.
fn one_line(text: &str) -> String {
    text.split(['\n', '\r'])
        .map(str::trim)
        .filter(|part| !part.is_empty())
        .collect::<Vec<_>>()
        .join(" | ")
}

/// A number rounded to 6 decimal places (µs to the picosecond, shares and overlaps to 10⁻⁶),
/// then as Rust prints it: the shortest text that reads back as the same f64, so that sums of
/// nanoseconds print as `74.15`, not `74.15000000000001`. Magnitudes of 10⁹ and more, where the
/// rounding itself would lose digits, are printed as they are.
pub fn number(value: f64) -> String {
    if !value.is_finite() || value.abs() >= 1e9 {
        return value.to_string();
    }
    let rounded = (value * 1e6).round() / 1e6;
    // No "-0".
    let rounded = if rounded == 0.0 { 0.0 } else { rounded };
    rounded.to_string()
}

/// Every metric of a report as (column, cell), in report order: per collective the R3 figures,
/// per named measure its median, per overlap its figure, per `is_completed()` its share.
fn metric_cells(report: &Report) -> Vec<(String, String)> {
    let mut cells = Vec::new();
    for c in &report.collectives {
        let figures = [
            Some(c.host_call_us.median),
            c.wait_us.map(|s| s.median),
            Some(c.stream_interval_us.median),
            Some(c.kernel_us.median),
            c.completed_at_wait,
        ];
        for (suffix, figure) in COLLECTIVE_SUFFIXES.iter().zip(figures) {
            cells.push((
                format!("{}.{suffix}", c.op),
                figure.map_or(String::new(), number),
            ));
        }
    }
    for m in &report.measures {
        cells.push((format!("{}.median_us", m.name), number(m.value_us.median)));
    }
    for o in &report.overlaps {
        cells.push((format!("{}.overlap", o.name), number(o.overlap)));
    }
    // An overlap undefined here keeps its column (empty) for the points where it is defined.
    for name in &report.undefined_overlaps {
        cells.push((format!("{name}.overlap"), String::new()));
    }
    for q in &report.queries {
        cells.push((format!("{}.is_completed_share", q.op), number(q.completed)));
    }
    cells
}

#[cfg(test)]
mod tests {
    use super::*;

    fn timeline_of(text: &str) -> Timeline {
        let scenario = sim::scenario::parse("t.toml", text).unwrap();
        sim::engine::simulate(&scenario)
    }

    const ASYNC: &str = "repeat = 3\nwarmup = 1\n[cluster]\nranks = 2\n[tensors]\nx = \"1MiB\"\n\
        [[op]]\nmark = \"a\"\n[[op]]\nlabel = \"ar\"\nall_reduce = \"x\"\nasync_op = true\nwork = \"w\"\n\
        [[op]]\nwait = \"w\"\n[[op]]\nmark = \"b\"\n\
        [[measure]]\nname = \"span\"\nfrom = \"a\"\nto = \"b\"\n";

    const PROVENANCE: Provenance = Provenance {
        scenario_hash: "h",
        sweep_points: 5,
        version: "v",
    };

    #[test]
    fn every_finding_kind_has_its_column() {
        for (index, kind) in FINDING_KINDS.iter().enumerate() {
            assert_eq!(finding_column(*kind), index, "{}", kind.as_str());
        }
    }

    #[test]
    fn an_overlap_undefined_at_the_base_keeps_its_column() {
        // The compute measure runs backwards (its `to` mark comes first), so it is below 0 and
        // R3's figure, which divides by the shorter measure, is undefined.
        let text = "repeat = 2\n[cluster]\nranks = 1\n[[op]]\nmark = \"a\"\n[[op]]\nmark = \"b\"\n\
            [[op]]\nmark = \"z\"\n\
            [[measure]]\nname = \"c\"\nfrom = \"b\"\nto = \"a\"\n\
            [[measure]]\nname = \"m\"\nfrom = \"a\"\nto = \"b\"\n\
            [[measure]]\nname = \"t\"\nfrom = \"a\"\nto = \"z\"\n\
            [[overlap]]\nname = \"o\"\ncompute = \"c\"\ncomm = \"m\"\nboth = \"t\"\n";
        let timeline = timeline_of(text);
        let base = report(&timeline);
        assert!(base.overlaps.is_empty());
        assert_eq!(base.undefined_overlaps, ["o"]);
        let columns = Columns::new(&[], &base);
        let header = columns.header();
        let column = header
            .iter()
            .position(|h| h == "o.overlap")
            .expect("o's column");
        let point = PointInfo {
            index: 0,
            values: &[],
            seed: 1,
        };
        assert_eq!(columns.row(&point, Ok(&timeline), &PROVENANCE)[column], "");
        assert!(crate::text::render_report(&base).contains("overlap o: undefined"));
    }

    #[test]
    fn columns_follow_the_wire_format() {
        let timeline = timeline_of(ASYNC);
        let base = report(&timeline);
        let columns = Columns::new(&["tensors.x"], &base);
        let header = columns.header();
        assert_eq!(
            header[..8],
            [
                "point",
                "tensors.x",
                "ar.host_call_us",
                "ar.wait_us",
                "ar.stream_interval_us",
                "ar.kernel_us",
                "ar.completed_at_wait_share",
                "span.median_us",
            ]
        );
        assert_eq!(header[8..11], MEMORY_COLUMNS);
        assert_eq!(header[11..13], ["findings", "findings.deadlock"]);
        assert_eq!(
            header[21..25],
            [
                "findings.out_of_memory",
                "findings.memory_cap",
                "findings.exit_failure",
                "findings.program_error"
            ]
        );
        assert_eq!(
            header[25..],
            [
                "error",
                "seed",
                "scenario_hash",
                "sweep_points",
                "c10dsim_version"
            ]
        );
        let values = ["1MiB".to_string()];
        let point = PointInfo {
            index: 4,
            values: &values,
            seed: 11,
        };
        let row = columns.row(&point, Ok(&timeline), &PROVENANCE);
        assert_eq!(row.len(), header.len());
        let ar = &base.collectives[0];
        assert_eq!(row[2], ar.host_call_us.median.to_string());
        assert_eq!(row[3], ar.wait_us.unwrap().median.to_string());
        let peak = timeline
            .ranks
            .iter()
            .map(|r| r.memory.peak_reserved_bytes)
            .max();
        assert_eq!(row[8], peak.unwrap().to_string());
        assert!(row[11..25].iter().all(|cell| cell == "0"));
        assert_eq!(row[25..], ["", "11", "h", "5", "v"]);
        // A point that could not be built: figures and counts empty, its error on one line.
        let row = columns.row(&point, Err("bad.toml:3:1: error\nsecond line"), &PROVENANCE);
        assert!(row[2..25].iter().all(String::is_empty));
        assert_eq!(row[25], "bad.toml:3:1: error | second line");
    }

    #[test]
    fn a_deadlocked_point_keeps_its_row_and_names_the_finding() {
        let columns = Columns::new(&[], &report(&timeline_of(ASYNC)));
        let stuck = timeline_of(
            "[cluster]\nranks = 2\n[tensors]\nx = \"1MiB\"\n[[op]]\nlabel = \"ar\"\nall_reduce = \"x\"\nranks = [0]\n",
        );
        let point = PointInfo {
            index: 0,
            values: &[],
            seed: 0,
        };
        let row = columns.row(&point, Ok(&stuck), &PROVENANCE);
        let header = columns.header();
        let cell = |name: &str| &row[header.iter().position(|h| h == name).unwrap()];
        assert_ne!(cell("findings"), "0");
        assert_eq!(cell("findings"), cell("findings.deadlock"));
        assert!(cell("error").starts_with("deadlock: "), "{}", cell("error"));
        // The base's measure is missing from this point's report: an empty cell.
        assert_eq!(cell("span.median_us"), "");
        // Findings after the first are counted, one in the singular.
        let mut two = stuck.clone();
        two.findings.truncate(1);
        two.findings.push(two.findings[0].clone());
        let row = columns.row(&point, Ok(&two), &PROVENANCE);
        let error = &row[header.iter().position(|h| h == "error").unwrap()];
        assert!(error.ends_with(" (and 1 more finding)"), "{error}");
        two.findings.push(two.findings[0].clone());
        let row = columns.row(&point, Ok(&two), &PROVENANCE);
        let error = &row[header.iter().position(|h| h == "error").unwrap()];
        assert!(error.ends_with(" (and 2 more findings)"), "{error}");
    }

    #[test]
    fn every_row_carries_the_sweeps_point_count() {
        let header: Vec<String> = ["point", SWEEP_POINTS_COLUMN]
            .iter()
            .map(ToString::to_string)
            .collect();
        let rows = |cells: &[[&str; 2]]| -> Vec<csv::StringRecord> {
            cells
                .iter()
                .map(|row| csv::StringRecord::from(row.to_vec()))
                .collect()
        };
        assert_eq!(
            sweep_points(&header, &rows(&[["0", "3"], ["1", "3"]])),
            Ok(Some(3))
        );
        assert_eq!(sweep_points(&header, &[]), Ok(None));
        // A `c10dsim-sweep/2` table has no such column.
        assert_eq!(sweep_points(&header[..1], &rows(&[["0", "3"]])), Ok(None));
        let error = |cells: &[[&str; 2]]| sweep_points(&header, &rows(cells)).unwrap_err().message;
        assert!(error(&[["0", "3"], ["1", "4"]]).contains("sweeps of 3 and of 4 points"));
        assert!(
            error(&[["3", "3"]]).contains("point 3 is not one of its sweep's 3 points (0 to 2)")
        );
        assert!(error(&[["0", ""]]).contains("not a count of points"));
    }

    #[test]
    fn a_point_cell_that_is_no_index_is_named_with_its_line() {
        // It used to show the row as Rust debug output: `StringRecord(["x", "2"])`.
        let (_, rows) = read_table(b"point,b\n0,1\nx,2\n").unwrap();
        assert_eq!(point_index(&rows[0]), Ok(0));
        let at_line_3 =
            "s.csv:3: error: the point cell \"x\" is not a point index (a whole number)";
        assert_eq!(
            point_index(&rows[1]).unwrap_err().in_file("s.csv"),
            at_line_3
        );
        assert_eq!(
            rows_in_point_order(rows).unwrap_err().in_file("s.csv"),
            at_line_3
        );
    }

    #[test]
    fn a_csv_error_is_placed_at_its_file_and_line_in_the_readers_words() {
        // It showed the csv crate's own `CSV error: record 2 (line: 3, byte: 16): …`.
        let error = read_table(b"point,b\n0,1\n1\n").unwrap_err();
        assert_eq!(
            error.in_file("s.csv"),
            "s.csv:3: error: a row of 1 cells, but the header has 2 columns"
        );
        let error = read_table(b"x,b\n").unwrap_err().in_file("s.csv");
        assert!(
            error.starts_with("s.csv:1: error: not a c10dsim sweep CSV"),
            "{error}"
        );
        // `bench --repeat`'s CSV, given to `plot`: the message says which CSVs it reads.
        let error = read_table(b"run,binary,round,ranks\n0,this,0,8\n").unwrap_err();
        assert_eq!(
            error.message,
            "not a c10dsim sweep CSV (its first column is not \"point\"): plot, merge and \
             --resume read the CSVs of `c10dsim sweep` and plot those of `bench --scaling` too, \
             not that of `bench --repeat`"
        );
        // A file with Windows line ends: the same lines (the csv reader said 2 and 1).
        let (_, rows) = read_table(b"point,b\r\n0,1\r\nx,2\r\n").unwrap();
        assert_eq!(
            point_index(&rows[1]).unwrap_err().in_file("s.csv"),
            "s.csv:3: error: the point cell \"x\" is not a point index (a whole number)"
        );
        let error = read_table(b"point,b\r\n0,1\r\n1\r\n").unwrap_err();
        assert_eq!(
            error.in_file("s.csv"),
            "s.csv:3: error: a row of 1 cells, but the header has 2 columns"
        );
        // A sweep_points error names the row's line (merge adds the file).
        let text = format!("point,{SWEEP_POINTS_COLUMN}\n0,3\n7,3\n");
        let (header, rows) = read_table(text.as_bytes()).unwrap();
        assert_eq!(
            sweep_points(&header, &rows).unwrap_err().in_file("s.csv"),
            "s.csv:3: error: point 7 is not one of its sweep's 3 points (0 to 2)"
        );
    }

    #[test]
    fn numbers_have_no_float_noise() {
        assert_eq!(number(1.0000000000000002), "1");
        assert_eq!(number(0.1 + 0.2), "0.3");
        assert_eq!(number(70.0 + 4.15), "74.15");
        assert_eq!(number(-0.0000001), "0");
        assert_eq!(number(1588.2015), "1588.2015");
        assert_eq!(number(-0.1127), "-0.1127");
        assert_eq!(number(3.5e12), "3500000000000");
    }

    #[test]
    fn a_size_axis_gains_a_bytes_column() {
        let timeline = timeline_of(ASYNC);
        let base = report(&timeline);
        let columns = Columns::new(&["tensors.x", "cluster.ranks"], &base).with_size_axes(&[true]);
        let header = columns.header();
        assert_eq!(
            header[..4],
            ["point", "tensors.x", "tensors.x_bytes", "cluster.ranks"]
        );
        let values = ["25MiB".to_string(), "2".to_string()];
        let provenance = Provenance {
            scenario_hash: "h",
            sweep_points: 4,
            version: "v",
        };
        let point = PointInfo {
            index: 3,
            values: &values,
            seed: 1,
        };
        let row = columns.row(&point, Ok(&timeline), &provenance);
        assert_eq!(row[..4], ["3", "25MiB", "26214400", "2"]);
        assert_eq!(row.len(), header.len());
    }
}
