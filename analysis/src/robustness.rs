//! The readers of user input, each fed raw bytes and then, when it accepts them, passed
//! through what consumes its result: the entry points of the fuzz targets (`fuzz/`, cargo fuzz)
//! and of the stable test that replays their corpus (`analysis/tests/fuzz_corpus.rs`). Each
//! returns whether the input was accepted; what it must never do is panic, hang or abort
//! (docs/reliability.md).
//!
//! None of them simulates but [`simulation`], which takes only scenarios small enough to run in
//! milliseconds, through the simulator its caller passes (`analysis` never calls the engine
//! itself): how much work a valid scenario asks for is bounded by `sim::limits`, which the
//! scenario entry point also evaluates.

use crate::import::{kineto, replay};
use crate::{calibrate, diff, flight_recorder, metrics, plot, sweep, text, trace};
use sim::scenario::{self, Override, Scenario};
use sim::sweep::{AxisArg, Sweep};
use sim::timeline::{RecordSelection, Timeline};

/// A scenario file: parsed and resolved, its `[sweep]` table read, its work estimated.
pub fn scenario(data: &[u8]) -> bool {
    let Ok(text) = std::str::from_utf8(data) else {
        return false;
    };
    let parsed = scenario::parse("fuzz.toml", text);
    let _ = Sweep::parse("fuzz.toml", text, &[]);
    match parsed {
        Ok(scenario) => {
            let _ = sim::limits::estimate(&scenario);
            let _ = text::describe_scenario(&scenario);
            true
        }
        Err(_) => false,
    }
}

/// The most engine events (`sim::limits`'s estimate, unfolded) and ranks of a scenario that
/// [`simulation`] runs.
pub const SIMULATION_EVENTS: u64 = 20_000;
pub const SIMULATION_RANKS: u32 = 16;

/// How [`simulation`]'s caller simulates a scenario: folded or not, summarised with a record
/// selection or not (`sim::engine::simulate_with` with those options, its Timeline folded
/// where it folded).
pub type Simulate<'a> = &'a dyn Fn(&Scenario, bool, Option<RecordSelection>) -> Timeline;

/// A scenario small enough to simulate at once (at most [`SIMULATION_RANKS`] ranks and
/// [`SIMULATION_EVENTS`] estimated engine events unfolded): simulated folded, unfolded (twice)
/// and summarised (`run --summary`). The two unfolded runs must be the same (determinism), the
/// folded Timeline, expanded, must be the unfolded one as JSON, and the summarised run's report
/// the unfolded run's, as printed (docs/scale.md, docs/timeline-format.md#summaries); a
/// difference panics, as the engine's bug. What the run
/// finds (a deadlock, a timeout, the time cap) is an outcome, not a failure. False for anything
/// it does not simulate.
pub fn simulation(data: &[u8], simulate: Simulate) -> bool {
    let Ok(text) = std::str::from_utf8(data) else {
        return false;
    };
    let Ok(scenario) = scenario::parse("fuzz.toml", text) else {
        return false;
    };
    let every_rank = sim::fold::Classes::of(&scenario, false);
    if scenario.cluster.ranks > SIMULATION_RANKS
        || sim::limits::estimate_for(&scenario, &every_rank).events > SIMULATION_EVENTS
    {
        return false;
    }
    let run = |fold: bool, summary: Option<RecordSelection>| simulate(&scenario, fold, summary);
    let json =
        |timeline: &Timeline| serde_json::to_string(timeline).expect("a Timeline serialises");
    let unfolded = run(false, None);
    let unfolded_json = json(&unfolded);
    assert!(
        json(&run(false, None)) == unfolded_json,
        "two runs of the same scenario and seed differ:\n{text}"
    );
    assert!(
        json(&run(true, None).expand()) == unfolded_json,
        "the folded run, expanded, differs from the unfolded one:\n{text}"
    );
    let none = RecordSelection::parse("none").expect("`none` parses");
    let printed = |timeline: &Timeline| text::render_report(&metrics::report(timeline));
    assert!(
        printed(&run(false, Some(none))) == printed(&unfolded),
        "the summarised run's report differs from the full run's:\n{text}"
    );
    true
}

/// `--set KEY=VALUE` (first line) on a scenario (the rest): the argument parsed as an override
/// and as a sweep axis, applied, and the result parsed.
pub fn set_override(data: &[u8]) -> bool {
    let Ok(text) = std::str::from_utf8(data) else {
        return false;
    };
    let (argument, scenario_text) = text.split_once('\n').unwrap_or((text, ""));
    let axis = AxisArg::parse(argument);
    if let Ok(axis) = &axis {
        let _ = Sweep::parse("fuzz.toml", scenario_text, std::slice::from_ref(axis));
    }
    let Ok(set) = Override::parse(argument) else {
        return false;
    };
    // How a Timeline records the run's overrides reads back as them (`calibrate`, `fidelity`),
    // unless the argument itself holds the separator.
    let invocation = scenario::Invocation {
        overrides: vec![set.clone()],
        ..scenario::Invocation::default()
    };
    let recorded = scenario::recorded_invocation("fuzz.toml", &invocation);
    if !set.to_string().contains(" --set ") {
        assert_eq!(
            scenario::read_recorded_invocation(&recorded),
            Ok(("fuzz.toml", vec![set.clone()])),
            "a recorded --set reads back otherwise"
        );
    }
    match sim::sweep::apply_overrides_with_ops(scenario_text, &[set]) {
        Ok(edited) => scenario::parse("fuzz.toml", &edited).is_ok(),
        Err(_) => false,
    }
}

/// A Timeline file: read and checked, then reported, traced and diffed against itself.
pub fn timeline(data: &[u8]) -> bool {
    let Ok(text) = std::str::from_utf8(data) else {
        return false;
    };
    let Ok(timeline) = Timeline::from_json(text) else {
        return false;
    };
    let report = metrics::report(&timeline);
    let _ = text::render_report(&report);
    let _ = trace::write_chrome_trace(&timeline, &mut std::io::sink());
    let traces = trace::RankTraces::new(&timeline);
    for (position, _) in traces.files() {
        let _ = traces.write(position, &mut std::io::sink());
    }
    let compared = diff::diff(&timeline, &timeline, &diff::DiffOptions::default());
    let _ = diff::render_diff(&compared);
    true
}

/// The scenario a profile is applied to: one of the catalogue's, with a `[host]` and a
/// `[network]` table.
const PROFILE_TARGET: &str = include_str!("../../scenarios/exp_b_stream_scope.toml");

/// A machine profile: parsed, then applied to a scenario both ways (`machine = …` and
/// `--machine`) and the results parsed.
pub fn profile(data: &[u8]) -> bool {
    let Ok(text) = std::str::from_utf8(data) else {
        return false;
    };
    let Ok(profile) = calibrate::parse_profile("fuzz.toml", text) else {
        return false;
    };
    let _ = calibrate::render_profile(&profile, &[]);
    for mode in [
        calibrate::ProfileMode::FillUnset,
        calibrate::ProfileMode::Replace,
    ] {
        if let Ok(edited) = calibrate::apply_profile(PROFILE_TARGET, &profile, mode) {
            let _ = scenario::parse("fuzz.toml", &edited);
        }
    }
    true
}

/// `c10dsim calibrate RUN.json=SCENARIO.toml`: a scenario (the bytes before the first NUL) and a
/// measured Timeline of it (after). The Timeline's recorded `--set`s and its measurement's
/// overrides are applied to the scenario, the pair is checked as `calibrate` checks it, a profile
/// is fitted from an empty prior and, when it is usable, written: what `calibrate -o` writes must
/// read back as a usable profile, else it panics, as the fit's bug. Accepted when a profile was
/// fitted.
pub fn calibration(data: &[u8]) -> bool {
    let Ok(text) = std::str::from_utf8(data) else {
        return false;
    };
    let Some((scenario_text, timeline_text)) = text.split_once('\0') else {
        return false;
    };
    let Ok(timeline) = Timeline::from_json(timeline_text) else {
        return false;
    };
    // `calibrate` expands a folded Timeline; a small one is enough here.
    if timeline.is_folded() && timeline.scenario.ranks > SIMULATION_RANKS {
        return false;
    }
    let timeline = timeline.expand();
    let Ok((_, mut sets)) = scenario::read_recorded_invocation(&timeline.scenario.path) else {
        return false;
    };
    sets.extend(calibrate::measurement_overrides(&timeline));
    let Ok(edited) = sim::sweep::apply_overrides_with_ops(scenario_text, &sets) else {
        return false;
    };
    let Ok(scenario) = scenario::parse("fuzz.toml", &edited) else {
        return false;
    };
    if calibrate::check_pairing(&timeline, &scenario).is_err()
        || calibrate::nothing_to_fit(&timeline).is_some()
    {
        return false;
    }
    let runs = [calibrate::CalibrationRun {
        scenario: &scenario,
        timeline: &timeline,
    }];
    let calibration = calibrate::calibrate(&runs, &calibrate::Profile::default());
    let _ = calibrate::render_fitted(&calibration.fitted);
    if calibrate::check_usable(&calibration.profile).is_ok() {
        let written = calibrate::render_profile(&calibration.profile, &calibration.fitted);
        match calibrate::parse_profile("fuzz.toml", &written) {
            Ok(read) => {
                if let Err(why) = calibrate::check_usable(&read) {
                    panic!("the written profile is not usable once read: {why}\n{written}");
                }
            }
            Err(error) => panic!("the written profile does not read: {error}\n{written}"),
        }
    }
    true
}

/// A sweep CSV: read, its point count checked and put in point order (as `--resume` and `merge`
/// do) and charted (as `plot`
/// does: its second column against its last).
pub fn sweep_csv(data: &[u8]) -> bool {
    let Ok((header, rows)) = sweep::read_table(data) else {
        return false;
    };
    let _ = sweep::sweep_points(&header, &rows);
    let Ok(rows) = sweep::rows_in_point_order(rows) else {
        return false;
    };
    let rows: Vec<Vec<String>> = rows
        .iter()
        .map(|row| row.iter().map(ToString::to_string).collect())
        .collect();
    if let (Some(x), Some(y)) = (header.get(1), header.last()) {
        let query = plot::ChartQuery {
            x,
            y,
            by: header.get(2).map(String::as_str),
            filters: &[],
        };
        let _ = plot::line_chart(&header, &rows, &query);
    }
    true
}

/// A Flight Recorder dump (pickle): read as rank 0's and as rank 1's, each written back and
/// read again (it must read the same), and both made a scenario that must parse, as
/// `import flight-recorder` does (without running it).
pub fn flight_recorder(data: &[u8]) -> bool {
    let Ok(dump) = flight_recorder::read(data, 0) else {
        return false;
    };
    let bytes = flight_recorder::write(&dump);
    let again = flight_recorder::read(&bytes, 0).expect("a dump written back reads");
    assert_eq!(
        flight_recorder::write(&again),
        bytes,
        "a dump written back reads the same"
    );
    let mut other = dump.clone();
    other.rank = 1;
    for dumps in [vec![dump.clone()], vec![dump, other]] {
        if let Ok(text) = flight_recorder::import::scenario(&dumps, "fuzz") {
            if let Err(error) = scenario::parse("fuzz.toml", &text) {
                panic!("an imported scenario does not parse: {error}\n{text}");
            }
        }
    }
    true
}

/// A torch.profiler trace (one rank, or a file of every rank): imported (as it is, and with the
/// what-if re-bucketed), the
/// traced replay figures taken, and every scenario the importer writes parsed. An import that
/// does not parse is the importer's bug, and panics here.
pub fn kineto(data: &[u8]) -> bool {
    let Ok(text) = std::str::from_utf8(data) else {
        return false;
    };
    let file = kineto::TraceFile {
        name: "fuzz.json",
        text,
    };
    let Ok(traces) = kineto::Trace::parse_file(&file) else {
        return false;
    };
    let traced: Vec<replay::StepFigures> = traces.iter().flat_map(replay::traced).collect();
    let _ = replay::render(&traced, &[]);
    let mut accepted = false;
    for bucket_bytes in [None, Some(100 << 20)] {
        let options = kineto::KinetoOptions { bucket_bytes };
        if let Ok(imported) = kineto::import_traces(&traces, &options) {
            if let Err(error) = scenario::parse("fuzz.toml", &imported) {
                panic!("the imported scenario does not parse: {error}\n{imported}");
            }
            accepted = true;
        }
    }
    accepted
}

/// The command line's value parsers, one argument per line: `--records-for` (a selection of
/// ranks and iterations), `--shard I/N`, and the sizes of `--bucket`, `--max-memory` and
/// `--max-timeline`; each accepted value is used as the command uses it. Accepted when one line
/// parses.
pub fn arguments(data: &[u8]) -> bool {
    let Ok(text) = std::str::from_utf8(data) else {
        return false;
    };
    let mut accepted = false;
    for line in text.lines() {
        if let Ok(selection) = sim::timeline::RecordSelection::parse(line) {
            for rank in [0, 1, 7, u32::MAX] {
                let _ = selection.keeps(rank, rank);
            }
            accepted = true;
        }
        if let Ok(shard) = sim::sweep::Shard::parse(line) {
            for total in [0, 1, 1_000, u64::MAX] {
                let _ = shard.len(total);
                let _ = shard.indices(total).take(4).count();
            }
            accepted = true;
        }
        if let Ok(bytes) = sim::units::parse_size_bytes(line) {
            let _ = sim::units::format_size(bytes);
            accepted = true;
        }
    }
    accepted
}

/// PyTorch's stderr of a launch (`c10dsim torch`): the first line the run's time 0 (its Unix
/// time in ns, optionally followed by its `CLOCK_MONOTONIC` ns), the rest the log, read into
/// watchdog records of a job with the groups `world` and `pair`. Accepted when a record is read.
pub fn torch_log(data: &[u8]) -> bool {
    let Ok(text) = std::str::from_utf8(data) else {
        return false;
    };
    let (origin, log) = text.split_once('\n').unwrap_or((text, ""));
    let mut clocks = origin.split_whitespace().map(|field| field.parse().ok());
    let origin = crate::torch_log::LogOrigin {
        unix_ns: clocks.next().flatten().unwrap_or(0),
        monotonic_ns: clocks.next().flatten(),
    };
    let groups = ["world".to_string(), "pair".to_string()];
    !crate::torch_log::watchdog_records(log, origin, &groups).is_empty()
}
