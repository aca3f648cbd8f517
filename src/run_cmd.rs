//! `c10dsim run`: load the scenario, simulate it, compare it with a measured Timeline
//! (`--against`), and emit the report and the files beside it (`emit`, which `hw` and `torch`
//! share for their measured Timelines).

use crate::{
    diff_cmd, fr_cmd, limits, output_failure, plot, progress, stdio, trace_out, write_json,
    Failure, ScenarioArgs,
};
use analysis::{metrics, text};
use sim::scenario::Scenario;
use sim::timeline::Timeline;
use std::path::Path;

/// `run --against` and the caps of `--max-events` and the like.
pub(crate) struct Against<'a> {
    pub(crate) limits: limits::LimitArgs,
    pub(crate) measured: Option<&'a Path>,
    pub(crate) tolerance: diff_cmd::ToleranceArgs,
}

/// The files `run` writes beside its report.
pub(crate) struct RunOutputs<'a> {
    pub(crate) trace: Option<&'a Path>,
    /// `--trace-dir`: a simulated Timeline holds the whole job, a measured one this process.
    pub(crate) trace_dir: Option<&'a Path>,
    pub(crate) timeline: Option<&'a Path>,
    /// `--fr-dir`: the Flight Recorder dumps' folder.
    pub(crate) fr_dir: Option<&'a Path>,
    pub(crate) svg: Option<&'a Path>,
    /// `--summary`, with the records kept whole.
    pub(crate) summary: Option<sim::timeline::RecordSelection>,
    /// `--detail ranks`: every rank's watchdog lines and findings listed on their own.
    pub(crate) per_rank: bool,
    /// `--max-timeline`: `--timeline` stops past it as it is written (`None`: no cap, a
    /// measured Timeline's).
    pub(crate) timeline_cap_bytes: Option<u64>,
}

impl RunOutputs<'_> {
    /// Writes the Timeline to `path`, under the cap if there is one.
    fn write_timeline(&self, path: &Path, timeline: &Timeline) -> Result<(), Failure> {
        match self.timeline_cap_bytes {
            Some(cap_bytes) => limits::write_capped_timeline(path, timeline, cap_bytes),
            None => write_json(path, timeline),
        }
    }
}

impl RunOutputs<'_> {
    /// What is wrong with the output paths whatever the run gives, refused before it: a file in
    /// a folder that does not exist or that is a folder, a `--trace-dir` or `--fr-dir` that is
    /// `-` or a file, a file written into `--trace-dir`, whose every file HTA reads as a rank's
    /// trace, two outputs on one path, and two outputs on standard output (`nccl_table`:
    /// nccl-tests' table is one).
    pub(crate) fn check_places(&self, nccl_table: bool) -> Result<(), Failure> {
        let mut on_stdout = self.on_stdout();
        if nccl_table {
            on_stdout.push("--nccl-tests");
        }
        if on_stdout.len() > 1 {
            let all = if on_stdout.len() == 2 { "both" } else { "all" };
            return Err(Failure::input(format!(
                "{} {all} ask for standard output: only one of them can have it",
                on_stdout.join(" and ")
            )));
        }
        let all = [
            ("--trace", self.trace),
            ("--timeline", self.timeline),
            ("--svg", self.svg),
            ("--trace-dir", self.trace_dir),
            ("--fr-dir", self.fr_dir),
        ];
        let named: Vec<(&str, &Path)> = all
            .into_iter()
            .filter_map(|(flag, path)| Some((flag, path?)))
            .collect();
        stdio::refuse_shared_outputs(&named)?;
        let folders = [("--trace-dir", self.trace_dir), ("--fr-dir", self.fr_dir)];
        for (flag, dir) in folders {
            if let Some(dir) = dir {
                stdio::check_folder_place(flag, dir)?;
            }
        }
        let files = [
            ("--trace", self.trace),
            ("--timeline", self.timeline),
            ("--svg", self.svg),
        ];
        for (flag, path) in files {
            let Some(path) = path else { continue };
            stdio::check_output_place(flag, path)?;
            let Some(dir) = self.trace_dir.and_then(|dir| dir.canonicalize().ok()) else {
                continue;
            };
            if stdio::folder_of(path).canonicalize().ok().as_deref() == Some(dir.as_path()) {
                return Err(Failure::input(format!(
                    "{flag} {}: it would be written into --trace-dir {}, whose every file HTA \
                     reads as a rank's trace; write it elsewhere",
                    path.display(),
                    dir.display()
                )));
            }
        }
        Ok(())
    }

    /// The flags of the files written to standard output (`-`).
    fn on_stdout(&self) -> Vec<&'static str> {
        [
            ("--trace -", self.trace),
            ("--timeline -", self.timeline),
            ("--svg -", self.svg),
        ]
        .into_iter()
        .filter(|(_, path)| path.is_some_and(stdio::is_dash))
        .map(|(flag, _)| flag)
        .collect()
    }
}

pub(crate) fn run(
    file: &Path,
    with: &ScenarioArgs,
    json: bool,
    outputs: &RunOutputs,
    nccl_tests: bool,
    fail_on_race: bool,
    against: &Against,
) -> Result<u8, Failure> {
    if let Some(path) = outputs.svg {
        plot::check_timeline_svg_name(path)?;
    }
    let limits = &against.limits;
    outputs.check_places(nccl_tests && !json)?;
    let scenario = with.load(file)?;
    limits
        .caps
        .check(file, &scenario, outputs.summary.is_some())?;
    if let Some(selection) = &outputs.summary {
        // A rank or iteration the scenario does not have would keep nothing, silently.
        let outside = |ranges: &Option<Vec<(u32, u32)>>, count: u32| {
            ranges
                .iter()
                .flatten()
                .find(|&&(_, last)| last >= count)
                .map(|&(_, last)| last)
        };
        if let Some(rank) = outside(&selection.ranks, scenario.cluster.ranks) {
            return Err(Failure::input(format!(
                "--records-for ranks: rank {rank} does not exist (the scenario has {}, 0-{})",
                text::counted(u64::from(scenario.cluster.ranks), "rank"),
                scenario.cluster.ranks - 1
            )));
        }
        let record_outputs = [
            ("--trace", outputs.trace),
            ("--trace-dir", outputs.trace_dir),
            ("--svg", outputs.svg),
        ];
        let asked: Vec<&str> = (record_outputs.iter())
            .filter(|(_, path)| path.is_some())
            .map(|(flag, _)| *flag)
            .collect();
        let kept_outputs: Vec<&str> = (asked.iter().copied())
            .chain(outputs.timeline.map(|_| "--timeline"))
            .collect();
        (limits.caps).check_kept_records(file, &scenario, selection, &kept_outputs)?;
        if selection.keeps_none() && !asked.is_empty() {
            note!(
                "c10dsim: note: --summary keeps no record without --records-for (e.g. --records-for 'ranks=0 iterations=0'), so {} will show none",
                asked.join(", ")
            );
        }
        if let Some(iteration) = outside(&selection.iterations, scenario.repeat) {
            return Err(Failure::input(format!(
                "--records-for iterations: iteration {iteration} does not exist (the scenario runs {}, 0-{})",
                text::counted(u64::from(scenario.repeat), "iteration"),
                scenario.repeat - 1
            )));
        }
    }
    if outputs.summary.is_none() {
        // Traces, charts, nccl-tests' table and the diff show every rank: a folded run is
        // expanded for them (docs/scale.md).
        let expanding = [
            ("--trace", outputs.trace.is_some()),
            ("--trace-dir", outputs.trace_dir.is_some()),
            ("--svg", outputs.svg.is_some()),
            ("--nccl-tests", nccl_tests),
            ("--against", against.measured.is_some()),
        ];
        let flags: Vec<&str> = (expanding.iter())
            .filter(|(_, asked)| *asked)
            .map(|(flag, _)| *flag)
            .collect();
        limits.caps.check_expanded(file, &scenario, &flags)?;
    }
    // A dump per rank, however the run is folded or summarised.
    let dump_files = match (outputs.fr_dir, &scenario.env.dump_file_prefix) {
        (Some(_), _) => Some("--fr-dir"),
        (None, Some(_)) => Some("the scenario's TORCH_FR_DUMP_TEMP_FILE"),
        (None, None) => None,
    };
    if let Some(source) = dump_files {
        limits.caps.check_dump_files(file, &scenario, source)?;
    }
    // Read before the run, so that a bad file or tolerance stops it before anything is
    // simulated or written, and noted as an input, so that `--timeline` cannot be written over
    // it.
    let measured = (against.measured)
        .map(|path| read_against(file, &scenario, path, &limits.caps))
        .transpose()?;
    let diff_options = measured
        .is_some()
        .then(|| against.tolerance.options())
        .transpose()?;
    if measured.is_some() && outputs.timeline.is_some_and(stdio::is_dash) {
        return Err(Failure::input(
            "--timeline - with --against: the diff takes standard output; write the Timeline to a file",
        ));
    }
    let options = sim::engine::Options {
        summary: outputs.summary.clone(),
        progress: progress::hook(),
        ..limits.engine_options()
    };
    let (timeline, _) = sim::engine::simulate_with(&scenario, options);
    progress::finish();
    if let Some(source) = dump_files {
        limits.caps.check_made_dumps(file, &timeline, source)?;
    }
    if let (Some(measured), Some(diff_options)) = (measured, diff_options) {
        if let Some(path) = outputs.timeline {
            outputs.write_timeline(path, &timeline)?;
        }
        let timeline = timeline.expand();
        fr_cmd::write_dumps(&scenario, &timeline, outputs.fr_dir)?;
        return diff_cmd::print_diff(&measured, &timeline, &diff_options, json);
    }
    let report = metrics::report(&timeline);
    emit(&scenario, &timeline, &report, json, nccl_tests, outputs)?;
    // Races stop nothing in the program, so they fail the run only when asked; every other
    // finding (deadlock, timeout, out of memory…) does.
    let failing = report
        .findings
        .iter()
        .any(|f| fail_on_race || f.kind != sim::timeline::FindingKind::Race);
    Ok(u8::from(failing))
}

/// The measured Timeline of `run --against`, read as `diff` reads one and expanded: it is held
/// beside the simulated one, so the two are held to `--max-timeline` together (the simulated
/// one as estimated before the run), before the file is read and before it expands.
fn read_against(
    file: &Path,
    scenario: &Scenario,
    path: &Path,
    caps: &limits::CapArgs,
) -> Result<Timeline, Failure> {
    let cap = caps.work.timeline.max_timeline;
    let simulated = caps.compared_bytes(scenario);
    let both = |json_bytes: u64| {
        limits::check_compared(
            &format!(
                "{}: run --against {} holds the simulated Timeline beside the measured one",
                file.display(),
                stdio::shown_name(path)
            ),
            [simulated, limits::held_bytes(json_bytes)],
            &format!(
                "the simulated run's estimate, {}, and {} of JSON at {} bytes a byte",
                sim::units::format_size_readable(simulated),
                sim::units::format_size_readable(json_bytes),
                limits::TIMELINE_MEMORY_BYTES_PER_JSON_BYTE
            ),
            "nothing was run",
            cap,
        )
    };
    limits::check_timeline_file(path, cap)?;
    both(stdio::file_size(path).unwrap_or(0))?;
    let (measured, json_bytes) = diff_cmd::read_unexpanded(path, cap)?;
    both(json_bytes)?;
    limits::expand_measured(path, measured, json_bytes, cap)
}

pub(crate) fn emit(
    scenario: &Scenario,
    timeline: &Timeline,
    report: &metrics::Report,
    json: bool,
    nccl_tests: bool,
    outputs: &RunOutputs,
) -> Result<(), Failure> {
    // A file written to stdout (`-`) takes stdout alone: the report goes to stderr. So does
    // nccl-tests' table (without --json), so that stdout reads as all_reduce_perf's does. Two
    // of them were refused before the run (`RunOutputs::check_places`).
    let dashes = outputs.on_stdout().len();
    let table = nccl_tests && !json;
    let shown = |path: &Path| {
        if stdio::is_dash(path) {
            "to standard output".to_string()
        } else {
            path.display().to_string()
        }
    };
    // With `--json` and a file on stdout, stderr holds the JSON report alone.
    let wrote = |what: &str, path: &Path| {
        if !(json && stdio::is_dash(path)) {
            note!("c10dsim: wrote {what} {}", shown(path));
        }
    };
    // Traces and charts show every rank: a folded Timeline is expanded for them (the report
    // weighs its classes instead, docs/scale.md).
    let expanded = std::cell::OnceCell::new();
    let per_rank = || expanded.get_or_init(|| timeline.expand());
    if let Some(path) = outputs.trace {
        trace_out::write_trace(path, per_rank())?;
        wrote("trace", path);
    }
    if let Some(dir) = outputs.trace_dir {
        let ranks = match timeline.source {
            sim::timeline::Source::Simulated => trace_out::Ranks::WholeJob,
            _ => trace_out::Ranks::ThisProcess,
        };
        let timeline = per_rank();
        trace_out::write_trace_dir(dir, timeline, ranks)?;
        note!(
            "c10dsim: wrote {} rank trace{} into {}",
            timeline.ranks.len(),
            if timeline.ranks.len() == 1 { "" } else { "s" },
            dir.display()
        );
    }
    if let Some(path) = outputs.timeline {
        outputs.write_timeline(path, timeline)?;
        wrote("timeline", path);
    }
    fr_cmd::write_dumps(scenario, timeline, outputs.fr_dir)?;
    if let Some(path) = outputs.svg {
        plot::write_timeline_svg(per_rank(), path)?;
        wrote("timeline chart", path);
    }
    let rendered = || text::render_report_with(report, outputs.per_rank);
    if dashes == 1 && json {
        // `--json` with a file on stdout: the JSON report, on stderr.
        let value = serde_json::json!({"parameters": scenario, "report": report});
        pretty_json(std::io::stderr().lock(), &value)?;
        return Ok(());
    }
    if dashes == 1 || table {
        // The whole text report, the scenario's head included, as stdout would have had it.
        eprint!("{}", text::describe_scenario(scenario));
        note!();
        eprint!("{}", rendered());
        if table {
            out!("{}", analysis::nccl_tests::table(per_rank()))?;
        }
        return Ok(());
    }
    if json {
        let mut value = serde_json::json!({"parameters": scenario, "report": report});
        if nccl_tests {
            // `--json --nccl-tests`: the table's rows as a member of the one JSON object.
            value["nccl_tests"] = serde_json::json!(analysis::nccl_tests::rows(per_rank()));
        }
        pretty_json(std::io::stdout().lock(), &value)?;
    } else {
        out!("{}", text::describe_scenario(scenario))?;
        outln!()?;
        out!("{}", rendered())?;
    }
    Ok(())
}

/// Writes `value` as indented JSON (arrays of numbers on one line: a group's ranks) and a
/// newline to `out`, streamed (the findings and watchdog lines of a large run can be long).
fn pretty_json(out: impl std::io::Write, value: &serde_json::Value) -> Result<(), Failure> {
    let mut out = std::io::BufWriter::new(out);
    crate::json_text::write(&mut out, value)
        .map_err(std::io::Error::from)
        .and_then(|()| std::io::Write::write_all(&mut out, b"\n"))
        .and_then(|()| std::io::Write::flush(&mut out))
        .map_err(output_failure)
}
