//! A thin NCCL communicator of the crate's own over `cudarc::nccl::{result, sys}`: the stream is
//! an argument of every call (as in ProcessGroupNCCL, which enqueues on the internal or the
//! current stream, R10/R11), the raw handle can be aborted from the watchdog thread (R26, R27),
//! and errors are values, never panics. Also the unique-id exchange through a shared folder
//! (R29).

use crate::error::HwError;
use cudarc::driver::sys::CUstream;
use cudarc::nccl::{result, sys};
use sim::pg::work::NcclAsyncError;
use std::ffi::c_void;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Size of NCCL's unique id in bytes.
pub const UNIQUE_ID_BYTES: usize = 128;

fn describe(error: result::NcclError) -> String {
    // SAFETY: ncclGetErrorString returns a pointer to a static C string for any code.
    let text = unsafe {
        let ptr = sys::ncclGetErrorString(error.0);
        if ptr.is_null() {
            String::new()
        } else {
            std::ffi::CStr::from_ptr(ptr).to_string_lossy().into_owned()
        }
    };
    format!("{:?} ({text})", error.0)
}

fn check(call: &str, status: Result<result::NcclStatus, result::NcclError>) -> Result<(), HwError> {
    status
        .map(|_| ())
        .map_err(|error| HwError::nccl(call, describe(error)))
}

/// The async error `code` reports, as ProcessGroupNCCL names it (R27); `None` for none: success,
/// or an operation still in progress.
pub fn async_error_of(code: sys::ncclResult_t) -> Option<NcclAsyncError> {
    use sys::ncclResult_t as R;
    Some(match code {
        R::ncclSuccess | R::ncclInProgress => return None,
        R::ncclUnhandledCudaError => NcclAsyncError::UnhandledCuda,
        R::ncclSystemError => NcclAsyncError::System,
        R::ncclInternalError => NcclAsyncError::Internal,
        R::ncclInvalidArgument => NcclAsyncError::InvalidArgument,
        R::ncclInvalidUsage => NcclAsyncError::InvalidUsage,
        R::ncclRemoteError => NcclAsyncError::Remote,
        _ => NcclAsyncError::Unknown,
    })
}

/// NCCL's version as `major.minor.patch` (`ncclGetVersion`, e.g. 22809 → 2.28.9).
pub fn version_string(code: i32) -> String {
    if code >= 20_900 {
        format!("{}.{}.{}", code / 10_000, code / 100 % 100, code % 100)
    } else {
        format!("{}.{}.{}", code / 1_000, code / 100 % 10, code % 100)
    }
}

pub fn version() -> Result<String, HwError> {
    result::get_nccl_version()
        .map(version_string)
        .map_err(|e| HwError::nccl("ncclGetVersion", describe(e)))
}

/// A new unique id as bytes (`ncclGetUniqueId`).
pub fn new_unique_id() -> Result<[u8; UNIQUE_ID_BYTES], HwError> {
    let id = result::get_uniqueid().map_err(|e| HwError::nccl("ncclGetUniqueId", describe(e)))?;
    Ok(id.internal.map(|c| c as u8))
}

/// One communicator. `enqueue` and `abort` are serialised by a lock, so the watchdog can abort
/// from its thread while the main thread enqueues.
pub struct Communicator {
    raw: Mutex<sys::ncclComm_t>,
    aborted: AtomicBool,
    pub name: String,
}

// SAFETY: an ncclComm_t may be used from any thread; every use here goes through the mutex, and
// ncclCommAbort is documented as callable from another thread.
unsafe impl Send for Communicator {}
unsafe impl Sync for Communicator {}

/// Element type of a buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Elem {
    F16,
    Bf16,
    F32,
}

impl Elem {
    fn size_bytes(self) -> usize {
        match self {
            Elem::F16 | Elem::Bf16 => 2,
            Elem::F32 => 4,
        }
    }

    fn raw(self) -> sys::ncclDataType_t {
        match self {
            Elem::F16 => sys::ncclDataType_t::ncclFloat16,
            Elem::Bf16 => sys::ncclDataType_t::ncclBfloat16,
            Elem::F32 => sys::ncclDataType_t::ncclFloat32,
        }
    }
}

/// One send or receive of a batch: `count` elements of `elem` at the device pointer `buffer`,
/// to or from the communicator's rank `peer`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerTransfer {
    pub send: bool,
    pub buffer: u64,
    pub count: usize,
    pub elem: Elem,
    pub peer: u32,
}

/// A collective on an in-place buffer (see [`crate::plan::nccl_counts`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    AllReduce,
    AllGather,
    ReduceScatter,
    Broadcast,
    /// A send and a receive of one slice per peer inside one NCCL group (the buffer holds
    /// `peers` slices of `count` elements; in place, as the other ops here).
    AllToAll {
        peers: u32,
    },
    /// `ncclSend` of the whole buffer to `peer` (a rank of the communicator).
    Send {
        peer: u32,
    },
    /// `ncclRecv` of the whole buffer from `peer`.
    Recv {
        peer: u32,
    },
}

impl Communicator {
    /// `ncclCommInitRank`: blocks until every rank of the communicator joined (R8 bootstrap).
    pub fn init(
        name: &str,
        size: u32,
        rank: u32,
        id: &[u8; UNIQUE_ID_BYTES],
    ) -> Result<Communicator, HwError> {
        let unique = sys::ncclUniqueId {
            internal: id.map(|b| b as std::ffi::c_char),
        };
        let mut raw: sys::ncclComm_t = std::ptr::null_mut();
        // SAFETY: `raw` is a valid out-pointer; the id comes from ncclGetUniqueId on the
        // group's first rank.
        let status = unsafe { result::comm_init_rank(&mut raw, size as i32, unique, rank as i32) };
        check("ncclCommInitRank", status)?;
        Ok(Communicator {
            raw: Mutex::new(raw),
            aborted: AtomicBool::new(false),
            name: name.to_string(),
        })
    }

    /// The communicator's handle, held for an enqueue, unless the watchdog aborted it.
    fn live(&self) -> Result<std::sync::MutexGuard<'_, sys::ncclComm_t>, HwError> {
        let raw = self.raw.lock().unwrap_or_else(|p| p.into_inner());
        if self.aborted.load(Ordering::Acquire) {
            return Err(HwError::nccl(
                "enqueue",
                format!("communicator {} was aborted by the watchdog", self.name),
            ));
        }
        Ok(raw)
    }

    /// Enqueues sends and receives, each of `count` elements at a device pointer to or from a
    /// rank of this communicator, in one NCCL group on `stream` (`batch_isend_irecv`).
    ///
    /// # Safety
    /// Every pointer must be a device pointer of this communicator's GPU holding its count, alive
    /// until the kernel finished; `stream` must be a stream of that GPU.
    pub unsafe fn enqueue_p2p(
        &self,
        stream: CUstream,
        transfers: &[PeerTransfer],
    ) -> Result<(), HwError> {
        let raw = self.live()?;
        let stream = stream as sys::cudaStream_t;
        let grouped = result::group_start().and_then(|_| {
            for t in transfers {
                let peer = t.peer as i32;
                if t.send {
                    let at = t.buffer as *const c_void;
                    result::send(at, t.count, t.elem.raw(), peer, *raw, stream)?;
                } else {
                    let at = t.buffer as *mut c_void;
                    result::recv(at, t.count, t.elem.raw(), peer, *raw, stream)?;
                }
            }
            Ok(result::NcclStatus::Success)
        });
        let ended = result::group_end();
        self.checked(&raw, "ncclGroupEnd", grouped.and(ended))
    }

    /// Enqueues one collective on `stream`. `buffer` holds `count` elements per rank's part:
    /// all_reduce and broadcast `count` in place; all_gather sends the rank's slice at
    /// `slice` into the whole buffer; reduce_scatter reduces the whole buffer into the slice.
    ///
    /// # Safety
    /// `buffer` and `slice` must be device pointers of this communicator's GPU, large enough for
    /// the op's counts, alive until the kernel finished; `stream` must be a stream of that GPU.
    pub unsafe fn enqueue(
        &self,
        op: Op,
        stream: CUstream,
        buffer: u64,
        slice: u64,
        count: usize,
        elem: Elem,
    ) -> Result<(), HwError> {
        let raw = self.live()?;
        let stream = stream as sys::cudaStream_t;
        let whole = buffer as *mut c_void;
        let part = slice as *mut c_void;
        let sum = sys::ncclRedOp_t::ncclSum;
        let status = match op {
            Op::AllReduce => result::all_reduce(whole, whole, count, elem.raw(), sum, *raw, stream),
            Op::Broadcast => result::broadcast(whole, whole, count, elem.raw(), 0, *raw, stream),
            Op::AllGather => result::all_gather(part, whole, count, elem.raw(), *raw, stream),
            Op::ReduceScatter => {
                result::reduce_scatter(whole, part, count, elem.raw(), sum, *raw, stream)
            }
            Op::AllToAll { peers } => {
                let slice_bytes = count * elem.size_bytes();
                let grouped = result::group_start().and_then(|_| {
                    for peer in 0..peers as usize {
                        let at = buffer as usize + peer * slice_bytes;
                        result::send(
                            at as *const c_void,
                            count,
                            elem.raw(),
                            peer as i32,
                            *raw,
                            stream,
                        )?;
                        result::recv(
                            at as *mut c_void,
                            count,
                            elem.raw(),
                            peer as i32,
                            *raw,
                            stream,
                        )?;
                    }
                    Ok(result::NcclStatus::Success)
                });
                let ended = result::group_end();
                grouped.and(ended)
            }
            Op::Send { peer } => result::send(whole, count, elem.raw(), peer as i32, *raw, stream),
            Op::Recv { peer } => result::recv(whole, count, elem.raw(), peer as i32, *raw, stream),
        };
        self.checked(&raw, "ncclCollective", status)
    }

    /// An enqueue's status: a call NCCL refused because the communicator already holds an async
    /// error is that error ([`HwError::CommunicatorFailed`], which the executor raises as
    /// PyTorch does, R27); any other failure is the call's own.
    fn checked(
        &self,
        raw: &sys::ncclComm_t,
        call: &str,
        status: Result<result::NcclStatus, result::NcclError>,
    ) -> Result<(), HwError> {
        check(call, status).map_err(|error| match Self::async_error_of_raw(raw) {
            Ok(Some(failed)) => HwError::CommunicatorFailed {
                call: call.to_string(),
                error: failed,
            },
            _ => error,
        })
    }

    /// `ncclCommGetAsyncError`: an error NCCL met in the background, if any (never on an
    /// aborted communicator); `Err` when the query itself fails.
    pub fn async_error(&self) -> Result<Option<NcclAsyncError>, HwError> {
        let raw = self.raw.lock().unwrap_or_else(|p| p.into_inner());
        if self.aborted.load(Ordering::Acquire) {
            return Ok(None);
        }
        Self::async_error_of_raw(&raw)
    }

    fn async_error_of_raw(raw: &sys::ncclComm_t) -> Result<Option<NcclAsyncError>, HwError> {
        let mut code = sys::ncclResult_t::ncclSuccess;
        // SAFETY: the caller holds the live, not aborted handle; `code` is a valid out-pointer.
        let status = unsafe { sys::ncclCommGetAsyncError(*raw, &mut code) };
        match status {
            sys::ncclResult_t::ncclSuccess => Ok(async_error_of(code)),
            status => Err(HwError::nccl("ncclCommGetAsyncError", status)),
        }
    }

    /// `ncclCommAbort` (R27 TearDown/CleanUpOnly): in-flight NCCL kernels exit, later enqueues
    /// fail. Idempotent.
    pub fn abort(&self) {
        let raw = self.raw.lock().unwrap_or_else(|p| p.into_inner());
        if !self.aborted.swap(true, Ordering::AcqRel) {
            // SAFETY: the handle is alive; after this it is never used again.
            // The result is ignored: abort is the last resort and has no recovery.
            let _ = unsafe { result::comm_abort(*raw) };
        }
    }
}

impl Drop for Communicator {
    fn drop(&mut self) {
        if !self.aborted.load(Ordering::Acquire) {
            let raw = *self.raw.get_mut().unwrap_or_else(|p| p.into_inner());
            // SAFETY: the handle is alive and no kernel is enqueued after the final device
            // synchronise; a failing destroy at exit has no one left to report to.
            let _ = unsafe { result::comm_destroy(raw) };
        }
    }
}

/// The unique-id exchange of R29 through files: the group's first rank writes the id under a
/// temporary name and renames it (atomic on one file system); the others poll until it appears.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rendezvous {
    pub dir: PathBuf,
    pub run_key: String,
}

/// `text` as file-name characters, one to one: ASCII letters, digits, `.` and `-` stay, every
/// other byte becomes `_` and two hex digits (so `a:b` is `a_3ab` and `a_b` is `a_5fb`).
fn escape(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || byte == b'.' || byte == b'-' {
            escaped.push(char::from(byte));
        } else {
            escaped.push_str(&format!("_{byte:02x}"));
        }
    }
    escaped
}

impl Rendezvous {
    /// The id file of `group`: the run key and the group name, escaped (never `+`) and joined
    /// by `+`, so that distinct keys or groups never share a file.
    pub fn path(&self, group: &str) -> PathBuf {
        self.dir.join(format!(
            "c10dsim-{}+{}.ncclid",
            escape(&self.run_key),
            escape(group)
        ))
    }

    /// The file's content: the id, then the run key and the group it belongs to.
    fn content(&self, group: &str, id: &[u8; UNIQUE_ID_BYTES]) -> Vec<u8> {
        let mut content = id.to_vec();
        content.extend_from_slice(self.owner(group).as_bytes());
        content
    }

    fn owner(&self, group: &str) -> String {
        format!("{}\n{group}", self.run_key)
    }

    /// The id in a file's `content`, when the file is this run key's and this group's: a file
    /// of another form (an earlier c10dsim's) is not read.
    fn id_in(&self, group: &str, content: &[u8]) -> Option<[u8; UNIQUE_ID_BYTES]> {
        let (id, owner) = content.split_at_checked(UNIQUE_ID_BYTES)?;
        if owner != self.owner(group).as_bytes() {
            return None;
        }
        id.try_into().ok()
    }

    pub fn publish(&self, group: &str, id: &[u8; UNIQUE_ID_BYTES]) -> Result<(), HwError> {
        let path = self.path(group);
        let temporary = path.with_extension(format!("tmp{}", std::process::id()));
        let fail = |what: &str, error: std::io::Error| {
            HwError::Rendezvous(format!("{what} {}: {error}", temporary.display()))
        };
        std::fs::write(&temporary, self.content(group, id)).map_err(|e| fail("cannot write", e))?;
        std::fs::rename(&temporary, &path).map_err(|e| fail("cannot rename", e))
    }

    /// Waits for the id (R29: `store.get` blocks until rank 0 published it or the timeout). A
    /// folder that is missing or cannot be read fails at once, not after the timeout.
    pub fn fetch(&self, group: &str, timeout: Duration) -> Result<[u8; UNIQUE_ID_BYTES], HwError> {
        let path = self.path(group);
        match std::fs::metadata(&self.dir) {
            Ok(metadata) if metadata.is_dir() => {}
            Ok(_) => {
                return Err(HwError::Rendezvous(format!(
                    "{} is not a folder",
                    self.dir.display()
                )))
            }
            Err(error) => {
                return Err(HwError::Rendezvous(format!(
                    "cannot use the folder {}: {error}",
                    self.dir.display()
                )))
            }
        }
        let start = Instant::now();
        let mut foreign = false;
        loop {
            match std::fs::read(&path) {
                Ok(content) => match self.id_in(group, &content) {
                    Some(id) => return Ok(id),
                    None => foreign = true,
                },
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
                Err(error) => {
                    return Err(HwError::Rendezvous(format!(
                        "cannot read {}: {error}",
                        path.display()
                    )))
                }
            }
            if start.elapsed() > timeout {
                let found = if foreign {
                    " (a file of that name is there, but not this run key's: left by an \
                     earlier c10dsim)"
                } else {
                    ""
                };
                return Err(HwError::Rendezvous(format!(
                    "no NCCL unique id for group {group:?} at {} after {} s{found} (possible \
                     application crash on the group's first rank, or a folder the ranks do not \
                     share)",
                    path.display(),
                    timeout.as_secs_f64()
                )));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Removes the id file (once the communicator exists on every rank, or one an earlier
    /// launch left).
    pub fn remove(&self, group: &str) {
        // A missing file is fine: nothing to clean.
        let _ = std::fs::remove_file(self.path(group));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every error code is an async error in ProcessGroupNCCL's words; success and an
    /// operation in progress are none.
    #[test]
    fn nccl_result_codes_are_processgroupnccls_async_errors() {
        use sys::ncclResult_t as R;
        assert_eq!(async_error_of(R::ncclSuccess), None);
        assert_eq!(async_error_of(R::ncclInProgress), None);
        assert_eq!(
            async_error_of(R::ncclRemoteError),
            Some(NcclAsyncError::Remote)
        );
        assert_eq!(
            async_error_of(R::ncclSystemError),
            Some(NcclAsyncError::System)
        );
        assert_eq!(
            async_error_of(R::ncclUnhandledCudaError),
            Some(NcclAsyncError::UnhandledCuda)
        );
        assert_eq!(
            async_error_of(R::ncclNumResults),
            Some(NcclAsyncError::Unknown)
        );
    }

    #[test]
    fn versions_print_like_nccl() {
        assert_eq!(version_string(22809), "2.28.9");
        assert_eq!(version_string(22203), "2.22.3");
        assert_eq!(version_string(2708), "2.7.8");
    }

    /// A fresh folder for one test.
    fn folder(test: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("c10dsim-hw-{test}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn ids_travel_through_the_folder() {
        let dir = folder("ids");
        let rendezvous = Rendezvous {
            dir: dir.clone(),
            run_key: "job 1/x".into(),
        };
        assert!(rendezvous
            .path("world")
            .ends_with("c10dsim-job_201_2fx+world.ncclid"));
        let id = [7u8; UNIQUE_ID_BYTES];
        let reader = {
            let rendezvous = rendezvous.clone();
            std::thread::spawn(move || rendezvous.fetch("world", Duration::from_secs(5)))
        };
        std::thread::sleep(Duration::from_millis(30));
        rendezvous.publish("world", &id).unwrap();
        assert_eq!(reader.join().unwrap().unwrap(), id);
        rendezvous.remove("world");
        let error = rendezvous
            .fetch("world", Duration::from_millis(20))
            .unwrap_err();
        assert!(error.to_string().contains("possible application crash"));
        assert!(error.to_string().contains("after 0.02 s"), "{error}");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn distinct_keys_and_groups_get_distinct_files() {
        let path = |run_key: &str, group: &str| {
            Rendezvous {
                dir: PathBuf::from("/ids"),
                run_key: run_key.into(),
            }
            .path(group)
        };
        assert_ne!(path("a:b", "world"), path("a_b", "world"));
        assert_ne!(path("a", "b+c"), path("a+b", "c"));
        assert_ne!(path("a-b", "c"), path("a", "b-c"));
        assert_ne!(path("k", "p2p:0:1"), path("k", "p2p_0_1"));
        assert_eq!(
            path("master=10.0.0.1:29500", "p2p:0:1"),
            PathBuf::from("/ids/c10dsim-master_3d10.0.0.1_3a29500+p2p_3a0_3a1.ncclid")
        );
    }

    /// The error of a fetch that must fail well before its 30-s timeout.
    fn fails_at_once(rendezvous: &Rendezvous) -> HwError {
        let start = Instant::now();
        let error = rendezvous
            .fetch("world", Duration::from_secs(30))
            .unwrap_err();
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "polled for {:?}",
            start.elapsed()
        );
        error
    }

    #[test]
    fn a_missing_folder_fails_at_once() {
        let rendezvous = Rendezvous {
            dir: std::env::temp_dir().join(format!("c10dsim-hw-absent-{}", std::process::id())),
            run_key: "k".into(),
        };
        let error = fails_at_once(&rendezvous);
        assert!(
            error.to_string().contains("cannot use the folder"),
            "{error}"
        );
        assert_eq!(error.exit_code(), 2);
    }

    #[test]
    fn an_id_file_that_cannot_be_read_fails_at_once() {
        let dir = folder("unreadable");
        let rendezvous = Rendezvous {
            dir: dir.clone(),
            run_key: "k".into(),
        };
        std::fs::create_dir(rendezvous.path("world")).unwrap();
        let error = fails_at_once(&rendezvous);
        assert!(error.to_string().contains("cannot read"), "{error}");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_file_not_of_this_run_key_is_not_read() {
        let dir = folder("foreign");
        let rendezvous = Rendezvous {
            dir: dir.clone(),
            run_key: "k".into(),
        };
        // What an earlier c10dsim wrote: the bare id.
        std::fs::write(rendezvous.path("world"), [1u8; UNIQUE_ID_BYTES]).unwrap();
        let error = rendezvous
            .fetch("world", Duration::from_millis(30))
            .unwrap_err();
        assert!(error.to_string().contains("not this run key's"), "{error}");
        rendezvous
            .publish("world", &[2u8; UNIQUE_ID_BYTES])
            .unwrap();
        assert_eq!(
            rendezvous
                .fetch("world", Duration::from_millis(30))
                .unwrap(),
            [2u8; UNIQUE_ID_BYTES]
        );
        // A reader that is not the group's checks what it reads.
        let other_group = rendezvous.content("pair", &[3u8; UNIQUE_ID_BYTES]);
        assert_eq!(rendezvous.id_in("world", &other_group), None);
        assert_eq!(
            rendezvous.id_in("pair", &other_group),
            Some([3u8; UNIQUE_ID_BYTES])
        );
        std::fs::remove_dir_all(dir).unwrap();
    }
}
