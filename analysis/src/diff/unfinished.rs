//! Where each rank stopped, on both sides of a diff (docs/diff.md): the host call that never
//! returned and what it was blocked on, the iteration never finished, the collectives, kernels
//! and stream waits that never did (docs/timeline-format.md), compared rank by rank. Every
//! iteration counts, warm-up included: where a run stopped is not a timing. Times are not
//! compared, only which records stayed unfinished.

use serde::{Deserialize, Serialize};
use sim::timeline::{
    HostBlock, KernelClass, RankTimeline, Source, Timeline, UnfinishedCollective,
    UnfinishedStreamWait,
};
use std::collections::BTreeMap;

/// One rank's unfinished record that the two sides do not share.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnfinishedDisagreement {
    pub rank: u32,
    /// `host` (the call that never returned), `iteration`, `collective`, `kernel` or
    /// `stream_wait`.
    pub record: String,
    /// The record on each side, as the text writes it; `None`: that side has none.
    pub a: Option<String>,
    pub b: Option<String>,
}

/// The record kinds, in the order the report lists them, with the words it names them by.
const RECORDS: [(&str, &str); 5] = [
    ("host", "unfinished host call"),
    ("iteration", "unfinished iteration"),
    ("collective", "unfinished collective"),
    ("kernel", "unfinished kernel"),
    ("stream_wait", "unfinished stream wait"),
];

/// The ranks that left anything unfinished on either side, and the disagreements, rank by rank.
pub(super) struct Compared {
    pub ranks: usize,
    pub disagreements: Vec<UnfinishedDisagreement>,
}

/// The host call that never returned, as both sides can compare it.
struct OpenCall {
    iteration: u32,
    op: String,
    /// What it was blocked on; `None`: not known (a `torch` Timeline's null: its interpreter
    /// cannot tell what a collective's own call blocks on).
    blocked_on: Option<String>,
}

impl OpenCall {
    fn agrees(&self, other: &OpenCall) -> bool {
        (self.iteration, &self.op) == (other.iteration, &other.op)
            && match (&self.blocked_on, &other.blocked_on) {
                (Some(x), Some(y)) => x == y,
                _ => true,
            }
    }

    fn text(&self) -> String {
        let blocked_on = self
            .blocked_on
            .as_deref()
            .unwrap_or("blocked on: not known");
        format!("{} (iteration {}), {blocked_on}", self.op, self.iteration)
    }
}

/// One side's unfinished records of one rank, named as the report writes them.
#[derive(Default)]
struct Stopped {
    host: Option<OpenCall>,
    iteration: Option<u32>,
    /// Sorted, so that two sides compare as multisets.
    collectives: Vec<String>,
    kernels: Vec<String>,
    stream_waits: Vec<String>,
}

impl Stopped {
    fn is_empty(&self) -> bool {
        self.host.is_none()
            && self.iteration.is_none()
            && self.collectives.is_empty()
            && self.kernels.is_empty()
            && self.stream_waits.is_empty()
    }
}

/// What both sides can know of a run that stopped. A `torch` Timeline's interpreter sees none
/// of NCCL's kernels, nor an abort under way (`aborting`), nor an async collective no `wait()`
/// was called on whose input its stream had passed, nor any stream wait but those on a
/// collective that never completed (its `wait()`'s, its input's that never came): against one,
/// those are compared on neither side (docs/torch.md).
#[derive(Clone, Copy)]
struct Seen {
    torch: bool,
}

impl Seen {
    fn collective(self, c: &UnfinishedCollective) -> bool {
        !self.torch || !c.async_op || c.wait.is_some() || c.input_ready_ns.is_none()
    }

    fn stream_wait(
        self,
        wait: &UnfinishedStreamWait,
        collectives: &[&UnfinishedCollective],
    ) -> bool {
        !self.torch
            || collectives.iter().any(|c| {
                c.iteration == wait.iteration
                    && ((c.wait.is_some_and(|w| w.op == wait.op)
                        && c.run_stream == wait.source_stream)
                        || (c.op == wait.op && wait.source_ns.is_none()))
            })
    }
}

fn stopped(
    timeline: &Timeline,
    rank: &RankTimeline,
    seen: Seen,
    kept: &dyn Fn(u32) -> bool,
) -> Stopped {
    let op = |op: u32| timeline.ops[op as usize].name.as_str();
    let stream = |stream: u16| {
        (rank.streams.get(stream as usize)).map_or_else(|| stream.to_string(), |s| s.name.clone())
    };
    let group = |group: u16| {
        (timeline.scenario.groups.get(group as usize))
            .map_or_else(|| group.to_string(), Clone::clone)
    };
    let host = (rank.unfinished_host.filter(|call| kept(call.iteration))).map(|call| {
        let blocked_on = match call.blocked_on {
            Some(HostBlock::Stream { stream: s }) => {
                Some(format!("blocked on stream {}", stream(s)))
            }
            Some(HostBlock::Device) => Some("blocked on the device".to_string()),
            Some(HostBlock::Work {
                group: g,
                seq,
                aborting,
            }) => {
                let aborting = if aborting && !seen.torch {
                    ", aborting its communicator"
                } else {
                    ""
                };
                Some(format!(
                    "blocked on the Work of {} seq {seq}{aborting}",
                    group(g)
                ))
            }
            Some(HostBlock::Communicator { group: g }) => {
                Some(format!("blocked on the communicator of {}", group(g)))
            }
            Some(HostBlock::LaunchQueue { stream: s }) => Some(format!(
                "blocked on the launch queue of stream {}",
                stream(s)
            )),
            None if timeline.source == Source::Torch => None,
            None => Some("not blocked: still running".to_string()),
        };
        OpenCall {
            iteration: call.iteration,
            op: op(call.op).to_string(),
            blocked_on,
        }
    });
    let collectives: Vec<&UnfinishedCollective> = (rank.unfinished_collectives.iter())
        .filter(|c| kept(c.iteration) && seen.collective(c))
        .collect();
    let mut named = Stopped {
        host,
        iteration: rank.unfinished_iteration.filter(|&i| kept(i)),
        collectives: (collectives.iter())
            .map(|c| {
                let (name, iteration, seq) = (op(c.op), c.iteration, c.seq);
                format!(
                    "{name} (iteration {iteration}, {} seq {seq})",
                    group(c.group)
                )
            })
            .collect(),
        kernels: (rank.unfinished_kernels.iter())
            .filter(|k| kept(k.iteration) && !(seen.torch && k.class == KernelClass::Communication))
            .map(|k| {
                let class = match k.class {
                    KernelClass::Compute => "compute",
                    KernelClass::Communication => "communication",
                    KernelClass::Sleep => "sleep",
                };
                let started = if k.start_ns.is_some() {
                    "started"
                } else {
                    "never started"
                };
                let (name, iteration) = (op(k.op), k.iteration);
                format!(
                    "{name} (iteration {iteration}, stream {}, {class}, {started})",
                    stream(k.stream)
                )
            })
            .collect(),
        stream_waits: (rank.unfinished_stream_waits.iter())
            .filter(|w| kept(w.iteration) && seen.stream_wait(w, &collectives))
            .map(|w| {
                let (name, iteration) = (op(w.op), w.iteration);
                format!(
                    "{name} (iteration {iteration}, stream {} waiting on {})",
                    stream(w.waiting_stream),
                    stream(w.source_stream)
                )
            })
            .collect(),
    };
    named.collectives.sort();
    named.kernels.sort();
    named.stream_waits.sort();
    named
}

/// The records of sorted `a` not in sorted `b` (as many times as `a` holds them more), and
/// those of `b` not in `a`.
fn only_in(a: &[String], b: &[String]) -> Vec<(Option<String>, Option<String>)> {
    let (mut i, mut j, mut out) = (0, 0, Vec::new());
    while i < a.len() || j < b.len() {
        match (a.get(i), b.get(j)) {
            (Some(x), Some(y)) if x == y => (i, j) = (i + 1, j + 1),
            (Some(x), Some(y)) if x < y => {
                out.push((Some(x.clone()), None));
                i += 1;
            }
            (Some(x), None) => {
                out.push((Some(x.clone()), None));
                i += 1;
            }
            (_, Some(y)) => {
                out.push((None, Some(y.clone())));
                j += 1;
            }
            (None, None) => unreachable!("the loop runs while either side has records"),
        }
    }
    out
}

fn disagreements(rank: u32, a: &Stopped, b: &Stopped) -> Vec<UnfinishedDisagreement> {
    let mut out = Vec::new();
    let mut push = |record: &str, (a, b): (Option<String>, Option<String>)| {
        out.push(UnfinishedDisagreement {
            rank,
            record: record.to_string(),
            a,
            b,
        });
    };
    let host_agrees = match (&a.host, &b.host) {
        (Some(x), Some(y)) => x.agrees(y),
        (x, y) => x.is_none() && y.is_none(),
    };
    if !host_agrees {
        push(
            "host",
            (
                a.host.as_ref().map(OpenCall::text),
                b.host.as_ref().map(OpenCall::text),
            ),
        );
    }
    if a.iteration != b.iteration {
        push(
            "iteration",
            (
                a.iteration.map(|i| i.to_string()),
                b.iteration.map(|i| i.to_string()),
            ),
        );
    }
    for (record, x, y) in [
        ("collective", &a.collectives, &b.collectives),
        ("kernel", &a.kernels, &b.kernels),
        ("stream_wait", &a.stream_waits, &b.stream_waits),
    ] {
        for pair in only_in(x, y) {
            push(record, pair);
        }
    }
    out
}

/// The unfinished records of `a` and `b` compared rank by rank. Where either Timeline is
/// summarised (`--summary`), only the ranks and iterations both kept records of are compared.
pub(super) fn compare(a: &Timeline, b: &Timeline) -> Compared {
    let seen = Seen {
        torch: a.source == Source::Torch || b.source == Source::Torch,
    };
    let keeps = |t: &Timeline, rank: u32, iteration: u32| {
        (t.summary.as_ref()).is_none_or(|s| s.records_for.keeps(rank, iteration))
    };
    let mut ranks: BTreeMap<u32, [Option<&RankTimeline>; 2]> = BTreeMap::new();
    for (side, timeline) in [a, b].into_iter().enumerate() {
        for rank in &timeline.ranks {
            ranks.entry(rank.rank).or_default()[side] = Some(rank);
        }
    }
    let mut compared = Compared {
        ranks: 0,
        disagreements: Vec::new(),
    };
    for (number, [in_a, in_b]) in ranks {
        let kept = |iteration: u32| keeps(a, number, iteration) && keeps(b, number, iteration);
        let side = |timeline: &Timeline, rank: Option<&RankTimeline>| {
            rank.map_or_else(Stopped::default, |rank| {
                stopped(timeline, rank, seen, &kept)
            })
        };
        let (stopped_a, stopped_b) = (side(a, in_a), side(b, in_b));
        if stopped_a.is_empty() && stopped_b.is_empty() {
            continue;
        }
        compared.ranks += 1;
        (compared.disagreements).extend(disagreements(number, &stopped_a, &stopped_b));
    }
    compared
}

/// The disagreements as the text writes them, kind by kind, those alike on several ranks as
/// one line naming them all.
pub(super) fn lines(disagreements: &[UnfinishedDisagreement]) -> Vec<String> {
    let mut out = Vec::new();
    for (record, words) in RECORDS {
        let of_kind = disagreements.iter().filter(|d| d.record == record);
        out.extend(super::lines_by_ranks(of_kind.map(|d| {
            let suffix = match (&d.a, &d.b) {
                (Some(a), None) if record != "host" && record != "iteration" => {
                    format!("): {a} in A only")
                }
                (None, Some(b)) if record != "host" && record != "iteration" => {
                    format!("): {b} in B only")
                }
                (a, b) => format!(
                    "): A {}; B {}",
                    a.as_deref().unwrap_or("none"),
                    b.as_deref().unwrap_or("none")
                ),
            };
            (d.rank, format!("{words} ("), suffix)
        })));
    }
    out
}
