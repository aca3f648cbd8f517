//! `c10dsim diff`, `run --against` and `calibrate`: file I/O and output formats around
//! `analysis::diff` and `analysis::calibrate` (docs/diff.md). Exit codes: 0 within tolerance,
//! 1 a difference exceeds it, 2 bad input.

use crate::Failure;
use analysis::calibrate::{self, CalibrationRun, Profile, ProfileMode};
use analysis::diff::{self, DiffOptions};
use sim::scenario::{Override, Scenario};
use sim::timeline::{Source, Timeline};
use std::path::{Path, PathBuf};

/// Tolerances of `diff` and `run --against`.
#[derive(clap::Args, Debug, Clone, Copy)]
pub struct ToleranceArgs {
    /// A timing difference fails only above this share of the reference value (percent).
    #[arg(
        long,
        default_value_t = DEFAULT_TOLERANCES.tol_pct,
        value_name = "PCT",
        allow_negative_numbers = true
    )]
    pub tol_pct: f64,
    /// ... and above this many microseconds.
    #[arg(
        long,
        default_value_t = DEFAULT_TOLERANCES.tol_us,
        value_name = "US",
        allow_negative_numbers = true
    )]
    pub tol_us: f64,
    /// Events closer than this are simultaneous for the ordering verdicts (µs).
    #[arg(
        long,
        default_value_t = DEFAULT_TOLERANCES.order_tie_us,
        value_name = "US",
        allow_negative_numbers = true
    )]
    pub order_tie_us: f64,
}

/// The tolerances when none is given.
const DEFAULT_TOLERANCES: ToleranceArgs = ToleranceArgs {
    tol_pct: 10.0,
    tol_us: 10.0,
    order_tie_us: 5.0,
};

impl ToleranceArgs {
    /// The diff's options; a negative or infinite tolerance is bad input.
    pub fn options(self) -> Result<DiffOptions, Failure> {
        for (name, value) in [
            ("--tol-pct", self.tol_pct),
            ("--tol-us", self.tol_us),
            ("--order-tie-us", self.order_tie_us),
        ] {
            if !(value.is_finite() && value >= 0.0) {
                return Err(Failure::input(format!(
                    "{name} must be a number ≥ 0, found {value}"
                )));
            }
        }
        Ok(DiffOptions {
            tolerance_pct: self.tol_pct,
            tolerance_us: self.tol_us,
            order_tie_us: self.order_tie_us,
            ..DiffOptions::default()
        })
    }
}

/// Reads a Timeline file, as every command that reads one does (`diff`, `run --against`,
/// `calibrate`, `fidelity`, `hw-merge`, `torch`'s join of its ranks' files): refused (exit 2)
/// before it is read where reading it would hold more than `max_timeline_bytes`
/// (`limits::read_timeline_text`); a folded one (docs/scale.md) is compared rank by rank, so it
/// is expanded to every rank, refused where that would hold more than `max_timeline_bytes`.
pub fn read_timeline_capped(path: &Path, max_timeline_bytes: u64) -> Result<Timeline, Failure> {
    let (timeline, _) = read_unexpanded(path, max_timeline_bytes)?;
    crate::limits::expand_capped(path, timeline, max_timeline_bytes)
}

/// A Timeline file read as [`read_timeline_capped`] reads it, not yet expanded, with its JSON
/// bytes as a comparison holds it (`limits::compared_json_bytes`).
pub fn read_unexpanded(path: &Path, max_timeline_bytes: u64) -> Result<(Timeline, u64), Failure> {
    let text = crate::limits::read_timeline_text(path, max_timeline_bytes)?;
    let timeline = Timeline::from_json(&text).map_err(|e| {
        // A Chrome trace (`--trace`, a PyTorch profiler trace) and `run --json`'s report
        // are the usual wrong files.
        let is_run_report = || {
            serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(&text).is_ok_and(
                |object| object.contains_key("parameters") && object.contains_key("report"),
            )
        };
        let hint = if text.trim_start().starts_with('{') && text.contains("\"traceEvents\"") {
            " (it is a Chrome trace: give the Timeline `run --timeline FILE` writes; a \
                 PyTorch profiler trace becomes a scenario with `c10dsim import kineto`)"
        } else if is_run_report() {
            " (it is a `run --json` report, not a Timeline: `run --timeline FILE` writes one)"
        } else {
            ""
        };
        Failure::input(format!("{}{hint}", e.in_file(&path.display().to_string())))
    })?;
    let json_bytes = crate::limits::compared_json_bytes(&timeline, text.len() as u64);
    Ok((timeline, json_bytes))
}

/// Prints the diff of B against the reference A; 1 when it exceeds the tolerances.
pub fn print_diff(
    a: &Timeline,
    b: &Timeline,
    options: &DiffOptions,
    json: bool,
) -> Result<u8, Failure> {
    let result = diff::diff(a, b, options);
    if !result.unlike_scenarios.is_empty() {
        note!(
            "c10dsim: note: {}: ops are matched by name all the same, so the comparison \
             may mean nothing",
            result.unlike_scenarios.join("; ")
        );
    }
    if json {
        outln!(
            "{}",
            serde_json::to_string_pretty(&result).expect("diffs serialise")
        )?;
    } else {
        out!("{}", diff::render_diff(&result))?;
    }
    Ok(u8::from(!result.within_tolerance()))
}

/// `c10dsim diff A.json B.json`.
/// `max_timeline_bytes` (`--max-timeline`) caps the memory of each file read, and of the two
/// Timelines held together, each expanded to every rank where it is folded: refused before
/// either is read where their files' sizes are already over it, before either expands where
/// their expansions are.
pub fn diff_files(
    a: &Path,
    b: &Path,
    tolerance: ToleranceArgs,
    json: bool,
    max_timeline_bytes: u64,
) -> Result<u8, Failure> {
    if crate::stdio::is_dash(a) && crate::stdio::is_dash(b) {
        return Err(Failure::input(
            "diff - -: standard input holds one Timeline; give at least one of them as a file",
        ));
    }
    let options = tolerance.options()?;
    let both = |json_bytes: [u64; 2], done: &str| {
        crate::limits::check_compared(
            &format!(
                "{} and {}: diff holds both Timelines",
                crate::stdio::shown_name(a),
                crate::stdio::shown_name(b)
            ),
            json_bytes.map(crate::limits::held_bytes),
            &format!(
                "{} and {} of JSON, {} bytes a byte",
                sim::units::format_size_readable(json_bytes[0]),
                sim::units::format_size_readable(json_bytes[1]),
                crate::limits::TIMELINE_MEMORY_BYTES_PER_JSON_BYTE
            ),
            done,
            max_timeline_bytes,
        )
    };
    // Each file alone first, then both: a file is at least its own JSON as compared (standard
    // input counts once read).
    crate::limits::check_timeline_file(a, max_timeline_bytes)?;
    crate::limits::check_timeline_file(b, max_timeline_bytes)?;
    let size = |path: &Path| crate::stdio::file_size(path).unwrap_or(0);
    both([size(a), size(b)], "nothing was read")?;
    let (a_timeline, a_bytes) = read_unexpanded(a, max_timeline_bytes)?;
    let (b_timeline, b_bytes) = read_unexpanded(b, max_timeline_bytes)?;
    both([a_bytes, b_bytes], "nothing was compared")?;
    print_diff(
        &crate::limits::expand_measured(a, a_timeline, a_bytes, max_timeline_bytes)?,
        &crate::limits::expand_measured(b, b_timeline, b_bytes, max_timeline_bytes)?,
        &options,
        json,
    )
}

/// Where a profile named by a scenario (`machine = "h200"` or `"profiles/h200.toml"`) is: a
/// path is taken relative to the scenario's folder, then to the working directory; a plain
/// name is looked up as `profiles/<name>.toml` in the scenario's folder and each folder above
/// it, then in the working directory.
fn find_profile(scenario: &Path, name: &str) -> Option<PathBuf> {
    let folder = scenario.parent().unwrap_or(Path::new(""));
    if is_profile_path(name) {
        return [folder.join(name), PathBuf::from(name)]
            .into_iter()
            .find(|p| p.is_file());
    }
    let file = format!("{name}.toml");
    folder
        .ancestors()
        .map(|dir| dir.join("profiles").join(&file))
        .chain(std::iter::once(Path::new("profiles").join(&file)))
        .find(|p| p.is_file())
}

/// Whether a scenario's `machine = …` is a path (`"profiles/h200.toml"`), not a plain name.
fn is_profile_path(name: &str) -> bool {
    name.ends_with(".toml") || name.contains('/')
}

/// The plain names `find_profile` would find: the stems of the `profiles/*.toml` files in the
/// scenario's folder, each folder above it and the working directory, sorted.
fn profile_names(scenario: &Path) -> std::collections::BTreeSet<String> {
    let folder = scenario.parent().unwrap_or(Path::new(""));
    folder
        .ancestors()
        .chain(std::iter::once(Path::new("")))
        .filter_map(|dir| std::fs::read_dir(dir.join("profiles")).ok())
        .flatten()
        .filter_map(|entry| {
            let path = entry.ok()?.path();
            let stem = path.file_stem()?.to_str()?.to_string();
            (path.extension()? == "toml" && path.is_file()).then_some(stem)
        })
        .collect()
}

/// Reads and validates a profile file.
pub fn read_profile(path: &Path) -> Result<Profile, Failure> {
    read_profile_with_text(path).map(|(profile, _)| profile)
}

/// A `calibrate --prior` profile: one that sets no machine value (an empty file, only its
/// `[profile]` table) is refused, as a mistake — it would fit as if no prior were given.
fn read_prior(path: &Path) -> Result<Profile, Failure> {
    let prior = read_profile(path)?;
    if prior.values.is_empty() {
        return Err(Failure::input(format!(
            "{}: error: the --prior profile sets nothing: a prior holds the values the runs \
             cannot fit, in {} (a profile `c10dsim calibrate` wrote, or one of profiles/; \
             docs/diff.md)",
            path.display(),
            calibrate::profile_tables()
        )));
    }
    Ok(prior)
}

/// A profile a scenario runs on (`machine =`, `--machine`), with the file's text: one that sets
/// no machine value (an empty file, only its `[profile]` table) is refused, as a mistake — the
/// run would be the scenario's own, as if no profile were named.
/// `named_at`: where the scenario names it (`machine =`), said in the refusal.
fn read_machine_profile(
    path: &Path,
    named_at: Option<&sim::scenario::ScenarioError>,
) -> Result<(Profile, String), Failure> {
    let (profile, text) = read_profile_with_text(path)?;
    if profile.values.is_empty() {
        let named = named_at.map_or(String::new(), |at| {
            format!(
                " (named by machine = at {}:{}:{})",
                at.path, at.line, at.column
            )
        });
        return Err(Failure::input(format!(
            "{}: error: the machine profile sets nothing{named}: a profile holds the machine's \
             values, in {} (a profile `c10dsim calibrate` wrote, or one of profiles/; \
             docs/diff.md)",
            path.display(),
            calibrate::profile_tables()
        )));
    }
    Ok((profile, text))
}

/// [`read_profile`], with the file's text.
fn read_profile_with_text(path: &Path) -> Result<(Profile, String), Failure> {
    let text = crate::stdio::read_scenario_text(path)?;
    let profile =
        calibrate::parse_profile(&path.display().to_string(), &text).map_err(|e| match e {
            // Shown as a scenario error is: the line, a caret under the place.
            calibrate::ProfileError::At(error) => {
                Failure::input(crate::diagnostic::render(&crate::diagnostic::Located {
                    error,
                    source: text.clone(),
                }))
            }
            whole => Failure::input(whole.to_string()),
        })?;
    Ok((profile, text))
}

/// A scenario's text with its machine profiles applied ([`resolve_machine`]).
pub struct WithMachine {
    pub text: String,
    /// Which profiles were applied, for error messages (`machine p.toml, --machine q.toml`).
    pub note: Option<String>,
    /// The profiles applied, in order, as `(path, text)`: an error on a line one of them
    /// wrote is placed there (`diagnostic::locate_with_profiles`).
    pub profiles: Vec<(String, String)>,
}

/// Applies the scenario's `machine` profile (its own keys win), then `forced` (`--machine`:
/// the profile's keys win).
pub fn resolve_machine(
    path: &Path,
    text: &str,
    forced: Option<&Path>,
) -> Result<WithMachine, Failure> {
    let shown = path.display().to_string();
    let mut text = text.to_string();
    let mut notes = Vec::new();
    let mut profiles = Vec::new();
    let reference =
        calibrate::machine_reference(&shown, &text).map_err(|e| Failure::input(e.to_string()))?;
    if reference.is_some() || forced.is_some() {
        // Errors of the file itself are reported first, at their own positions (the profile's
        // keys, once inserted, move the lines below them).
        let mut own = text.clone();
        if let Some((_, span)) = &reference {
            own.replace_range(span.clone(), &" ".repeat(span.len()));
        }
        sim::scenario::parse(&shown, &own).map_err(|error| {
            let located = crate::diagnostic::locate(error, &shown, &text, &own, &[]);
            Failure::input(crate::diagnostic::render(&located))
        })?;
    }
    if let Some((name, span)) = reference {
        let file = find_profile(path, &name).ok_or_else(|| {
            // Where `find_profile` looked: a path is not looked up under `profiles/`, and a
            // plain name not beside the scenario.
            let message = if is_profile_path(&name) {
                format!(
                    "machine = {name:?}: no such profile (looked for it relative to the \
                     scenario's folder, then to the working directory)"
                )
            } else {
                let known = profile_names(path);
                let suggestion =
                    sim::scenario::did_you_mean(&name, known.iter().map(String::as_str));
                format!(
                    "machine = {name:?}: no such profile{suggestion} (looked for \
                     profiles/{name}.toml in the scenario's folder, the folders above it and \
                     the working directory)"
                )
            };
            Failure::input(
                sim::scenario::error_at(&shown, &text, span.clone(), message).to_string(),
            )
        })?;
        let named_at = sim::scenario::error_at(&shown, &text, span, "");
        let (profile, profile_text) = read_machine_profile(&file, Some(&named_at))?;
        text = calibrate::apply_profile(&text, &profile, ProfileMode::FillUnset)
            .map_err(|e| Failure::input(format!("{shown}: {e}")))?;
        note!("c10dsim: machine profile {}", file.display());
        notes.push(format!("machine {}", file.display()));
        profiles.push((file.display().to_string(), profile_text));
    }
    if let Some(file) = forced {
        let (profile, profile_text) = read_machine_profile(file, None)?;
        text = calibrate::apply_profile(&text, &profile, ProfileMode::Replace)
            .map_err(|e| Failure::input(format!("{shown}: {e}")))?;
        notes.push(format!("--machine {}", file.display()));
        profiles.push((file.display().to_string(), profile_text));
    }
    Ok(WithMachine {
        text,
        note: (!notes.is_empty()).then(|| notes.join(", ")),
        profiles,
    })
}

/// A calibration input: `RUN.json` (its scenario is `scenarios/<stem>.toml` beside it, else the
/// scenario the Timeline records, with the `--set`s it was run with) or `RUN.json=SCENARIO.toml`;
/// the run is read under `max_timeline_bytes` (`--max-timeline`).
fn calibration_input(
    argument: &str,
    max_timeline_bytes: u64,
) -> Result<(Timeline, PathBuf, Vec<Override>), Failure> {
    let (run, scenario) = run_and_scenario(argument);
    let empty = |side: &str| {
        Failure::input(format!(
            "calibrate {argument}: {side}; give it as RUN.json=SCENARIO.toml, or RUN.json alone"
        ))
    };
    if run.as_os_str().is_empty() {
        return Err(empty("no run before its `=`"));
    }
    if scenario
        .as_ref()
        .is_some_and(|path| path.as_os_str().is_empty())
    {
        return Err(empty("no scenario after its `=`"));
    }
    let timeline = read_timeline_capped(&run, max_timeline_bytes)?;
    if let Some(path) = scenario {
        return Ok((timeline, path, Vec::new()));
    }
    let stem = run.file_stem().unwrap_or_default().to_string_lossy();
    let beside = run
        .parent()
        .unwrap_or(Path::new(""))
        .join("scenarios")
        .join(format!("{stem}.toml"));
    if beside.is_file() {
        return Ok((timeline, beside, Vec::new()));
    }
    let (recorded, mut overrides) = recorded_invocation(&timeline.scenario.path)?;
    overrides.extend(calibrate::measurement_overrides(&timeline));
    if !recorded.is_file() {
        return Err(Failure::input(format!(
            "{}: its scenario is neither scenarios/{stem}.toml beside it nor {}; \
             name it as RUN.json=SCENARIO.toml",
            run.display(),
            timeline.scenario.path
        )));
    }
    Ok((timeline, recorded, overrides))
}

/// A calibration argument's run and the scenario it names, if any. A run's own path may hold
/// `=` (`sweep/seed=1/run.json`): the argument is the run when it names a file, else it parts
/// at the first `=` that leaves a run before it (standard input or a file), else at its first.
fn run_and_scenario(argument: &str) -> (PathBuf, Option<PathBuf>) {
    let is_run = |path: &str| crate::stdio::is_dash(Path::new(path)) || Path::new(path).is_file();
    if is_run(argument) {
        return (PathBuf::from(argument), None);
    }
    let mut splits = argument
        .match_indices('=')
        .map(|(at, _)| (&argument[..at], &argument[at + 1..]));
    let first = splits.clone().next();
    match splits.find(|(run, _)| is_run(run)).or(first) {
        Some((run, scenario)) => (PathBuf::from(run), Some(PathBuf::from(scenario))),
        None => (PathBuf::from(argument), None),
    }
}

/// The scenario file and `--set`s of a Timeline's `scenario.path` (`FILE [--set K=V --set …]`,
/// as `load` shows a scenario read with overrides).
pub fn recorded_invocation(path: &str) -> Result<(PathBuf, Vec<Override>), Failure> {
    let (file, overrides) = sim::scenario::read_recorded_invocation(path)
        .map_err(|e| Failure::input(format!("{path}: recorded --set: {e}")))?;
    Ok((PathBuf::from(file), overrides))
}

/// Refuses a Timeline paired with a scenario it is not a run of.
fn paired(argument: &str, timeline: &Timeline, scenario: &Scenario) -> Result<(), Failure> {
    calibrate::check_pairing(timeline, scenario)
        .map_err(|error| Failure::input(format!("calibrate {argument}: {error}")))
}

/// The runs that hold records to fit, with their arguments. A run without any (its process
/// ended before its first op, as in `rank0_crash_init`) is left out with a note on stderr; if
/// no run holds any, the calibration is refused.
fn with_something_to_fit(
    runs: &[String],
    inputs: Vec<(Timeline, Scenario)>,
) -> Result<Vec<(&str, Timeline, Scenario)>, Failure> {
    let mut kept = Vec::with_capacity(inputs.len());
    let mut reasons = Vec::new();
    for (run, (timeline, scenario)) in runs.iter().zip(inputs) {
        match calibrate::nothing_to_fit(&timeline) {
            Some(why) => reasons.push(format!("calibrate {run}: {why}")),
            None => kept.push((run.as_str(), timeline, scenario)),
        }
    }
    if kept.is_empty() {
        return Err(Failure::input(reasons.join("\n")));
    }
    for reason in reasons {
        note!("c10dsim: {reason}; left out of the fit");
    }
    Ok(kept)
}

/// `c10dsim calibrate RUNS… -o profile.toml`: prints each fitted value with its residual and
/// writes the profile (the prior's values where the runs fit nothing).
pub fn calibrate_runs(args: &CalibrateArgs) -> Result<u8, Failure> {
    let CalibrateArgs {
        runs,
        output,
        prior,
        name,
        held_out,
        caps,
    } = args;
    refuse_repeated_runs(runs, held_out)?;
    let inputs = runs
        .iter()
        .map(|run| {
            let (timeline, path, overrides) = calibration_input(run, caps.max_timeline())?;
            let scenario = crate::load(&path, &overrides)?;
            paired(run, &timeline, &scenario)?;
            Ok((timeline, scenario))
        })
        .collect::<Result<Vec<(Timeline, Scenario)>, Failure>>()?;
    let inputs = with_something_to_fit(runs, inputs)?;
    let to_stdout = crate::stdio::is_dash(output);
    if to_stdout && !held_out.is_empty() {
        return Err(Failure::input(
            "--validate simulates with the profile read back from -o; `-o -` (standard output) cannot be read back: give a file",
        ));
    }
    // Read and paired before fitting: a bad held-out argument, or a run of another scenario,
    // fails before anything is written (a profile changes neither the ranks nor the ops).
    let held_out = held_out
        .iter()
        .map(|run| {
            let (timeline, path, overrides) = calibration_input(run, caps.max_timeline())?;
            paired(
                &format!("--validate {run}"),
                &timeline,
                &crate::load(&path, &overrides)?,
            )?;
            Ok((timeline, path, overrides))
        })
        .collect::<Result<Vec<_>, Failure>>()?;
    let mut prior = match prior {
        Some(path) => read_prior(path)?,
        None => Profile::default(),
    };
    let pairs: Vec<CalibrationRun> = inputs
        .iter()
        .map(|(_, timeline, scenario)| CalibrationRun { scenario, timeline })
        .collect();
    let runs_per_gpu = calibrate::runs_per_gpu(&pairs);
    // A simulated Timeline is fitted (the fit gives back what the simulation ran with, a check
    // of the fit) but named as one, never as a measurement.
    let kind = |timeline: &Timeline| match timeline.source {
        Source::Simulated => "simulated",
        Source::Measured | Source::Torch => "measured",
    };
    for (run, timeline, _) in &inputs {
        if timeline.source == Source::Simulated {
            note!(
                "c10dsim: note: {run} is a simulated Timeline: it fits the simulator's own \
                 parameters back, not a machine's; the profile lists it as `simulated: {run}`"
            );
        }
    }
    let counts: Vec<String> = ["measured", "simulated"]
        .into_iter()
        .map(|which| {
            let count = inputs.iter().filter(|(_, t, _)| kind(t) == which).count();
            (count, which)
        })
        .filter(|&(count, _)| count > 0)
        .map(|(count, which)| format!("{count} {which} run{}", if count == 1 { "" } else { "s" }))
        .collect();
    // The profile names the runs it was fitted to: not those left out for want of records.
    prior.about = format!(
        "calibrated by c10dsim calibrate from {}{}{}",
        counts.join(" and "),
        runs_per_gpu
            .as_ref()
            .map_or(String::new(), |gpus| format!(", {gpus}")),
        if prior.name.is_empty() {
            String::new()
        } else {
            format!(" (unfitted values: profile {})", prior.name)
        }
    );
    prior.name = name.to_string();
    // A prior fitted to some of these runs already names them: each once.
    for (run, timeline, _) in &inputs {
        let source = format!("{}: {run}", kind(timeline));
        if !prior.sources.contains(&source) {
            prior.sources.push(source);
        }
    }
    let calibration = calibrate::calibrate(&pairs, &prior);
    if let Some(gpus) = &runs_per_gpu {
        let gpu = match calibration.profile.values.get("cluster.gpu") {
            Some(gpu) => format!("cluster.gpu is the prior's, {gpu}"),
            None => "the profile names no cluster.gpu".to_string(),
        };
        note!(
            "c10dsim: the runs were measured on different GPUs ({gpus}): each fitted value \
             is fitted across them all, and {gpu}"
        );
    }
    let mut fitted = calibrate::render_fitted(&calibration.fitted);
    if let Some(gpu) = calibration.profile.values.get("cluster.gpu") {
        fitted.push_str(&format!("cluster.gpu = {gpu}\n"));
    }
    for note in &calibration.notes {
        fitted.push_str(&format!("note: {note}\n"));
    }
    // A profile that sets no machine value is refused wherever it is used (`--machine`,
    // `machine =`, `--prior`): none is written.
    if calibration.profile.values.is_empty() {
        return Err(Failure::input(format!(
            "the runs fit no machine value (they time none of what a profile holds, in {}), \
             so nothing was written: a profile that sets nothing is refused by --machine, \
             machine = and --prior\n{fitted}",
            calibrate::profile_tables()
        )));
    }
    let profile = calibrate::render_profile(&calibration.profile, &calibration.fitted);
    // A profile that fails a scenario's checks is not written.
    calibrate::check_usable(&calibration.profile).map_err(|why| {
        let (unset, advice) = match args.prior.as_deref().map(Path::display) {
            None => (
                "the defaults for what it leaves unset".to_string(),
                "Fit from runs that measure both values, or give --prior the host costs of \
                 the machine these runs were measured on"
                    .to_string(),
            ),
            Some(prior) => {
                let kept = calibrate::unfitted_keys_named(&why, &calibration);
                let kept = match kept.as_slice() {
                    [] => String::new(),
                    [key] => format!("{key} is --prior {prior}'s, not fitted. "),
                    keys => format!("{} are --prior {prior}'s, not fitted. ", keys.join(", ")),
                };
                (
                    format!(
                        "--prior {prior}'s values for what the runs do not fit, and the \
                         defaults for what neither sets"
                    ),
                    format!(
                        "{kept}Fit from runs that measure both values, or give a --prior with the \
                         host costs of the machine these runs were measured on"
                    ),
                )
            }
        };
        Failure::input(format!(
            "the fitted profile fails the checks every scenario applies (with {unset}), so \
             nothing was written: {why}. {advice}\n{fitted}"
        ))
    })?;
    // The profile written to standard output takes it alone: the fitted values go to stderr.
    if to_stdout {
        eprint!("{fitted}");
        crate::stdio::write_bytes(output, profile.as_bytes())?;
        return Ok(0);
    }
    out!("{fitted}")?;
    crate::stdio::write_bytes(output, profile.as_bytes())?;
    note!("c10dsim: wrote profile {}", output.display());
    if held_out.is_empty() {
        return Ok(0);
    }
    let mut diffs = Vec::new();
    for (measured, path, overrides) in &held_out {
        let scenario = crate::load_on(path, overrides, None, Some(output))?;
        let simulated = caps.simulate(path, &scenario)?;
        diffs.push(diff::diff(measured, &simulated, &DiffOptions::default()));
    }
    let validation = calibrate::validation(&diffs);
    if validation.rows.is_empty() {
        note!(
            "c10dsim: warning: the held-out runs have no timing metric with a measured value \
             (no measure, host call or kernel both runs time): the profile is not validated"
        );
    }
    outln!()?;
    out!("{}", calibrate::render_validation(&validation))?;
    Ok(0)
}

/// Refuses a run file given twice among the fitted runs or the held-out ones, however named
/// (`a.json` and `./a.json`): fitted twice, it would count twice, and a fitted run validated is
/// not held out. Standard input (`-`) is left out.
fn refuse_repeated_runs(runs: &[String], held_out: &[String]) -> Result<(), Failure> {
    let mut seen: Vec<(PathBuf, &str, &str)> = Vec::new();
    let arguments =
        (runs.iter().map(|run| (run, ""))).chain(held_out.iter().map(|run| (run, "--validate ")));
    for (argument, flag) in arguments {
        let (run, _) = run_and_scenario(argument);
        if crate::stdio::is_dash(&run) {
            continue;
        }
        let Ok(file) = run.canonicalize() else {
            continue;
        };
        if let Some((_, first, first_flag)) = seen.iter().find(|(seen, ..)| *seen == file) {
            let why = match (first_flag.is_empty(), flag.is_empty()) {
                (true, false) => {
                    "a run the profile was fitted to is not held out; validate on runs left out \
                     of the fit"
                }
                (true, true) => "fitted twice, it would count as two runs",
                _ => "validated twice, it would count twice",
            };
            return Err(Failure::input(format!(
                "calibrate {first_flag}{first} and {flag}{argument} name one run, {}: {why}",
                file.display()
            )));
        }
        seen.push((file, argument, flag));
    }
    Ok(())
}

/// `c10dsim calibrate`'s arguments.
pub struct CalibrateArgs {
    pub runs: Vec<String>,
    pub output: PathBuf,
    pub prior: Option<PathBuf>,
    pub name: String,
    /// Measured runs to predict with the fitted profile (never fitted to).
    pub held_out: Vec<String>,
    /// The runs' read cap and the held-out runs' simulations' caps.
    pub caps: crate::limits::SimulationCaps,
}
