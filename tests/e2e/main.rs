//! The end-to-end test binary: the scenario catalogue, the command line, bad input and
//! determinism. One binary, as ripgrep does, so that the helpers in `util` are shared.

mod caps;
mod catalogue;
mod cli;
mod determinism;
mod diff;
mod faults;
mod fidelity;
mod flight_recorder;
mod fold;
mod hw_options;
mod import;
mod lifetime;
mod measured_paths;
mod multi_gpu;
mod open_calls;
mod outputs;
mod process_group;
mod robustness;
mod summary;
mod sweep;
mod torch;
mod util;
