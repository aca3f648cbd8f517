//! A run kept as summaries (`Options::summary`, `run --summary`): each rank's records are
//! folded into per-op distributions as they are completed — at each of its host's iteration
//! boundaries, every record of the iterations whose records can no longer change — and only
//! those of the ranks and iterations the user named are kept whole. Memory then grows with the
//! records still open (the iterations between the GPU and the host running ahead of it, which
//! the launch queue bounds) and the distinct values of the distributions, not with the run.
//!
//! The engine's side: [`Records`] (a record vector whose front can be dropped while the
//! indices the engine holds stay valid), [`RankRecords`] (a rank's records while it runs),
//! [`Engine::iteration_ended`] (the fold) and [`Engine::resolved`] (the deferred fields filled
//! in, the GPU side's times among them (`engine/gpu_times.rs`), shared with the Timeline's
//! assembly); [`Summariser`] holds the distributions.
//!
//! What a fold keeps of a folded collective ([`FoldedWork`]: 40 bytes) is what the watchdog
//! and the failure component may still ask of its Work; event fire times (`fired_ns`, 8 bytes
//! per event instance) are kept whole. The Flight Recorder dump of a summarised run has
//! entries for the collectives not yet folded only, though its counters, record ids and
//! `pg_status` count the folded ones too.
//!
//! About 840 lines, its tests (in `summary/tests.rs`, comparing it with the full run) apart: the
//! record vectors, the fold and the distributions are one mechanism (what the fold drops is what
//! the distributions must hold).

use super::rank::{RankState, Scratch};
use super::{Engine, NEVER, NO_WORK_START};
use crate::allocator::MemoryPeaks;
use crate::timeline::*;
use std::collections::BTreeMap;
use std::ops::{Index, IndexMut};

/// Records with absolute indices, whose front can be dropped: `records[i]` is the `i`-th record
/// ever pushed, for `i` from [`Records::base`] on. A plain vector (the engine indexes it on its
/// hot paths; a ring buffer's index costs more there, measured): dropping the front moves
/// what stays, which the folds' spacing ([`FOLD_EVERY_ITERATIONS`]) keeps to a few moves per
/// record.
#[derive(Debug)]
pub(super) struct Records<T> {
    base: usize,
    items: Vec<T>,
}

impl<T> Default for Records<T> {
    fn default() -> Self {
        Records {
            base: 0,
            items: Vec::new(),
        }
    }
}

impl<T> Records<T> {
    /// Records ever pushed (the next record's index).
    #[inline]
    pub(super) fn len(&self) -> usize {
        self.base + self.items.len()
    }

    #[inline]
    pub(super) fn push(&mut self, record: T) {
        self.items.push(record);
    }

    pub(super) fn reserve_exact(&mut self, more: usize) {
        self.items.reserve_exact(more);
    }

    /// The index of the first record still held.
    pub(super) fn base(&self) -> usize {
        self.base
    }

    /// The records still held, oldest first.
    pub(super) fn items(&self) -> &[T] {
        &self.items
    }

    /// Drops the `count` oldest records held, returning them (all of them without a copy:
    /// the Timeline's assembly takes every record).
    fn take_front(&mut self, count: usize) -> Vec<T> {
        self.base += count;
        if count == self.items.len() {
            return std::mem::take(&mut self.items);
        }
        self.items.drain(..count).collect()
    }
}

impl<T> Index<usize> for Records<T> {
    type Output = T;
    #[inline]
    fn index(&self, index: usize) -> &T {
        &self.items[index - self.base]
    }
}

impl<T> IndexMut<usize> for Records<T> {
    #[inline]
    fn index_mut(&mut self, index: usize) -> &mut T {
        &mut self.items[index - self.base]
    }
}

/// What the failure component may still ask of a folded collective's Work.
#[derive(Debug, Clone, Copy)]
pub(super) struct FoldedWork {
    pub(super) end_ns: u64,
    pub(super) seq: u64,
    /// The Work's `SeqNum` (`CollectiveRecord::seq_num`).
    pub(super) seq_num: u64,
    pub(super) bytes: u64,
    pub(super) op: u32,
    pub(super) iteration: u32,
    pub(super) group: u16,
}

/// A rank's records while it runs; [`RankTimeline`] once it ended.
#[derive(Debug, Default)]
pub(super) struct RankRecords {
    pub(super) rank: u32,
    pub(super) streams: Vec<StreamInfo>,
    pub(super) host: Records<HostCall>,
    pub(super) kernels: Records<KernelRecord>,
    pub(super) collectives: Records<CollectiveRecord>,
    pub(super) marks: Records<MarkRecord>,
    pub(super) stream_waits: Records<StreamWaitRecord>,
    pub(super) queries: Records<QueryRecord>,
    pub(super) cache_releases: Vec<CacheRelease>,
    pub(super) races: Vec<RaceRecord>,
    pub(super) exceptions: Vec<ExceptionRecord>,
    /// Per folded collective (index below `collectives.base()`): its Work's facts.
    pub(super) folded_works: Vec<FoldedWork>,
    /// Records are folded as they complete (summary mode): no room is reserved ahead.
    pub(super) folds: bool,
}

/// How many of each kind of record a fold takes (the oldest ones).
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Counts {
    host: usize,
    kernels: usize,
    collectives: usize,
    marks: usize,
    stream_waits: usize,
    queries: usize,
}

impl Counts {
    /// Every record `records` holds.
    pub(super) fn all(records: &RankRecords) -> Counts {
        Counts {
            host: records.host.items().len(),
            kernels: records.kernels.items().len(),
            collectives: records.collectives.items().len(),
            marks: records.marks.items().len(),
            stream_waits: records.stream_waits.items().len(),
            queries: records.queries.items().len(),
        }
    }
}

/// Samples counted by value (exact medians with memory in the distinct values).
type Histogram = BTreeMap<i64, u64>;

fn add(histogram: &mut Histogram, value: i64) {
    *histogram.entry(value).or_default() += 1;
}

fn distribution(histogram: &Histogram) -> Distribution {
    Distribution::from_counts(histogram.iter().map(|(&v, &c)| (v, c)).collect())
}

#[derive(Default)]
struct CollectiveSamples {
    seen: bool,
    bytes: u64,
    async_op: bool,
    host_call: Histogram,
    wait: Histogram,
    stream_interval: Histogram,
    kernel: Histogram,
    data: Histogram,
    spin: Histogram,
    /// The spin of the rank that arrived last, kept apart from `spin` (it waited for none but
    /// itself); the summary's spin where no other rank took part (a group of one).
    last_rank_spin: Histogram,
    waits: u64,
    completed: u64,
    last_ranks: BTreeMap<u32, u64>,
    /// One bit per rank: those with a measured record of the op.
    ranks_seen: Vec<u64>,
    /// Per rank, 1 + the last iteration counted in `rank_iterations` (0: none yet).
    last_iteration: Vec<u32>,
    /// (rank, measured iteration) pairs with a completed call of the op.
    rank_iterations: u64,
}

#[derive(Default)]
struct KernelSamples {
    kernel: Histogram,
    queued: Histogram,
}

/// The distributions of a summarised run, and the records kept whole.
pub(super) struct Summariser {
    selection: RecordSelection,
    warmup: u32,
    collectives: Vec<CollectiveSamples>,
    kernels: Vec<KernelSamples>,
    /// Per op: `is_completed()` calls and how many returned true.
    queries: Vec<(u64, u64)>,
    /// Per measure: every sample, and how many were positive.
    measures: Vec<(Histogram, u64)>,
    /// Per rank (only when the scenario has measures), per measure: its samples.
    rank_measures: Vec<Vec<Histogram>>,
    /// The kept records of each rank that keeps some.
    kept: BTreeMap<u32, RankTimeline>,
    /// Per rank that keeps some records: the iteration of its last host call folded so far
    /// and the latest end of that iteration's calls, where the next iteration's profiler step
    /// starts.
    last_steps: BTreeMap<u32, (u32, u64)>,
    memory: MemoryPeaks,
    cache_releases: u64,
    cache_release_stalls: u64,
    ends: BTreeMap<ExitStatusKey, Vec<u32>>,
}

/// [`ExitStatus`] in a fixed order, to group ranks by how they ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct ExitStatusKey(u8);

const STATUSES: [ExitStatus; 6] = [
    ExitStatus::Clean,
    ExitStatus::Raised,
    ExitStatus::Aborted,
    ExitStatus::Killed,
    ExitStatus::Crashed,
    ExitStatus::Running,
];

impl Summariser {
    pub(super) fn new(scenario: &crate::scenario::Scenario, selection: RecordSelection) -> Self {
        let ops = scenario.ops.len();
        let measures = scenario.measures.len();
        Summariser {
            selection,
            warmup: scenario.warmup,
            collectives: (0..ops).map(|_| CollectiveSamples::default()).collect(),
            kernels: (0..ops).map(|_| KernelSamples::default()).collect(),
            queries: vec![(0, 0); ops],
            measures: vec![(Histogram::new(), 0); measures],
            rank_measures: if measures == 0 {
                Vec::new()
            } else {
                vec![vec![Histogram::new(); measures]; scenario.cluster.ranks as usize]
            },
            kept: BTreeMap::new(),
            last_steps: BTreeMap::new(),
            memory: MemoryPeaks::default(),
            cache_releases: 0,
            cache_release_stalls: 0,
            ends: BTreeMap::new(),
        }
    }

    /// Folds completed, resolved records of `rank` into the distributions; keeps those the
    /// selection names.
    fn absorb(&mut self, scenario: &crate::scenario::Scenario, batch: RankTimeline) {
        let rank = batch.rank;
        let warmup = self.warmup;
        for record in batch.collectives.iter().filter(|c| c.iteration >= warmup) {
            let samples = &mut self.collectives[record.op as usize];
            samples.seen = true;
            let (word, bit) = (rank as usize / 64, rank % 64);
            if samples.ranks_seen.len() <= word {
                samples.ranks_seen.resize(word + 1, 0);
            }
            samples.ranks_seen[word] |= 1 << bit;
            if samples.last_iteration.len() <= rank as usize {
                samples.last_iteration.resize(rank as usize + 1, 0);
            }
            let counted = &mut samples.last_iteration[rank as usize];
            if *counted != record.iteration + 1 {
                *counted = record.iteration + 1;
                samples.rank_iterations += 1;
            }
            samples.bytes = record.bytes;
            samples.async_op = record.async_op;
            let span = |from: u64, to: u64| to as i64 - from as i64;
            add(
                &mut samples.host_call,
                span(record.host_start_ns, record.host_end_ns),
            );
            add(&mut samples.stream_interval, record.stream_interval_ns());
            add(&mut samples.kernel, record.duration_ns());
            add(&mut samples.data, span(record.data_start_ns, record.end_ns));
            let spin = if record.last_rank == Some(rank) {
                &mut samples.last_rank_spin
            } else {
                &mut samples.spin
            };
            add(spin, span(record.kernel_start_ns, record.data_start_ns));
            if let Some(last) = record.last_rank {
                *samples.last_ranks.entry(last).or_default() += 1;
            }
            if let Some(wait) = &record.wait {
                samples.waits += 1;
                samples.completed += u64::from(wait.completed_at_return);
                if wait.op != record.op {
                    add(
                        &mut samples.wait,
                        span(wait.host_start_ns, wait.host_end_ns),
                    );
                }
            }
        }
        for kernel in batch
            .kernels
            .iter()
            .filter(|k| k.iteration >= warmup && k.class != KernelClass::Communication)
        {
            let samples = &mut self.kernels[kernel.op as usize];
            add(
                &mut samples.kernel,
                kernel.end_ns as i64 - kernel.start_ns as i64,
            );
            add(
                &mut samples.queued,
                kernel.start_ns as i64 - kernel.enqueue_ns as i64,
            );
        }
        for query in batch.queries.iter().filter(|q| q.iteration >= warmup) {
            let entry = &mut self.queries[query.op as usize];
            entry.0 += 1;
            entry.1 += u64::from(query.completed);
        }
        self.absorb_measures(scenario, rank, &batch.marks);
        self.keep(batch);
    }

    /// The measures of the iterations whose marks are in `marks` (every mark of an iteration
    /// is folded at once), as `analysis::metrics` pairs them: the last mark of each name in an
    /// iteration counts.
    fn absorb_measures(
        &mut self,
        scenario: &crate::scenario::Scenario,
        rank: u32,
        marks: &[MarkRecord],
    ) {
        if scenario.measures.is_empty() {
            return;
        }
        let mut by_iteration: BTreeMap<(u32, u32), (u64, u64)> = BTreeMap::new();
        for mark in marks.iter().filter(|m| m.iteration >= self.warmup) {
            by_iteration.insert((mark.iteration, mark.mark), (mark.host_ns, mark.gpu_ns));
        }
        let iterations: Vec<u32> = {
            let mut list: Vec<u32> = by_iteration.keys().map(|&(i, _)| i).collect();
            list.dedup();
            list
        };
        for iteration in iterations {
            for (index, measure) in scenario.measures.iter().enumerate() {
                let (Some(a), Some(b)) = (
                    by_iteration.get(&(iteration, measure.from as u32)),
                    by_iteration.get(&(iteration, measure.to as u32)),
                ) else {
                    continue;
                };
                let (start, end) = match measure.clock {
                    crate::scenario::Clock::Host => (a.0, b.0),
                    crate::scenario::Clock::Gpu => (a.1, b.1),
                };
                let value = end as i64 - start as i64;
                add(&mut self.measures[index].0, value);
                self.measures[index].1 += u64::from(value > 0);
                add(&mut self.rank_measures[rank as usize][index], value);
            }
        }
    }

    /// The records of `batch` the selection names join the rank's kept records.
    fn keep(&mut self, batch: RankTimeline) {
        let rank = batch.rank;
        if !self.selection.keeps_rank(rank) {
            return;
        }
        let selection = &self.selection;
        let kept = self.kept.entry(rank).or_insert_with(|| RankTimeline {
            rank,
            ..RankTimeline::default()
        });
        if !batch.streams.is_empty() {
            kept.streams = batch.streams;
        }
        let keeps = |iteration: u32| selection.keeps(rank, iteration);
        // A kept iteration after one not kept starts its step where that one's calls ended,
        // which the kept records no longer tell.
        let mut last_step = self.last_steps.get(&rank).copied();
        let mut step_start = |iteration: u32, last_step: Option<(u32, u64)>| {
            if let Some((previous, end_ns)) = last_step {
                if previous != iteration && keeps(iteration) && !keeps(previous) {
                    kept.step_starts_ns.push((iteration, end_ns));
                }
            }
        };
        for call in &batch.host {
            step_start(call.iteration, last_step);
            last_step = Some(match last_step {
                Some((iteration, end_ns)) if iteration == call.iteration => {
                    (iteration, end_ns.max(call.end_ns))
                }
                _ => (call.iteration, call.end_ns),
            });
        }
        if let Some(iteration) = batch.unfinished_iteration {
            step_start(iteration, last_step);
        }
        if let Some(last_step) = last_step {
            self.last_steps.insert(rank, last_step);
        }
        kept.host
            .extend(batch.host.into_iter().filter(|r| keeps(r.iteration)));
        kept.kernels
            .extend(batch.kernels.into_iter().filter(|r| keeps(r.iteration)));
        kept.collectives
            .extend(batch.collectives.into_iter().filter(|r| keeps(r.iteration)));
        kept.marks
            .extend(batch.marks.into_iter().filter(|r| keeps(r.iteration)));
        kept.stream_waits.extend(
            batch
                .stream_waits
                .into_iter()
                .filter(|r| keeps(r.iteration)),
        );
        kept.queries
            .extend(batch.queries.into_iter().filter(|r| keeps(r.iteration)));
        kept.unfinished_collectives
            .extend((batch.unfinished_collectives.into_iter()).filter(|r| keeps(r.iteration)));
        kept.unfinished_kernels
            .extend((batch.unfinished_kernels.into_iter()).filter(|r| keeps(r.iteration)));
        kept.unfinished_stream_waits
            .extend((batch.unfinished_stream_waits.into_iter()).filter(|r| keeps(r.iteration)));
        if let Some(call) = batch.unfinished_host.filter(|r| keeps(r.iteration)) {
            kept.unfinished_host = Some(call);
        }
        if let Some(iteration) = batch.unfinished_iteration.filter(|&i| keeps(i)) {
            kept.unfinished_iteration = Some(iteration);
        }
        kept.cache_releases.extend(
            batch
                .cache_releases
                .into_iter()
                .filter(|r| keeps(r.iteration)),
        );
        kept.races
            .extend(batch.races.into_iter().filter(|r| keeps(r.iteration)));
        kept.exceptions
            .extend(batch.exceptions.into_iter().filter(|r| keeps(r.iteration)));
        if batch.end.is_some() {
            kept.memory = batch.memory;
            kept.end = batch.end;
        }
    }

    /// A rank's last records, its memory peaks and its end; returns its kept records, if the
    /// selection names it.
    pub(super) fn finish_rank(
        &mut self,
        scenario: &crate::scenario::Scenario,
        last: RankTimeline,
    ) -> Option<RankTimeline> {
        let rank = last.rank;
        self.memory.peak_reserved_bytes = self
            .memory
            .peak_reserved_bytes
            .max(last.memory.peak_reserved_bytes);
        self.memory.peak_allocated_bytes = self
            .memory
            .peak_allocated_bytes
            .max(last.memory.peak_allocated_bytes);
        self.memory.cache_releases = self.memory.cache_releases.max(last.memory.cache_releases);
        self.cache_releases += last.cache_releases.len() as u64;
        self.cache_release_stalls += (last.cache_releases.iter())
            .filter(|release| release.device_idle_ns.is_some())
            .count() as u64;
        if let Some(end) = last.end {
            let key = STATUSES.iter().position(|&s| s == end.status).unwrap_or(0);
            self.ends
                .entry(ExitStatusKey(key as u8))
                .or_default()
                .push(rank);
        }
        self.absorb(scenario, last);
        self.last_steps.remove(&rank);
        self.kept.remove(&rank)
    }

    /// Whether `rank`'s Flight Recorder dump is kept, and which ranks it stands for (empty: its
    /// own alone): a rank the selection names keeps its own; of the others of `class` (ranks
    /// that behave alike, whose dumps differ only in their rank), the lowest keeps one for
    /// them all; the rest keep none. Each dump lists every rank of its groups, so keeping one
    /// per rank would grow with the square of the ranks.
    pub(super) fn dump_stands_for(&self, rank: u32, class: &RankSet) -> Option<RankSet> {
        if self.selection.keeps_rank(rank) {
            return Some(RankSet::default());
        }
        let unnamed = |member: &u32| !self.selection.keeps_rank(*member);
        if class.iter().find(unnamed) != Some(rank) {
            return None;
        }
        let others = RankSet::from_ranks(class.iter().filter(unnamed));
        Some(if others.count() > 1 {
            others
        } else {
            RankSet::default()
        })
    }

    /// The summary, once every rank finished.
    pub(super) fn into_summary(self, scenario: &crate::scenario::Scenario) -> TimelineSummary {
        let collectives = self
            .collectives
            .iter()
            .enumerate()
            .filter(|(_, samples)| samples.seen)
            .map(|(op, s)| CollectiveSummary {
                op: op as OpRef,
                bytes: s.bytes,
                async_op: s.async_op,
                ranks: s.ranks_seen.iter().map(|word| word.count_ones()).sum(),
                rank_iterations: s.rank_iterations,
                host_call: distribution(&s.host_call),
                wait: distribution(&s.wait),
                stream_interval: distribution(&s.stream_interval),
                kernel: distribution(&s.kernel),
                data: distribution(&s.data),
                spin: distribution(if s.spin.is_empty() {
                    &s.last_rank_spin
                } else {
                    &s.spin
                }),
                waits: s.waits,
                completed_at_return: s.completed,
                last_ranks: s.last_ranks.iter().map(|(&r, &c)| (r, c)).collect(),
            })
            .collect();
        let kernels = self
            .kernels
            .iter()
            .enumerate()
            .filter(|(_, samples)| !samples.kernel.is_empty())
            .map(|(op, s)| KernelSummary {
                op: op as OpRef,
                kernel: distribution(&s.kernel),
                queued: distribution(&s.queued),
            })
            .collect();
        let measures = scenario
            .measures
            .iter()
            .enumerate()
            .map(|(index, measure)| MeasureSummary {
                name: measure.name.clone(),
                values: distribution(&self.measures[index].0),
                positive: self.measures[index].1,
                rank_medians_us: self
                    .rank_measures
                    .iter()
                    .enumerate()
                    .filter(|(_, per_measure)| !per_measure[index].is_empty())
                    .map(|(rank, per_measure)| {
                        let values = distribution(&per_measure[index]);
                        (rank as u32, median_us(&values))
                    })
                    .collect(),
            })
            .collect();
        let queries = self
            .queries
            .iter()
            .enumerate()
            .filter(|(_, &(calls, _))| calls > 0)
            .map(|(op, &(calls, completed))| QuerySummary {
                op: op as OpRef,
                calls,
                completed,
            })
            .collect();
        let ends = self
            .ends
            .iter()
            .map(|(key, ranks)| EndClass {
                status: STATUSES[key.0 as usize],
                ranks: crate::ranks::RankSet::from_ranks(ranks.iter().copied()).to_string(),
                count: ranks.len() as u64,
            })
            .collect();
        TimelineSummary {
            records_for: self.selection,
            collectives,
            kernels,
            measures,
            queries,
            memory: self.memory,
            cache_releases: self.cache_releases,
            cache_release_stalls: self.cache_release_stalls,
            ends,
        }
    }
}

/// The median in µs (the mean of the middle two for an even count), as the report takes it.
pub fn median_us(values: &Distribution) -> f64 {
    let n = values.count;
    if n % 2 == 1 {
        values.nth(n / 2) as f64 / 1_000.0
    } else {
        (values.nth(n / 2 - 1) as f64 + values.nth(n / 2) as f64) / 2_000.0
    }
}

/// A rank's records fold every this many iterations of its host: often enough that what is
/// held stays within a few iterations of what must be (the GPU's backlog), rarely enough that
/// the folds' allocations and the records they move cost little against the simulation.
pub(super) const FOLD_EVERY_ITERATIONS: u32 = 16;

impl Engine<'_> {
    /// Summary hook, at `rank`'s host starting a new iteration: every
    /// [`FOLD_EVERY_ITERATIONS`], folds the records of every earlier iteration that can no
    /// longer change. No-op unless the run is summarised.
    pub(super) fn iteration_ended(&mut self, rank: u32) {
        if self.summariser.is_none()
            || !self.ranks[rank as usize]
                .iteration
                .is_multiple_of(FOLD_EVERY_ITERATIONS)
        {
            return;
        }
        let counts = self.closed_counts(rank);
        if counts.host + counts.kernels + counts.collectives + counts.stream_waits == 0 {
            return;
        }
        let batch = resolved(&mut self.ranks[rank as usize], counts);
        let scenario = self.scenario;
        if let Some(summariser) = &mut self.summariser {
            summariser.absorb(scenario, batch);
        }
    }

    /// How many of `rank`'s oldest records belong to iterations all of whose records are
    /// closed: every time they carry is known and nothing will write them again (a
    /// collective's Work no longer has a name a later `wait()` could use).
    fn closed_counts(&self, rank: u32) -> Counts {
        let state = &self.ranks[rank as usize];
        let (t, scratch, fired) = (&state.timeline, &state.scratch, &state.fired_ns);
        let now_ns = self.now_ns;
        // The first iteration with an open record (the host's current one at most).
        let mut open = state.iteration;
        let mut first_open = |iterations: &mut dyn Iterator<Item = (u32, bool)>| {
            for (iteration, closed) in iterations {
                if iteration >= open {
                    return;
                }
                if !closed {
                    open = iteration;
                    return;
                }
            }
        };
        // The GPU's records first: where the GPU is, the first open record is near the front,
        // and every later scan stops there (host calls are closed once made, so scanned first
        // they would walk every iteration the host ran ahead).
        let base = t.kernels.base();
        first_open(
            &mut t.kernels.items().iter().enumerate().map(|(k, record)| {
                let ended = scratch.kernel_times.get(base + k).end_ns != NEVER;
                (record.iteration, ended)
            }),
        );
        let base = t.collectives.base();
        first_open(&mut t.collectives.items().iter().enumerate().map(|(k, c)| {
            let index = base + k;
            let named = state
                .work_end
                .iter()
                .any(|work| matches!(work, Some((_, c)) if *c as usize == index));
            let closed = !named
                && fired[scratch.collective_input_ready[index] as usize] != NEVER
                && (scratch.enqueued_end(index)).is_some_and(|end| fired[end as usize] != NEVER)
                && scratch.collective_data.get(index).data_start_ns != NEVER
                && (scratch.kernel_times)
                    .get(scratch.collective_kernel[index] as usize)
                    .start_ns
                    != NEVER
                && c.wait.is_none_or(|_| {
                    let stream_wait = scratch.collective_wait_stream_wait[index] as usize;
                    scratch.stream_wait_released_ns.get(stream_wait) != NEVER
                });
            (c.iteration, closed)
        }));
        let base = t.marks.base();
        first_open(&mut t.marks.items().iter().enumerate().map(|(k, m)| {
            let instance = scratch.mark_instance[base + k];
            (m.iteration, fired[instance as usize] != NEVER)
        }));
        let base = t.stream_waits.base();
        first_open(
            &mut t.stream_waits.items().iter().enumerate().map(|(k, w)| {
                let instance = scratch.stream_wait_instance[base + k];
                let released = scratch.stream_wait_released_ns.get(base + k) != NEVER;
                (w.iteration, released && fired[instance as usize] != NEVER)
            }),
        );
        let base = t.queries.base();
        first_open(&mut t.queries.items().iter().enumerate().map(|(k, q)| {
            let instance = scratch.query_instance[base + k];
            // Not fired by now: it fires after the query, which then saw it incomplete.
            (
                q.iteration,
                fired[instance as usize] != NEVER || now_ns > q.host_ns,
            )
        }));
        first_open(
            &mut t
                .host
                .items()
                .iter()
                .map(|h| (h.iteration, h.end_ns != NEVER)),
        );
        let before = |items: &mut dyn Iterator<Item = u32>| items.take_while(|&i| i < open).count();
        Counts {
            host: before(&mut t.host.items().iter().map(|r| r.iteration)),
            kernels: before(&mut t.kernels.items().iter().map(|r| r.iteration)),
            collectives: before(&mut t.collectives.items().iter().map(|r| r.iteration)),
            marks: before(&mut t.marks.items().iter().map(|r| r.iteration)),
            stream_waits: before(&mut t.stream_waits.items().iter().map(|r| r.iteration)),
            queries: before(&mut t.queries.items().iter().map(|r| r.iteration)),
        }
    }
}

/// Takes `counts` of a rank's oldest records out of the run, with their deferred times filled
/// in from the event instances (the Timeline's assembly takes them all this way). A time not
/// known yet stays `NEVER`.
pub(super) fn resolved(state: &mut RankState, counts: Counts) -> RankTimeline {
    let fired = &state.fired_ns;
    let t = &mut state.timeline;
    let scratch: &mut Scratch = &mut state.scratch;
    let collectives_base = t.collectives.base();
    let mut collectives = t.collectives.take_front(counts.collectives);
    let data_starts = scratch.collective_data.take_front(counts.collectives);
    for (k, (record, data)) in collectives.iter_mut().zip(data_starts).enumerate() {
        let index = collectives_base + k;
        record.input_ready_ns = fired[scratch.collective_input_ready[index] as usize];
        let work_start = scratch.collective_work_start[index];
        record.work_start_ns = (work_start != NO_WORK_START).then(|| fired[work_start as usize]);
        record.end_ns = (scratch.enqueued_end(index)).map_or(NEVER, |end| fired[end as usize]);
        record.data_start_ns = data.data_start_ns;
        record.last_rank = data.last_rank;
        let kernel = scratch.collective_kernel[index] as usize;
        record.kernel_start_ns = scratch.kernel_times.get(kernel).start_ns;
        let end_ns = record.end_ns;
        if let Some(wait) = &mut record.wait {
            let stream_wait = scratch.collective_wait_stream_wait[index];
            wait.released_ns = scratch.stream_wait_released_ns.get(stream_wait as usize);
            wait.completed_at_return = end_ns <= wait.host_end_ns;
        }
    }
    if t.folds {
        t.folded_works
            .extend(collectives.iter().map(|record| FoldedWork {
                end_ns: record.end_ns,
                seq: record.seq,
                seq_num: record.seq_num(),
                bytes: record.bytes,
                op: record.op,
                iteration: record.iteration,
                group: record.group,
            }));
    }
    scratch
        .collective_input_ready
        .take_front(counts.collectives);
    scratch.collective_work_start.take_front(counts.collectives);
    scratch.collective_end.take_front(counts.collectives);
    scratch.collective_kernel.take_front(counts.collectives);
    scratch
        .collective_wait_stream_wait
        .take_front(counts.collectives);
    let mut stream_waits = t.stream_waits.take_front(counts.stream_waits);
    let instances = scratch.stream_wait_instance.take_front(counts.stream_waits);
    let released = scratch
        .stream_wait_released_ns
        .take_front(counts.stream_waits);
    for ((wait, instance), released_ns) in stream_waits.iter_mut().zip(instances).zip(released) {
        wait.source_ns = fired[instance as usize];
        wait.released_ns = released_ns;
    }
    let mut marks = t.marks.take_front(counts.marks);
    let instances = scratch.mark_instance.take_front(counts.marks);
    for (mark, instance) in marks.iter_mut().zip(instances) {
        mark.gpu_ns = fired[instance as usize];
    }
    let mut kernels = t.kernels.take_front(counts.kernels);
    let times = scratch.kernel_times.take_front(counts.kernels);
    for (kernel, times) in kernels.iter_mut().zip(times) {
        kernel.start_ns = times.start_ns;
        kernel.end_ns = times.end_ns;
    }
    let mut queries = t.queries.take_front(counts.queries);
    let instances = scratch.query_instance.take_front(counts.queries);
    let failures = scratch.query_failed_ns.take_front(counts.queries);
    for ((query, instance), failed_ns) in queries.iter_mut().zip(instances).zip(failures) {
        // A Work that failed is completed (with its error) from then on (R27).
        let end_fired = fired[instance as usize] <= query.host_ns;
        let error_ns = (failed_ns != NEVER).then_some(failed_ns);
        query.completed = crate::pg::work::is_completed(end_fired, error_ns, query.host_ns);
    }
    RankTimeline {
        rank: t.rank,
        host: t.host.take_front(counts.host),
        kernels,
        collectives,
        marks,
        stream_waits,
        queries,
        ..RankTimeline::default()
    }
}

impl RankRecords {
    /// The facts of collective `index`'s Work, folded or not.
    pub(super) fn folded_work(&self, index: u32) -> Option<&FoldedWork> {
        self.folded_works.get(index as usize)
    }
}

#[cfg(test)]
mod tests;
