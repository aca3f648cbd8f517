//! # c10dsim-analysis: pure functions over Timelines
//!
//! The R3 metrics (`host_call_us`, `stream_interval_us`, `completed_at_wait`, `overlap`) and the
//! scenario's named measures ([`metrics::report`]), the Chrome traces that open in Perfetto and
//! load in Holistic Trace Analysis ([`trace::write_chrome_trace`], [`trace::RankTraces`]), the
//! text tables `c10dsim run` prints ([`text`]), the comparison of
//! two Timelines ([`diff::diff`]), machine profiles fitted to measured ones
//! ([`calibrate::calibrate`]) and the spread of repeated measurements ([`spread::Spread`]).
//! Also: the fidelity table ([`fidelity`]), other tools' files turned into scenarios (a
//! torch.profiler trace, [`import`]; Flight Recorder dumps, read and written as bytes,
//! [`flight_recorder`]), PyTorch's log lines as Timeline records ([`torch_log`]) and the join of a
//! `c10dsim torch` run's rank files with them ([`torch_join`]), sweep CSV rows
//! ([`sweep`]), charts ([`plot`], [`gantt`]), nccl-tests' table ([`nccl_tests`]) and the
//! fuzzing targets' entry points ([`robustness`]).
//!
//! Invariant: nothing here runs a simulation or touches a file, clock or GPU; every function
//! maps Timelines (from the simulator or from the hardware backend alike), or the bytes of a file
//! the caller read, to values (the traces are written to a writer the caller opens).
//!
//! ```
//! let text = "repeat = 3\nwarmup = 1\n[cluster]\nranks = 2\n[tensors]\nx = \"64MiB\"\n\
//!             [[op]]\nlabel = \"ar\"\nall_reduce = \"x\"\n";
//! let scenario = sim::scenario::parse("doc.toml", text).unwrap();
//! let timeline = sim::engine::simulate(&scenario);
//! let report = analysis::metrics::report(&timeline);
//! assert_eq!(report.collectives[0].op, "ar");
//! // A sync all_reduce returns on the host long before its stream interval ends (R11).
//! let ar = &report.collectives[0];
//! assert!(ar.host_call_us.median < ar.stream_interval_us.median);
//! ```

pub mod calibrate;
pub mod diff;
pub mod fidelity;
pub mod flight_recorder;
pub mod gantt;
pub mod import;
pub mod metrics;
pub mod nccl_tests;
pub mod plot;
pub mod robustness;
pub mod spread;
pub mod sweep;
#[cfg(test)]
mod test_scenarios;
pub mod text;
pub mod torch_join;
pub mod torch_log;
pub mod trace;
