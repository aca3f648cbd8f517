//! The hardware backend's tensor memory: the simulator's own books ([`sim::lifetime`]) keyed by
//! CUDA events. The executor carries their steps out with real `cuMemAlloc`/`cuMemFree` and a
//! real device-wide synchronise before a cache release (R17–R20).

use crate::exec::Ev;

pub use sim::lifetime::{AllocStep, Place};

/// Which block each tensor lives in and what keeps freed blocks from their pools.
pub type Memory = sim::lifetime::TensorMemory<Ev>;
