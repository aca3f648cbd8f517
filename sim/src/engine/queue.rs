//! The event queue: events by time, and events of equal time in the order they were
//! scheduled, so that a run is deterministic.
//!
//! That order is a binary heap of (time, sequence number, event); it is kept here as a heap of
//! the distinct pending times and, per time, a FIFO of its events (the current time's FIFO
//! apart, since events scheduled for now are the most common). The two pop the same events
//! in the same order (a later push of the same time has a higher sequence number, and goes to
//! the back of its time's FIFO), but ranks in step share their times: when a collective's last
//! rank arrives, every member's kernel end is due at the same time. Then the heap holds one entry
//! for all of them, and each of those events is popped from the front of a contiguous FIFO
//! instead of being sifted through a heap as large as the rank count.

use super::failure::Wake;
use rustc_hash::FxHashMap;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

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
    /// Every rank of a collective arrived (R16): its data starts moving, after the events
    /// already due at this time (`rendezvous::Engine::arrive` says why).
    RendezvousDue {
        rendezvous: u32,
    },
    /// The host goes on at `at_ns`; `generation` tells whether it is still in the state that
    /// scheduled the resume (`RankState::generation`).
    HostResume {
        rank: u32,
        at_ns: u64,
        generation: u64,
    },
    /// The end of the communicator's init the host waits in (R8) resumes it at `at_ns`, as
    /// `HostResume` does, unless a member's process ended before it and undid the init.
    CommInitEnd {
        rank: u32,
        at_ns: u64,
        generation: u64,
    },
    /// A polling `wait()` reaches its deadline; `generation` tells whether the host is still
    /// in that wait.
    WaitTimeout {
        rank: u32,
        generation: u64,
    },
    /// The main thread's abort after a wait's timeout may end now: its least time
    /// (`host.comm_abort_us`) passed, or, that passed, the device drained;
    /// `generation` tells whether the host is still in that abort.
    WaitAbortDue {
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
    /// The process of `rank`, whose end was decided at a host time the simulation had not
    /// reached (`Blocked::Exiting`), ends now.
    ProcessEnds {
        rank: u32,
    },
}

/// Events by time, then by the order they were scheduled.
#[derive(Default)]
pub(super) struct EventQueue {
    /// The time of the events being popped, and those of its events not popped yet: events
    /// scheduled for the current time (most are) join it without a look-up.
    current_ns: u64,
    current: VecDeque<Event>,
    /// The later times at which events are pending, earliest first.
    times: BinaryHeap<Reverse<u64>>,
    /// Per later time, its events in the order they were scheduled (never empty).
    due: FxHashMap<u64, VecDeque<Event>>,
    /// FIFOs of times that were drained, reused so that the queue allocates only as it grows.
    spare: Vec<VecDeque<Event>>,
}

impl EventQueue {
    pub(super) fn push(&mut self, at_ns: u64, event: Event) {
        if at_ns < self.current_ns {
            // Before the time being popped (the engine's clock stays behind over events it
            // drops unprocessed, and may schedule there): that time's events wait behind it.
            let parked = std::mem::take(&mut self.current);
            if parked.is_empty() {
                self.spare.push(parked);
            } else {
                self.times.push(Reverse(self.current_ns));
                self.due.insert(self.current_ns, parked);
            }
            self.current_ns = at_ns;
        }
        if at_ns == self.current_ns {
            self.current.push_back(event);
            return;
        }
        let fifo = self.due.entry(at_ns).or_insert_with(|| {
            self.times.push(Reverse(at_ns));
            self.spare.pop().unwrap_or_default()
        });
        fifo.push_back(event);
    }

    /// The earliest event and its time.
    pub(super) fn pop(&mut self) -> Option<(u64, Event)> {
        if self.current.is_empty() {
            // On to the next time: its FIFO becomes the current one.
            let Reverse(at_ns) = self.times.pop()?;
            let next = self.due.remove(&at_ns).expect("a pending time has events");
            let drained = std::mem::replace(&mut self.current, next);
            self.spare.push(drained);
            self.current_ns = at_ns;
        }
        let event = self
            .current
            .pop_front()
            .expect("the current time has events");
        Some((self.current_ns, event))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_is_three_words() {
        // Millions are queued and copied per second: a host's wake-up carries its generation
        // in the room the largest variants take anyway.
        assert_eq!(std::mem::size_of::<Event>(), 24);
    }

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

    #[test]
    fn pops_in_the_order_of_a_heap_of_time_and_sequence_number() {
        // Pushes and pops interleaved, times drawn from a small range so that many are equal,
        // many pushed at the time just popped (as the engine does), a few before it: the order
        // is the one of a binary heap of (time, sequence number).
        let mut queue = EventQueue::default();
        let mut reference = BinaryHeap::new();
        let mut sequence = 0u64;
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut draw = |bound: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % bound
        };
        let mut now_ns = 0;
        let mut popped = Vec::new();
        for rank in 0..20_000u32 {
            if draw(3) == 0 {
                let expected = reference.pop().map(|Reverse((t, _, e))| (t, e));
                let got = queue.pop();
                assert_eq!(got, expected);
                if let Some((at_ns, _)) = got {
                    now_ns = at_ns;
                    popped.push(at_ns);
                }
            } else {
                let at_ns = match draw(50) {
                    0 => now_ns.saturating_sub(draw(3) * 10),
                    _ => now_ns + draw(4) * 10,
                };
                sequence += 1;
                let event = Event::SmTransfer { rank };
                reference.push(Reverse((at_ns, sequence, event)));
                queue.push(at_ns, event);
            }
        }
        while let Some(Reverse((at_ns, _, event))) = reference.pop() {
            assert_eq!(queue.pop(), Some((at_ns, event)));
        }
        assert_eq!(queue.pop(), None);
        assert!(popped.len() > 5_000, "{}", popped.len());
    }
}
