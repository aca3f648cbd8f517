//! Plain-text rendering of a scenario's resolved parameters and of a [`Report`].

use crate::metrics::{CollectiveMetrics, MemoryMetrics, Report, Stat};
use sim::ranks::RankSet;
use sim::scenario::Scenario;
use sim::timeline::{group_ranks_in, ThreadKind};
use sim::units::{format_size, format_size_readable};
use std::borrow::Cow;
use std::fmt::Write;

/// The seed and every resolved parameter, printed before results so that a run can be replayed
/// and its inputs checked.
pub fn describe_scenario(scenario: &Scenario) -> String {
    let mut out = String::new();
    let us = |ns: u64| ns as f64 / 1_000.0;
    let c = &scenario.cluster;
    let n = &scenario.network;
    let h = &scenario.host;
    let _ = writeln!(
        out,
        "scenario {:?} ({}, sha {}), torch profile {}, seed {}",
        scenario.name,
        scenario.path,
        scenario.source_hash,
        scenario.torch.as_str(),
        scenario.seed
    );
    let _ = writeln!(
        out,
        "  repeat {} (warmup {}), ranks {} ({} per node), gpu {} ({} SMs, {} bf16 TFLOP/s, gemm efficiency {})",
        scenario.repeat,
        scenario.warmup,
        sim::ranks::thousands(u64::from(c.ranks)),
        c.ranks_per_node,
        c.gpu.preset,
        c.gpu.sms,
        c.gpu.bf16_tflops,
        c.gpu.gemm_efficiency
    );
    let _ = writeln!(
        out,
        "  network: nvlink {} GB/s, nic {} GB/s, alpha {} us (nic {} us), kernel floor {} us",
        n.nvlink_bytes_per_s / 1e9,
        n.nic_bytes_per_s / 1e9,
        us(n.alpha_ns),
        us(n.nic_alpha_ns),
        us(n.kernel_floor_ns)
    );
    let launch = match h.first_gemm_ns {
        0 => us(h.launch_ns).to_string(),
        first_gemm_ns => format!(
            "{} (the first GEMM of each dtype {} more)",
            us(h.launch_ns),
            us(first_gemm_ns)
        ),
    };
    let _ = writeln!(
        out,
        "  host us: collective {} (synchronous on the current stream {}), wait {}, launch {launch}, launch latency {} (NCCL {}), event {}, sync {}, item {}, mark {}, query {}, comm init {} (later ones {}), init_process_group {}, new_group {}, blocking-wait poll {}",
        us(h.collective_ns),
        us(h.sync_collective_ns),
        us(h.wait_ns),
        us(h.launch_latency_ns),
        us(h.nccl_launch_latency_ns),
        us(h.event_ns),
        us(h.sync_ns),
        us(h.item_ns),
        us(h.mark_ns),
        us(h.query_ns),
        us(h.comm_init_ns),
        us(h.comm_init_next_ns),
        us(h.init_process_group_ns),
        us(h.new_group_ns),
        us(h.blocking_wait_poll_ns)
    );
    let env: Vec<String> = scenario
        .env
        .raw
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    let _ = writeln!(
        out,
        "  env: {}",
        if env.is_empty() {
            "(defaults)".to_string()
        } else {
            env.join(" ")
        }
    );
    let e = &scenario.env;
    let timeouts: Vec<String> = scenario
        .groups
        .iter()
        .map(|g| format!("{} {} s", g.name, g.timeout_ns as f64 / 1e9))
        .collect();
    let _ = writeln!(
        out,
        "  watchdog (R26-R28): group timeouts {}; {}; async error handling {}, dump wait 4 x {} ms, heartbeat {} s (monitoring {}), store poll {} ms, propagate error {}, desync debug {}",
        timeouts.join(", "),
        if e.blocking_wait {
            "no watchdog (blocking wait)"
        } else {
            "polls every 100 ms"
        },
        e.async_error_handling.number(),
        e.wait_timeout_dump_ns / 1_000_000,
        e.heartbeat_timeout_ns / 1_000_000_000,
        if e.enable_monitoring { "on" } else { "off" },
        e.coord_check_ns / 1_000_000,
        u8::from(e.propagate_error),
        u8::from(e.desync_debug)
    );
    for fault in &scenario.faults {
        let op = &scenario.ops[fault.op];
        let _ = writeln!(
            out,
            "  fault: {} on {} at {} (line {}), iteration {}",
            fault.kind.key(),
            sim::ranks::RankSet::from_ranks(fault.ranks.iter().copied()).named(),
            op.display_name(),
            op.line,
            fault.iteration
        );
    }
    if !scenario.tensors.is_empty() {
        let tensors: Vec<String> = scenario
            .tensors
            .iter()
            .map(|t| {
                let list = if t.count > 1 {
                    format!("{} x ", t.count)
                } else {
                    String::new()
                };
                format!(
                    "{}={list}{} {}",
                    t.name,
                    format_size(t.size_bytes),
                    t.dtype.as_str()
                )
            })
            .collect();
        let _ = writeln!(out, "  tensors: {}", tensors.join(", "));
    }
    out
}

fn stat_cell(stat: &Stat) -> String {
    format!("{:.3}", stat.median)
}

/// Renders a report as aligned tables (medians in microseconds); a watchdog line or finding made
/// once for a class of ranks, or the same for several ranks, names them as ranges (`[Ranks
/// 0-2,4-99999 (99,999 ranks)]`).
pub fn render_report(report: &Report) -> String {
    render_report_with(report, false)
}

/// [`render_report`], every rank's watchdog lines and findings on their own when `per_rank`
/// (`run --detail ranks`, docs/scale.md).
pub fn render_report_with(report: &Report, per_rank: bool) -> String {
    let mut out = String::new();
    if !report.collectives.is_empty() {
        // Where a collective ran on fewer ranks than the job (a subgroup, or the ranks a
        // launch ran), a column says how many each row's figures are over.
        let every_rank = report.collectives.iter().all(|c| c.ranks == report.ranks);
        let measured = report.repeat - report.warmup;
        // Only the calls that completed have figures (one that never did, in a hang, a timeout
        // or a process taken down, is an unfinished record): where a row's fall short of its
        // ranks x measured iterations, a column says how many of them it is over.
        let rank_iterations_of = |c: &CollectiveMetrics| u64::from(c.ranks) * u64::from(measured);
        let every_call = report
            .collectives
            .iter()
            .all(|c| c.rank_iterations == rank_iterations_of(c));
        let mut header = vec!["collective", "line", "size"];
        if !every_rank {
            header.push("ranks");
        }
        if !every_call {
            header.push("ran");
        }
        header.extend([
            "async",
            "host_call_us",
            "wait_us",
            "stream_interval_us",
            "kernel_us",
            "completed_at_wait",
        ]);
        let rows: Vec<Vec<String>> = report
            .collectives
            .iter()
            .map(|c| {
                let mut row = vec![c.op.clone(), c.line.to_string(), format_size(c.bytes)];
                if !every_rank {
                    row.push(sim::ranks::thousands(u64::from(c.ranks)));
                }
                if !every_call {
                    row.push(format!(
                        "{} of {}",
                        sim::ranks::thousands(c.rank_iterations),
                        sim::ranks::thousands(rank_iterations_of(c))
                    ));
                }
                row.extend([
                    c.async_op.to_string(),
                    stat_cell(&c.host_call_us),
                    c.wait_us.as_ref().map_or("-".into(), stat_cell),
                    stat_cell(&c.stream_interval_us),
                    stat_cell(&c.kernel_us),
                    c.completed_at_wait
                        .map_or("-".into(), |f| format!("{:.0}%", f * 100.0)),
                ]);
                row
            })
            .collect();
        let over = if every_rank {
            counted(u64::from(report.ranks), "rank")
        } else {
            "each one's ranks".to_string()
        };
        let completed = if every_call {
            ""
        } else {
            "the calls that completed, in `ran` of "
        };
        let _ = writeln!(
            out,
            "collectives (medians over {completed}{over} x {}, us):",
            counted(u64::from(measured), "measured iteration")
        );
        out.push_str(&table(&header, &rows));
    }
    if report.collectives.iter().any(|c| c.spin_us.max > 0.0) {
        out.push_str("stragglers (R16: a kernel spins until the last rank arrives):\n");
        let header = [
            "collective",
            "last_rank",
            "share",
            "spin_us_median",
            "spin_us_max",
        ];
        let rows: Vec<Vec<String>> = report
            .collectives
            .iter()
            .filter(|c| c.spin_us.max > 0.0)
            .map(|c| {
                vec![
                    c.op.clone(),
                    c.last_rank.map_or("-".into(), |r| r.to_string()),
                    format!("{:.0}%", c.last_rank_share * 100.0),
                    format!("{:.3}", c.spin_us.median),
                    format!("{:.3}", c.spin_us.max),
                ]
            })
            .collect();
        out.push_str(&table(&header, &rows));
    }
    if !report.kernels.is_empty() {
        out.push_str("kernels (medians, us):\n");
        let header = ["op", "line", "kernel_us", "queued_us"];
        let rows: Vec<Vec<String>> = report
            .kernels
            .iter()
            .map(|k| {
                vec![
                    k.op.clone(),
                    k.line.to_string(),
                    stat_cell(&k.kernel_us),
                    stat_cell(&k.queued_us),
                ]
            })
            .collect();
        out.push_str(&table(&header, &rows));
    }
    if !report.measures.is_empty() {
        let header = [
            "measure",
            "clock",
            "median_us",
            "p10_us",
            "p90_us",
            "samples",
            "positive",
        ];
        let rows: Vec<Vec<String>> = report
            .measures
            .iter()
            .map(|m| {
                vec![
                    m.name.clone(),
                    m.clock.clone(),
                    format!("{:.3}", m.value_us.median),
                    format!("{:.3}", m.value_us.p10),
                    format!("{:.3}", m.value_us.p90),
                    m.value_us.samples.to_string(),
                    format!("{:.0}%", m.positive_fraction * 100.0),
                ]
            })
            .collect();
        out.push_str("measures:\n");
        out.push_str(&table(&header, &rows));
    }
    if !report.overlaps.is_empty() {
        out.push_str("overlap (R3: (t_compute + t_comm - t_both) / min(t_compute, t_comm); 1 = hidden, 0 = serial):\n");
        let header = ["overlap", "value", "compute_us", "comm_us", "both_us"];
        let rows: Vec<Vec<String>> = report
            .overlaps
            .iter()
            .map(|o| {
                vec![
                    o.name.clone(),
                    format!("{:.3}", o.overlap),
                    format!("{:.3}", o.compute_us),
                    format!("{:.3}", o.comm_us),
                    format!("{:.3}", o.both_us),
                ]
            })
            .collect();
        out.push_str(&table(&header, &rows));
    }
    for name in &report.undefined_overlaps {
        let _ = writeln!(
            out,
            "overlap {name}: undefined (no rank had its three measures with compute and comm \
             above 0; R3 divides by the smaller)"
        );
    }
    for query in &report.queries {
        let _ = writeln!(
            out,
            "is_completed {} (line {}): true in {:.0}% of {}",
            query.op,
            query.line,
            query.completed * 100.0,
            counted(query.samples as u64, "call")
        );
    }
    out.push_str(&memory_line(&report.memory));
    if !report.watchdog.is_empty() {
        out.push_str(
            "watchdog, heartbeat monitor and main thread (R15, R26-R29, R31), simulated time:\n",
        );
        let thread_name = |thread: ThreadKind| match thread {
            ThreadKind::Main => "main",
            ThreadKind::Watchdog => "pt_nccl_watchdg",
            ThreadKind::HeartbeatMonitor => "pt_nccl_heartbt",
        };
        let lines = merge_by_rank(
            report.watchdog.iter().map(|record| {
                (
                    (record.at_ns, thread_name(record.thread)),
                    Some(record.rank),
                    &record.stands_for,
                    record.message.as_str(),
                )
            }),
            per_rank,
        );
        for ((at_ns, thread), message) in lines {
            let mut lines = message.lines();
            let _ = writeln!(
                out,
                "  {:>12.3} s  {thread:<15}  {}",
                at_ns as f64 / 1e9,
                lines.next().unwrap_or_default()
            );
            for line in lines {
                let _ = writeln!(out, "  {:>12}    {:<15}  {line}", "", "");
            }
        }
    }
    if report.findings.is_empty() {
        out.push_str("findings: none\n");
    } else {
        let lines = merge_by_rank(
            report.findings.iter().map(|finding| {
                (
                    finding.kind,
                    finding.rank,
                    &finding.stands_for,
                    finding.message.as_str(),
                )
            }),
            per_rank,
        );
        // Every rank's findings, each folded one counted once per rank it stands for, so that
        // folded and unfolded runs say the same; findings of ranks that found the same are one
        // line, and the header says so where that made fewer lines.
        let count: u64 = (report.findings.iter())
            .map(|finding| finding.stands_for.count().max(1))
            .sum();
        if lines.len() as u64 == count {
            let _ = writeln!(out, "findings: {count}");
        } else {
            let _ = writeln!(
                out,
                "findings: {count} ({}: alike findings of several ranks are one line)",
                counted(lines.len() as u64, "line")
            );
        }
        for (kind, message) in lines {
            let _ = writeln!(out, "  [{kind:?}] {message}");
        }
    }
    out
}

/// The caching allocator's line: the peaks are the largest rank's, the releases all ranks'.
fn memory_line(memory: &MemoryMetrics) -> String {
    format!(
        "memory (caching allocator): peak reserved {}, peak allocated {} (the largest rank); cache releases (cudaFree) {} over all ranks, of them device-wide stalls {}\n",
        format_size_readable(memory.peak_reserved_bytes),
        format_size_readable(memory.peak_allocated_bytes),
        memory.cache_releases,
        memory.cache_release_stalls
    )
}

/// A count and its noun, singular for one (`1 rank`, `100,000 ranks`, `0 points`): every
/// message that counts something says it this way.
pub fn counted(count: u64, noun: &str) -> String {
    let plural = if count == 1 { "" } else { "s" };
    format!("{} {noun}{plural}", sim::ranks::thousands(count))
}

/// A record made for the ranks of `ranks` (a class's `stands_for`, or the ranks whose records
/// were merged), as the report shows it: its `[Rank r]` names them all (`[Ranks 0-2,4-99999
/// (99,999 ranks)]`), or they lead it.
fn for_ranks(rank: u32, ranks: &RankSet, message: &str) -> String {
    if ranks.count() <= 1 {
        return message.to_string();
    }
    let named = ranks.named();
    if let Some(rest) = message.strip_prefix(&format!("[Rank {rank}]")) {
        return format!("[R{}]{rest}", &named[1..]);
    }
    format!("{named}: {message}")
}

/// The records as the report lists them, in order of first appearance: records under the same
/// key whose messages differ only in the `[Rank r]` they open with and the ranks in their
/// process group they name (a store timeout's `[1] is setting up …`, R29) — the watchdog lines
/// and findings of ranks that did the same but were not folded together (each its own class:
/// drawn kernel jitter, docs/scale.md) — become one line naming all their ranks and group ranks;
/// `per_rank` (`run --detail ranks`) lists each.
pub(crate) fn merge_by_rank<'a, K: PartialEq>(
    records: impl Iterator<Item = (K, Option<u32>, &'a RankSet, &'a str)>,
    per_rank: bool,
) -> Vec<(K, String)> {
    // (key, the first record's rank and message, ranks, group ranks named).
    type Group<'a, K> = (K, (Option<u32>, &'a str), RankSet, Option<RankSet>);
    let mut groups: Vec<Group<'a, K>> = Vec::new();
    // Per message after its `[Rank r]`, its group ranks left out: the groups it may join.
    let mut index: std::collections::HashMap<Cow<'a, str>, Vec<usize>> = Default::default();
    for (key, rank, stands_for, message) in records {
        let ranks = match rank {
            Some(rank) if stands_for.is_empty() => RankSet::range(rank, rank),
            _ => stands_for.clone(),
        };
        let rest = rank.and_then(|rank| message.strip_prefix(&format!("[Rank {rank}]")));
        let (shape, group_ranks) = match rest.map(|rest| (rest, group_ranks_in(rest))) {
            Some((rest, Some((span, named)))) => {
                let shape = format!("{}{}", &rest[..span.start], &rest[span.end..]);
                (Some(Cow::Owned(shape)), Some(named))
            }
            Some((rest, None)) => (Some(Cow::Borrowed(rest)), None),
            None => (None, None),
        };
        let found = match (per_rank, &shape) {
            (false, Some(shape)) => index
                .get(shape)
                .and_then(|list| list.iter().copied().find(|&i| groups[i].0 == key)),
            _ => None,
        };
        match found {
            Some(i) => {
                let group = &mut groups[i];
                group.2.union_with(&ranks);
                if let (Some(merged), Some(named)) = (&mut group.3, &group_ranks) {
                    merged.union_with(named);
                }
            }
            None => {
                if let Some(shape) = shape {
                    index.entry(shape).or_default().push(groups.len());
                }
                groups.push((key, (rank, message), ranks, group_ranks));
            }
        }
    }
    groups
        .into_iter()
        .map(|(key, (rank, message), ranks, group_ranks)| {
            let text = match rank {
                Some(rank) if ranks.count() > 1 => {
                    let mut message = message.to_string();
                    if let (Some((span, _)), Some(merged)) = (group_ranks_in(&message), group_ranks)
                    {
                        message.replace_range(span, &merged.to_string());
                    }
                    for_ranks(rank, &ranks, &message)
                }
                _ => message.to_string(),
            };
            (key, text)
        })
        .collect()
}

/// Left-aligns the first column and right-aligns the others; every text table of the crate
/// goes through it.
pub fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let mut line = |cells: Vec<&str>| {
        let mut text = String::from("  ");
        // Padded by hand: `format!`'s width stops at 65,535, and a label may be longer.
        for (index, (cell, &width)) in cells.iter().zip(&widths).enumerate() {
            let padding = " ".repeat(width.saturating_sub(cell.chars().count()));
            if index == 0 {
                text.push_str(cell);
                text.push_str(&padding);
            } else {
                text.push_str("  ");
                text.push_str(&padding);
                text.push_str(cell);
            }
        }
        out.push_str(text.trim_end());
        out.push('\n');
    };
    line(header.to_vec());
    for row in rows {
        line(row.iter().map(String::as_str).collect());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_gemm_s_cost_is_described_only_where_the_scenario_has_one() {
        let text = "[[op]]\ngemm = [1024, 1024, 1024]\n";
        let plain = describe_scenario(&sim::scenario::parse("a.toml", text).unwrap());
        assert!(plain.contains("launch 5, launch latency"), "{plain}");
        let costed = format!("[host]\nfirst_gemm_us = 80000\n{text}");
        let costed = describe_scenario(&sim::scenario::parse("b.toml", &costed).unwrap());
        assert!(
            costed.contains("launch 5 (the first GEMM of each dtype 80000 more), launch latency"),
            "{costed}"
        );
    }

    #[test]
    fn a_list_of_tensors_is_described_with_its_count() {
        let text = "[tensors]\ngrads = { size = \"25KB\", count = 1000 }\nx = \"1MiB\"\n\
                    [[op]]\nall_reduce = \"grads\"\n";
        let described = describe_scenario(&sim::scenario::parse("a.toml", text).unwrap());
        assert!(
            described.contains("  tensors: grads=1000 x 25000B f32, x=1MiB f32\n"),
            "{described}"
        );
    }

    #[test]
    fn records_that_differ_only_in_their_rank_are_one_line_unless_each_is_asked_for() {
        let none = RankSet::default();
        let class = RankSet::from_ranks([4, 5]);
        let records = [
            (
                "timeout",
                Some(0),
                &none,
                "[Rank 0] timed out; rank 3 never joined",
            ),
            (
                "timeout",
                Some(1),
                &none,
                "[Rank 1] timed out; rank 3 never joined",
            ),
            (
                "timeout",
                Some(4),
                &class,
                "[Rank 4] timed out; rank 3 never joined",
            ),
            ("hang", Some(3), &none, "host of rank 3 hangs"),
            ("timeout", None, &none, "the store timed out"),
            (
                "dump",
                Some(2),
                &none,
                "[Rank 2] timed out; rank 3 never joined",
            ),
        ];
        let merged = merge_by_rank(records.iter().copied(), false);
        assert_eq!(
            merged,
            [
                (
                    "timeout",
                    "[Ranks 0-1,4-5 (4 ranks)] timed out; rank 3 never joined".to_string()
                ),
                ("hang", "host of rank 3 hangs".to_string()),
                ("timeout", "the store timed out".to_string()),
                (
                    "dump",
                    "[Rank 2] timed out; rank 3 never joined".to_string()
                ),
            ]
        );
        let each = merge_by_rank(records.iter().copied(), true);
        assert_eq!(each.len(), records.len());
        assert_eq!(
            each[2].1,
            "[Ranks 4-5 (2 ranks)] timed out; rank 3 never joined"
        );
        assert_eq!(
            for_ranks(4, &class, "[Rank 4] WorkNCCL timed out in wait()"),
            "[Ranks 4-5 (2 ranks)] WorkNCCL timed out in wait()"
        );
        assert_eq!(
            for_ranks(4, &class, "the store timed out"),
            "ranks 4-5 (2 ranks): the store timed out"
        );
    }

    #[test]
    fn the_findings_header_counts_findings_as_json_lists_them_and_says_how_many_lines() {
        // Ranks 0 and 1 each time out at the same collective, not folded together (the hang
        // sets rank 1 apart): two findings, alike but for their rank, so one line.
        let mut report = crate::metrics::report(&crate::test_scenarios::backlog_then_hang());
        let header = |report: &Report| {
            let text = render_report(report);
            let (_, findings) = text.split_once("\nfindings: ").expect("a findings section");
            let mut lines = findings.lines();
            let header = lines.next().unwrap().to_string();
            (header, lines.take_while(|l| l.starts_with("  [")).count())
        };
        assert_eq!(report.findings.len(), 2);
        assert_eq!(
            header(&report),
            (
                "2 (1 line: alike findings of several ranks are one line)".to_string(),
                1
            )
        );
        // One finding, one line: the count alone.
        report.findings.truncate(1);
        assert_eq!(header(&report), ("1".to_string(), 1));
    }

    #[test]
    fn the_memory_line_says_which_figures_are_one_rank_s_and_which_all_ranks_r20() {
        let memory = MemoryMetrics {
            peak_reserved_bytes: 2 << 20,
            peak_allocated_bytes: 1 << 20,
            cache_releases: 8,
            cache_release_stalls: 8,
        };
        assert_eq!(
            memory_line(&memory),
            "memory (caching allocator): peak reserved 2MiB, peak allocated 1MiB (the largest rank); cache releases (cudaFree) 8 over all ranks, of them device-wide stalls 8\n"
        );
    }

    #[test]
    fn a_collective_whose_later_calls_never_ran_says_how_many_its_figures_are_over() {
        let timeline = crate::test_scenarios::backlog_then_hang();
        let report = crate::metrics::report(&timeline);
        assert_eq!(report.collectives[0].rank_iterations, 2);
        let rendered = render_report(&report);
        assert!(
            rendered.contains("collectives (medians over the calls that completed, in `ran` of 2 ranks x 2 measured iterations, us):"),
            "{rendered}"
        );
        let row = rendered
            .lines()
            .find(|line| line.trim_start().starts_with("ar "))
            .unwrap();
        assert!(row.contains("2 of 4"), "{row}");
        // Where every call completed, the table is as before: no column, the plain count.
        let whole = crate::test_scenarios::backlog_every_call_completes();
        let rendered = render_report(&crate::metrics::report(&whole));
        assert!(
            rendered.contains("collectives (medians over 2 ranks x 2 measured iterations, us):"),
            "{rendered}"
        );
        assert!(!rendered.contains(" ran "), "{rendered}");
    }

    #[test]
    fn tables_align_columns() {
        let text = table(
            &["name", "value"],
            &[
                vec!["a".into(), "1".into()],
                vec!["long".into(), "22".into()],
            ],
        );
        assert_eq!(text, "  name  value\n  a         1\n  long     22\n");
    }

    #[test]
    fn a_cell_longer_than_the_formatter_pads_is_written_whole() {
        let long = "m".repeat(70_000);
        let text = table(&["name", "value"], &[vec![long.clone(), "1".into()]]);
        assert!(text.contains(&format!("{long}      1")));
        let text = table(&["value", "name"], &[vec!["1".into(), long.clone()]]);
        assert!(text.starts_with("  value  "));
        assert!(text.ends_with(&format!("\n  1      {long}\n")));
    }
}
