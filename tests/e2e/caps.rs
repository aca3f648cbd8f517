//! Every refusal on a cap (docs/reliability.md#limits) names only flags its command takes:
//! each refusal path of each command is run, every `--flag` its message names is given to that
//! command (or to the `c10dsim …` command line the message quotes) and clap must know it; the
//! cap raised, the refusal goes. `calibrate`, `fidelity`, `hw-merge` and `torch` told the user to
//! "raise --max-timeline", which they refused as an unexpected argument.

use crate::robustness::{temp, write};
use crate::util::{skipped, stderr};
use std::path::Path;
use std::process::{Command, Output};

/// Runs the binary with `env` set.
fn c10dsim_with(args: &[String], env: &[(&str, &str)]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_c10dsim"))
        .args(args)
        .envs(env.iter().copied())
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("the binary runs")
}

/// The flags `message` names, each with the command it is meant for: a backquoted `c10dsim …`
/// command line's flags are its command's (its leading words, `import kineto`), the others
/// `command`'s.
fn named_flags(command: &[&str], message: &str) -> Vec<(Vec<String>, String)> {
    let mut named = Vec::new();
    for (index, part) in message.split('`').enumerate() {
        let quoted = (index % 2 == 1)
            .then(|| part.strip_prefix("c10dsim "))
            .flatten();
        let path: Vec<String> = match quoted {
            Some(line) => line
                .split_whitespace()
                .take_while(|word| {
                    word.starts_with(|c: char| c.is_ascii_lowercase())
                        && word.chars().all(|c| c.is_ascii_lowercase() || c == '-')
                })
                .map(str::to_string)
                .collect(),
            None => command.iter().map(|word| word.to_string()).collect(),
        };
        let words = part.split(|c: char| c.is_whitespace() || "(),;:/'=".contains(c));
        for word in words {
            let flag = word.trim_end_matches('.');
            if flag.len() > 2 && flag.starts_with("--") {
                named.push((path.clone(), flag.to_string()));
            }
        }
    }
    named
}

/// A refusal on a cap: the command's words (`["import", "kineto"]`), its arguments, the cap's
/// flag with a value that refuses and one that passes, what the refusal says, and the
/// environment it runs in.
struct Refusal<'a> {
    command: &'a [&'a str],
    args: Vec<String>,
    cap: (&'a str, &'a str, &'a str),
    says: &'a str,
    env: &'a [(&'a str, &'a str)],
}

impl Refusal<'_> {
    /// Runs it at the refusing cap: refused with exit 2, saying so and naming the cap's flag;
    /// every flag the message names is its command's; then at the passing cap, not refused so.
    fn check(&self) {
        self.check_exiting(2);
    }

    /// [`Self::check`], refused with exit `code`.
    fn check_exiting(&self, code: i32) {
        let (flag, refused_at, passes_at) = self.cap;
        let at = |value: &str| {
            let mut args: Vec<String> = self.command.iter().map(|w| w.to_string()).collect();
            args.extend(self.args.iter().cloned());
            args.extend([flag.to_string(), value.to_string()]);
            args
        };
        let shown = at(refused_at).join(" ");
        let output = c10dsim_with(&at(refused_at), self.env);
        let message = stderr(&output);
        assert_eq!(output.status.code(), Some(code), "{shown}: {message}");
        assert!(message.contains(self.says), "{shown}: {message}");
        let named = named_flags(self.command, &message);
        assert!(
            named.iter().any(|(_, named)| named == flag),
            "{shown}: {message}"
        );
        for (path, named) in named {
            let mut asked = path.clone();
            asked.extend([named.clone(), "--help".to_string()]);
            let help = c10dsim_with(&asked, &[]);
            assert!(
                !stderr(&help).contains("unexpected argument"),
                "`{shown}` names {named}, which `c10dsim {}` does not take: {message}",
                path.join(" ")
            );
        }
        let output = c10dsim_with(&at(passes_at), self.env);
        let err = stderr(&output);
        assert!(
            !err.contains(self.says),
            "{}: {err}",
            at(passes_at).join(" ")
        );
        assert_ne!(output.status.code(), Some(101), "{err}");
    }
}

fn text(path: &Path) -> String {
    path.display().to_string()
}

/// A folder of `scenarios/hang_10min.toml`'s Flight Recorder dumps, written by `run --fr-dir`.
fn hang_dumps(name: &str) -> std::path::PathBuf {
    let dumps = temp(name);
    let _ = std::fs::remove_dir_all(&dumps);
    let made = c10dsim_with(
        &strings(&[
            "run",
            "scenarios/hang_10min.toml",
            "--fr-dir",
            &text(&dumps),
        ]),
        &[],
    );
    assert_eq!(made.status.code(), Some(1), "{}", stderr(&made));
    dumps
}

/// A folder of the first `runs` recorded `c10dsim torch` runs of exp_b, as `fidelity` reads.
fn torch_runs(name: &str, runs: u32) -> String {
    let folder = temp(name);
    std::fs::create_dir_all(&folder).unwrap();
    for run in 1..=runs {
        let file = format!("exp_b_stream_scope.run{run}.json");
        std::fs::copy(format!("tests/data/torch/{file}"), folder.join(&file)).unwrap();
    }
    text(&folder)
}

fn strings(words: &[&str]) -> Vec<String> {
    words.iter().map(|word| word.to_string()).collect()
}

#[test]
fn every_refusal_on_a_cap_names_flags_its_command_takes() {
    // 64 ranks x 1000 iterations: folded a 118 KB Timeline, expanded about 3.6 MiB of JSON,
    // 21.6 MiB held.
    let big = write(
        "caps_big.toml",
        "repeat = 1000\n[cluster]\nranks = 64\n[[op]]\nhost_sleep_us = 1\n",
    );
    let folded = temp("caps_folded.json");
    let made = c10dsim_with(&strings(&["run", &big, "--timeline", &text(&folded)]), &[]);
    assert_eq!(made.status.code(), Some(0), "{}", stderr(&made));
    let folded = text(&folded);
    let tiny = write(
        "caps_tiny.toml",
        "[cluster]\nranks = 1\n[[op]]\nhost_sleep_us = 1\n",
    );
    let straggler = write(
        "caps_straggler.toml",
        "[cluster]\nranks = 64\n[groups.world]\ntimeout_s = 1\neager_init = true\n\
         [tensors]\nx = \"1MiB\"\n[[op]]\nlabel = \"ar\"\nall_reduce = \"x\"\n\
         [[perturb]]\nranks = [3]\nbefore = \"ar\"\nhost_delay_us = 2_000_000\n",
    );
    // 86 KB: reading it is about 344 KB.
    let measured = "tests/data/hw/exp_b_stream_scope.json";
    let held_out = "tests/data/hw/x2/overlap_bench.2ranks.json";
    let out = |name: &str| text(&temp(name));
    let dumps = hang_dumps("caps_dumps");
    let torch_runs = torch_runs("caps_torch", 3);
    let kineto = "tests/data/torch/recorded/traces/fsdp_b25/rank0.json";
    let events = ("--max-events", "10", "1000000000");
    let read = "a Timeline file of";
    let expanded = "a folded Timeline: expanded to all 64 ranks";
    let simulated = "engine events, over the cap of 10";
    let refusals = [
        Refusal {
            command: &["run"],
            args: strings(&[&big]),
            cap: events,
            says: simulated,
            env: &[],
        },
        Refusal {
            command: &["run"],
            args: strings(&[&big, "--trace", &out("caps_trace.json")]),
            cap: ("--max-timeline", "1MiB", "64MiB"),
            says: "--trace shows every rank",
            env: &[],
        },
        Refusal {
            command: &["run"],
            args: strings(&[
                &big,
                "--summary",
                "--records-for",
                "ranks=0-63",
                "--trace",
                &out("caps_trace.json"),
            ]),
            cap: ("--max-timeline", "1MiB", "64MiB"),
            says: "--trace shows the records --records-for keeps",
            env: &[],
        },
        Refusal {
            command: &["run"],
            args: strings(&[
                "scenarios/hang_10min.toml",
                "--set",
                "cluster.ranks=64",
                "--fr-dir",
                &out("caps_fr_dir"),
            ]),
            cap: ("--max-timeline", "64KiB", "256KiB"),
            says: "--fr-dir writes a Flight Recorder dump for each of the 64 ranks",
            env: &[],
        },
        Refusal {
            command: &["run"],
            args: strings(&[&straggler, "--fr-dir", &out("caps_straggler_dumps")]),
            cap: ("--max-timeline", "64KiB", "1MiB"),
            says: "--fr-dir writes the Flight Recorder dumps of the 64 ranks that dumped",
            env: &[],
        },
        Refusal {
            command: &["run"],
            args: strings(&[
                "scenarios/hang_10min.toml",
                "--set",
                "cluster.ranks=64",
                "--summary",
                "--timeline",
                &out("caps_summary.json"),
            ]),
            cap: ("--max-timeline", "4KiB", "64KiB"),
            says: "the Timeline passed the cap of 4KiB",
            env: &[],
        },
        Refusal {
            command: &["run"],
            args: strings(&[&tiny, "--against", measured]),
            cap: ("--max-timeline", "128KiB", "4GiB"),
            says: read,
            env: &[],
        },
        Refusal {
            command: &["run"],
            args: strings(&[&tiny, "--against", &folded]),
            cap: ("--max-timeline", "4MiB", "4GiB"),
            says: "holds the simulated Timeline beside the measured one",
            env: &[],
        },
        Refusal {
            command: &["check"],
            args: strings(&[&big]),
            cap: events,
            says: simulated,
            env: &[],
        },
        Refusal {
            command: &["sweep"],
            args: strings(&[&big, "--set", "repeat=1,2", "-o", &out("caps_sweep.csv")]),
            cap: events,
            says: simulated,
            env: &[],
        },
        Refusal {
            command: &["bench"],
            args: strings(&["--ranks", "4", "--iterations", "10"]),
            cap: events,
            says: "engine events, over the cap of 10",
            env: &[],
        },
        Refusal {
            command: &["diff"],
            args: strings(&[measured, measured]),
            cap: ("--max-timeline", "128KiB", "4GiB"),
            says: read,
            env: &[],
        },
        Refusal {
            command: &["diff"],
            args: strings(&[&folded, &folded]),
            cap: ("--max-timeline", "4MiB", "4GiB"),
            says: "diff holds both Timelines",
            env: &[],
        },
        Refusal {
            command: &["calibrate"],
            args: strings(&[measured, "-o", &out("caps_profile.toml")]),
            cap: ("--max-timeline", "128KiB", "4GiB"),
            says: read,
            env: &[],
        },
        Refusal {
            command: &["calibrate"],
            args: strings(&[&format!("{folded}={big}"), "-o", &out("caps_profile.toml")]),
            cap: ("--max-timeline", "4MiB", "4GiB"),
            says: expanded,
            env: &[],
        },
        Refusal {
            command: &["calibrate"],
            args: strings(&[
                measured,
                "-o",
                &out("caps_profile.toml"),
                "--validate",
                held_out,
            ]),
            cap: events,
            says: simulated,
            env: &[],
        },
        Refusal {
            command: &["fidelity"],
            args: strings(&["--torch", &torch_runs, "--hw", &torch_runs]),
            cap: ("--max-timeline", "64KiB", "4GiB"),
            says: read,
            env: &[],
        },
        Refusal {
            command: &["fidelity"],
            args: strings(&["--torch", &torch_runs, "--hw", &torch_runs]),
            cap: events,
            says: simulated,
            env: &[],
        },
        Refusal {
            command: &["hw-merge"],
            args: strings(&[measured, "-o", &out("caps_merged.json")]),
            cap: ("--max-timeline", "128KiB", "4GiB"),
            says: read,
            env: &[],
        },
        Refusal {
            command: &["import", "kineto"],
            args: strings(&[kineto, "-o", &out("caps_kineto.toml"), "--replay"]),
            cap: events,
            says: simulated,
            env: &[],
        },
        Refusal {
            command: &["import", "flight-recorder"],
            args: strings(&[&text(&dumps), "-o", &out("caps_fr.toml")]),
            cap: events,
            says: simulated,
            env: &[],
        },
    ];
    for refusal in &refusals {
        refusal.check();
    }
    let _ = std::fs::remove_dir_all(&dumps);
}

/// The commands that simulate a scenario on their own to compare it take `--max-memory` as
/// `run` does; a simulation stopped at the cap is not compared (exit 1, the `memory_cap`
/// finding's words): its Timeline ends at the first event, and `import flight-recorder` read it
/// as "every collective in the dumps completes when replayed".
#[test]
fn a_simulation_stopped_at_the_memory_cap_is_not_compared() {
    let dumps = hang_dumps("caps_memory_dumps");
    let torch_runs = torch_runs("caps_memory_torch", 1);
    let out = |name: &str| text(&temp(name));
    let memory = ("--max-memory", "1KiB", "64GiB");
    let stopped = "over the cap of 1KiB (--max-memory)";
    let refusals = [
        Refusal {
            command: &["calibrate"],
            args: strings(&[
                "tests/data/hw/exp_b_stream_scope.json",
                "-o",
                &out("caps_memory_profile.toml"),
                "--validate",
                "tests/data/hw/x2/overlap_bench.2ranks.json",
            ]),
            cap: memory,
            says: stopped,
            env: &[],
        },
        Refusal {
            command: &["fidelity"],
            args: strings(&["--torch", &torch_runs, "--hw", &torch_runs]),
            cap: memory,
            says: stopped,
            env: &[],
        },
        Refusal {
            command: &["import", "kineto"],
            args: strings(&[
                "tests/data/torch/recorded/traces/fsdp_b25/rank0.json",
                "-o",
                &out("caps_memory_kineto.toml"),
                "--replay",
            ]),
            cap: memory,
            says: stopped,
            env: &[],
        },
        Refusal {
            command: &["import", "flight-recorder"],
            args: strings(&[&text(&dumps), "-o", &out("caps_memory_fr.toml")]),
            cap: memory,
            says: stopped,
            env: &[],
        },
    ];
    for refusal in &refusals {
        refusal.check_exiting(1);
    }
    let _ = std::fs::remove_dir_all(&dumps);
}

/// `torch` joins its ranks' files through the read cap: against the fake torch of
/// `python/tests/fake_torch` (docs/torch.md), where Python runs.
#[test]
fn torch_s_refusal_on_the_read_cap_names_a_flag_it_takes() {
    let python = Command::new("python3").arg("--version").output();
    if !python.is_ok_and(|output| output.status.success()) {
        skipped("torch_s_refusal_on_the_read_cap_names_a_flag_it_takes: no python3");
        return;
    }
    let fake = concat!(env!("CARGO_MANIFEST_DIR"), "/python/tests/fake_torch");
    Refusal {
        command: &["torch"],
        args: strings(&[
            "scenarios/exp_b_stream_scope.toml",
            "--timeline",
            &text(&temp("caps_torch.json")),
        ]),
        cap: ("--max-timeline", "64KiB", "4GiB"),
        says: "a Timeline file of",
        env: &[("C10DSIM_PYTHON", "python3"), ("PYTHONPATH", fake)],
    }
    .check();
}
