//! The crate's one error type and its exit codes.

use std::fmt;

/// Why a hardware run could not be made or did not finish.
///
/// Every variant's message names what is missing or wrong; [`HwError::exit_code`] gives the
/// documented process exit code (ARCHITECTURE.md, "Architecture invariants", and
/// docs/reliability.md, "Exit codes": 1 = the run found a problem the user asked about, 2 = bad
/// input or environment).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HwError {
    /// A shared library cudarc loads at run time is not found by the dynamic loader.
    MissingLibrary {
        /// Plain name, e.g. `libnccl.so`.
        library: &'static str,
        /// What the library is needed for.
        needed_for: &'static str,
    },
    /// A library was found but lacks a function c10dsim calls (a stub or another
    /// product's library of that name): cudarc would panic on first use.
    MissingSymbol {
        library: &'static str,
        symbol: &'static str,
    },
    /// The driver loaded but reports no usable GPU (or `cuInit` failed).
    NoDevice(String),
    /// The scenario asks for a rank/GPU layout this machine or launch cannot host.
    Layout(String),
    /// Rank, world size or another option from the environment or the caller is invalid.
    BadOptions(String),
    /// One-rank Timelines that cannot be joined into one (`merge_ranks`): the part at fault.
    Merge(String),
    /// The scenario uses something the hardware backend cannot execute.
    Unsupported(String),
    /// The NCCL unique-id exchange through the rendezvous directory failed (R29).
    Rendezvous(String),
    /// A CUDA driver, NVRTC or cuBLAS call failed.
    Cuda { call: String, detail: String },
    /// An NCCL call failed.
    Nccl { call: String, detail: String },
    /// NCCL refused a call because its communicator already holds an async error (a peer's
    /// process exited, the network failed): the executor raises it from the collective call
    /// as PyTorch does (R27, [`HwError::AsyncError`]).
    CommunicatorFailed {
        call: String,
        error: sim::pg::work::NcclAsyncError,
    },
    /// The GPU had no room for an allocation (`cuMemAlloc`'s `CUDA_ERROR_OUT_OF_MEMORY`; the
    /// detail names the call and its bytes), or, inside the executor, the allocator's books had
    /// none even after releasing the cache (R20), as PyTorch's "CUDA out of memory". The
    /// executor makes either the run's `out_of_memory` finding; only the run's own buffers made
    /// before it (GEMM operands, lists' buffers) end it with this error.
    OutOfMemory(String),
    /// A collective did not complete within the timeout: the watchdog (R26) or a blocking
    /// wait (R15) gave up. `work`: the Work the watchdog caught or the wait timed out on, by
    /// its end event's handle in the device's pool (a wait's finding names the `wait()` that
    /// raised). The finding, whole, in the simulator's words (`sim::pg::work`).
    Timeout {
        work: Option<usize>,
        finding: String,
    },
    /// The watchdog found an NCCL async error on a communicator (an injected `[[fault]]` of
    /// kind `async_error`, or one NCCL reports) under the Work `work`, by its end event's
    /// handle, or `wait()` or a collective call raised it (R26, R27; no `work`: the call that
    /// raised is named). The finding, whole, in the simulator's words (`sim::pg::work`).
    AsyncError {
        work: Option<usize>,
        finding: String,
    },
    /// The program raised an exception of its own and did not catch it: a Work's name used
    /// where no call bound it (Python's NameError, [`sim::pg::Step::NameError`]). The finding,
    /// whole, in the simulator's words (`sim::pg::work::name_error`).
    ProgramError(String),
}

impl HwError {
    /// The process exit code the CLI should use: 1 for a timeout, an async error or an
    /// out-of-memory (findings about the run), 2 for
    /// everything else (bad input or environment: no GPU, no library, impossible layout, a failed
    /// CUDA/NCCL call).
    pub fn exit_code(&self) -> i32 {
        match self {
            HwError::Timeout { .. }
            | HwError::AsyncError { .. }
            | HwError::OutOfMemory(_)
            | HwError::ProgramError(_) => 1,
            _ => 2,
        }
    }

    pub(crate) fn cuda(call: &str, detail: impl fmt::Debug) -> HwError {
        HwError::Cuda {
            call: call.to_string(),
            detail: format!("{detail:?}"),
        }
    }

    pub(crate) fn nccl(call: &str, detail: impl fmt::Debug) -> HwError {
        HwError::Nccl {
            call: call.to_string(),
            detail: format!("{detail:?}"),
        }
    }
}

impl fmt::Display for HwError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HwError::MissingLibrary {
                library,
                needed_for,
            } => write!(
                f,
                "{library} not found by the dynamic loader (needed for {needed_for}); \
                 add its folder to LD_LIBRARY_PATH (see docs/hw.md)"
            ),
            HwError::MissingSymbol { library, symbol } => write!(
                f,
                "{library} was found but does not export {symbol}: not the NVIDIA library \
                 c10dsim needs (a stub or another version?); check LD_LIBRARY_PATH (see docs/hw.md)"
            ),
            HwError::NoDevice(detail) => write!(f, "no usable NVIDIA GPU: {detail}"),
            HwError::Layout(detail) => write!(f, "cannot place the scenario's ranks: {detail}"),
            HwError::BadOptions(detail) => write!(f, "bad hardware-run option: {detail}"),
            HwError::Merge(detail) => write!(f, "cannot merge rank Timelines: {detail}"),
            HwError::Unsupported(detail) => {
                write!(f, "the hardware backend cannot run this: {detail}")
            }
            HwError::Rendezvous(detail) => write!(f, "NCCL rendezvous failed: {detail}"),
            HwError::Cuda { call, detail } => write!(f, "CUDA call {call} failed: {detail}"),
            HwError::Nccl { call, detail } => write!(f, "NCCL call {call} failed: {detail}"),
            HwError::CommunicatorFailed { call, error } => write!(
                f,
                "NCCL call {call} failed: its communicator holds an async error ({error:?})"
            ),
            HwError::OutOfMemory(detail) => write!(f, "CUDA out of memory. {detail}"),
            HwError::Timeout { finding, .. }
            | HwError::AsyncError { finding, .. }
            | HwError::ProgramError(finding) => f.write_str(finding),
        }
    }
}

impl std::error::Error for HwError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_follow_the_convention() {
        let finding = "x".to_string();
        let work = Some(0);
        assert_eq!(HwError::Timeout { work, finding }.exit_code(), 1);
        let missing = HwError::MissingLibrary {
            library: "libnccl.so",
            needed_for: "collectives",
        };
        assert_eq!(missing.exit_code(), 2);
        assert!(missing.to_string().contains("libnccl.so"));
        assert_eq!(HwError::NoDevice("none".into()).exit_code(), 2);
        let finding = "x".to_string();
        assert_eq!(HwError::AsyncError { work, finding }.exit_code(), 1);
        assert_eq!(HwError::OutOfMemory("x".into()).exit_code(), 1);
        assert_eq!(HwError::ProgramError("x".into()).exit_code(), 1);
        for input in [
            HwError::Layout("x".into()),
            HwError::BadOptions("x".into()),
            HwError::Merge("x".into()),
            HwError::Unsupported("x".into()),
            HwError::Rendezvous("x".into()),
            HwError::cuda("cuInit", "x"),
            HwError::nccl("ncclCommInitRank", "x"),
            HwError::CommunicatorFailed {
                call: "ncclCollective".into(),
                error: sim::pg::work::NcclAsyncError::Remote,
            },
            HwError::MissingSymbol {
                library: "libcuda.so",
                symbol: "cuInit",
            },
        ] {
            assert_eq!(input.exit_code(), 2, "{input}");
        }
    }
}
