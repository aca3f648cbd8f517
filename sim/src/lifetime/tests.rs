//! The lifetime books' unit tests: up-front tensors and bucket buffers, the stash, recordStream,
//! cache releases and lists of tensors.

use super::*;
use crate::collective::CollectiveKind::{AllReduce, AllToAll, Send};

/// 1 GiB of capacity: the static 64 MiB plus one 512 MiB segment fit, a second does not.
fn scenario(lifetime: &str) -> Scenario {
    let text = format!(
        r#"
[cluster]
ranks = 1
[memory]
capacity_gib = 1
fraction = 1.0
lifetime = "{lifetime}"
[tensors]
fixed = "64MiB"
small = "4KiB"
grad = "256MiB"
other = "256MiB"
big = "512MiB"
[[op]]
alloc = "grad"
[[op]]
alloc = "other"
[[op]]
alloc = "big"
[[op]]
free = "grad"
[[op]]
free = "other"
[[op]]
free = "big"
"#
    );
    crate::scenario::parse("memory.toml", &text).unwrap_or_else(|e| panic!("{e}"))
}

const MIB: u64 = 1 << 20;

fn new_segment(step: AllocStep) -> Place {
    match step {
        AllocStep::NewSegment { place, .. } => place,
        other => panic!("expected a new segment, got {other:?}"),
    }
}

#[test]
fn static_tensors_are_allocated_up_front_in_pytorch_sized_segments() {
    let mut memory = TensorMemory::<u32>::new(&scenario("stash"), 0);
    let steps = memory.static_steps();
    assert_eq!(steps.len(), 2);
    let fixed = Place {
        segment: 0,
        offset_bytes: 0,
    };
    assert_eq!(
        steps[0],
        (
            UpFront::Tensor(0),
            AllocStep::NewSegment {
                place: fixed,
                bytes: 64 * MIB
            }
        )
    );
    // 4 KiB get a 2 MiB segment of their own (small requests share 2 MiB segments).
    assert_eq!(
        steps[1].1,
        AllocStep::NewSegment {
            place: Place {
                segment: 1,
                offset_bytes: 0
            },
            bytes: 2 * MIB
        }
    );
    assert!(memory.static_steps().is_empty());
}

#[test]
fn a_stashed_block_of_a_dropped_work_returns_at_wait_then_is_reused() {
    let mut memory = TensorMemory::<u32>::new(&scenario("stash"), 0);
    let grad = new_segment(memory.allocate(2, 256 * MIB, 0));
    // A Work the program does not hold (a synchronous call's, waited by its wrapper).
    memory.keep_alive(2, 0, 2, (7, 99), (AllReduce, false));
    memory.free(2, Vec::new());
    // Held by the Work's stash: not in the pool (R18), so a new segment.
    new_segment(memory.allocate(3, 256 * MIB, 0));
    memory.release_on_wait(7);
    assert_eq!(memory.allocate(4, 256 * MIB, 0), AllocStep::Cached(grad));
}

#[test]
fn a_work_the_program_holds_keeps_its_output_past_wait_until_it_is_dropped() {
    // `w = dist.all_reduce(g, async_op=True); del g; w.wait()`: the Work's outputs_ still
    // hold g; it goes when `w` is bound to the next Work (R18).
    let mut memory = TensorMemory::<u32>::new(&scenario("stash"), 0);
    let grad = new_segment(memory.allocate(2, 256 * MIB, 0));
    memory.keep_alive(2, 0, 2, (7, 99), (AllReduce, true));
    memory.free(2, Vec::new());
    memory.release_on_wait(7);
    new_segment(memory.allocate(3, 256 * MIB, 0));
    memory.drop_handle(7);
    assert_eq!(memory.allocate(4, 256 * MIB, 0), AllocStep::Cached(grad));
}

#[test]
fn under_record_stream_a_held_output_waits_for_its_work_then_for_its_events() {
    let mut memory = TensorMemory::<u32>::new(&scenario("record_stream"), 0);
    let grad = new_segment(memory.allocate(2, 256 * MIB, 0));
    memory.keep_alive(2, 0, 2, (7, 5), (AllReduce, true));
    assert_eq!(memory.streams_to_record(2), [2]);
    memory.free(2, vec![11]);
    memory.collect_pending(|_| true);
    new_segment(memory.allocate(3, 256 * MIB, 0));
    memory.drop_handle(7);
    assert_eq!(memory.pending_events(), [11]);
    memory.collect_pending(|event| event == 11);
    assert_eq!(memory.allocate(4, 256 * MIB, 0), AllocStep::Cached(grad));
}

#[test]
fn never_waited_works_leave_the_shelf_once_complete_held_or_not_and_a_held_output_stays() {
    // `w = dist.all_reduce(g, async_op=True); del g`, never waited: the shelf is shared with
    // the watchdog's copy of the Work and goes at the first collective after completion, held
    // or not; the Work's outputs_ (g itself, in place) keep the block until `w` is rebound.
    let mut memory = TensorMemory::<u32>::new(&scenario("stash"), 0);
    let grad = new_segment(memory.allocate(2, 256 * MIB, 0));
    memory.keep_alive(2, 0, 2, (3, 40), (AllReduce, true));
    memory.free(2, Vec::new());
    assert_eq!(memory.shelf_ends(0), [40]);
    memory.release_shelf(0, |_| false);
    assert_eq!(memory.shelf_ends(0), [40], "not complete: it stays");
    memory.release_shelf(0, |end| end == 40);
    assert!(
        memory.shelf_ends(0).is_empty(),
        "complete: it leaves, held or not"
    );
    new_segment(memory.allocate(3, 256 * MIB, 0));
    memory.drop_handle(3);
    assert_eq!(memory.allocate(4, 256 * MIB, 0), AllocStep::Cached(grad));
}

#[test]
fn a_held_work_whose_outputs_are_another_buffer_keeps_its_input_only_on_the_shelf() {
    // `w = dist.all_to_all_single(out, t, async_op=True); del t`, w held and never waited: the
    // Work's outputs_ are `out`, so t goes with the shelf at the next collective after
    // completion (R18).
    let mut memory = TensorMemory::<u32>::new(&scenario("stash"), 0);
    let sent = new_segment(memory.allocate(2, 256 * MIB, 0));
    memory.keep_alive(2, 0, 2, (3, 40), (AllToAll, true));
    memory.free(2, Vec::new());
    new_segment(memory.allocate(3, 256 * MIB, 0));
    memory.release_shelf(0, |end| end == 40);
    assert_eq!(memory.allocate(4, 256 * MIB, 0), AllocStep::Cached(sent));
}

#[test]
fn under_stash_a_send_still_records_its_tensor_on_the_nccl_stream() {
    // PyTorch 2.12 stashes collectives' tensors but keeps recordStream for point-to-point
    // calls (R19): `del t` after `dist.isend(t)` records an event on the NCCL stream, and the
    // block returns once it passed; nothing goes on the shelf.
    let mut memory = TensorMemory::<u32>::new(&scenario("stash"), 0);
    let sent = new_segment(memory.allocate(2, 256 * MIB, 0));
    memory.keep_alive(2, 0, 5, (3, 40), (Send, false));
    assert!(memory.shelf_ends(0).is_empty());
    assert_eq!(memory.streams_to_record(2), [5]);
    memory.free(2, vec![11]);
    new_segment(memory.allocate(3, 256 * MIB, 0));
    memory.collect_pending(|event| event == 11);
    assert_eq!(memory.allocate(4, 256 * MIB, 0), AllocStep::Cached(sent));
}

#[test]
fn record_stream_frees_wait_for_their_events() {
    let mut memory = TensorMemory::<u32>::new(&scenario("record_stream"), 0);
    let grad = new_segment(memory.allocate(2, 256 * MIB, 0));
    memory.keep_alive(2, 0, 2, (0, 5), (AllReduce, false));
    assert_eq!(memory.streams_to_record(2), [2]);
    memory.free(2, vec![11]);
    assert_eq!(memory.pending_events(), [11]);
    memory.collect_pending(|_| false);
    new_segment(memory.allocate(3, 256 * MIB, 0));
    memory.collect_pending(|event| event == 11);
    assert_eq!(memory.allocate(4, 256 * MIB, 0), AllocStep::Cached(grad));
}

#[test]
fn a_rebound_name_gets_a_new_block_while_the_old_one_lives_until_it_is_dropped_r30() {
    let mut memory = TensorMemory::<u32>::new(&scenario("record_stream"), 0);
    // Nothing to set aside before the name's first binding.
    memory.set_aside(2);
    assert_eq!(memory.set_aside_streams(2), None);
    let first = new_segment(memory.allocate(2, 256 * MIB, 0));
    memory.keep_alive(2, 0, 2, (0, 5), (AllReduce, false));
    memory.set_aside(2);
    // The new result is made while the old one is alive: a second block.
    let second = new_segment(memory.allocate(2, 256 * MIB, 0));
    assert_ne!(first, second);
    memory.keep_alive(2, 0, 2, (1, 6), (AllReduce, false));
    // The old one's recordStream stream stays with it, the new one's with the name.
    assert_eq!(memory.set_aside_streams(2), Some(vec![2]));
    memory.free_set_aside(2, vec![11]);
    assert_eq!(memory.set_aside_streams(2), None);
    assert_eq!(memory.streams_to_record(2), [2]);
    assert_eq!(memory.place(2), Some(second));
    memory.collect_pending(|event| event == 11);
    assert_eq!(memory.allocate(3, 256 * MIB, 0), AllocStep::Cached(first));
}

#[test]
fn a_full_cache_is_released_then_out_of_memory() {
    let mut memory = TensorMemory::<u32>::new(&scenario("none"), 0);
    let big = new_segment(memory.allocate(4, 512 * MIB, 0));
    memory.free(4, Vec::new());
    // Cached for stream 0; 512 MiB more on stream 1 do not fit beside it (R20).
    assert_eq!(
        memory.allocate(4, 512 * MIB, 1),
        AllocStep::NeedsRelease { synchronises: true }
    );
    assert_eq!(memory.release_cache(), [big.segment]);
    new_segment(memory.allocate(4, 512 * MIB, 1));
    assert_eq!(memory.allocate(2, 512 * MIB, 0), AllocStep::OutOfMemory);
    assert_eq!(memory.peaks().cache_releases, 1);
}

#[test]
fn with_expandable_segments_a_release_does_not_synchronise_r20() {
    let mut config = scenario("none");
    config.memory.expandable_segments = true;
    let mut memory = TensorMemory::<u32>::new(&config, 0);
    new_segment(memory.allocate(4, 512 * MIB, 0));
    memory.free(4, Vec::new());
    assert_eq!(
        memory.allocate(4, 512 * MIB, 1),
        AllocStep::NeedsRelease {
            synchronises: false
        }
    );
}

/// A list of `count` tensors of `size`, allocated up front, beside nothing else.
fn list(size: &str, count: u32, lifetime: &str) -> TensorMemory<u32> {
    let text = format!(
        "[cluster]\nranks = 1\n[memory]\nlifetime = \"{lifetime}\"\n\
         [tensors]\ngrads = {{ size = \"{size}\", count = {count} }}\n[[op]]\ndevice_sync = true\n"
    );
    TensorMemory::new(&crate::scenario::parse("list.toml", &text).unwrap(), 0)
}

#[test]
fn a_list_is_one_block_per_tensor_in_the_small_pool_r17() {
    // PyTorch's 4 torch.empty of 300 KiB: small requests, 4 blocks of one 2 MiB segment —
    // not one 1.2 MiB request, which would take a 20 MiB segment of the large pool.
    let mut memory = list("300KiB", 4, "none");
    let steps: Vec<AllocStep> = memory.static_steps().into_iter().map(|(_, s)| s).collect();
    let at = |offset_bytes| Place {
        segment: 0,
        offset_bytes,
    };
    assert_eq!(
        steps,
        [
            AllocStep::NewSegment {
                place: at(0),
                bytes: 2 * MIB
            },
            AllocStep::Cached(at(300 << 10)),
            AllocStep::Cached(at(600 << 10)),
            AllocStep::Cached(at(900 << 10)),
        ]
    );
    assert_eq!(memory.reserved_bytes(), 2 * MIB);
    assert_eq!(memory.peaks().peak_allocated_bytes, 1200 << 10);
    assert_eq!(memory.allocated_tensors(0), 4);
    // End to end, the four blocks are one region to the race detector.
    let regions: Vec<Region> = memory.regions(0, Binding::Current).collect();
    assert_eq!(
        regions,
        [Region {
            segment: 0,
            start_bytes: 0,
            end_bytes: 1200 << 10
        }]
    );
    memory.free(0, Vec::new());
    assert_eq!(memory.allocated_tensors(0), 0);
    assert_eq!(memory.regions(0, Binding::Current).count(), 0);
}

#[test]
fn a_stashed_list_keeps_every_block_until_wait_r18() {
    // Two 1 MiB tensors fill one 2 MiB segment of the small pool.
    let mut memory = list("1MiB", 2, "stash");
    memory.static_steps();
    // A Work the program does not hold (a synchronous call's, waited by its wrapper).
    memory.keep_alive(0, 0, 1, (7, 99), (AllReduce, false));
    memory.free(0, Vec::new());
    // Both blocks are held by the Work: 1 MiB more needs a new segment.
    assert!(matches!(
        memory.allocate(0, MIB, 0),
        AllocStep::NewSegment { .. }
    ));
    memory.free(0, Vec::new());
    memory.release_on_wait(7);
    // Both came back: the first segment is wholly free again.
    assert_eq!(memory.release_cache().len(), 2);
}

#[test]
fn a_record_stream_list_returns_every_block_once_its_events_passed_r19() {
    let mut memory = list("300KiB", 4, "record_stream");
    memory.static_steps();
    memory.keep_alive(0, 0, 1, (7, 99), (AllReduce, false));
    assert_eq!(memory.streams_to_record(0), [1]);
    memory.free(0, vec![11]);
    assert_eq!(memory.pending_events(), [11]);
    memory.collect_pending(|event| event == 11);
    assert!(memory.pending_events().is_empty());
    assert_eq!(memory.release_cache().len(), 1);
}

/// `scenarios/coalescing.toml`'s memory: 1000 gradients of 25 KB and a bucketed all_reduce
/// of them, at the bucket cap given.
fn bucketed(cap: &str) -> TensorMemory<u32> {
    let text = format!(
        "[cluster]\nranks = 1\n[tensors]\ngrads = {{ size = \"25KB\", count = 1000 }}\n\
         [[op]]\nall_reduce = \"grads\"\nbucket = \"{cap}\"\n"
    );
    TensorMemory::new(&crate::scenario::parse("bucket.toml", &text).unwrap(), 0)
}

#[test]
fn a_bucketed_collective_s_buffers_are_allocated_up_front_beside_the_list_r17_r25() {
    // DDP's Reducer allocates each bucket's flattened gradients (`at::empty`) at its
    // construction, as `c10dsim torch`'s interpreter does at setup: the grads' 13 small
    // segments (83 blocks of 25,088 B each) and one 25,000,448-B block whose 24-MiB segment
    // keeps its 165,376-B remainder (too small to split off): PyTorch's 50 MiB reserved and
    // 50,253,824 B allocated (tests/data/torch/coalescing.run*.json).
    let mut memory = bucketed("25MB");
    assert_eq!(memory.reserved_bytes(), 50 * MIB);
    assert_eq!(memory.peaks().peak_allocated_bytes, 50_253_824);
    let steps = memory.static_steps();
    assert_eq!(steps.len(), 1001);
    assert_eq!(
        steps[1000],
        (
            UpFront::Bucket {
                op: 0,
                bucket: 0,
                size_bytes: 25_000_000
            },
            AllocStep::NewSegment {
                place: Place {
                    segment: 13,
                    offset_bytes: 0
                },
                bytes: 24 * MIB
            }
        )
    );
    // Three buckets of 400 gradients, 400 and 200: the last one is the remainder.
    let buckets: Vec<UpFront> = (bucketed("10MB").static_steps().into_iter())
        .map(|(owner, _)| owner)
        .filter(|owner| matches!(owner, UpFront::Bucket { .. }))
        .collect();
    let bucket = |bucket, size_bytes| UpFront::Bucket {
        op: 0,
        bucket,
        size_bytes,
    };
    assert_eq!(
        buckets,
        [
            bucket(0, 10_000_000),
            bucket(1, 10_000_000),
            bucket(2, 5_000_000)
        ]
    );
}

/// Booked one at a time, as `hw` books them: a segment the device refuses leaves the books
/// as they were before it — here the bucket buffer after the 1000 gradients — and, nothing
/// being freed before the program, no release can help.
#[test]
fn a_refused_up_front_segment_is_dropped_from_the_books() {
    let text = "[cluster]\nranks = 1\n[tensors]\ngrads = { size = \"25KB\", count = 1000 }\n\
                [[op]]\nall_reduce = \"grads\"\nbucket = \"25MB\"\n";
    let scenario = crate::scenario::parse("bucket.toml", text).unwrap();
    let mut memory = TensorMemory::<u32>::unbooked(&scenario, 0);
    for _ in 0..1000 {
        let (owner, _) = memory.allocate_up_front().unwrap();
        assert_eq!(owner, UpFront::Tensor(0));
    }
    let grads = memory.peaks();
    let (owner, step) = memory.allocate_up_front().unwrap();
    assert!(matches!(owner, UpFront::Bucket { bucket: 0, .. }));
    assert!(matches!(step, AllocStep::NewSegment { .. }));
    assert_eq!(memory.refuse_new_segment(), AllocStep::OutOfMemory);
    assert_eq!(memory.peaks(), grads);
    assert_eq!(memory.reserved_bytes(), grads.peak_reserved_bytes);
    assert!(memory.bucket_region(0, 0).is_none());
    // Booked whole, the same books.
    assert_eq!(
        TensorMemory::<u32>::new(&scenario, 0)
            .peaks()
            .peak_reserved_bytes,
        50 * MIB
    );
}

#[test]
fn the_books_find_each_bucket_buffer_of_each_bucketed_collective_r21_r25() {
    // Two bucketed all_reduces (ops 1 and 3), of two buckets and of one, whose buffers the
    // race detector looks up by (op, bucket) and names by their number among all buffers.
    let text = "[cluster]\nranks = 1\n[tensors]\ngrads = { size = \"1MiB\", count = 4 }\n\
                [[op]]\nkernel = { us = 1 }\n[[op]]\nall_reduce = \"grads\"\nbucket = \"2MiB\"\n\
                [[op]]\nkernel = { us = 1 }\n[[op]]\nall_reduce = \"grads\"\nbucket = \"4MiB\"\n";
    let memory = TensorMemory::<u32>::new(&crate::scenario::parse("two.toml", text).unwrap(), 0);
    let found: Vec<(u32, u64)> = [(1, 0), (1, 1), (3, 0)]
        .into_iter()
        .map(|(op, bucket)| {
            let (index, region) = memory.bucket_region(op, bucket).expect("allocated");
            assert_eq!(memory.bucket_of(index), (op, bucket));
            (index, region.end_bytes - region.start_bytes)
        })
        .collect();
    assert_eq!(found, [(0, 2 * MIB), (1, 2 * MIB), (2, 4 * MIB)]);
    assert!(memory.bucket_region(1, 2).is_none());
    assert!(memory.bucket_region(3, 1).is_none());
    assert!(memory.bucket_region(2, 0).is_none());
}

#[test]
fn a_split_segment_is_released_only_when_wholly_free() {
    let mut memory = TensorMemory::<u32>::new(&scenario("none"), 0);
    // Two 256 MiB tensors from one 512 MiB cached segment (split, R17).
    let big = new_segment(memory.allocate(4, 512 * MIB, 0));
    memory.free(4, Vec::new());
    let AllocStep::Cached(first) = memory.allocate(2, 256 * MIB, 0) else {
        panic!()
    };
    let AllocStep::Cached(second) = memory.allocate(3, 256 * MIB, 0) else {
        panic!()
    };
    assert_eq!((first.segment, second.segment), (big.segment, big.segment));
    assert_eq!(second.offset_bytes, 256 * MIB);
    memory.free(2, Vec::new());
    // Half of the segment is still in use: nothing to release (fragmentation).
    assert_eq!(memory.allocate(4, 512 * MIB, 1), AllocStep::OutOfMemory);
    memory.free(3, Vec::new());
    assert_eq!(
        memory.allocate(4, 512 * MIB, 1),
        AllocStep::NeedsRelease { synchronises: true }
    );
    assert_eq!(memory.release_cache(), [big.segment]);
}
