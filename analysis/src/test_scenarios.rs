//! Scenario texts that the tests of more than one module simulate.

use sim::scenario::Scenario;
use sim::timeline::Timeline;

/// A 605 s GPU backlog before an unwaited all_reduce, `repeat = 2`, rank 1 hanging before the
/// second iteration's all_reduce: the watchdog takes both processes down at 660.1 s, so only
/// the first iteration's all_reduce completed, on both ranks (2 of 4 rank-iterations); rank 0's
/// second one is an unfinished record, rank 1 never called it.
const BACKLOG_THEN_HANG: &str = "repeat = 2\n[cluster]\nranks = 2\n[groups.world]\n\
    eager_init = true\n[tensors]\ngrad = \"25MiB\"\n\
    [[op]]\nlabel = \"backlog\"\ngpu_sleep_us = 605_000_000\n\
    [[op]]\nlabel = \"ar\"\nall_reduce = \"grad\"\nasync_op = true\n\
    [[fault]]\nranks = [1]\nat = \"ar\"\niteration = 1\nkind = \"hang\"\n";

/// [`BACKLOG_THEN_HANG`] simulated: some calls never completed.
pub(crate) fn backlog_then_hang() -> Timeline {
    sim::engine::simulate(&parse(BACKLOG_THEN_HANG))
}

/// The same program with a 1 ms backlog and no fault: every call completes.
pub(crate) fn backlog_every_call_completes() -> Timeline {
    let (whole, _) = BACKLOG_THEN_HANG.split_once("[[fault]]").unwrap();
    sim::engine::simulate(&parse(&whole.replace("605_000_000", "1000")))
}

fn parse(text: &str) -> Scenario {
    sim::scenario::parse("backlog.toml", text).unwrap()
}
