//! Which shard of a sweep this process runs: `--shard`, else a Slurm array task's variables,
//! else a Kubernetes indexed Job's (docs/sweep-format.md); half-set or disagreeing variables are
//! refused or named.

use crate::Failure;
use sim::sweep::Shard;

/// The variables a Kubernetes indexed Job sets (the index), and the one c10dsim reads for the
/// number of completions (set it to the Job's `completions`).
const K8S_INDEX_VARIABLE: &str = "JOB_COMPLETION_INDEX";
const K8S_COUNT_VARIABLE: &str = "C10DSIM_SHARD_COUNT";

fn variable(name: &str) -> Result<Option<u64>, Failure> {
    match std::env::var(name) {
        Err(_) => Ok(None),
        Ok(text) => {
            text.trim().parse().map(Some).map_err(|_| {
                Failure::input(format!("{name}={text:?} is not a non-negative integer"))
            })
        }
    }
}

/// What one scheduler's variables say of the shard.
enum Reading {
    Unset,
    /// Its index or its count without the other: `set` names the one set (`NAME=VALUE`),
    /// `unset` the other; `refusal` says what to do when no other scheduler gives both.
    HalfSet {
        set: String,
        unset: &'static str,
        refusal: String,
    },
    /// Both: the shard, the variables (`NAME=VALUE, …`) and the one the sweep's note names.
    Set {
        shard: Shard,
        described: String,
        source: &'static str,
    },
}

/// A Slurm array task's shard: ((`SLURM_ARRAY_TASK_ID` − `SLURM_ARRAY_TASK_MIN`) /
/// `SLURM_ARRAY_TASK_STEP` of `SLURM_ARRAY_TASK_COUNT`).
fn slurm_reading() -> Result<Reading, Failure> {
    let (id, count) = match (
        variable("SLURM_ARRAY_TASK_ID")?,
        variable("SLURM_ARRAY_TASK_COUNT")?,
    ) {
        (None, None) => return Ok(Reading::Unset),
        (Some(id), None) => {
            return Ok(Reading::HalfSet {
                set: format!("SLURM_ARRAY_TASK_ID={id}"),
                unset: "SLURM_ARRAY_TASK_COUNT",
                refusal: "SLURM_ARRAY_TASK_ID is set but SLURM_ARRAY_TASK_COUNT is not (Slurm \
                          sets both for a job array): set it to the array's task count (or pass \
                          --shard I/N)"
                    .to_string(),
            })
        }
        (None, Some(count)) => {
            return Ok(Reading::HalfSet {
                set: format!("SLURM_ARRAY_TASK_COUNT={count}"),
                unset: "SLURM_ARRAY_TASK_ID",
                refusal: "SLURM_ARRAY_TASK_COUNT is set but SLURM_ARRAY_TASK_ID is not (Slurm \
                          sets both for a job array): without the id every task would run the \
                          whole sweep; set the task's id, unset the count, or pass --shard I/N"
                    .to_string(),
            })
        }
        (Some(id), Some(count)) => (id, count),
    };
    let min = variable("SLURM_ARRAY_TASK_MIN")?.unwrap_or(0);
    // `--array=0-15:4` runs tasks 0, 4, 8 and 12: shards 0 to 3 of 4.
    let step = variable("SLURM_ARRAY_TASK_STEP")?.unwrap_or(1).max(1);
    let offset = id.checked_sub(min).ok_or_else(|| {
        Failure::input(format!(
            "SLURM_ARRAY_TASK_ID={id} is below SLURM_ARRAY_TASK_MIN={min}: not a task of \
             this array"
        ))
    })?;
    if offset % step != 0 {
        return Err(Failure::input(format!(
            "SLURM_ARRAY_TASK_ID={id} is not SLURM_ARRAY_TASK_MIN={min} plus a multiple of \
             SLURM_ARRAY_TASK_STEP={step}: not a task of this array"
        )));
    }
    set_reading(
        offset / step,
        ("SLURM_ARRAY_TASK_COUNT", count),
        "SLURM_ARRAY_TASK_ID",
        format!("SLURM_ARRAY_TASK_ID={id}, SLURM_ARRAY_TASK_COUNT={count}"),
    )
}

/// A Kubernetes indexed Job's shard: `JOB_COMPLETION_INDEX` of `C10DSIM_SHARD_COUNT`.
fn kubernetes_reading() -> Result<Reading, Failure> {
    match (variable(K8S_INDEX_VARIABLE)?, variable(K8S_COUNT_VARIABLE)?) {
        (None, None) => Ok(Reading::Unset),
        (Some(index), None) => Ok(Reading::HalfSet {
            set: format!("{K8S_INDEX_VARIABLE}={index}"),
            unset: K8S_COUNT_VARIABLE,
            refusal: format!(
                "{K8S_INDEX_VARIABLE} is set but {K8S_COUNT_VARIABLE} is not: set it to the \
                 Job's completions (or pass --shard I/N)"
            ),
        }),
        (None, Some(count)) => Ok(Reading::HalfSet {
            set: format!("{K8S_COUNT_VARIABLE}={count}"),
            unset: K8S_INDEX_VARIABLE,
            refusal: format!(
                "{K8S_COUNT_VARIABLE} is set but {K8S_INDEX_VARIABLE} is not (an indexed Job \
                 sets it in each pod): without the index every task would run the whole sweep; \
                 run as an indexed Job (completionMode: Indexed), unset {K8S_COUNT_VARIABLE}, or \
                 pass --shard I/N"
            ),
        }),
        (Some(index), Some(count)) => set_reading(
            index,
            (K8S_COUNT_VARIABLE, count),
            K8S_INDEX_VARIABLE,
            format!("{K8S_INDEX_VARIABLE}={index}, {K8S_COUNT_VARIABLE}={count}"),
        ),
    }
}

/// The shard `index` of `count` (its variable's name and value), which `source` chose.
fn set_reading(
    index: u64,
    (count_variable, count): (&'static str, u64),
    source: &'static str,
    described: String,
) -> Result<Reading, Failure> {
    if count == 0 {
        return Err(Failure::input(format!(
            "{count_variable}=0: a sweep has at least 1 shard (set it to the number of tasks, \
             or pass --shard I/N)"
        )));
    }
    let shard = Shard::parse(&format!("{index}/{count}")).map_err(|_| {
        Failure::input(format!(
            "{source}: shard index {index} is not below the shard count {count}"
        ))
    })?;
    Ok(Reading::Set {
        shard,
        described,
        source,
    })
}

/// What chose the sweep's shard: the shard, where it came from (`--shard`, the variable, or
/// `default`), and what the user should hear of the variables not used.
pub(super) struct ShardChoice {
    pub shard: Shard,
    pub source: &'static str,
    pub notes: Vec<String>,
}

/// `--shard` when given; else the first of a Slurm array task's variables and a Kubernetes
/// indexed Job's that gives both index and count (Slurm's first, as `hw` reads the launchers in
/// order); else the whole sweep. The other scheduler's, disagreeing or half set, are ignored
/// with a note; an index or a count alone, with no scheduler giving both, is refused.
pub(super) fn shard(explicit: Option<Shard>) -> Result<ShardChoice, Failure> {
    if let Some(shard) = explicit {
        return Ok(ShardChoice {
            shard,
            source: "--shard",
            notes: Vec::new(),
        });
    }
    let mut used: Option<(Shard, String, &'static str)> = None;
    let mut half_set = Vec::new();
    let mut notes = Vec::new();
    for read in [slurm_reading, kubernetes_reading] {
        let reading = match used {
            None => read()?,
            // Variables of the scheduler not used: a bad value of theirs does not matter here.
            Some(_) => read().unwrap_or(Reading::Unset),
        };
        match (reading, &used) {
            (Reading::Unset, _) => {}
            (
                Reading::HalfSet {
                    set,
                    unset,
                    refusal,
                },
                _,
            ) => half_set.push((set, unset, refusal)),
            (
                Reading::Set {
                    shard,
                    described,
                    source,
                },
                None,
            ) => used = Some((shard, described, source)),
            (
                Reading::Set {
                    shard, described, ..
                },
                Some((used_shard, used_described, _)),
            ) => {
                if shard != *used_shard {
                    notes.push(format!(
                        "using shard {used_shard} ({used_described}); ignoring shard {shard} \
                         ({described}), which disagrees: Slurm's variables are read before the \
                         Kubernetes ones"
                    ));
                }
            }
        }
    }
    let Some((shard, described, source)) = used else {
        return match half_set.into_iter().next() {
            Some((_, _, refusal)) => Err(Failure::input(refusal)),
            None => Ok(ShardChoice {
                shard: Shard::ALL,
                source: "default",
                notes,
            }),
        };
    };
    for (set, unset, _) in half_set {
        notes.push(format!(
            "using shard {shard} ({described}); ignoring {set}, set without {unset}"
        ));
    }
    Ok(ShardChoice {
        shard,
        source,
        notes,
    })
}
