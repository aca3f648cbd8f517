//! Runs scenario files on this machine's GPU, writes each measured Timeline as JSON and prints
//! a short summary (medians of host calls and kernels, over the measured iterations).
//!
//! ```text
//! hw_smoke [--downscale off|nccl|model|spin:<µs>] [--timeout-ms MS] [--out DIR] FILE...
//! hw_smoke merge OUT.json PART.json...
//! ```
//!
//! Under a launcher each process writes `<scenario>.rank<r>.json`; `merge` joins such parts
//! into one Timeline with every rank ([`hw::merge_ranks`]).
//!
//! Exit codes as `c10dsim hw`: 2 when no GPU or library is found or a file is bad, 1 on a
//! timeout.

use sim::timeline::Timeline;
use std::collections::BTreeMap;
use std::path::PathBuf;

fn median(values: &mut [u64]) -> u64 {
    values.sort_unstable();
    values.get(values.len() / 2).copied().unwrap_or(0)
}

fn summary(timeline: &Timeline) {
    let warmup = timeline.scenario.warmup;
    for rank in &timeline.ranks {
        println!(" rank {}", rank.rank);
        let mut host: BTreeMap<u32, Vec<u64>> = BTreeMap::new();
        for call in rank.host.iter().filter(|c| c.iteration >= warmup) {
            host.entry(call.op)
                .or_default()
                .push(call.end_ns - call.start_ns);
        }
        let mut gpu: BTreeMap<u32, Vec<u64>> = BTreeMap::new();
        for kernel in rank.kernels.iter().filter(|k| k.iteration >= warmup) {
            gpu.entry(kernel.op)
                .or_default()
                .push(kernel.end_ns - kernel.start_ns);
        }
        println!("  {:<28} {:>12} {:>12}", "op", "host µs", "kernel µs");
        for (op, mut times) in host {
            let kernel = gpu
                .get_mut(&op)
                .map(|k| format!("{:.1}", median(k) as f64 / 1e3))
                .unwrap_or_default();
            println!(
                "  {:<28} {:>12.1} {:>12}",
                timeline.ops[op as usize].name,
                median(&mut times) as f64 / 1e3,
                kernel
            );
        }
        let waits: Vec<_> = rank
            .collectives
            .iter()
            .filter(|c| c.iteration >= warmup)
            .filter_map(|c| c.wait)
            .collect();
        if !waits.is_empty() {
            let done = waits.iter().filter(|w| w.completed_at_return).count();
            println!("  completed_at_wait: {done}/{}", waits.len());
        }
    }
}

fn merge(mut args: impl Iterator<Item = String>) {
    let out = args.next().unwrap_or_default();
    let mut parts = Vec::new();
    for path in args {
        let text = std::fs::read_to_string(&path).unwrap_or_else(|error| {
            eprintln!("{path}: {error}");
            std::process::exit(2)
        });
        let timeline = serde_json::from_str::<Timeline>(&text).unwrap_or_else(|error| {
            eprintln!("{path}: {error}");
            std::process::exit(2)
        });
        parts.push((path, timeline));
    }
    let merged = hw::merge_ranks(parts).unwrap_or_else(|e| fail(e));
    let json = serde_json::to_string(&merged).expect("a Timeline serialises");
    std::fs::write(&out, json).unwrap_or_else(|error| {
        eprintln!("{out}: {error}");
        std::process::exit(2)
    });
    println!("merged {} ranks -> {out}", merged.ranks.len());
    summary(&merged);
}

fn main() {
    let mut args = std::env::args().skip(1).peekable();
    if args.peek().map(String::as_str) == Some("merge") {
        args.next();
        return merge(args);
    }
    let mut options = hw::HwOptions::from_env().unwrap_or_else(|error| fail(error));
    for note in &options.notes {
        eprintln!("hw_smoke: note: {note}");
    }
    let mut out = PathBuf::from(".");
    let mut files = Vec::new();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--downscale" => {
                let mode = args.next().unwrap_or_default();
                options.downscale = hw::Downscale::parse(&mode).unwrap_or_else(|e| fail(e));
            }
            "--out" => out = PathBuf::from(args.next().unwrap_or_default()),
            "--timeout-ms" => {
                let timeout_ms: u64 =
                    args.next().and_then(|t| t.parse().ok()).unwrap_or_else(|| {
                        fail(hw::HwError::BadOptions(
                            "--timeout-ms takes milliseconds".into(),
                        ))
                    });
                options
                    .set_timeout_ms(timeout_ms)
                    .unwrap_or_else(|e| fail(e));
            }
            _ => files.push(arg),
        }
    }
    match hw::probe() {
        Ok(report) => eprintln!("probe: {report:?}"),
        Err(error) => fail(error),
    }
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap_or_else(|error| {
            eprintln!("{file}: {error}");
            std::process::exit(2)
        });
        let scenario = sim::scenario::parse(&file, &text).unwrap_or_else(|error| {
            eprintln!("{error}");
            std::process::exit(2)
        });
        let timeline = hw::run_scenario(&scenario, &options).unwrap_or_else(|e| fail(e));
        let name = match options.launch {
            Some(launch) => format!("{}.rank{}.json", scenario.name, launch.rank),
            None => format!("{}.json", scenario.name),
        };
        let path = out.join(name);
        let json = serde_json::to_string(&timeline).expect("a Timeline serialises");
        std::fs::write(&path, json).unwrap_or_else(|error| {
            eprintln!("{}: {error}", path.display());
            std::process::exit(2)
        });
        println!("{} -> {}", scenario.name, path.display());
        summary(&timeline);
    }
}

fn fail(error: hw::HwError) -> ! {
    eprintln!("hw_smoke: {error}");
    std::process::exit(error.exit_code())
}
