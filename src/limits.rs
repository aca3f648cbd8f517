//! `--max-events`, `--max-timeline` and `--max-memory` (docs/reliability.md): the caps a run
//! must fit, checked against `sim::limits`'s estimate before it runs (exit 2) and, for
//! memory, while it runs (a `memory_cap` finding, exit 1). The memory in use is the process's
//! resident set, read from /proc (no cap where there is none).

use crate::Failure;
use sim::scenario::Scenario;
use sim::timeline::Timeline;
use std::path::Path;

/// `--max-timeline`, defined once for every command a Timeline's size can refuse: a scenario's
/// estimate before it runs (`run`, `check`, `sweep`, `bench`, and the simulations of
/// `calibrate --validate`, `fidelity` and `import`), a folded Timeline expanded to every rank to
/// be shown or compared, and a Timeline file before it is read (`diff`, `run --against`,
/// `calibrate`, `fidelity`, `hw-merge`, `torch`).
#[derive(clap::Args, Clone, Copy, Debug)]
pub struct TimelineCap {
    /// Refuse (exit 2) what would hold a Timeline larger than this (e.g. 16GiB): a scenario
    /// estimated before it runs, a folded Timeline expanded to every rank to show them or held
    /// to compare them (6 bytes of memory a byte of JSON), a Timeline file read (6 a byte).
    #[arg(
        long,
        value_name = "SIZE",
        default_value = "4GiB",
        value_parser = parse_size,
        allow_hyphen_values = true
    )]
    pub max_timeline: u64,
}

/// The two caps of a scenario's estimate (`--max-events`, `--max-timeline`), shared by every
/// command that simulates a scenario (`run`, `check`, `sweep`, `bench`, and through
/// [`SimulationCaps`] `calibrate`, `fidelity` and `import`).
#[derive(clap::Args, Clone, Copy, Debug)]
pub struct WorkCaps {
    /// Refuse (exit 2) a scenario estimated to need more engine events than this.
    #[arg(
        long,
        value_name = "N",
        default_value_t = sim::limits::Limits::default().max_events,
        allow_negative_numbers = true,
        value_parser = crate::parse_count::<u64>
    )]
    pub max_events: u64,
    #[command(flatten)]
    pub timeline: TimelineCap,
}

/// The caps a scenario's estimate must fit and how ranks are simulated, shared by `run`,
/// `check` and `sweep`.
#[derive(clap::Args, Clone, Copy, Debug)]
pub struct CapArgs {
    #[command(flatten)]
    pub work: WorkCaps,
    /// Simulate every rank, also ranks that behave alike, which are simulated once by default
    /// (docs/scale.md); the report is the same.
    #[arg(long)]
    pub no_fold: bool,
    /// `--detail ranks`: every rank's findings and watchdog records, not one per class of
    /// ranks that behave alike (simulates every rank; docs/scale.md).
    #[arg(long, value_name = "WHAT")]
    pub detail: Option<Detail>,
}

/// `--max-memory`, defined once for every command whose simulation runs (`run`, `sweep`, and
/// through [`SimulationCaps`] `calibrate`, `fidelity` and `import`; `check` runs none).
#[derive(clap::Args, Clone, Copy, Debug, Default)]
pub struct MemoryCap {
    /// Stop a simulation (exit 1, a memory_cap finding) once the process holds more than this
    /// (default: 8GiB or 3/4 of the machine's memory, the smaller).
    #[arg(long, value_name = "SIZE", value_parser = parse_size, allow_hyphen_values = true)]
    pub max_memory: Option<u64>,
}

/// [`CapArgs`] and the memory cap of a simulation that runs (`run` and `sweep`; `check` runs
/// none).
#[derive(clap::Args, Clone, Copy, Debug, Default)]
pub struct LimitArgs {
    #[command(flatten)]
    pub caps: CapArgs,
    #[command(flatten)]
    pub memory: MemoryCap,
}

/// The caps of a command that simulates a scenario it reaches on its own to compare it rank by
/// rank (`calibrate --validate`, `fidelity`, `import kineto --replay`, `import
/// flight-recorder`): those `run` holds it to, its `--max-timeline` also the cap of the
/// Timeline files it reads. It simulates as `run` does by default, folded.
#[derive(clap::Args, Clone, Copy, Debug, Default)]
pub struct SimulationCaps {
    #[command(flatten)]
    pub work: WorkCaps,
    #[command(flatten)]
    pub memory: MemoryCap,
}

/// What `--detail` lists in full.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Detail {
    /// Every rank on its own.
    Ranks,
}

fn parse_size(text: &str) -> Result<u64, String> {
    sim::units::parse_size_bytes(text)
}

impl Default for WorkCaps {
    /// The caps as the flags' defaults set them.
    fn default() -> WorkCaps {
        let limits = sim::limits::Limits::default();
        WorkCaps {
            max_events: limits.max_events,
            timeline: TimelineCap {
                max_timeline: limits.max_timeline_bytes,
            },
        }
    }
}

impl Default for CapArgs {
    /// The caps as the flags' defaults set them.
    fn default() -> CapArgs {
        CapArgs {
            work: WorkCaps::default(),
            no_fold: false,
            detail: None,
        }
    }
}

impl CapArgs {
    /// Refuses, with the estimate's numbers and the flags that raise the caps, a scenario that
    /// exceeds them.
    /// A summarised run (`run --summary`) keeps no Timeline of that size: the Timeline cap does
    /// not apply to it; it simulates every rank, unfolded, and its events are counted so.
    pub fn check(&self, path: &Path, scenario: &Scenario, summarised: bool) -> Result<(), Failure> {
        self.over(scenario, summarised).map_err(|message| {
            let unfolded = if summarised
                && self.estimate(scenario).op_calls < self.estimate_unfolded(scenario).op_calls
            {
                " (--summary simulates every rank, unfolded: docs/scale.md)"
            } else {
                ""
            };
            Failure::input(format!(
                "{}: {message}{unfolded}; nothing was run (raise the caps with --max-events / \
                 --max-timeline)",
                path.display()
            ))
        })
    }

    /// What the estimate of `scenario` exceeds, if anything.
    pub fn over(&self, scenario: &Scenario, summarised: bool) -> Result<(), String> {
        let mut limits = self.limits();
        if summarised {
            limits.max_timeline_bytes = u64::MAX;
            return self.estimate_unfolded(scenario).check(&limits);
        }
        self.estimate(scenario).check(&limits)
    }

    /// Refuses, before the run, outputs that show every rank (`flags`: `--trace`, `--svg`, …)
    /// of a folded run whose Timeline, expanded to every rank for them (docs/scale.md), is
    /// estimated over `--max-timeline`, with the ways to get a smaller output (each a command
    /// line that runs). A run that does not fold was held to the cap already (`check`).
    pub fn check_expanded(
        &self,
        path: &Path,
        scenario: &Scenario,
        flags: &[&str],
    ) -> Result<(), Failure> {
        if flags.is_empty() {
            return Ok(());
        }
        let Some(expanded) = self.expanded_over_cap(scenario) else {
            return Ok(());
        };
        // `--summary` keeps the named ranks' records for traces and charts; clap refuses it
        // with `--nccl-tests` and `--against`, which read every record.
        let summarisable =
            (flags.iter()).all(|flag| !matches!(*flag, "--nccl-tests" | "--against"));
        let summary = if summarisable && expanded.events <= self.work.max_events {
            "trace some ranks and iterations with --summary --records-for 'ranks=0 iterations=0', "
        } else {
            ""
        };
        Err(Failure::input(format!(
            "{}: {} show{} every rank: the folded run's Timeline expanded to all {} ranks for \
             {} is about {} ({} op calls), over the cap of {} (--max-timeline); nothing was run \
             ({summary}run fewer iterations with --set repeat=N, or raise --max-timeline; \
             --timeline writes the folded Timeline)",
            path.display(),
            flags.join(" and "),
            if flags.len() == 1 { "s" } else { "" },
            scenario.cluster.ranks,
            if flags.len() == 1 { "it" } else { "them" },
            sim::units::format_size_readable(expanded.timeline_bytes),
            expanded.op_calls,
            sim::units::format_size(self.work.timeline.max_timeline),
        )))
    }

    /// The estimate of a folded run's Timeline expanded to every rank, where it is over
    /// `--max-timeline` (a run that does not fold was held to the cap by `check`).
    fn expanded_over_cap(&self, scenario: &Scenario) -> Option<sim::limits::WorkEstimate> {
        self.expanded_estimate(scenario)
            .filter(|expanded| expanded.timeline_bytes > self.work.timeline.max_timeline)
    }

    /// The estimate of a folded run's Timeline expanded to every rank; none for a run that
    /// does not fold.
    fn expanded_estimate(&self, scenario: &Scenario) -> Option<sim::limits::WorkEstimate> {
        if !sim::engine::classes(scenario, &self.engine_options()).folded() {
            return None;
        }
        // The expanded dumps share their groups' rank lists, which these outputs never write.
        let mut expanded = self.estimate_unfolded(scenario);
        expanded.timeline_bytes =
            (expanded.timeline_bytes).saturating_sub(expanded.dump_rank_lists_bytes);
        Some(expanded)
    }

    /// The estimated Timeline of `scenario` as a comparison (`run --against`) holds it,
    /// expanded to every rank: the estimate's bytes, which count what a call's records hold in
    /// memory as well (512 bytes a call; measured expanded, 290-530).
    pub fn compared_bytes(&self, scenario: &Scenario) -> u64 {
        self.expanded_estimate(scenario)
            .unwrap_or_else(|| self.estimate(scenario))
            .timeline_bytes
    }

    /// Refuses, before the run, a summarised run's outputs that show the records `selection`
    /// (`--records-for`) keeps whole (`flags`: `--trace`, `--timeline`, …) where those records,
    /// estimated as their ranks' and iterations' share of the unfolded run's Timeline, are over
    /// `--max-timeline`.
    pub fn check_kept_records(
        &self,
        path: &Path,
        scenario: &Scenario,
        selection: &sim::timeline::RecordSelection,
        flags: &[&str],
    ) -> Result<(), Failure> {
        if flags.is_empty() {
            return Ok(());
        }
        // Overlapping ranges count twice: the estimate errs on the large side.
        let selected = |ranges: &Option<Vec<(u32, u32)>>, count: u32| {
            ranges.as_ref().map_or(u64::from(count), |ranges| {
                let listed = ranges
                    .iter()
                    .map(|&(first, last)| u64::from(last.saturating_sub(first)).saturating_add(1));
                listed.sum::<u64>().min(u64::from(count))
            })
        };
        let ranks = selected(&selection.ranks, scenario.cluster.ranks);
        let iterations = selected(&selection.iterations, scenario.repeat);
        let op_calls = u128::from(self.estimate_unfolded(scenario).op_calls);
        let kept_calls = op_calls * u128::from(ranks) * u128::from(iterations)
            / (u128::from(scenario.cluster.ranks) * u128::from(scenario.repeat)).max(1);
        let kept_bytes = u64::try_from(kept_calls)
            .unwrap_or(u64::MAX)
            .saturating_mul(sim::limits::TIMELINE_BYTES_PER_CALL);
        if kept_bytes <= self.work.timeline.max_timeline {
            return Ok(());
        }
        Err(Failure::input(format!(
            "{}: {} show{} the records --records-for keeps: {ranks} ranks x {iterations} \
             iterations, about {} ({kept_calls} op calls), over the cap of {} (--max-timeline); \
             nothing was run (name fewer ranks or iterations with --records-for, e.g. \
             --records-for 'ranks=0 iterations=0', or raise --max-timeline)",
            path.display(),
            flags.join(" and "),
            if flags.len() == 1 { "s" } else { "" },
            sim::units::format_size_readable(kept_bytes),
            sim::units::format_size(self.work.timeline.max_timeline),
        )))
    }

    /// Refuses, before the run, the Flight Recorder dumps written a file per rank (`--fr-dir`,
    /// or the scenario's `TORCH_FR_DUMP_TEMP_FILE`: `source` names which) where their
    /// total, estimated unfolded, is over `--max-timeline`: each lists every rank of its groups,
    /// so the files grow as the square of the ranks however the run is folded.
    pub fn check_dump_files(
        &self,
        path: &Path,
        scenario: &Scenario,
        source: &str,
    ) -> Result<(), Failure> {
        let dumps_bytes = self.estimate_unfolded(scenario).flight_recorder_bytes;
        if dumps_bytes <= self.work.timeline.max_timeline {
            return Ok(());
        }
        Err(Failure::input(format!(
            "{}: {source} writes a Flight Recorder dump for each of the {} ranks, each listing \
             every rank of its groups: about {} in all, over the cap of {} (--max-timeline); \
             nothing was run (run fewer ranks with --set cluster.ranks=N, or raise \
             --max-timeline; --timeline keeps a dump per class of ranks in its flight_recorder \
             section)",
            path.display(),
            scenario.cluster.ranks,
            sim::units::format_size_readable(dumps_bytes),
            sim::units::format_size(self.work.timeline.max_timeline),
        )))
    }

    /// Refuses, after the run and before anything is written, the Flight Recorder dumps the
    /// run made, a file per rank (`source` as for [`Self::check_dump_files`]), where their
    /// files would be over `--max-timeline`: measured, a dump that stands for a class of ranks
    /// counted once per rank. The estimate before the run cannot see every timeout (a backlog
    /// of long kernels, a straggler's run-ahead), so it is not the only check.
    pub fn check_made_dumps(
        &self,
        path: &Path,
        timeline: &Timeline,
        source: &str,
    ) -> Result<(), Failure> {
        let (mut ranks, mut dumps_bytes) = (0u64, 0u64);
        for (dump, stands_for) in timeline.dumps_standing_for() {
            let copies = stands_for.map_or(1, |ranks| ranks.count());
            let bytes = analysis::flight_recorder::write(dump).len() as u64;
            ranks = ranks.saturating_add(copies);
            dumps_bytes = dumps_bytes.saturating_add(bytes.saturating_mul(copies));
        }
        if dumps_bytes <= self.work.timeline.max_timeline {
            return Ok(());
        }
        Err(Failure::input(format!(
            "{}: {source} writes the Flight Recorder dumps of the {ranks} ranks that dumped, each \
             listing every rank of its groups: {} in all, over the cap of {} (--max-timeline); \
             the run was simulated and nothing was written (run fewer ranks with --set \
             cluster.ranks=N, or raise --max-timeline; --timeline keeps a dump per class of \
             ranks in its flight_recorder section)",
            path.display(),
            sim::units::format_size_readable(dumps_bytes),
            sim::units::format_size(self.work.timeline.max_timeline),
        )))
    }

    /// The work `scenario` asks for, simulated as these flags say (folded unless `--no-fold`
    /// or `--detail ranks`).
    pub fn estimate(&self, scenario: &Scenario) -> sim::limits::WorkEstimate {
        let classes = sim::engine::classes(scenario, &self.engine_options());
        sim::limits::estimate_for(scenario, &classes)
    }

    /// The work of `scenario` simulated rank by rank, as `run --summary` simulates it; its
    /// Timeline is also the folded run's expanded to every rank (`Timeline::expand`).
    fn estimate_unfolded(&self, scenario: &Scenario) -> sim::limits::WorkEstimate {
        let options = sim::engine::Options {
            summary: Some(sim::timeline::RecordSelection::default()),
            ..self.engine_options()
        };
        let classes = sim::engine::classes(scenario, &options);
        sim::limits::estimate_for(scenario, &classes)
    }

    /// The estimate's caps.
    pub fn limits(&self) -> sim::limits::Limits {
        sim::limits::Limits {
            max_events: self.work.max_events,
            max_timeline_bytes: self.work.timeline.max_timeline,
        }
    }

    /// Engine options that simulate ranks as these flags say.
    fn engine_options(&self) -> sim::engine::Options {
        sim::engine::Options {
            fold: !self.no_fold,
            per_rank_detail: self.detail == Some(Detail::Ranks),
            ..sim::engine::Options::default()
        }
    }
}

impl MemoryCap {
    /// The cap in bytes: the one given, else the default.
    fn bytes(&self) -> u64 {
        self.max_memory.unwrap_or_else(default_memory_cap)
    }
}

impl LimitArgs {
    /// Engine options with the memory cap.
    pub fn engine_options(&self) -> sim::engine::Options {
        sim::engine::Options {
            memory_in_use: Some(resident_bytes),
            max_memory_bytes: self.memory.bytes(),
            ..self.caps.engine_options()
        }
    }
}

impl SimulationCaps {
    /// The cap of each Timeline file the command reads (`--max-timeline`).
    pub fn max_timeline(&self) -> u64 {
        self.work.timeline.max_timeline
    }

    /// Simulates a scenario the command reaches on its own (the one a measured Timeline names,
    /// one it imported), as `run` would: refused (exit 2) when its estimate is over the caps,
    /// or when its Timeline, expanded to every rank, would be; stopped past the memory cap,
    /// where its Timeline ends, and not compared (exit 1, the `memory_cap` finding's words).
    /// Its Timeline, expanded.
    pub fn simulate(&self, path: &Path, scenario: &Scenario) -> Result<Timeline, Failure> {
        let caps = LimitArgs {
            caps: CapArgs {
                work: self.work,
                ..CapArgs::default()
            },
            memory: self.memory,
        };
        caps.caps.over(scenario, false).map_err(|message| {
            Failure::input(format!(
                "{}: {message}; nothing was run (this command simulates the scenario to compare \
                 it: raise the caps with --max-events / --max-timeline)",
                path.display()
            ))
        })?;
        // Compared rank by rank, the Timeline is expanded: held to the cap as `run --trace`
        // holds it.
        if let Some(expanded) = caps.caps.expanded_over_cap(scenario) {
            return Err(Failure::input(format!(
                "{}: this command compares the Timeline rank by rank: expanded to all {} ranks \
                 it is about {} ({} op calls), over the cap of {} (--max-timeline); nothing was \
                 run (raise --max-timeline)",
                path.display(),
                scenario.cluster.ranks,
                sim::units::format_size_readable(expanded.timeline_bytes),
                expanded.op_calls,
                sim::units::format_size(self.max_timeline()),
            )));
        }
        let timeline = sim::engine::simulate_with(scenario, caps.engine_options()).0;
        let memory_cap = sim::timeline::FindingKind::MemoryCap;
        if let Some(stopped) = timeline.findings.iter().find(|f| f.kind == memory_cap) {
            return Err(Failure {
                code: 1,
                message: format!(
                    "{}: {}; nothing was compared (raise --max-memory)",
                    path.display(),
                    stopped.message
                ),
            });
        }
        expand_capped(path, timeline, self.max_timeline())
    }
}

/// Bytes of memory a Timeline takes per byte of its JSON while a command holds it: read (its
/// text and the Timeline parsed from it), expanded to every rank (`Timeline::expand`), or as one
/// side of a comparison (its share of `diff`'s own working set). Measured (release build,
/// `/usr/bin/time`, peak resident set less the process's own, over the JSON bytes held), a side
/// of `diff` of a folded Timeline against itself, expanded: scenarios/straggler.toml at 4,096
/// ranks 1.33, overlap_bench.toml at 2,048 1.50, exp_a_api_modes.toml and exp_b_stream_scope.toml
/// at 4,096 1.72 and 1.88, hang_10min.toml at 4,096 and 65,536 2.03 and 1.97, marks and GPU
/// sleeps 2.72, host sleeps alone 4.85-4.94; read, unfolded: the catalogue's runs 1.34-2.64 (3.26
/// in address space, which `ulimit -v` counts), host sleeps alone 4.71 (`run --against`) and 5.06
/// a side of `diff`. A host call is small in JSON and a record of fixed size in memory. Rounded
/// up.
pub const TIMELINE_MEMORY_BYTES_PER_JSON_BYTE: u64 = 6;

/// The memory that holding `json_bytes` of Timeline takes, at
/// [`TIMELINE_MEMORY_BYTES_PER_JSON_BYTE`].
pub fn held_bytes(json_bytes: u64) -> u64 {
    json_bytes.saturating_mul(TIMELINE_MEMORY_BYTES_PER_JSON_BYTE)
}

/// The text of the Timeline file `path` (`-`: standard input), refused (exit 2) before it is
/// read where reading it ([`held_bytes`] of the file) would hold more than `max_timeline_bytes`
/// (`--max-timeline`, [`check_timeline_file`]); standard input, whose size is known only as it
/// is read, is read no further than that share of the cap.
pub fn read_timeline_text(path: &Path, max_timeline_bytes: u64) -> Result<String, Failure> {
    check_timeline_file(path, max_timeline_bytes)?;
    let max_file_bytes = max_timeline_bytes / TIMELINE_MEMORY_BYTES_PER_JSON_BYTE;
    crate::stdio::read_text_within(path, max_file_bytes)?
        .ok_or_else(|| read_refusal(path, None, max_timeline_bytes))
}

/// Refuses (exit 2), before it is read, the Timeline file `path` whose reading would hold more
/// than `max_timeline_bytes`: its size is known (standard input's is not).
pub fn check_timeline_file(path: &Path, max_timeline_bytes: u64) -> Result<(), Failure> {
    let max_file_bytes = max_timeline_bytes / TIMELINE_MEMORY_BYTES_PER_JSON_BYTE;
    match crate::stdio::file_size(path).filter(|&size| size > max_file_bytes) {
        Some(size) => Err(read_refusal(path, Some(size), max_timeline_bytes)),
        None => Ok(()),
    }
}

/// The refusal of a Timeline file of `size` bytes (none: more than the cap's share, read so
/// far) over `max_timeline_bytes`.
fn read_refusal(path: &Path, size: Option<u64>, max_timeline_bytes: u64) -> Failure {
    let per_byte = TIMELINE_MEMORY_BYTES_PER_JSON_BYTE;
    let (more, file_bytes, read) = match size {
        Some(bytes) => ("", bytes, "nothing was read"),
        None => (
            "more than ",
            max_timeline_bytes / per_byte,
            "it was read no further",
        ),
    };
    Failure::input(format!(
        "{}: a Timeline file of {more}{file_bytes} bytes: reading it would hold {}{} of memory \
         ({per_byte} bytes a byte of the file: its text and the Timeline parsed from it), over \
         the cap of {} (--max-timeline); {read} (give a Timeline of fewer iterations or ranks, \
         or raise --max-timeline)",
        crate::stdio::shown_name(path),
        if size.is_some() {
            "about "
        } else {
            "more than "
        },
        sim::units::format_size_readable(held_bytes(file_bytes)),
        sim::units::format_size(max_timeline_bytes),
    ))
}

/// Whether a command that compares or shows every rank expands `timeline` first: a folded one,
/// or a summarised one whose dumps stand for several ranks.
fn needs_expansion(timeline: &Timeline) -> bool {
    timeline.is_folded() || timeline.has_dumps_for_several_ranks()
}

/// The JSON bytes of `timeline` as a command that compares every rank holds it: expanded
/// (`Timeline::expanded_bytes`) where it is expanded, else `json_bytes`, those it was read
/// from.
pub fn compared_json_bytes(timeline: &Timeline, json_bytes: u64) -> u64 {
    if needs_expansion(timeline) {
        timeline.expanded_bytes()
    } else {
        json_bytes
    }
}

/// Refuses (exit 2) a comparison of two Timelines (`diff`, `run --against`) whose memory held
/// together, `held` (each side's, in the order `parts` names them), is over
/// `max_timeline_bytes` (`--max-timeline`): `who` says what holds them, `parts` what each side
/// is, `done` what was not done.
pub fn check_compared(
    who: &str,
    held: [u64; 2],
    parts: &str,
    done: &str,
    max_timeline_bytes: u64,
) -> Result<(), Failure> {
    let total = held[0].saturating_add(held[1]);
    if total <= max_timeline_bytes {
        return Ok(());
    }
    Err(Failure::input(format!(
        "{who}, each expanded to every rank where it is folded: about {} of memory ({parts}), \
         over the cap of {} (--max-timeline); {done} (give Timelines of fewer iterations or \
         ranks, as `c10dsim run --set repeat=N` or `c10dsim run --set cluster.ranks=N` writes \
         one, or raise --max-timeline)",
        sim::units::format_size_readable(total),
        sim::units::format_size(max_timeline_bytes),
    )))
}

/// `timeline` expanded to every rank (`Timeline::expand`) for a command that compares or shows
/// every rank (`diff`, `calibrate`, `fidelity`, `run --against`, the replays); refused (exit 2)
/// before it expands where the expanded Timeline would hold more than `max_timeline_bytes` of
/// memory ([`held_bytes`] of its JSON): a folded Timeline of 65,536 ranks x 10^6 iterations is
/// 135 MB and expands to terabytes.
pub fn expand_capped(
    path: &Path,
    timeline: Timeline,
    max_timeline_bytes: u64,
) -> Result<Timeline, Failure> {
    if !needs_expansion(&timeline) {
        return Ok(timeline);
    }
    let expanded_bytes = timeline.expanded_bytes();
    expand_measured(path, timeline, expanded_bytes, max_timeline_bytes)
}

/// [`expand_capped`] of a Timeline whose JSON bytes as compared are known, `expanded_bytes`
/// ([`compared_json_bytes`]).
pub fn expand_measured(
    path: &Path,
    timeline: Timeline,
    expanded_bytes: u64,
    max_timeline_bytes: u64,
) -> Result<Timeline, Failure> {
    if !needs_expansion(&timeline) {
        return Ok(timeline);
    }
    if held_bytes(expanded_bytes) > max_timeline_bytes {
        return Err(Failure::input(format!(
            "{}: a folded Timeline: expanded to all {} ranks, as this command compares them \
             rank by rank, it is about {} of JSON and would hold about {} of memory ({} bytes \
             a byte of JSON), over the cap of {} (--max-timeline); nothing was compared (give a \
             Timeline of fewer iterations or ranks, as `c10dsim run --set repeat=N` or \
             `c10dsim run --set cluster.ranks=N` writes one, or raise --max-timeline)",
            path.display(),
            timeline.scenario.ranks,
            sim::units::format_size_readable(expanded_bytes),
            sim::units::format_size_readable(held_bytes(expanded_bytes)),
            TIMELINE_MEMORY_BYTES_PER_JSON_BYTE,
            sim::units::format_size(max_timeline_bytes),
        )));
    }
    Ok(timeline.expand())
}

/// Writes `timeline` to `path` as `write_json` does, but stops once it passes `cap_bytes`
/// (`--max-timeline`), and keeps nothing of it (standard output keeps what it was sent): the
/// estimate before the run errs on the large side but does not cover everything (a summarised
/// run's named ranks), so the cap holds here too. The message says how large the
/// `flight_recorder` section is, each of whose dumps lists every rank of its groups.
pub fn write_capped_timeline(
    path: &Path,
    timeline: &Timeline,
    cap_bytes: u64,
) -> Result<(), Failure> {
    crate::stdio::replace(path, |out| {
        let mut capped = CappedWriter {
            out,
            written_bytes: 0,
            cap_bytes,
        };
        let written = serde_json::to_writer(&mut capped, timeline)
            .map_err(std::io::Error::from)
            .and_then(|()| {
                if crate::stdio::is_dash(path) {
                    std::io::Write::write_all(&mut capped, b"\n")?;
                }
                Ok(())
            });
        written.map_err(|error| {
            if capped.written_bytes <= cap_bytes {
                return error;
            }
            let mut counted = CappedWriter {
                out: &mut std::io::sink(),
                written_bytes: 0,
                cap_bytes: u64::MAX,
            };
            let dumps = serde_json::to_writer(&mut counted, &timeline.flight_recorder)
                .map(|()| counted.written_bytes)
                .unwrap_or(0);
            std::io::Error::other(format!(
                "the Timeline passed the cap of {} (--max-timeline) as it was written, so it \
                 was stopped there and not kept; its flight_recorder section alone is {} \
                 ({} Flight Recorder dump{}, each listing every rank of its groups)",
                sim::units::format_size(cap_bytes),
                sim::units::format_size_readable(dumps),
                timeline.flight_recorder.len(),
                if timeline.flight_recorder.len() == 1 {
                    ""
                } else {
                    "s"
                },
            ))
        })
    })
}

/// A writer that fails once more than `cap_bytes` would have been written through it.
struct CappedWriter<'a> {
    out: &'a mut dyn std::io::Write,
    written_bytes: u64,
    cap_bytes: u64,
}

impl std::io::Write for CappedWriter<'_> {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        let after_bytes = self.written_bytes.saturating_add(bytes.len() as u64);
        if after_bytes > self.cap_bytes {
            self.written_bytes = after_bytes;
            return Err(std::io::Error::other("over --max-timeline"));
        }
        let written = self.out.write(bytes)?;
        self.written_bytes += written as u64;
        Ok(written)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}

/// 8 GiB, or three quarters of the machine's memory when that is less.
fn default_memory_cap() -> u64 {
    let eight_gib = 8 << 30;
    let total = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|text| {
            let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
            let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
            Some(kib * 1024)
        });
    total.map_or(eight_gib, |bytes| (bytes / 4 * 3).min(eight_gib))
}

/// The process's resident set (0 where /proc is missing: no cap).
fn resident_bytes() -> u64 {
    const PAGE_BYTES: u64 = 4096;
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|text| text.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map_or(0, |pages| pages * PAGE_BYTES)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A command that simulates a scenario on its own compares it rank by rank, expanded: the
    /// expanded Timeline is held to the cap as `run --trace` holds it, before anything runs. Only
    /// the folded one was, so a `calibrate --validate` run of 65,536 ranks x `repeat = 1000`
    /// (about 32 GiB expanded) would have been simulated, then expanded past the machine's memory.
    #[test]
    fn a_command_s_own_simulation_holds_the_expanded_timeline_to_the_cap() {
        let text = "repeat = 1000\n[cluster]\nranks = 64\n[[op]]\nhost_sleep_us = 1\n";
        let scenario = sim::scenario::parse("big.toml", text).unwrap();
        let path = Path::new("big.toml");
        let mut caps = SimulationCaps::default();
        caps.work.timeline.max_timeline = 4 << 20;
        let folded = CapArgs::default().estimate(&scenario).timeline_bytes;
        assert!(folded < caps.max_timeline(), "folded, {folded} bytes fit");
        let refused = caps.simulate(path, &scenario).map(|t| t.ranks.len());
        let message = refused.err().map(|f| f.message).unwrap_or_default();
        assert!(
            message.contains("big.toml: ") && message.contains("over the cap of 4MiB"),
            "{message}"
        );
        caps.work.timeline.max_timeline = 64 << 20;
        let timeline = caps.simulate(path, &scenario).map_err(|f| f.message);
        assert_eq!(timeline.map(|t| t.ranks.len()), Ok(64));
    }

    /// A hang's every rank dumps its Flight Recorder, each dump listing every rank of its groups
    /// in JSON: the square of the ranks, which --trace, --svg and --nccl-tests never write and
    /// the expanded Timeline's dumps share (one list per group). Counted, 65,536 ranks of
    /// hang_10min were refused --trace at about 32 GiB; the trace is 380 MB, 154 MB at peak.
    #[test]
    fn outputs_that_show_every_rank_leave_the_dumps_rank_lists_out() {
        let text = "[cluster]\nranks = 4096\n[groups.world]\neager_init = true\n\
                    [tensors]\ng = \"1MiB\"\n[[op]]\nlabel = \"ar\"\nall_reduce = \"g\"\n\
                    [[fault]]\nranks = [3]\nat = \"ar\"\nkind = \"hang\"\n";
        let scenario = sim::scenario::parse("hang.toml", text).unwrap();
        let caps = CapArgs {
            work: WorkCaps {
                timeline: TimelineCap {
                    max_timeline: 64 << 20,
                },
                ..WorkCaps::default()
            },
            ..CapArgs::default()
        };
        assert!(
            caps.estimate_unfolded(&scenario).flight_recorder_bytes
                > caps.work.timeline.max_timeline
        );
        let shown = caps.check_expanded(Path::new("hang.toml"), &scenario, &["--trace"]);
        assert_eq!(shown.map_err(|f| f.message), Ok(()));
        // The dump files do list them: --fr-dir is still held to the cap.
        let dumps = caps.check_dump_files(Path::new("hang.toml"), &scenario, "--fr-dir");
        assert!(dumps.is_err());
    }
}
