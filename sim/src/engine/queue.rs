//! The event queue: one binary heap of (time, sequence number, event), so that events of equal
//! time pop in the order they were scheduled and a run is deterministic.

use super::failure::Wake;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Event {
    Advance {
        rank: u32,
        stream: u16,
    },
    KernelEnd {
        rank: u32,
        stream: u16,
        version: u32,
    },
    /// SMs move from an elastic kernel to a waiting one (see `gpu`).
    SmTransfer {
        rank: u32,
    },
    HostResume {
        rank: u32,
        at_ns: u64,
    },
    /// A polling `wait()` reaches its deadline; `generation` tells whether the host is still
    /// in that wait.
    WaitTimeout {
        rank: u32,
        generation: u64,
    },
    /// A wake-up the failure component asked for: a step of a group's watchdog or heartbeat
    /// monitor, or of the store rendezvous (R26–R29, `failure`).
    Failure {
        rank: u32,
        group: u16,
        wake: Wake,
    },
}

/// Events by time, then by the order they were scheduled.
#[derive(Default)]
pub(super) struct EventQueue {
    heap: BinaryHeap<Reverse<(u64, u64, Event)>>,
    sequence: u64,
}

impl EventQueue {
    pub(super) fn push(&mut self, at_ns: u64, event: Event) {
        self.sequence += 1;
        self.heap.push(Reverse((at_ns, self.sequence, event)));
    }

    /// The earliest event and its time.
    pub(super) fn pop(&mut self) -> Option<(u64, Event)> {
        self.heap
            .pop()
            .map(|Reverse((at_ns, _, event))| (at_ns, event))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_times_pop_in_scheduling_order() {
        let mut queue = EventQueue::default();
        queue.push(5, Event::SmTransfer { rank: 2 });
        queue.push(3, Event::SmTransfer { rank: 9 });
        queue.push(5, Event::SmTransfer { rank: 1 });
        let order: Vec<(u64, Event)> = std::iter::from_fn(|| queue.pop()).collect();
        assert_eq!(
            order,
            [
                (3, Event::SmTransfer { rank: 9 }),
                (5, Event::SmTransfer { rank: 2 }),
                (5, Event::SmTransfer { rank: 1 }),
            ]
        );
    }
}
