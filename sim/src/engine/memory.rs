//! A rank's tensor memory in simulated time: the caching allocator and the lifetime books
//! ([`crate::lifetime`], shared with `hw`) driven by the `Alloc`, `Free` and `ReleaseShelf`
//! steps — per-stream caches (R17), the stash shelf (R18), recordStream's pending frees (R19)
//! and the cache release that synchronises the device (R20).

use super::*;
use crate::lifetime::{
    out_of_memory_finding, up_front_out_of_memory_finding, AllocStep, UpFront,
    CACHE_RELEASE_DID_NOT_HELP,
};

/// Where each tensor lives and what keeps its block from being reused (R17–R20), and the
/// state of an allocation that waits for the device before releasing the cache.
pub(super) struct MemoryState {
    pub(super) books: TensorMemory<Instance>,
    /// A cache release has waited for what it must: recordStream's pending events and, unless
    /// expandable segments, the whole device (R20); the host time at which the allocation that
    /// needs it started.
    release_waited_since_ns: Option<u64>,
    /// The allocation before the program that did not fit, if one did not.
    up_front_refused: Option<UpFront>,
}

impl MemoryState {
    pub(super) fn new(scenario: &Scenario, rank: u32) -> MemoryState {
        let mut books = TensorMemory::new(scenario, rank);
        // The up-front allocations cost no simulated time: they happen before the program.
        let up_front_refused = (books.static_steps().into_iter()).find_map(|(owner, step)| {
            (!matches!(step, AllocStep::Cached(_) | AllocStep::NewSegment { .. })).then_some(owner)
        });
        MemoryState {
            books,
            release_waited_since_ns: None,
            up_front_refused,
        }
    }
}

impl Engine<'_> {
    /// Before the program: a tensor or bucket buffer allocated up front that does not fit
    /// raises PyTorch's `OutOfMemoryError` (R17, R20), uncaught, so the process ends before
    /// its first op. True when it did.
    pub(super) fn up_front_out_of_memory(&mut self, rank: u32) -> bool {
        let state = &self.ranks[rank as usize];
        let Some(owner) = state.memory.up_front_refused else {
            return false;
        };
        let scenario = self.scenario;
        let books = &state.memory.books;
        let list_position = match owner {
            UpFront::Tensor(tensor) => {
                books.list_position_text(tensor, scenario.tensors[tensor].count)
            }
            UpFront::Bucket { .. } => String::new(),
        };
        let size_bytes = owner.size_bytes(scenario);
        let pytorch_text = books.out_of_memory_text(size_bytes, scenario.memory.capacity_bytes);
        let rank_id = state.timeline.rank;
        let finding = Finding {
            kind: FindingKind::OutOfMemory,
            rank: Some(rank_id),
            iteration: None,
            op: None,
            stream: Some(state.timeline.streams[0].name.clone()),
            message: up_front_out_of_memory_finding(
                scenario,
                (rank_id, &pytorch_text),
                (owner, &list_position),
                None,
            ),
            stands_for: RankSet::default(),
        };
        self.rank_finding(rank, finding);
        let end = ProcessEnd {
            status: ExitStatus::Raised,
            at_ns: Some(0),
        };
        self.kill(rank, end);
        true
    }

    /// R18: Works never waited on leave the shelf at the next collective of their group once
    /// they completed by the host's time (later ones stay on the shelf). The simulation must
    /// have reached the host's time to know which did: false when the host blocked until then
    /// (the step runs again when it resumes).
    pub(super) fn release_shelf(&mut self, rank: u32, group: GroupId) -> bool {
        let now_ns = self.now_ns;
        let state = &mut self.ranks[rank as usize];
        if !state.memory.books.has_shelved(group) {
            return true;
        }
        if now_ns < state.host_ns {
            state.blocked = Blocked::Timer;
            let at_ns = state.host_ns;
            self.schedule(at_ns, self.host_resume(rank, at_ns));
            return false;
        }
        let host_ns = state.host_ns;
        let fired = &state.fired_ns;
        state
            .memory
            .books
            .release_shelf(group, |end| fired[end as usize] <= host_ns);
        true
    }

    /// `del t` (R18, R19): the block (each of a list's, at the cost of one free each) returns to
    /// its stream's pool now, when the last Work holding it lets go (stash), or once events on
    /// the streams that used it passed (recordStream).
    pub(super) fn free(&mut self, rank: u32, tensor: TensorId) {
        let streams = self.ranks[rank as usize]
            .memory
            .books
            .streams_to_record(tensor);
        let instances: Vec<Instance> = streams.iter().map(|&s| self.record(rank, s)).collect();
        let state = &mut self.ranks[rank as usize];
        let frees = u64::from(state.memory.books.allocated_tensors(tensor));
        state.host_ns += self.scenario.memory.alloc_ns * frees;
        state.memory.books.free(tensor, instances);
    }

    /// The tensor set aside for `tensor` by a functional collective's call, dropped when the
    /// call returned (R30), as [`Engine::free`] drops one.
    pub(super) fn free_set_aside(&mut self, rank: u32, tensor: TensorId) {
        let Some(streams) = (self.ranks[rank as usize].memory.books).set_aside_streams(tensor)
        else {
            return;
        };
        let instances: Vec<Instance> = streams.iter().map(|&s| self.record(rank, s)).collect();
        let state = &mut self.ranks[rank as usize];
        state.host_ns += self.scenario.memory.alloc_ns;
        state.memory.books.free_set_aside(tensor, instances);
    }

    /// `torch.empty` on `stream` (R17), once per tensor of a list: each from the stream's
    /// cache, a new segment, or — at the capacity — after releasing the cache, which first
    /// waits for the whole device (R20). False when the host blocked (the allocation runs
    /// again when it resumes, at the list's next tensor) or stopped.
    pub(super) fn alloc(
        &mut self,
        rank: u32,
        op_index: usize,
        tensor: TensorId,
        stream: u16,
    ) -> bool {
        let count = self.scenario.tensors[tensor].count;
        while self.ranks[rank as usize]
            .memory
            .books
            .allocated_tensors(tensor)
            < count
        {
            match self.alloc_one(rank, op_index, tensor, stream) {
                TensorAllocation::Made => {}
                TensorAllocation::Blocked => return false,
                TensorAllocation::Raised => return true,
            }
        }
        true
    }

    /// One `torch.empty`: the next tensor of `tensor`'s list.
    fn alloc_one(
        &mut self,
        rank: u32,
        op_index: usize,
        tensor: TensorId,
        stream: u16,
    ) -> TensorAllocation {
        let scenario = self.scenario;
        let now_ns = self.now_ns;
        let state = &mut self.ranks[rank as usize];
        // R19: blocks freed under recordStream come back once their events passed, checked
        // now; the simulation must have reached the host's time to know which did. Not when the
        // allocation resumes after its release's waits: the release itself returns them (R20).
        if state.memory.release_waited_since_ns.is_none()
            && !state.memory.books.pending_events().is_empty()
        {
            if now_ns < state.host_ns {
                state.blocked = Blocked::Timer;
                let at_ns = state.host_ns;
                self.schedule(at_ns, self.host_resume(rank, at_ns));
                return TensorAllocation::Blocked;
            }
            let fired = &state.fired_ns;
            state
                .memory
                .books
                .collect_pending(|instance| fired[instance as usize] != NEVER);
        }
        let memory_config = &scenario.memory;
        let size_bytes = scenario.tensors[tensor].size_bytes;
        let mut released = false;
        loop {
            let state = &mut self.ranks[rank as usize];
            let books = &mut state.memory.books;
            let step = if released {
                books.allocate_after_release(tensor, size_bytes, stream)
            } else {
                books.allocate(tensor, size_bytes, stream)
            };
            match step {
                AllocStep::Cached(_) => {
                    state.host_ns += memory_config.alloc_ns;
                    return TensorAllocation::Made;
                }
                AllocStep::NewSegment { .. } => {
                    state.host_ns += memory_config.malloc_ns;
                    return TensorAllocation::Made;
                }
                AllocStep::NeedsRelease { synchronises } => {
                    if let Some(start_ns) = state.memory.release_waited_since_ns.take() {
                        // R20: synchronize_and_free_events, then cudaFree every cached segment.
                        let device_idle_ns = synchronises.then_some(state.host_ns);
                        let segments_freed = state.memory.books.release_cache().len() as u32;
                        // Expandable segments unmap pages without cudaFree's synchronisation.
                        if synchronises {
                            state.host_ns += memory_config.free_ns * u64::from(segments_freed);
                        }
                        state.timeline.cache_releases.push(CacheRelease {
                            iteration: state.iteration,
                            op: op_index as OpRef,
                            host_start_ns: start_ns,
                            host_end_ns: state.host_ns,
                            device_idle_ns,
                            segments_freed,
                        });
                        released = true;
                        continue;
                    }
                    // The release first waits for the events of blocks freed under recordStream
                    // (synchronize_and_free_events, even with expandable segments); a cudaFree
                    // of a segment then synchronises the device: the host waits for every
                    // stream, then runs this allocation again (R19, R20, R23 `frag`).
                    state.memory.release_waited_since_ns = Some(state.host_ns);
                    let mut instances = state.memory.books.pending_events();
                    if synchronises {
                        let streams = state.streams.len() as u16;
                        instances.extend((0..streams).map(|s| self.record(rank, s)));
                    }
                    if !self.block_on(rank, &instances, 0, HostBlock::Device) {
                        return TensorAllocation::Blocked;
                    }
                }
                AllocStep::OutOfMemory => {
                    let pytorch_text = (state.memory.books)
                        .out_of_memory_text(size_bytes, memory_config.capacity_bytes);
                    let rank_id = state.timeline.rank;
                    let finding = Finding {
                        kind: FindingKind::OutOfMemory,
                        rank: Some(rank_id),
                        iteration: Some(state.iteration),
                        op: Some(op_index as OpRef),
                        stream: Some(state.timeline.streams[stream as usize].name.clone()),
                        message: out_of_memory_finding(
                            rank_id,
                            &pytorch_text,
                            (
                                &scenario.ops[op_index],
                                size_bytes,
                                &(state.memory.books)
                                    .list_position_text(tensor, scenario.tensors[tensor].count),
                            ),
                            CACHE_RELEASE_DID_NOT_HELP,
                        ),
                        stands_for: RankSet::default(),
                    };
                    // torch.OutOfMemoryError, uncaught: the process exits, and its GPU work
                    // with it.
                    let end = ProcessEnd {
                        status: ExitStatus::Raised,
                        at_ns: Some(state.host_ns),
                    };
                    self.rank_finding(rank, finding);
                    self.kill(rank, end);
                    return TensorAllocation::Raised;
                }
            }
        }
    }
}

/// What became of one `torch.empty`.
enum TensorAllocation {
    Made,
    /// The host blocked: the allocation runs again when it resumes.
    Blocked,
    /// PyTorch's `OutOfMemoryError`: the rank's program stopped.
    Raised,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::parse;

    /// 256 MiB all_reduced and deleted under recordStream, the Work dropped at once (its block
    /// waits for the NCCL stream's event, R19; a Work the program kept would keep it, R18), a
    /// cached segment on a side stream, then an allocation that fits only once the cache is
    /// released (1 GiB of device memory).
    fn pending_free(expandable: bool, bytes: &str) -> Timeline {
        let text = format!(
            "[cluster]\nranks = 2\n[memory]\ncapacity_gib = 1\nlifetime = \"record_stream\"\n\
             expandable_segments = {expandable}\n[streams]\nside = {{}}\n\
             [groups.world]\neager_init = true\n\
             [tensors]\ng = \"256MiB\"\nc = \"300MiB\"\nh = \"{bytes}\"\n\
             [[op]]\nalloc = \"c\"\nstream = \"side\"\n[[op]]\nfree = \"c\"\nstream = \"side\"\n\
             [[op]]\nalloc = \"g\"\n[[op]]\nall_reduce = \"g\"\nasync_op = true\n\
             [[op]]\nfree = \"g\"\n[[op]]\nalloc = \"h\"\n\
             [[op]]\nkernel = {{ us = 50, sms = 8 }}\nwrites = [\"h\"]\n\
             [[op]]\nfree = \"h\"\n"
        );
        simulate(&parse("pending.toml", &text).unwrap())
    }

    #[test]
    fn a_release_returns_recordstream_frees_before_it_decides_out_of_memory_r19_r20() {
        // 256 MiB pending + 800 MiB > 1 GiB: PyTorch's release_cached_blocks first waits for
        // g's event and frees g's segment, then the retry fits.
        let timeline = pending_free(false, "800MiB");
        assert!(timeline.findings.is_empty(), "{:?}", timeline.findings);
        let rank = &timeline.ranks[0];
        assert_eq!(rank.cache_releases.len(), 1);
        assert_eq!(rank.cache_releases[0].segments_freed, 2);
        let all_reduce_end_ns = rank.collectives[0].end_ns;
        assert!(rank.cache_releases[0].device_idle_ns.unwrap() >= all_reduce_end_ns);
    }

    #[test]
    fn with_expandable_segments_a_release_still_waits_for_recordstream_events_r19_r20() {
        // 256 + 300 cached + 700 > 1 GiB: a release, which needs no device-wide stall but
        // must wait for g's event before g's block is reused; else the write on h races NCCL.
        let timeline = pending_free(true, "700MiB");
        assert!(timeline.findings.is_empty(), "{:?}", timeline.findings);
        let rank = &timeline.ranks[0];
        assert_eq!(rank.cache_releases.len(), 1);
        assert_eq!(rank.cache_releases[0].device_idle_ns, None);
        assert!(rank.cache_releases[0].host_start_ns < rank.collectives[0].end_ns);
        assert!(rank.cache_releases[0].host_end_ns >= rank.collectives[0].end_ns);
    }

    #[test]
    fn a_release_that_frees_no_segment_waits_only_for_recordstream_events_r19_r20() {
        // g and k share one 20 MiB segment; g, all_reduced (its Work dropped at once: one the
        // program kept would keep g, R18) and deleted under recordStream, waits for the NCCL
        // stream's event. 1010 MiB more do not fit: PyTorch's
        // release_cached_blocks synchronises g's event and returns its block, but k keeps the
        // segment, so nothing is cudaFree'd and the device is not synchronised: the host does
        // not wait for the 5 ms kernel on the side stream before it raises.
        let text =
            "[cluster]\nranks = 2\n[memory]\ncapacity_gib = 1\nlifetime = \"record_stream\"\n\
                    [streams]\nside = {}\n[groups.world]\neager_init = true\n\
                    [tensors]\ng = \"4MiB\"\nk = \"4MiB\"\nh = \"1010MiB\"\n\
                    [[op]]\nalloc = \"g\"\n[[op]]\nalloc = \"k\"\n\
                    [[op]]\nall_reduce = \"g\"\nasync_op = true\n\
                    [[op]]\nfree = \"g\"\n\
                    [[op]]\nkernel = { us = 5000, sms = 8 }\nstream = \"side\"\n\
                    [[op]]\nalloc = \"h\"\n\
                    [[op]]\nfree = \"h\"\n[[op]]\nfree = \"k\"\n";
        let timeline = simulate(&parse("no_segment.toml", text).unwrap());
        let kinds: Vec<FindingKind> = timeline.findings.iter().map(|f| f.kind).collect();
        assert_eq!(kinds, [FindingKind::OutOfMemory]);
        let rank = &timeline.ranks[0];
        assert_eq!(rank.cache_releases.len(), 1);
        let release = rank.cache_releases[0];
        assert_eq!(release.segments_freed, 0);
        assert_eq!(release.device_idle_ns, None);
        assert!(release.host_end_ns >= rank.collectives[0].end_ns);
        // The kernel ends with the process (the OOM kills it), so its own length bounds it.
        assert!(release.host_end_ns < rank.kernels[0].start_ns + 5_000_000);
    }

    #[test]
    fn the_retry_after_a_release_asks_only_for_a_new_segment_r20() {
        // g and k share one 20 MiB segment, `big` fills the rest of the 1 GiB; g, all_reduced
        // (its Work dropped at once: one the program kept would keep g, R18) and deleted under
        // recordStream, waits for the NCCL stream's event.
        // h (8 MiB) fits no cached block and no new segment: the release synchronises g's
        // event and returns its 8 MiB block, which would fit h, but PyTorch's retry after
        // release_cached_blocks is `alloc_block` alone (a new segment), so h raises.
        let text =
            "[cluster]\nranks = 2\n[memory]\ncapacity_gib = 1\nlifetime = \"record_stream\"\n\
                    [groups.world]\neager_init = true\n\
                    [tensors]\ng = \"8MiB\"\nk = \"9MiB\"\nbig = \"1000MiB\"\nh = \"8MiB\"\n\
                    [[op]]\nalloc = \"g\"\n[[op]]\nalloc = \"k\"\n[[op]]\nalloc = \"big\"\n\
                    [[op]]\nall_reduce = \"g\"\nasync_op = true\n\
                    [[op]]\nfree = \"g\"\n[[op]]\nalloc = \"h\"\n\
                    [[op]]\nfree = \"h\"\n[[op]]\nfree = \"k\"\n[[op]]\nfree = \"big\"\n";
        let timeline = simulate(&parse("retry.toml", text).unwrap());
        let kinds: Vec<FindingKind> = timeline.findings.iter().map(|f| f.kind).collect();
        assert_eq!(kinds, [FindingKind::OutOfMemory]);
        let rank = &timeline.ranks[0];
        assert_eq!(rank.cache_releases.len(), 1);
        assert_eq!(rank.cache_releases[0].segments_freed, 0);
        assert!(rank.cache_releases[0].host_end_ns >= rank.collectives[0].end_ns);
    }

    #[test]
    fn out_of_memory_says_what_pytorch_tried_to_allocate_r20() {
        // 4 KiB that fit nowhere: PyTorch's error names the 2 MiB segment it asked for, in
        // c10's format_size (1 GiB as 1024.00 MiB), and the 1023 MiB tensor's whole block.
        let text = "[cluster]\nranks = 1\n[memory]\ncapacity_gib = 1\n\
                    [tensors]\nkeep = \"1023MiB\"\nsmall = \"4KiB\"\n\
                    [[op]]\nalloc = \"small\"\n[[op]]\nfree = \"small\"\n";
        let timeline = simulate(&parse("oom.toml", text).unwrap());
        assert_eq!(timeline.findings.len(), 1);
        assert_eq!(
            timeline.findings[0].message,
            "[Rank 0] CUDA out of memory. Tried to allocate 2.00 MiB. 1024.00 MiB allowed; Of the \
             allocated memory 1024.00 MiB is allocated by PyTorch, and 0 bytes is reserved by \
             PyTorch but unallocated. At alloc#0 (line 8), 4096 B asked, even after releasing \
             the cache (R20); the rank's program stopped"
        );
    }

    #[test]
    fn out_of_memory_in_a_list_names_the_one_tensor_that_did_not_fit_r17_r20() {
        // 400 MiB + 6 × 100 MiB fit in 1 GiB; PyTorch's seventh torch.empty raises, asking for
        // its own 100 MiB (not the list's 700 MiB).
        let text = "[cluster]\nranks = 1\n[memory]\ncapacity_gib = 1\n\
                    [tensors]\nkeep = \"400MiB\"\ngrads = { size = \"100MiB\", count = 7 }\n\
                    [[op]]\nalloc = \"grads\"\n[[op]]\nfree = \"grads\"\n";
        let timeline = simulate(&parse("oom.toml", text).unwrap());
        assert_eq!(timeline.findings.len(), 1);
        assert_eq!(
            timeline.findings[0].message,
            "[Rank 0] CUDA out of memory. Tried to allocate 100.00 MiB. 1024.00 MiB allowed; Of \
             the allocated memory 1000.00 MiB is allocated by PyTorch, and 0 bytes is reserved \
             by PyTorch but unallocated. At alloc#0 (line 8), 104857600 B asked (tensor 7 of \
             the list of 7), even after releasing the cache (R20); the rank's program stopped"
        );
        assert_eq!(timeline.ranks[0].memory.peak_reserved_bytes, 1000 << 20);
    }

    #[test]
    fn a_list_allocated_up_front_raises_at_the_tensor_that_does_not_fit_r17() {
        let text = "[cluster]\nranks = 1\n[memory]\ncapacity_gib = 1\n\
                    [tensors]\ngrads = { size = \"300MiB\", count = 4 }\n\
                    [[op]]\ndevice_sync = true\n";
        let timeline = simulate(&parse("oom.toml", text).unwrap());
        assert_eq!(timeline.findings.len(), 1);
        let message = &timeline.findings[0].message;
        assert!(
            message.contains("Tried to allocate 300.00 MiB.")
                && message.contains("Tensor \"grads\" (tensor 4 of the list of 4), 314572800 B"),
            "{message}"
        );
    }

    #[test]
    fn a_release_inside_a_list_waits_then_the_list_goes_on_r17_r20() {
        // 600 MiB cached on a side stream behind a 5 ms kernel; 6 × 100 MiB on the default
        // stream: the fifth needs the cache released, which waits for the device, and the
        // allocation resumes at the fifth, not at the first.
        let text = "[cluster]\nranks = 1\n[memory]\ncapacity_gib = 1\n[streams]\nside = {}\n\
                    [tensors]\nc = \"600MiB\"\ngrads = { size = \"100MiB\", count = 6 }\n\
                    [[op]]\nalloc = \"c\"\nstream = \"side\"\n\
                    [[op]]\nkernel = { us = 5000, sms = 8 }\nstream = \"side\"\n\
                    [[op]]\nfree = \"c\"\nstream = \"side\"\n\
                    [[op]]\nalloc = \"grads\"\n[[op]]\nfree = \"grads\"\n";
        let timeline = simulate(&parse("list.toml", text).unwrap());
        assert!(timeline.findings.is_empty(), "{:?}", timeline.findings);
        let rank = &timeline.ranks[0];
        assert_eq!(rank.cache_releases.len(), 1);
        let release = rank.cache_releases[0];
        assert_eq!(release.segments_freed, 1);
        assert!(release.device_idle_ns.unwrap() >= rank.kernels[0].end_ns);
        // The release started after four 100 MiB segments (20 µs of cudaMalloc each).
        let call = (rank.host.iter())
            .find(|h| h.op == 3)
            .expect("the alloc's host call");
        assert_eq!(release.host_start_ns, call.start_ns + 4 * 20_000);
        // Four before the release, two after: six new segments, 1000 MiB at the peak.
        assert_eq!(rank.memory.peak_reserved_bytes, 1000 << 20);
        assert_eq!(call.end_ns, release.host_end_ns + 2 * 20_000);
    }

    #[test]
    fn out_of_memory_comes_after_the_cache_was_released_r20() {
        // 200 MiB live, 300 MiB cached on a side stream, 900 MiB asked on the default stream:
        // PyTorch frees the cached segment (a device-wide stall) before it raises.
        let text = "[cluster]\nranks = 1\n[memory]\ncapacity_gib = 1\n[streams]\nside = {}\n\
                    [tensors]\nkeep = \"200MiB\"\nc = \"300MiB\"\nh = \"900MiB\"\n\
                    [[op]]\nalloc = \"c\"\nstream = \"side\"\n[[op]]\nfree = \"c\"\nstream = \"side\"\n\
                    [[op]]\nalloc = \"h\"\n[[op]]\nfree = \"h\"\n";
        let timeline = simulate(&parse("oom.toml", text).unwrap());
        let kinds: Vec<FindingKind> = timeline.findings.iter().map(|f| f.kind).collect();
        assert_eq!(kinds, [FindingKind::OutOfMemory]);
        let rank = &timeline.ranks[0];
        assert_eq!(rank.cache_releases.len(), 1);
        assert_eq!(rank.cache_releases[0].segments_freed, 1);
        assert_eq!(rank.memory.cache_releases, 1);
    }

    #[test]
    fn an_unwaited_all_to_all_lets_go_of_its_sent_tensor_at_the_next_collective_r18() {
        // The R18 probe (tests/data/torch/probes/shelf_a2a/): the all_to_all's outputs are
        // not its tensor, so x (64 MiB) leaves the shelf at the next collective and `again`
        // reuses its block, 130 MiB reserved at the peak; the all_reduce of
        // scenarios/unwaited_work.toml keeps x through its outputs, 194 MiB.
        let peak_mib = |path: &str| {
            let path = format!("../{path}");
            let text = std::fs::read_to_string(&path).unwrap();
            let timeline = simulate(&parse(&path, &text).unwrap());
            timeline.ranks[0].memory.peak_reserved_bytes >> 20
        };
        assert_eq!(
            peak_mib("tests/data/torch/probes/shelf_a2a/unwaited_a2a.toml"),
            130
        );
        assert_eq!(peak_mib("scenarios/unwaited_work.toml"), 194);
    }
}
