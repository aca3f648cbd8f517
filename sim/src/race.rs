//! The stream race detector of one rank (R21): happens-before with vector clocks, as
//! `torch.cuda._sanitizer` does, extended to the NCCL streams and to allocator reuse.
//!
//! Agents are the host thread (index 0) and each stream (1 + stream). Happens-before edges:
//! host program order; the host issuing an item onto a stream; stream order (R4); an event's
//! record and a later wait on it (R5: syncStream's input-ready event, `wait()`'s end event,
//! `wait_event`); host synchronisations on events, streams or the device (R14). Memory is a
//! block of the caching allocator, not a tensor name, so a block reused by a later tensor while
//! NCCL still touches it is a race like any other (R17–R19). Memory is a byte range of an
//! allocator segment. Two accesses conflict when their ranges overlap, one writes, and neither
//! happens before the other; each conflict is reported once per pair of ops.
//!
//! Everything here follows the order in which the host issues work, which is program order:
//! the analysis needs no timing, so it finds races that did not happen to overlap in this run.
//!
//! ```
//! use sim::race::{AccessKind, RaceDetector};
//! let mut detector = RaceDetector::new(2); // host + streams 0 and 1
//! let write = detector.enqueue(0);         // a kernel on stream 0 writes bytes 0..64 of segment 7
//! assert!(detector.access(write, (7, 0, 64), AccessKind::Write, 1, 0).is_none());
//! let read = detector.enqueue(1);          // a kernel on stream 1 reads them: no event between
//! let race = detector.access(read, (7, 32, 96), AccessKind::Read, 2, 0).unwrap();
//! assert_eq!(race.earlier_site, 1);
//! ```

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

/// Agents whose clock entries live inline: the host and 7 streams.
const INLINE_AGENTS: usize = 8;

/// A vector clock over this rank's agents. Up to [`INLINE_AGENTS`] agents it is a whole array
/// whose entries past the last agent stay 0 (no agent ticks them, and a join keeps them 0), so
/// the copy at every item the host enqueues and a join are a few fixed-size moves; beyond, a
/// boxed slice.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Clock {
    Inline([u32; INLINE_AGENTS]),
    Heap(Box<[u32]>),
}

impl Clock {
    /// 0 for each of `agents` agents.
    fn zero(agents: usize) -> Clock {
        if agents <= INLINE_AGENTS {
            Clock::Inline([0; INLINE_AGENTS])
        } else {
            Clock::Heap(vec![0; agents].into_boxed_slice())
        }
    }

    fn as_slice(&self) -> &[u32] {
        match self {
            Clock::Inline(entries) => entries,
            Clock::Heap(entries) => entries,
        }
    }

    fn as_mut_slice(&mut self) -> &mut [u32] {
        match self {
            Clock::Inline(entries) => entries,
            Clock::Heap(entries) => entries,
        }
    }

    /// Takes, for each agent, the later of the two times.
    fn join(&mut self, other: &Clock) {
        match (self, other) {
            (Clock::Inline(mine), Clock::Inline(theirs)) => {
                for (mine, theirs) in mine.iter_mut().zip(theirs) {
                    *mine = (*mine).max(*theirs);
                }
            }
            (mine, theirs) => {
                for (mine, theirs) in mine.as_mut_slice().iter_mut().zip(theirs.as_slice()) {
                    *mine = (*mine).max(*theirs);
                }
            }
        }
    }
}

impl std::ops::Index<usize> for Clock {
    type Output = u32;

    fn index(&self, agent: usize) -> &u32 {
        &self.as_slice()[agent]
    }
}

impl std::ops::IndexMut<usize> for Clock {
    fn index_mut(&mut self, agent: usize) -> &mut u32 {
        &mut self.as_mut_slice()[agent]
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AccessKind {
    Read,
    Write,
}

/// A point on one agent: its agent index, and the vector clock there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Point {
    pub agent: usize,
    clock: Clock,
}

/// Memory: (segment, first byte, end byte).
pub type Range = (u32, u64, u64);

#[derive(Debug, Clone)]
struct Access {
    agent: usize,
    time: u32,
    kind: AccessKind,
    /// Caller's identifier of the access (an op).
    site: u64,
    /// Caller's identifier of what lived in the range then (a tensor): a block reused by a
    /// later tensor still has the earlier one's accesses.
    tensor: u32,
    start: u64,
    end: u64,
}

/// Accesses kept per segment; beyond it the oldest ordered ones are dropped.
const MAX_ACCESSES_PER_SEGMENT: usize = 256;

/// Two unordered accesses of one block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Race {
    pub segment: u32,
    pub earlier_agent: usize,
    pub earlier_kind: AccessKind,
    pub earlier_site: u64,
    pub earlier_tensor: u32,
    pub later_agent: usize,
    pub later_kind: AccessKind,
    pub later_site: u64,
}

#[derive(Debug, Clone)]
pub struct RaceDetector {
    host: Clock,
    streams: Vec<Clock>,
    /// Clocks of recorded events that a later wait or sync may name.
    events: HashMap<u32, Clock>,
    shadows: HashMap<u32, Vec<Access>>,
    reported: HashSet<(u64, u64)>,
    /// Off: every method returns at once (for measuring the detector's cost).
    enabled: bool,
}

impl RaceDetector {
    /// A detector for a rank with `streams` streams.
    pub fn new(streams: usize) -> RaceDetector {
        let agents = streams + 1;
        let mut host = Clock::zero(agents);
        host[0] = 1;
        let streams = (1..agents)
            .map(|agent| {
                let mut clock = Clock::zero(agents);
                clock[agent] = 1;
                clock
            })
            .collect();
        RaceDetector {
            host,
            streams,
            events: HashMap::default(),
            shadows: HashMap::default(),
            reported: HashSet::default(),
            enabled: true,
        }
    }

    /// A detector that records nothing and finds nothing.
    pub fn disabled(streams: usize) -> RaceDetector {
        RaceDetector {
            enabled: false,
            ..RaceDetector::new(streams)
        }
    }

    /// The host issued the next call.
    pub fn host_step(&mut self) {
        if !self.enabled {
            return;
        }
        self.host[0] += 1;
    }

    /// The host pushes an item onto `stream`: it follows the stream's previous item and the
    /// host's calls so far. Returns the item's point.
    ///
    /// Inlined: the engine calls it for every item it queues, and out of line the call and the
    /// move of the point it returns cost instructions at every one.
    #[inline]
    pub fn enqueue(&mut self, stream: u16) -> Point {
        let agent = usize::from(stream) + 1;
        if !self.enabled {
            return Point {
                agent,
                clock: Clock::zero(0),
            };
        }
        let clock = &mut self.streams[usize::from(stream)];
        clock.join(&self.host);
        clock[agent] += 1;
        Point {
            agent,
            clock: clock.clone(),
        }
    }

    /// An event recorded at `point` (which `enqueue` returned).
    pub fn record(&mut self, instance: u32, point: &Point) {
        if !self.enabled {
            return;
        }
        self.events.insert(instance, point.clock.clone());
    }

    /// Forgets an event no later wait can name.
    pub fn forget(&mut self, instance: u32) {
        self.events.remove(&instance);
    }

    /// `stream` waits on a recorded event (R5): what happened before the record happens before
    /// the stream's later items.
    pub fn stream_waits(&mut self, stream: u16, instance: u32) {
        if let Some(event) = self.events.get(&instance) {
            self.streams[usize::from(stream)].join(event);
        }
    }

    /// The host waited for a recorded event (R14).
    pub fn host_waits(&mut self, instance: u32) {
        if let Some(event) = self.events.get(&instance) {
            self.host.join(event);
        }
    }

    /// An access of `range`, where `tensor` lives, at `point`; returns the first race it
    /// makes, if any.
    pub fn access(
        &mut self,
        point: Point,
        range: Range,
        kind: AccessKind,
        site: u64,
        tensor: u32,
    ) -> Option<Race> {
        if !self.enabled {
            return None;
        }
        let (segment, start, end) = range;
        let accesses = self.shadows.entry(segment).or_default();
        let ordered = |earlier: &Access| point.clock[earlier.agent] >= earlier.time;
        let overlaps = |other: &Access| other.start < end && start < other.end;
        let conflict = accesses
            .iter()
            .find(|other| {
                overlaps(other)
                    && (other.kind == AccessKind::Write || kind == AccessKind::Write)
                    && !ordered(other)
            })
            .cloned();
        // What this access supersedes: ordered accesses it covers, if it writes; ordered reads
        // of the same range by the same agent, if it reads.
        accesses.retain(|other| {
            let covered = start <= other.start && other.end <= end;
            let superseded = ordered(other)
                && covered
                && (kind == AccessKind::Write
                    || (other.kind == AccessKind::Read && other.agent == point.agent));
            !superseded
        });
        if accesses.len() >= MAX_ACCESSES_PER_SEGMENT {
            if let Some(oldest) = accesses.iter().position(&ordered) {
                accesses.remove(oldest);
            }
        }
        accesses.push(Access {
            agent: point.agent,
            time: point.clock[point.agent],
            kind,
            site,
            tensor,
            start,
            end,
        });
        let earlier = conflict?;
        if !self.reported.insert((earlier.site, site)) {
            return None;
        }
        Some(Race {
            segment,
            earlier_agent: earlier.agent,
            earlier_kind: earlier.kind,
            earlier_site: earlier.site,
            earlier_tensor: earlier.tensor,
            later_agent: point.agent,
            later_kind: kind,
            later_site: site,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_wait_orders_two_streams_r5() {
        let mut d = RaceDetector::new(2);
        let write = d.enqueue(0);
        assert!(d
            .access(write.clone(), (1, 0, 8), AccessKind::Write, 10, 0)
            .is_none());
        let record = d.enqueue(0);
        d.record(5, &record);
        d.host_step();
        d.enqueue(1);
        d.stream_waits(1, 5);
        let read = d.enqueue(1);
        assert!(d.access(read, (1, 0, 8), AccessKind::Read, 11, 0).is_none());
    }

    #[test]
    fn a_rank_with_more_streams_than_inline_agents_orders_and_races_the_same_r5() {
        // 9 streams and the host: the clocks live on the heap, and a stream's clock joins the
        // host's and an event's there.
        let mut d = RaceDetector::new(9);
        let write = d.enqueue(8);
        assert!(d
            .access(write, (1, 0, 8), AccessKind::Write, 1, 0)
            .is_none());
        let unordered = d.enqueue(0);
        let race = d
            .access(unordered, (1, 0, 8), AccessKind::Read, 2, 0)
            .unwrap();
        assert_eq!((race.earlier_site, race.later_site), (1, 2));
        let record = d.enqueue(8);
        d.record(5, &record);
        d.stream_waits(0, 5);
        let ordered = d.enqueue(0);
        assert!(d
            .access(ordered, (1, 0, 8), AccessKind::Read, 3, 0)
            .is_none());
    }

    #[test]
    fn reads_on_two_streams_do_not_race_but_a_later_write_does() {
        let mut d = RaceDetector::new(2);
        let a = d.enqueue(0);
        assert!(d.access(a, (1, 0, 8), AccessKind::Read, 1, 0).is_none());
        let b = d.enqueue(1);
        assert!(d.access(b, (1, 0, 8), AccessKind::Read, 2, 0).is_none());
        let c = d.enqueue(0);
        let race = d.access(c, (1, 0, 8), AccessKind::Write, 3, 0).unwrap();
        assert_eq!((race.earlier_site, race.later_site), (2, 3));
    }

    #[test]
    fn a_host_sync_orders_later_launches_r14() {
        let mut d = RaceDetector::new(2);
        let write = d.enqueue(0);
        assert!(d
            .access(write, (1, 0, 8), AccessKind::Write, 1, 0)
            .is_none());
        let tail = d.enqueue(0);
        d.record(9, &tail);
        d.host_waits(9);
        d.host_step();
        let read = d.enqueue(1);
        assert!(d.access(read, (1, 0, 8), AccessKind::Read, 2, 0).is_none());
    }

    #[test]
    fn disjoint_ranges_of_one_segment_do_not_race() {
        let mut d = RaceDetector::new(2);
        let a = d.enqueue(0);
        assert!(d.access(a, (1, 0, 64), AccessKind::Write, 1, 0).is_none());
        let b = d.enqueue(1);
        assert!(d.access(b, (1, 64, 128), AccessKind::Write, 2, 0).is_none());
        let c = d.enqueue(1);
        assert!(d.access(c, (1, 60, 70), AccessKind::Read, 3, 0).is_some());
    }

    #[test]
    fn a_race_on_a_reused_block_names_the_tensor_of_the_earlier_access() {
        let mut d = RaceDetector::new(2);
        let nccl = d.enqueue(1);
        assert!(d.access(nccl, (1, 0, 8), AccessKind::Write, 1, 4).is_none());
        let reuse = d.enqueue(0);
        let race = d.access(reuse, (1, 0, 8), AccessKind::Write, 2, 5).unwrap();
        assert_eq!(race.earlier_tensor, 4);
    }

    #[test]
    fn each_pair_of_sites_is_reported_once() {
        let mut d = RaceDetector::new(2);
        for _ in 0..3 {
            let w = d.enqueue(0);
            d.access(w, (1, 0, 8), AccessKind::Write, 1, 0);
        }
        let r = d.enqueue(1);
        assert!(d.access(r, (1, 0, 8), AccessKind::Read, 2, 0).is_some());
        let r = d.enqueue(1);
        assert!(d.access(r, (1, 0, 8), AccessKind::Read, 2, 0).is_none());
    }
}
