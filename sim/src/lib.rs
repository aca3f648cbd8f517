//! # c10dsim-sim: the shared model and the discrete-event simulator
//!
//! This crate holds the model that both engines share — the validated [`scenario::Scenario`]
//! (what every rank's Python program does, and on what machine), ProcessGroupNCCL's lowering of
//! each op into the primitive steps both engines execute ([`pg`]), and the
//! [`timeline::Timeline`] (what happened) — and the simulator that turns the one into the other
//! in simulated time.
//!
//! The behaviour modelled is that of PyTorch's ProcessGroupNCCL and CUDA streams, as numbered
//! rules R1…R31 in `docs/semantics.md` (at the repository's root); code comments cite them.
//!
//! Invariant: nothing here reads a clock, a file or a GPU. Same scenario and seed ⇒ the same
//! Timeline, bit for bit.
//!
//! ```
//! let text = r#"
//! [cluster]
//! ranks = 2
//! [tensors]
//! buf = "64MiB"
//! [[op]]
//! all_reduce = "buf"
//! async_op = true
//! work = "w"
//! [[op]]
//! wait = "w"
//! "#;
//! let scenario = sim::scenario::parse("example.toml", text).unwrap();
//! let timeline = sim::engine::simulate(&scenario);
//! let collective = &timeline.ranks[0].collectives[0];
//! let wait = collective.wait.unwrap();
//! // R12: wait() returns on the host long before the collective ends on the GPU.
//! assert!(wait.host_end_ns < collective.end_ns);
//! assert!(!wait.completed_at_return);
//! ```

pub mod allocator;
pub mod collective;
pub mod cost;
pub mod engine;
pub mod flight_recorder;
pub mod fold;
pub mod gpu;
pub mod lifetime;
pub mod limits;
pub mod nccl;
pub mod nccl_env;
pub mod pg;
pub mod race;
pub mod random;
pub mod ranks;
pub mod scenario;
pub mod sweep;
pub mod timeline;
pub mod units;
