//! Parameter sweeps: a scenario's `[sweep]` table, plus `--set key=v1,v2,…` axes from the
//! command line, expanded into numbered points — each a list of overrides applied to the
//! scenario's text, the values shown for them, and the point's own seed.
//!
//! ```toml
//! [sweep]
//! "tensors.buf" = ["1MiB", "64MiB"]            # an axis: a dotted path and its values
//! "env.TORCH_NCCL_BLOCKING_WAIT" = [0, 1]
//!
//! [sweep.zip.mode]                              # a zipped axis: its paths advance together
//! values = ["sync", "async"]                    # what the `mode` column shows
//! "op.ar" = [{ all_reduce = "buf" }, { all_reduce = "buf", async_op = true, work = "w" }]
//! "op.finish" = [{ set_stream = "default" }, { wait = "w" }]
//! ```
//!
//! Points are the cartesian product of the axes in file order, the first axis varying slowest
//! (nested loops). `op.LABEL.KEY` sets one key of the `[[op]]` labelled LABEL; `op.LABEL` with
//! an inline table replaces that op's keys (its label stays). Every other path is handed to
//! [`apply_overrides`]. The user-facing description is `docs/sweep-format.md`.
//!
//! Pure: no files, clocks or threads. A point's scenario depends only on the file, the axes and
//! the point's index — never on which thread runs it or in what order.
//!
//! Over 1,000 lines (about 1,090; the unit tests are in `sweep/tests.rs`): reading the axes, the
//! checks of a bad sweep, expanding points and editing `[[op]]`s by label share one `Sweep` and
//! the private `Dimension`/`AxisValue` types; the op edits
//! (`apply_overrides_with_ops`, `set_op`) are the piece to move out if it grows.
//!
//! ```
//! let text = "[cluster]\nranks = 2\n[tensors]\nx = \"1MiB\"\n[[op]]\nall_reduce = \"x\"\n\
//!             [sweep]\n\"tensors.x\" = [\"1KiB\", \"1MiB\"]\n\"cluster.ranks\" = [2, 4]\n";
//! let sweep = sim::sweep::Sweep::parse("doc.toml", text, &[]).unwrap();
//! assert_eq!(sweep.point_count(), 4);
//! assert_eq!(sweep.columns(), ["tensors.x", "cluster.ranks"]);
//! assert_eq!(sweep.size_columns(), [true, false]);
//! let point = sweep.point(1);
//! assert_eq!(point.values, ["1KiB", "4"]);
//! let scenario = sweep.scenario(&point).unwrap();
//! assert_eq!(scenario.cluster.ranks, 4);
//! ```

use crate::scenario::{
    self, apply_overrides, LineOrigin, Override, OverrideError, Scenario, ScenarioError,
};
use crate::units::parse_size_bytes;
use std::fmt;
use std::ops::Range;

/// The most points one sweep may have.
pub const MAX_POINTS: u64 = 1 << 40;

/// The reserved key of `[sweep]` holding zipped axes (`[sweep.zip.NAME]`).
const ZIP_KEY: &str = "zip";
/// The reserved key of a zipped axis holding what its column shows.
const ZIP_VALUES_KEY: &str = "values";

/// One value of an axis: the TOML text that is set, and what its CSV cell shows.
#[derive(Debug, Clone, PartialEq, Eq)]
struct AxisValue {
    toml: String,
    shown: String,
}

/// One dotted path and its values.
#[derive(Debug, Clone, PartialEq, Eq)]
struct AxisPath {
    path: String,
    values: Vec<AxisValue>,
    /// Where the axis's key is written in `[sweep]`, for errors.
    key_span: Option<Range<usize>>,
}

/// One factor of the cartesian product: a single path, or a zipped group whose paths advance
/// together.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Dimension {
    /// `Some((name, labels))` for a zipped group with `values`: one column, its name and the
    /// label of each step, stands for all its paths. Otherwise every path is a column.
    zip: Option<(String, Vec<String>)>,
    /// Where a zipped group's name is written in `[sweep]`, for errors.
    name_span: Option<Range<usize>>,
    paths: Vec<AxisPath>,
}

impl Dimension {
    fn len(&self) -> usize {
        self.paths[0].values.len()
    }

    fn columns(&self) -> Vec<&str> {
        match &self.zip {
            Some((name, _)) => vec![name.as_str()],
            None => self.paths.iter().map(|p| p.path.as_str()).collect(),
        }
    }
}

/// An axis given on the command line: `--set key=v1,v2,…`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AxisArg {
    pub path: String,
    pub values: Vec<String>,
}

impl AxisArg {
    /// Parses `key=v1,v2,…`; commas inside brackets, braces or quotes do not split
    /// (`op.g.gemm=[1,2,3],[4,5,6]` has two values).
    pub fn parse(text: &str) -> Result<AxisArg, OverrideError> {
        let single = Override::parse(text)?;
        let values = split_top_level(&single.value);
        if values.iter().any(String::is_empty) {
            return Err(OverrideError {
                message: format!("--set {text}: empty value in the list"),
            });
        }
        Ok(AxisArg {
            path: single.path,
            values,
        })
    }
}

impl fmt::Display for AxisArg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}={}", self.path, self.values.join(","))
    }
}

fn split_top_level(text: &str) -> Vec<String> {
    let mut parts = Vec::new();
    let mut current = String::new();
    let mut depth = 0i32;
    let mut quote: Option<char> = None;
    let mut escaped = false;
    for c in text.chars() {
        match (quote, c) {
            // A TOML basic string's `\"` (or `\\`) does not end it; a literal one has no escapes.
            (Some('"'), _) if escaped => escaped = false,
            (Some('"'), '\\') => escaped = true,
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '"' | '\'') => quote = Some(c),
            (None, '[' | '{') => depth += 1,
            (None, ']' | '}') => depth -= 1,
            (None, ',') if depth == 0 => {
                parts.push(current.trim().to_string());
                current.clear();
                continue;
            }
            _ => {}
        }
        current.push(c);
    }
    parts.push(current.trim().to_string());
    parts
}

/// One point of a sweep.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Point {
    /// 0-based position in the full (unsharded) sweep.
    pub index: u64,
    /// One cell per [`Sweep::columns`] entry.
    pub values: Vec<String>,
    /// What is set on the scenario's text (after the fixed `--set` overrides).
    pub overrides: Vec<Override>,
}

/// A slice of a sweep for one machine: the points whose index ≡ `index` (mod `count`), so
/// expensive corners of the grid spread over all slices.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    pub index: u64,
    pub count: u64,
}

impl Shard {
    /// The whole sweep.
    pub const ALL: Shard = Shard { index: 0, count: 1 };

    /// Parses `I/N` with 0 ≤ I < N.
    pub fn parse(text: &str) -> Result<Shard, String> {
        let invalid = || format!("--shard expects I/N with 0 <= I < N (e.g. 0/4), found {text:?}");
        let (index, count) = text.split_once('/').ok_or_else(invalid)?;
        let index: u64 = index.trim().parse().map_err(|_| invalid())?;
        let count: u64 = count.trim().parse().map_err(|_| invalid())?;
        if count == 0 || index >= count {
            return Err(invalid());
        }
        Ok(Shard { index, count })
    }

    /// The indices of this slice's points among `total`.
    pub fn indices(self, total: u64) -> impl Iterator<Item = u64> {
        (self.index..total).step_by(self.count as usize)
    }

    /// How many of `total` points are in this slice.
    pub fn len(self, total: u64) -> u64 {
        total.saturating_sub(self.index).div_ceil(self.count)
    }
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

/// The seed of point `index`: the (index + 1)-th output of a SplitMix64 generator started at
/// the scenario's seed, its top bit cleared. Portable and O(1) to jump to, so a point's seed
/// never depends on which points ran before it; at most 2⁶³ − 1, the largest seed a scenario
/// holds (a TOML integer), so that `run --seed` replays every point.
pub fn point_seed(scenario_seed: u64, index: u64) -> u64 {
    let mut z = scenario_seed.wrapping_add(0x9e37_79b9_7f4a_7c15u64.wrapping_mul(index + 1));
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    (z ^ (z >> 31)) & i64::MAX.unsigned_abs()
}

/// A scenario file with its sweep axes, ready to produce points.
#[derive(Debug, Clone)]
pub struct Sweep {
    path: String,
    text: String,
    /// `--set key=value` with one value on a key that is not an axis: applied to every point.
    fixed: Vec<Override>,
    dimensions: Vec<Dimension>,
    point_count: u64,
}

impl Sweep {
    /// Reads the `[sweep]` table of a scenario's text and adds the command-line axes: a key
    /// that is already an axis gets the new values; a new key with several values becomes a new
    /// axis (varying fastest); a new key with one value is set on every point. Errors name
    /// file:line:column of the offending sweep key.
    pub fn parse(path: &str, text: &str, cli: &[AxisArg]) -> Result<Sweep, ScenarioError> {
        let document = toml_edit::Document::parse(text).map_err(|error| {
            let span = error.span().unwrap_or(0..0);
            let message = error.message().trim_end().to_string();
            let message = scenario::name_duplicate_key(message, text, span.clone());
            scenario::error_at(path, text, span, message)
        })?;
        let mut dimensions = match document.get("sweep") {
            None => Vec::new(),
            Some(item) => FileAxes { path, text }.read(item)?,
        };
        let mut fixed = Vec::new();
        // The labelled zipped axes given new labels, and the `--set`s that replaced a path of
        // one: each of those needs new labels too.
        let mut relabelled: Vec<&str> = Vec::new();
        let mut replaced_under_labels: Vec<(String, &AxisArg)> = Vec::new();
        for arg in cli {
            // A zipped axis named like a scenario path: the `--set` would be taken as new
            // labels where the user may have meant the key.
            if let Some(dimension) = (dimensions.iter())
                .find(|d| d.zip.as_ref().is_some_and(|(name, _)| *name == arg.path))
            {
                refuse_a_scenario_path_name(path, text, dimension)?;
            }
            if let Some((name, labels)) = dimensions
                .iter_mut()
                .filter_map(|d| d.zip.as_mut())
                .find(|(name, _)| *name == arg.path)
            {
                if arg.values.len() != labels.len() {
                    return Err(whole_file(
                        path,
                        format!(
                            "--set {arg}: {name:?} is a zipped axis of {} values, so it needs {} labels, found {}",
                            labels.len(),
                            labels.len(),
                            arg.values.len()
                        ),
                    ));
                }
                *labels = (arg.values.iter())
                    .map(|v| cli_value(name, v).shown)
                    .collect();
                relabelled.push(&arg.path);
                continue;
            }
            let existing = dimensions
                .iter_mut()
                .flat_map(|d| {
                    let steps = d.len();
                    let zipped = d.zip.is_some() || d.paths.len() > 1;
                    let labelled = d.zip.as_ref().map(|(name, _)| name.clone());
                    d.paths
                        .iter_mut()
                        .map(move |p| (p, steps, zipped, labelled.clone()))
                })
                .find(|(p, _, _, _)| p.path == arg.path);
            let values: Vec<AxisValue> =
                arg.values.iter().map(|v| cli_value(&arg.path, v)).collect();
            match existing {
                Some((axis, steps, zipped, labelled)) => {
                    if let Some(name) = labelled {
                        replaced_under_labels.push((name, arg));
                    }
                    if zipped && values.len() != steps {
                        return Err(whole_file(
                            path,
                            format!(
                                "--set {arg}: {:?} is in a zipped axis of {steps} values, so it needs {steps} values, found {}",
                                arg.path,
                                values.len()
                            ),
                        ));
                    }
                    axis.values = values;
                }
                None if values.len() == 1 => fixed.push(Override {
                    path: arg.path.clone(),
                    value: values[0].toml.clone(),
                }),
                None => dimensions.push(Dimension {
                    zip: None,
                    name_span: None,
                    paths: vec![AxisPath {
                        path: arg.path.clone(),
                        values,
                        key_span: None,
                    }],
                }),
            }
        }
        // The column of a labelled zipped axis shows its labels, not its paths' values: new
        // values under the old labels would name points by what they did not run.
        if let Some((name, arg)) =
            (replaced_under_labels.iter()).find(|(name, _)| !relabelled.contains(&name.as_str()))
        {
            return Err(whole_file(
                path,
                format!(
                    "--set {arg}: {:?} is in the zipped axis {name:?}, whose column shows its \
                     `values` labels; they would not describe the new values: give new labels \
                     too, --set {name}=LABEL1,LABEL2,…",
                    arg.path
                ),
            ));
        }
        let mut point_count: u64 = 1;
        for dimension in &dimensions {
            point_count = point_count
                .checked_mul(dimension.len() as u64)
                .filter(|&n| n <= MAX_POINTS)
                .ok_or_else(|| {
                    whole_file(
                        path,
                        format!("the sweep has more than {MAX_POINTS} points; shrink its axes"),
                    )
                })?;
        }
        let sweep = Sweep {
            path: path.to_string(),
            text: text.to_string(),
            fixed,
            dimensions,
            point_count,
        };
        sweep.check_each_key_varies_in_one_axis()?;
        sweep.check_columns_unique()?;
        sweep.check_paths_apply()?;
        sweep.check_each_axis_has_a_valid_value()?;
        Ok(sweep)
    }

    /// An axis none of whose values gives a valid scenario (a misspelt key such as
    /// `env.TORCH_NCCL_BLOCKING_WIAT`) is bad input, refused before anything runs; a value that
    /// fails where others pass fails only its points. Each value is tried on the file alone,
    /// then with the other axes at their first value (values that are valid only together);
    /// a sound sweep costs one parse per axis.
    fn check_each_axis_has_a_valid_value(&self) -> Result<(), ScenarioError> {
        for (varied, dimension) in self.dimensions.iter().enumerate() {
            let at = |step: usize, others: bool| -> Vec<Override> {
                self.dimensions
                    .iter()
                    .enumerate()
                    .filter(|&(index, _)| others || index == varied)
                    .flat_map(|(index, d)| {
                        let at = if index == varied { step } else { 0 };
                        d.paths.iter().map(move |axis| Override {
                            path: axis.path.clone(),
                            value: axis.values[at].toml.clone(),
                        })
                    })
                    .collect()
            };
            let mut first_error = None;
            'values: for step in 0..dimension.len() {
                for others in [false, true] {
                    let point = Point {
                        index: 0,
                        values: Vec::new(),
                        overrides: at(step, others),
                    };
                    match self.scenario(&point) {
                        Ok(_) => {
                            first_error = None;
                            break 'values;
                        }
                        Err(error) => {
                            first_error.get_or_insert((error, point.overrides));
                        }
                    }
                }
            }
            if let Some((error, overrides)) = first_error {
                // The same error without any axis: the file or a one-value `--set` is at
                // fault, not this axis.
                if let Err(base) = self.base_scenario() {
                    if base.message == error.message {
                        return Err(self.in_file(base, &[]));
                    }
                }
                let paths: Vec<&str> = dimension.paths.iter().map(|p| p.path.as_str()).collect();
                let mut error = self.in_file(error, &overrides);
                error.message = format!(
                    "sweep axis {}: none of its values gives a valid scenario (a misspelt key?); the first: {}",
                    paths.join(", "),
                    error.message
                );
                // An axis of the file: the error is at its key there.
                if let Some(span) = dimension.paths.iter().find_map(|p| p.key_span.clone()) {
                    return Err(scenario::error_at(
                        &self.path,
                        &self.text,
                        span,
                        error.message,
                    ));
                }
                return Err(error);
            }
        }
        Ok(())
    }

    /// An error in the text edited by the fixed `--set`s and `overrides`, placed in the file's
    /// text: at the file's line where the edit kept it, else as an error of the `--set` that
    /// wrote the line (or of the edits, where none did).
    fn in_file(&self, mut error: ScenarioError, overrides: &[Override]) -> ScenarioError {
        let all: Vec<Override> = self.fixed.iter().chain(overrides).cloned().collect();
        error.path.clone_from(&self.path);
        let edited = match apply_overrides_with_ops(&self.text, &all) {
            Ok(edited) if error.line > 0 => edited,
            _ => return error,
        };
        match scenario::line_origin(&self.text, &edited, &all, error.line) {
            LineOrigin::Original(line) => {
                error.line = line;
                error
            }
            LineOrigin::Override(index) => whole_file(
                &self.path,
                format!("--set {}: {}", all[index], error.message),
            ),
            LineOrigin::Edited => {
                let sets: Vec<String> = all.iter().map(ToString::to_string).collect();
                whole_file(
                    &self.path,
                    format!(
                        "{} (on a line written by --set {})",
                        error.message,
                        sets.join(" --set ")
                    ),
                )
            }
        }
    }

    /// Two axes that set the same key, or a key and a part of it (`tensors.buf` and
    /// `tensors.buf.size`), would leave a point's column showing a value the point did not
    /// run with: refused at the second axis's key.
    fn check_each_key_varies_in_one_axis(&self) -> Result<(), ScenarioError> {
        let overlap = |a: &str, b: &str| {
            let (short, long) = if a.len() <= b.len() { (a, b) } else { (b, a) };
            long.strip_prefix(short)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with('.'))
        };
        let axes: Vec<&AxisPath> = self.dimensions.iter().flat_map(|d| &d.paths).collect();
        let at_key = |axis: &AxisPath, message: String| match &axis.key_span {
            Some(span) => scenario::error_at(&self.path, &self.text, span.clone(), message),
            None => whole_file(&self.path, message),
        };
        let on_the_sweep = |path: &str| {
            format!(
                "sweep key {path:?} would edit the [sweep] table itself, which no point reads; \
                 name a scenario key"
            )
        };
        if let Some(axis) = axes.iter().find(|axis| overlap(&axis.path, "sweep")) {
            return Err(at_key(axis, on_the_sweep(&axis.path)));
        }
        if let Some(fixed) = self
            .fixed
            .iter()
            .find(|fixed| overlap(&fixed.path, "sweep"))
        {
            return Err(whole_file(&self.path, on_the_sweep(&fixed.path)));
        }
        for (position, axis) in axes.iter().enumerate() {
            let earlier = axes[..position].iter().map(|a| a.path.as_str());
            let fixed = self.fixed.iter().map(|f| f.path.as_str());
            let Some(other) = earlier
                .chain(fixed)
                .find(|other| overlap(other, &axis.path))
            else {
                continue;
            };
            let what = if other == axis.path {
                format!("sweep key {other:?} is varied by two axes")
            } else {
                format!(
                    "sweep key {:?} overlaps {other:?}, set elsewhere",
                    axis.path
                )
            };
            let message = format!(
                "{what}: a point's row would show a value it did not run with; vary each key \
                 in one axis (zip keys to vary them together)"
            );
            return Err(at_key(axis, message));
        }
        Ok(())
    }

    /// Two axes of one column (a zipped axis named like a path axis) are refused at the second
    /// one's name in `[sweep]`, or as the `--set` that added it.
    fn check_columns_unique(&self) -> Result<(), ScenarioError> {
        let columns = self.dimensions.iter().flat_map(|dimension| {
            // A labelled zipped axis's one column is its name; otherwise each path's key.
            let spans: Vec<Option<Range<usize>>> = match dimension.zip {
                Some(_) => vec![dimension.name_span.clone()],
                None => (dimension.paths.iter())
                    .map(|axis| axis.key_span.clone())
                    .collect(),
            };
            dimension.columns().into_iter().zip(spans)
        });
        let mut seen: Vec<&str> = Vec::new();
        for (column, span) in columns {
            if !seen.contains(&column) {
                seen.push(column);
                continue;
            }
            let message = format!("sweep column {column:?} appears twice; name each axis once");
            return Err(match span {
                Some(span) => scenario::error_at(&self.path, &self.text, span, message),
                None => whole_file(&self.path, format!("--set {column}=…: {message}")),
            });
        }
        Ok(())
    }

    /// Every axis path must be settable on the file (a table path, or an op label that
    /// exists); a value that is invalid for the scenario fails only the points that use it.
    fn check_paths_apply(&self) -> Result<(), ScenarioError> {
        // An override's error names its `--set` argument.
        apply_overrides_with_ops(&self.text, &self.fixed)
            .map_err(|error| whole_file(&self.path, error.to_string()))?;
        for axis in self.dimensions.iter().flat_map(|d| &d.paths) {
            let first = Override {
                path: axis.path.clone(),
                value: axis.values[0].toml.clone(),
            };
            let edits: Vec<Override> = self.fixed.iter().cloned().chain([first]).collect();
            apply_overrides_with_ops(&self.text, &edits).map_err(|error| match &axis.key_span {
                Some(span) => scenario::error_at(
                    &self.path,
                    &self.text,
                    span.clone(),
                    format!("sweep axis {:?}: {error}", axis.path),
                ),
                // An axis given on the command line: the `--set` argument is at fault.
                None => whole_file(&self.path, error.to_string()),
            })?;
        }
        Ok(())
    }

    /// Points in the full sweep.
    pub fn point_count(&self) -> u64 {
        self.point_count
    }

    /// The axis columns, in order: for each axis its path; a zipped axis with `values` shows
    /// one column named after it, one without shows each of its paths.
    pub fn columns(&self) -> Vec<&str> {
        self.dimensions
            .iter()
            .flat_map(Dimension::columns)
            .collect()
    }

    /// Refuses, at its name in `[sweep]`, a zipped axis with `values` named like one of
    /// `written`, the columns c10dsim writes besides the axes (`point`, the metrics, `seed`,
    /// `error`, a size axis's `_bytes` twin, …; two axes of one column are refused by
    /// [`Sweep::parse`]), then one named like a scenario path (`tensors.x`, `env.FOO`). Its name
    /// is the user's own choice, so the user renames it; a path axis named like a written column
    /// (`seed`) is the scenario's key and is shown as `scenario.<key>` instead.
    pub fn check_zip_names(&self, written: &[String]) -> Result<(), ScenarioError> {
        for dimension in &self.dimensions {
            let Some((name, _)) = &dimension.zip else {
                continue;
            };
            if written.contains(name) {
                return Err(scenario::error_at(
                    &self.path,
                    &self.text,
                    dimension.name_span.clone().unwrap_or(0..0),
                    format!(
                        "zipped axis {name:?} is named like another column of the CSV, which \
                         would have two columns of one name: rename the zipped axis"
                    ),
                ));
            }
            refuse_a_scenario_path_name(&self.path, &self.text, dimension)?;
        }
        Ok(())
    }

    /// An error of the path axis whose CSV column is `column`: at its key in `[sweep]`, or as
    /// the `--set` that added it.
    pub fn axis_column_error(&self, column: &str, message: String) -> ScenarioError {
        let axis = (self.dimensions.iter())
            .filter(|dimension| dimension.zip.is_none())
            .flat_map(|dimension| &dimension.paths)
            .find(|axis| axis.path == column);
        match axis.and_then(|axis| axis.key_span.clone()) {
            Some(span) => scenario::error_at(&self.path, &self.text, span, message),
            None => whole_file(&self.path, format!("--set {column}=…: {message}")),
        }
    }

    /// Per column of [`Sweep::columns`]: whether it holds sizes — a tensor's size
    /// (`tensors.NAME` or `tensors.NAME.size`) every value of which reads as one (`25MiB`,
    /// `4096`). The CSV adds the size in bytes beside such a column.
    pub fn size_columns(&self) -> Vec<bool> {
        self.dimensions
            .iter()
            .flat_map(|dimension| -> Vec<bool> {
                if dimension.zip.is_some() {
                    return vec![false];
                }
                dimension
                    .paths
                    .iter()
                    .map(|axis| {
                        let parts = scenario::path_keys(&axis.path).unwrap_or_default();
                        let names_size = parts.first().is_some_and(|key| key == "tensors")
                            && (parts.len() == 2 || (parts.len() == 3 && parts[2] == "size"));
                        names_size
                            && axis
                                .values
                                .iter()
                                .all(|value| parse_size_bytes(&value.shown).is_ok())
                    })
                    .collect()
            })
            .collect()
    }

    /// Point `index` (< [`Sweep::point_count`]): mixed-radix digits of the index, the last axis
    /// varying fastest.
    pub fn point(&self, index: u64) -> Point {
        assert!(index < self.point_count, "point {index} out of range");
        let mut steps = vec![0usize; self.dimensions.len()];
        let mut rest = index;
        for (step, dimension) in steps.iter_mut().zip(&self.dimensions).rev() {
            let len = dimension.len() as u64;
            *step = (rest % len) as usize;
            rest /= len;
        }
        let mut values = Vec::new();
        let mut overrides = Vec::new();
        for (dimension, &step) in self.dimensions.iter().zip(&steps) {
            if let Some((_, labels)) = &dimension.zip {
                values.push(labels[step].clone());
            }
            for axis in &dimension.paths {
                if dimension.zip.is_none() {
                    values.push(axis.values[step].shown.clone());
                }
                overrides.push(Override {
                    path: axis.path.clone(),
                    value: axis.values[step].toml.clone(),
                });
            }
        }
        Point {
            index,
            values,
            overrides,
        }
    }

    /// The file's own values (with the fixed `--set` overrides) and its own seed: what
    /// `c10dsim run` runs, and what decides the metric columns of the sweep's CSV.
    pub fn base_scenario(&self) -> Result<Scenario, ScenarioError> {
        let text = apply_overrides_with_ops(&self.text, &self.fixed)
            .map_err(|error| whole_file(&self.path, error.to_string()))?;
        scenario::parse(&self.path, &text)
    }

    /// The scenario of one point, its seed set to [`point_seed`]. Errors name the point's
    /// overrides beside the file, as positions refer to the edited text; its ops keep the
    /// file's line numbers, as `run --set` keeps them, whatever the edits inserted above them.
    pub fn scenario(&self, point: &Point) -> Result<Scenario, ScenarioError> {
        let shown = format!(
            "{} [point {}: {}]",
            self.path,
            point.index,
            point
                .overrides
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(" ")
        );
        let all: Vec<Override> = self.fixed.iter().chain(&point.overrides).cloned().collect();
        let text = apply_overrides_with_ops(&self.text, &all)
            .map_err(|error| whole_file(&shown, error.message))?;
        let mut scenario = scenario::parse(&shown, &text)?;
        scenario::renumber_op_lines(&mut scenario, &self.text, &text);
        scenario.seed = point_seed(scenario.seed, point.index);
        Ok(scenario)
    }
}

/// A labelled zipped axis whose name starts with a scenario's top-level key (`tensors.x`,
/// `seed`, `env.FOO`, `op.LABEL.KEY`, or `machine`, the profile `run --set` takes) is refused at
/// its name: `--set NAME=…` would be taken as new labels for the axis, not as that key, and the
/// CSV would show values the user did not ask for.
fn refuse_a_scenario_path_name(
    path: &str,
    text: &str,
    dimension: &Dimension,
) -> Result<(), ScenarioError> {
    let Some((name, _)) = &dimension.zip else {
        return Ok(());
    };
    let first = name.split('.').next().unwrap_or_default();
    if !scenario::TOP_LEVEL_KEYS.contains(&first) && first != scenario::MACHINE_KEY {
        return Ok(());
    }
    Err(scenario::error_at(
        path,
        text,
        dimension.name_span.clone().unwrap_or(0..0),
        format!(
            "zipped axis {name:?} is named like a scenario path ({first:?} is a scenario key), \
             so `--set {name}=…` could mean the key or the axis's labels: give the zipped axis \
             a plain name such as \"mode\""
        ),
    ))
}

fn whole_file(path: &str, message: impl Into<String>) -> ScenarioError {
    ScenarioError {
        path: path.to_string(),
        line: 0,
        column: 0,
        width: 0,
        message: message.into(),
    }
}

/// A value typed on the command line: TOML when it parses as TOML (and the key takes that
/// type), else a plain string.
fn cli_value(path: &str, text: &str) -> AxisValue {
    let always_string = crate::scenario::overrides::STRING_KEYS.contains(&path);
    match text.parse::<toml_edit::Value>() {
        Ok(value) if !always_string || value.is_str() => AxisValue {
            shown: shown(&value),
            toml: text.to_string(),
        },
        _ => AxisValue {
            shown: text.to_string(),
            toml: toml_edit::Value::from(text).to_string(),
        },
    }
}

/// A CSV cell for a value: strings without quotes, everything else as compact TOML.
fn shown(value: &toml_edit::Value) -> String {
    match value.as_str() {
        Some(text) => text.to_string(),
        None => {
            let mut value = value.clone();
            value.decor_mut().clear();
            value.to_string()
        }
    }
}

fn toml_text(value: &toml_edit::Value) -> String {
    let mut value = value.clone();
    value.decor_mut().clear();
    value.to_string()
}

/// Applies overrides: `op.LABEL[.KEY]` ones to the labelled `[[op]]`, the rest through
/// [`apply_overrides`]. What sweep points and `c10dsim run --set` use.
pub fn apply_overrides_with_ops(
    text: &str,
    overrides: &[Override],
) -> Result<String, OverrideError> {
    let (op_edits, table_edits): (Vec<&Override>, Vec<&Override>) = overrides
        .iter()
        .partition(|o| o.keys().is_ok_and(|keys| keys[0] == "op"));
    let table_edits: Vec<Override> = table_edits.into_iter().cloned().collect();
    let text = apply_overrides(text, &table_edits)?;
    if op_edits.is_empty() {
        return Ok(text);
    }
    let mut document: toml_edit::DocumentMut =
        text.parse()
            .map_err(|e: toml_edit::TomlError| OverrideError {
                message: format!("cannot edit a file that is not valid TOML: {}", e.message()),
            })?;
    for edit in op_edits {
        set_op(&mut document, edit)?;
    }
    Ok(document.to_string())
}

fn set_op(document: &mut toml_edit::DocumentMut, edit: &Override) -> Result<(), OverrideError> {
    let fail = |message: String| OverrideError {
        message: format!("--set {edit}: {message}"),
    };
    let keys = edit.keys()?;
    let (label, key) = match keys.as_slice() {
        [_, label] => (label.as_str(), None),
        [_, label, key] => (label.as_str(), Some(key.as_str())),
        _ => {
            return Err(fail(
                "name an op by its label: op.LABEL or op.LABEL.KEY".to_string(),
            ))
        }
    };
    let ops = document
        .get_mut("op")
        .and_then(toml_edit::Item::as_array_of_tables_mut)
        .ok_or_else(|| fail("the scenario has no [[op]] tables".to_string()))?;
    let Some(op) = ops
        .iter_mut()
        .find(|op| op.get("label").and_then(toml_edit::Item::as_str) == Some(label))
    else {
        let labels = ops
            .iter()
            .filter_map(|op| op.get("label").and_then(toml_edit::Item::as_str));
        return Err(fail(format!(
            "no [[op]] has label = {label:?}{}",
            scenario::did_you_mean(label, labels)
        )));
    };
    let value = match edit.value.parse::<toml_edit::Value>() {
        Ok(value) => value,
        Err(_) => toml_edit::Value::from(edit.value.as_str()),
    };
    match key {
        Some(key) => {
            op.insert(key, toml_edit::Item::Value(value));
        }
        None => {
            let toml_edit::Value::InlineTable(replacement) = value else {
                return Err(fail(
                    "op.LABEL takes an inline table of the op's keys, e.g. { wait = \"w\" }"
                        .to_string(),
                ));
            };
            let keep: Vec<String> = op
                .iter()
                .map(|(k, _)| k.to_string())
                .filter(|k| k != "label")
                .collect();
            for k in keep {
                op.remove(&k);
            }
            for (k, v) in replacement.iter() {
                let mut v = v.clone();
                v.decor_mut().clear();
                op.insert(k, toml_edit::Item::Value(v));
            }
        }
    }
    Ok(())
}

/// The entries of a table with nested tables flattened into dotted paths, so that
/// `tensors.buf = [..]` (a dotted key) reads as `"tensors.buf" = [..]`, and
/// `tensors."a.b" = [..]` as `'tensors."a.b"' = [..]`; `zip` stays a table. A key of the table
/// itself that holds a value is a path as written; every key below it is one key of the path.
fn flatten(
    table: &dyn toml_edit::TableLike,
) -> Vec<(String, Option<Range<usize>>, &toml_edit::Item)> {
    flatten_below(table, false)
}

fn flatten_below(
    table: &dyn toml_edit::TableLike,
    nested: bool,
) -> Vec<(String, Option<Range<usize>>, &toml_edit::Item)> {
    let mut entries = Vec::new();
    for (key, item) in table.iter() {
        let span = table.key(key).and_then(toml_edit::Key::span);
        let one_key = scenario::dotted_path(&[key.to_string()]);
        match item.as_table_like() {
            Some(inner) if key != ZIP_KEY => {
                entries.extend(
                    flatten_below(inner, true)
                        .into_iter()
                        .map(|(rest, span, item)| (format!("{one_key}.{rest}"), span, item)),
                );
            }
            _ if nested => entries.push((one_key, span, item)),
            _ => entries.push((key.to_string(), span, item)),
        }
    }
    entries
}

/// Reads `[sweep]` from the spanned document.
struct FileAxes<'a> {
    path: &'a str,
    text: &'a str,
}

impl FileAxes<'_> {
    fn error(&self, span: Option<Range<usize>>, message: impl Into<String>) -> ScenarioError {
        scenario::error_at(self.path, self.text, span.unwrap_or(0..0), message)
    }

    fn read(&self, sweep: &toml_edit::Item) -> Result<Vec<Dimension>, ScenarioError> {
        let table = sweep.as_table_like().ok_or_else(|| {
            self.error(
                sweep.span(),
                "[sweep] must be a table of dotted keys and value lists, e.g. \"tensors.buf\" = [\"1MiB\", \"64MiB\"]",
            )
        })?;
        // File order: each entry (and each zipped group) sorted by where it is written.
        let mut dimensions: Vec<(usize, Dimension)> = Vec::new();
        for (key, key_span, item) in flatten(table) {
            if key == ZIP_KEY {
                let zips = item.as_table_like().ok_or_else(|| {
                    self.error(
                        key_span,
                        "sweep.zip holds named zipped axes: [sweep.zip.NAME] with equal-length lists",
                    )
                })?;
                for (name, group) in zips.iter() {
                    let name_span = zips.key(name).and_then(toml_edit::Key::span);
                    let dimension = self.zipped(name, name_span.clone(), group)?;
                    dimensions.push((name_span.map_or(0, |s| s.start), dimension));
                }
                continue;
            }
            let axis = self.axis(&key, key_span.clone(), item)?;
            dimensions.push((
                key_span.map_or(0, |s| s.start),
                Dimension {
                    zip: None,
                    name_span: None,
                    paths: vec![axis],
                },
            ));
        }
        dimensions.sort_by_key(|(start, _)| *start);
        Ok(dimensions.into_iter().map(|(_, d)| d).collect())
    }

    fn axis(
        &self,
        key: &str,
        key_span: Option<Range<usize>>,
        item: &toml_edit::Item,
    ) -> Result<AxisPath, ScenarioError> {
        let keys = scenario::path_keys(key).map_err(|reason| {
            self.error(
                key_span.clone(),
                format!(
                    "sweep key {key:?} is not a dotted path such as \"tensors.buf\" or \
                     'tensors.\"a.b\"': {reason}"
                ),
            )
        })?;
        let path = scenario::dotted_path(&keys);
        // `machine = NAME` names the profile the whole file is read on, before its points are
        // made: one profile per sweep, as `sweep --set machine=a,b` is told.
        if path == scenario::MACHINE_KEY {
            return Err(self.error(
                key_span,
                format!(
                    "sweep axis {key:?}: a sweep runs every point on one machine profile; run \
                     one sweep per profile (`machine = NAME` in the file, or `--set machine=NAME`)"
                ),
            ));
        }
        let values = self.values(key, key_span.clone(), item)?;
        Ok(AxisPath {
            path,
            values,
            key_span,
        })
    }

    fn values(
        &self,
        key: &str,
        key_span: Option<Range<usize>>,
        item: &toml_edit::Item,
    ) -> Result<Vec<AxisValue>, ScenarioError> {
        let array = item.as_array().ok_or_else(|| {
            self.error(
                item.span().or(key_span.clone()),
                format!("sweep axis {key:?} must be a list of values, e.g. [1, 2]"),
            )
        })?;
        if array.is_empty() {
            return Err(self.error(
                array.span().or(key_span),
                format!("sweep axis {key:?} has no values"),
            ));
        }
        Ok(array
            .iter()
            .map(|value| AxisValue {
                toml: toml_text(value),
                shown: shown(value),
            })
            .collect())
    }

    fn zipped(
        &self,
        name: &str,
        name_span: Option<Range<usize>>,
        group: &toml_edit::Item,
    ) -> Result<Dimension, ScenarioError> {
        // The name is a CSV column: a newline or a tab would break the one-line record.
        if let Some(why) = crate::scenario::unfit_name("zipped axis", name) {
            return Err(self.error(name_span, why));
        }
        let table = group.as_table_like().ok_or_else(|| {
            self.error(
                name_span.clone(),
                format!("sweep.zip.{name} must be a table of dotted keys and equal-length lists"),
            )
        })?;
        let mut labels = None;
        let mut paths = Vec::new();
        let mut length: Option<(usize, String)> = None;
        for (key, key_span, item) in flatten(table) {
            let values = self.values(&key, key_span.clone(), item)?;
            match &length {
                Some((n, first)) if *n != values.len() => {
                    return Err(self.error(
                        key_span,
                        format!(
                            "zipped axis {name:?}: {key:?} has {} values but {first:?} has {n}; zipped lists advance together and need equal lengths",
                            values.len()
                        ),
                    ))
                }
                Some(_) => {}
                None => length = Some((values.len(), key.clone())),
            }
            if key == ZIP_VALUES_KEY {
                labels = Some(values.into_iter().map(|v| v.shown).collect::<Vec<_>>());
            } else {
                paths.push(self.axis(&key, key_span, item)?);
            }
        }
        if paths.is_empty() {
            return Err(self.error(
                name_span,
                format!("zipped axis {name:?} sets no path; add e.g. \"tensors.buf\" = [..]"),
            ));
        }
        Ok(Dimension {
            zip: labels.map(|labels| (name.to_string(), labels)),
            name_span,
            paths,
        })
    }
}

#[cfg(test)]
mod tests;
