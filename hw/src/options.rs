//! Run options: which rank this process is, where the NCCL unique id is exchanged, and the
//! single-GPU downscale mode. Everything here is plain logic, tested without a GPU (the
//! rendezvous folder's check alone touches the file system).
//!
//! About 1,000 lines, the second half its tests: the launchers' variables, the layout they give
//! and the run key are one decision (which process is which rank on which GPU, and which id
//! file it reads), and their tests go through each launcher's combinations.

use crate::error::HwError;
use std::path::PathBuf;

/// The variables one launcher sets for each process it starts.
#[derive(Debug, PartialEq, Eq)]
pub struct Launcher {
    /// How the user calls it: `torchrun`, `srun`, `mpirun`.
    pub name: &'static str,
    pub rank_var: &'static str,
    pub world_size_var: &'static str,
    pub local_rank_var: &'static str,
}

pub static TORCHRUN: Launcher = Launcher {
    name: "torchrun",
    rank_var: "RANK",
    world_size_var: "WORLD_SIZE",
    local_rank_var: "LOCAL_RANK",
};

pub static SRUN: Launcher = Launcher {
    name: "srun",
    rank_var: "SLURM_PROCID",
    world_size_var: "SLURM_NTASKS",
    local_rank_var: "SLURM_LOCALID",
};

pub static MPIRUN: Launcher = Launcher {
    name: "mpirun",
    rank_var: "OMPI_COMM_WORLD_RANK",
    world_size_var: "OMPI_COMM_WORLD_SIZE",
    local_rank_var: "OMPI_COMM_WORLD_LOCAL_RANK",
};

/// The launchers in the order their variables are believed when several are set: the one
/// that started this process directly comes first (torchrun is started by srun, and mpirun and
/// srun run inside a Slurm allocation whose batch step sets `SLURM_*`).
pub static LAUNCHERS: [&Launcher; 3] = [&TORCHRUN, &SRUN, &MPIRUN];

/// The rank of this process as a launcher (torchrun, srun, mpirun) describes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LaunchEnv {
    /// Global rank (`RANK`, `SLURM_PROCID`, `OMPI_COMM_WORLD_RANK`).
    pub rank: u32,
    /// Number of processes (`WORLD_SIZE`, …).
    pub world_size: u32,
    /// Rank on this node (`LOCAL_RANK`, …): the GPU ordinal this process drives.
    pub local_rank: u32,
    /// The launcher whose variables these are.
    pub launcher: &'static Launcher,
    /// Whether the local rank was set; when not, it is the global rank.
    pub local_rank_set: bool,
}

impl LaunchEnv {
    /// The variable the local rank was read from, as `NAME=value`, for messages.
    pub fn local_rank_source(&self) -> String {
        if self.local_rank_set {
            format!("{}={}", self.launcher.local_rank_var, self.local_rank)
        } else {
            format!(
                "{}={} ({} unset)",
                self.launcher.rank_var, self.local_rank, self.launcher.local_rank_var
            )
        }
    }

    /// `RANK=3, WORLD_SIZE=8 (torchrun)`, for messages.
    fn describe(&self) -> String {
        format!(
            "{}={}, {}={} ({})",
            self.launcher.rank_var,
            self.rank,
            self.launcher.world_size_var,
            self.world_size,
            self.launcher.name
        )
    }
}

/// What a collective becomes when a multi-rank scenario is downscaled to rank 0 alone.
///
/// A 1-rank NCCL communicator makes every collective trivial: the kernel copies (or does
/// nothing to) the local buffer and finishes in a few microseconds, since there is no peer to
/// wait for (R16) and no data to move (R24). The stand-in chooses what the NCCL stream runs
/// instead, so that overlap and ordering still have something to show.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StandIn {
    /// The real 1-rank NCCL collective (a few µs).
    Nccl,
    /// A spin kernel of this fixed duration on the stream the collective would run on, with
    /// the channel count the simulator plans for the real collective.
    Spin { duration_ns: u64 },
    /// A spin kernel as the simulator plans the real collective (`sim::nccl::plan_collective`:
    /// the α-β ring of R24, or the NCCL model where the scenario asks): its duration for the
    /// real group size, tensor size and `[network]`, one block per channel (R22).
    Model,
}

/// How a scenario with more ranks than this process can host is handled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Downscale {
    /// Refuse: a multi-rank scenario needs one process per GPU.
    #[default]
    Off,
    /// Run rank 0's program alone, every group it belongs to as a 1-rank communicator, each
    /// collective replaced as the stand-in says.
    RankZero(StandIn),
}

impl Downscale {
    /// Parses the CLI spelling: `off`, `nccl`, `model`, or `spin:<µs>` (e.g. `spin:500`).
    pub fn parse(text: &str) -> Result<Downscale, HwError> {
        let stand_in = match text {
            "off" => return Ok(Downscale::Off),
            "nccl" => StandIn::Nccl,
            "model" => StandIn::Model,
            other => match other.strip_prefix("spin:") {
                Some(us) => {
                    let us: f64 = us.parse().map_err(|_| {
                        HwError::BadOptions(format!(
                            "downscale {other:?}: expected spin:<microseconds>, e.g. spin:500"
                        ))
                    })?;
                    if !(0.001..=60e6).contains(&us) {
                        return Err(HwError::BadOptions(format!(
                            "downscale {other:?}: the spin must last between 1 ns (spin:0.001) and 60 s"
                        )));
                    }
                    StandIn::Spin {
                        duration_ns: (us * 1_000.0).round() as u64,
                    }
                }
                None => {
                    return Err(HwError::BadOptions(format!(
                        "unknown downscale mode {other:?}; expected off, nccl, model or spin:<µs>"
                    )))
                }
            },
        };
        Ok(Downscale::RankZero(stand_in))
    }
}

/// The longest `--timeout-ms`: a day, the longest `timeout_s` a scenario's group may have.
pub const MAX_TIMEOUT_MS: u64 = 86_400_000;

/// The GPU this process drives when it is not the launcher's local rank.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceChoice {
    /// The ordinal the user asked for (`c10dsim hw --device N`).
    Flag(usize),
    /// The launcher gave this process exactly one visible GPU (`CUDA_VISIBLE_DEVICES` names
    /// one, as `srun --gpus-per-task=1` sets it): ordinal 0.
    OnlyVisibleGpu,
}

/// What one launcher's variables say about this process.
enum Reading {
    /// None of its variables is set.
    Unset,
    /// Its rank or its world size is set, not both.
    HalfSet {
        launcher: &'static Launcher,
        set: &'static str,
        unset: &'static str,
    },
    Set(LaunchEnv),
}

/// Options of [`crate::run_scenario`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HwOptions {
    /// This process's rank, from the launcher; `None` for a plain single process.
    pub launch: Option<LaunchEnv>,
    /// Folder shared by all ranks where each group's first rank publishes the NCCL unique id
    /// (R29). One host: any local folder; several hosts: a shared file system.
    pub rendezvous_dir: PathBuf,
    /// Distinguishes this launch's id files from another launch's in the same folder (see
    /// [`HwOptions::from_vars`]).
    pub run_key: String,
    pub downscale: Downscale,
    /// Overrides every group's `timeout` (`init_process_group(timeout=…)`, default 10 min) for
    /// the watchdog, blocking waits and the id rendezvous (R26, R15, R29); set it with
    /// [`HwOptions::set_timeout_ms`], which keeps it within 1 ms to a day.
    pub timeout_ns: Option<u64>,
    /// GPU to drive; `None` means `LOCAL_RANK` (0 for a plain process).
    pub device: Option<DeviceChoice>,
    /// What reading the environment decided that the user should hear (`c10dsim hw` prints
    /// them on standard error): another launcher's variables that disagree and were not used.
    pub notes: Vec<String>,
}

impl Default for HwOptions {
    fn default() -> Self {
        HwOptions {
            launch: None,
            rendezvous_dir: std::env::temp_dir(),
            run_key: "local".to_string(),
            downscale: Downscale::Off,
            timeout_ns: None,
            device: None,
            notes: Vec::new(),
        }
    }
}

impl HwOptions {
    /// Reads the launcher's variables from the process environment (see [`HwOptions::from_vars`]).
    pub fn from_env() -> Result<HwOptions, HwError> {
        HwOptions::from_vars(|name| std::env::var(name).ok())
    }

    /// Reads rank, world size and local rank from the launcher's variables: torchrun (`RANK`,
    /// `WORLD_SIZE`, `LOCAL_RANK`), srun (`SLURM_PROCID`, `SLURM_NTASKS`, `SLURM_LOCALID`),
    /// Open MPI (`OMPI_COMM_WORLD_RANK`, `…_SIZE`, `…_LOCAL_RANK`). The first of these (in
    /// [`LAUNCHERS`] order) that sets both rank and world size describes this process; another
    /// whose variables disagree, or that sets only one of the two, is ignored with a note. With
    /// no launcher setting both, one that sets only one is refused, naming the other. A launched
    /// process whose `CUDA_VISIBLE_DEVICES` names one GPU drives that one (ordinal 0).
    /// `C10DSIM_RENDEZVOUS_DIR` overrides the id folder (the system temp folder).
    ///
    /// The run key is what the launcher gives that tells its launches apart: torchrun's
    /// `TORCHELASTIC_RUN_ID` (unless it is torchrun's default, `none`), srun's
    /// `SLURM_JOB_ID`.`SLURM_STEP_ID`, mpirun's `PMIX_NAMESPACE`, and with any launcher
    /// `MASTER_ADDR`:`MASTER_PORT`; the launcher's name when it gives none of these.
    pub fn from_vars(get: impl Fn(&str) -> Option<String>) -> Result<HwOptions, HwError> {
        let number = |name: &str, text: String| -> Result<u32, HwError> {
            text.trim().parse::<u32>().map_err(|error| {
                let why = match error.kind() {
                    std::num::IntErrorKind::PosOverflow => "is larger than 4,294,967,295",
                    _ => "is not a non-negative integer",
                };
                HwError::BadOptions(format!("{name}={text:?} {why}"))
            })
        };
        let read = |launcher: &'static Launcher| -> Result<Reading, HwError> {
            let (rank_var, world_var) = (launcher.rank_var, launcher.world_size_var);
            let (rank, world) = match (get(rank_var), get(world_var)) {
                (None, None) => return Ok(Reading::Unset),
                (Some(rank), Some(world)) => (number(rank_var, rank)?, number(world_var, world)?),
                (Some(_), None) => {
                    return Ok(Reading::HalfSet {
                        launcher,
                        set: rank_var,
                        unset: world_var,
                    })
                }
                (None, Some(_)) => {
                    return Ok(Reading::HalfSet {
                        launcher,
                        set: world_var,
                        unset: rank_var,
                    })
                }
            };
            if world == 0 || rank >= world {
                return Err(HwError::BadOptions(format!(
                    "{rank_var}={rank} with {world_var}={world}: the rank must be below the world size"
                )));
            }
            let local_rank = get(launcher.local_rank_var)
                .map(|local| number(launcher.local_rank_var, local))
                .transpose()?;
            Ok(Reading::Set(LaunchEnv {
                rank,
                world_size: world,
                local_rank: local_rank.unwrap_or(rank),
                launcher,
                local_rank_set: local_rank.is_some(),
            }))
        };
        let mut launch: Option<LaunchEnv> = None;
        let mut half_set = Vec::new();
        let mut notes = Vec::new();
        for launcher in LAUNCHERS {
            let reading = match launch {
                None => read(launcher)?,
                // A launcher further out (the Slurm allocation around torchrun) describes
                // another process: a bad value of its own does not matter here.
                Some(_) => read(launcher).unwrap_or(Reading::Unset),
            };
            match (reading, launch) {
                (Reading::Unset, _) => {}
                (Reading::Set(read), None) => launch = Some(read),
                (Reading::Set(outer), Some(used)) => {
                    if (outer.rank, outer.world_size) != (used.rank, used.world_size) {
                        notes.push(format!(
                            "using {}; ignoring {}, which disagrees: the first of torchrun, \
                             srun, mpirun that sets both is the launcher that started this \
                             process",
                            used.describe(),
                            outer.describe()
                        ));
                    }
                }
                (
                    Reading::HalfSet {
                        launcher,
                        set,
                        unset,
                    },
                    _,
                ) => half_set.push((launcher, set, unset)),
            }
        }
        for (launcher, set, unset) in half_set {
            match launch {
                None => {
                    return Err(HwError::BadOptions(format!(
                        "{set} is set but {unset} is not: {} sets both for each process it \
                         starts; set {unset}, or unset {set} to run as a single process",
                        launcher.name
                    )))
                }
                Some(used) => notes.push(format!(
                    "ignoring {set} ({unset} is not set); using {}",
                    used.describe()
                )),
            }
        }
        let rendezvous_dir = get("C10DSIM_RENDEZVOUS_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(std::env::temp_dir);
        let one_visible_gpu = get("CUDA_VISIBLE_DEVICES")
            .is_some_and(|list| !list.trim().is_empty() && !list.contains(','));
        Ok(HwOptions {
            launch,
            rendezvous_dir,
            run_key: launch.map_or_else(|| "local".to_string(), |l| run_key(l.launcher, &get)),
            device: (launch.is_some() && one_visible_gpu).then_some(DeviceChoice::OnlyVisibleGpu),
            notes,
            ..HwOptions::default()
        })
    }

    /// `--timeout-ms`: refused when 0 or longer than a day ([`MAX_TIMEOUT_MS`]).
    pub fn set_timeout_ms(&mut self, timeout_ms: u64) -> Result<(), HwError> {
        if !(1..=MAX_TIMEOUT_MS).contains(&timeout_ms) {
            return Err(HwError::BadOptions(format!(
                "--timeout-ms {timeout_ms}: a timeout lasts from 1 ms to a day \
                 ({MAX_TIMEOUT_MS} ms), as a group's timeout_s does"
            )));
        }
        self.timeout_ns = Some(timeout_ms * 1_000_000);
        Ok(())
    }

    /// Whether the ranks exchange NCCL ids through [`HwOptions::rendezvous_dir`]: launched and
    /// not downscaled.
    pub fn uses_rendezvous(&self) -> bool {
        self.launch.is_some() && self.downscale == Downscale::Off
    }

    /// Checks that the rendezvous folder exists and takes a new file, so that a wrong
    /// `C10DSIM_RENDEZVOUS_DIR` is refused at once rather than after the group's timeout.
    pub fn check_rendezvous_dir(&self) -> Result<(), HwError> {
        let dir = &self.rendezvous_dir;
        let refuse = |why: String| {
            HwError::BadOptions(format!(
                "the NCCL id folder {:?} {why}: set C10DSIM_RENDEZVOUS_DIR to a folder every rank \
                 can write (on several hosts, a shared file system)",
                dir.display().to_string()
            ))
        };
        match std::fs::metadata(dir) {
            Err(error) => return Err(refuse(format!("cannot be used ({error})"))),
            Ok(metadata) if !metadata.is_dir() => return Err(refuse("is not a folder".into())),
            Ok(_) => {}
        }
        let probe = dir.join(format!(".c10dsim-write-check-{}", std::process::id()));
        std::fs::write(&probe, b"")
            .map_err(|error| refuse(format!("does not take a new file ({error})")))?;
        // The probe did its work; a file left behind (another process removed it) is harmless.
        let _ = std::fs::remove_file(&probe);
        Ok(())
    }
}

/// The run key of a launch by `launcher` (see [`HwOptions::from_vars`]).
fn run_key(launcher: &Launcher, get: &impl Fn(&str) -> Option<String>) -> String {
    let own = if std::ptr::eq(launcher, &TORCHRUN) {
        get("TORCHELASTIC_RUN_ID")
            .filter(|id| id != "none")
            .map(|id| format!("torchelastic={id}"))
    } else if std::ptr::eq(launcher, &SRUN) {
        get("SLURM_JOB_ID").map(|job| {
            let step = get("SLURM_STEP_ID").unwrap_or_default();
            format!("slurm={job}.{step}")
        })
    } else {
        get("PMIX_NAMESPACE").map(|namespace| format!("pmix={namespace}"))
    };
    let master = get("MASTER_ADDR").map(|addr| {
        let port = get("MASTER_PORT").unwrap_or_default();
        format!("master={addr}:{port}")
    });
    let parts: Vec<String> = own.into_iter().chain(master).collect();
    if parts.is_empty() {
        launcher.name.to_string()
    } else {
        parts.join(";")
    }
}

/// Where this process's rank runs, once the scenario, the launch and the GPU count are known.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// The scenario rank whose program this process executes.
    pub rank: u32,
    /// Ranks that really take part (the communicators' world).
    pub world: u32,
    /// GPU ordinal.
    pub device: usize,
    /// Whether the file rendezvous is used (launched by torchrun/srun/mpirun).
    pub launched: bool,
    /// The stand-in, when the scenario was downscaled to rank 0 alone.
    pub stand_in: Option<StandIn>,
}

impl Layout {
    /// What can be refused without a GPU: a launch that does not match the scenario (a world
    /// size other than its ranks) or the downscale (which runs one process), and a multi-rank
    /// scenario in a single process without the downscale: NCCL refuses two ranks of one
    /// communicator on one GPU, so every rank needs its own GPU and process.
    pub fn check_launch(scenario_ranks: u32, options: &HwOptions) -> Result<(), HwError> {
        let Some(launch) = options.launch else {
            if scenario_ranks > 1 && options.downscale == Downscale::Off {
                return Err(HwError::Layout(format!(
                    "the scenario has {scenario_ranks} ranks but this is a single process (no \
                     RANK/WORLD_SIZE in the environment), and one GPU hosts one rank (NCCL \
                     refuses two ranks of a communicator on one GPU): launch one process per GPU \
                     on {scenario_ranks} GPUs with `torchrun --no-python \
                     --nproc-per-node={scenario_ranks} c10dsim hw FILE` (or srun), or ask for \
                     the downscale (rank 0 alone, 1-rank communicators, see docs/hw.md)"
                )));
            }
            return Ok(());
        };
        let world_var = launch.launcher.world_size_var;
        match options.downscale {
            Downscale::RankZero(_) if launch.world_size > 1 => Err(HwError::Layout(format!(
                "downscale runs rank 0 alone in one process, but {} started {} processes \
                 ({world_var}={}); start one process, or drop the downscale to run all \
                 {scenario_ranks} ranks",
                launch.launcher.name, launch.world_size, launch.world_size
            ))),
            Downscale::Off if launch.world_size != scenario_ranks => Err(HwError::Layout(format!(
                "the scenario has {scenario_ranks} ranks but {} started {} processes \
                     ({world_var}={}); start exactly {scenario_ranks}, one per GPU",
                launch.launcher.name, launch.world_size, launch.world_size
            ))),
            _ => Ok(()),
        }
    }

    /// Decides the layout, or says at once why the scenario cannot run here: the launch
    /// ([`Layout::check_launch`]), then the GPU count.
    pub fn resolve(
        scenario_ranks: u32,
        options: &HwOptions,
        device_count: usize,
    ) -> Result<Layout, HwError> {
        Layout::check_launch(scenario_ranks, options)?;
        if device_count == 0 {
            return Err(HwError::NoDevice(
                "the driver reports 0 CUDA devices".to_string(),
            ));
        }
        let layout = match (options.launch, options.downscale) {
            (Some(launch), Downscale::Off) => Layout {
                rank: launch.rank,
                world: launch.world_size,
                device: 0,
                launched: true,
                stand_in: None,
            },
            (_, Downscale::RankZero(stand_in)) => Layout {
                rank: 0,
                world: 1,
                device: 0,
                launched: false,
                stand_in: (scenario_ranks > 1).then_some(stand_in),
            },
            // A multi-rank scenario in a single process was refused by `check_launch`.
            (None, Downscale::Off) => Layout {
                rank: 0,
                world: 1,
                device: 0,
                launched: false,
                stand_in: None,
            },
        };
        let device = Layout::device(options, layout.launched, device_count)?;
        Ok(Layout { device, ..layout })
    }

    /// The GPU ordinal: `--device`, else the one visible GPU, else the local rank, else 0;
    /// refused, naming what chose it, when the node has no such GPU.
    fn device(options: &HwOptions, launched: bool, device_count: usize) -> Result<usize, HwError> {
        let (device, chosen_by) = match (options.device, options.launch) {
            (Some(DeviceChoice::Flag(device)), _) => (device, format!("--device {device}")),
            (None, Some(launch)) => (launch.local_rank as usize, launch.local_rank_source()),
            // Ordinal 0, which every node with a GPU has.
            (Some(DeviceChoice::OnlyVisibleGpu), _) | (None, None) => return Ok(0),
        };
        if device < device_count {
            return Ok(device);
        }
        let one_per_gpu = if launched && options.device.is_none() {
            format!(
                "; one GPU hosts one rank (NCCL refuses two ranks of a communicator on one GPU): \
                 start at most {device_count} processes per node"
            )
        } else {
            String::new()
        };
        Err(HwError::Layout(format!(
            "{chosen_by} asks for GPU {device}, but this process sees {device_count} GPU(s) \
             (ordinals 0 to {}){one_per_gpu}",
            device_count - 1
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn vars(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |name| map.get(name).cloned()
    }

    fn read(pairs: &[(&str, &str)]) -> HwOptions {
        HwOptions::from_vars(vars(pairs)).unwrap()
    }

    fn refusal(pairs: &[(&str, &str)]) -> String {
        HwOptions::from_vars(vars(pairs)).unwrap_err().to_string()
    }

    fn launched(rank: u32, world_size: u32, local_rank: u32) -> HwOptions {
        HwOptions {
            launch: Some(LaunchEnv {
                rank,
                world_size,
                local_rank,
                launcher: &TORCHRUN,
                local_rank_set: true,
            }),
            ..HwOptions::default()
        }
    }

    #[test]
    fn torchrun_variables_give_the_rank() {
        let options = read(&[
            ("RANK", "3"),
            ("WORLD_SIZE", "8"),
            ("LOCAL_RANK", "3"),
            ("TORCHELASTIC_RUN_ID", "job42"),
            ("C10DSIM_RENDEZVOUS_DIR", "/shared/ids"),
        ]);
        assert_eq!(options.launch, launched(3, 8, 3).launch);
        assert_eq!(options.run_key, "torchelastic=job42");
        assert_eq!(options.rendezvous_dir, PathBuf::from("/shared/ids"));
        assert!(options.notes.is_empty());
    }

    #[test]
    fn slurm_and_mpi_variables_are_read_and_bad_ones_refused() {
        let slurm = read(&[
            ("SLURM_PROCID", "5"),
            ("SLURM_NTASKS", "16"),
            ("SLURM_LOCALID", "1"),
            ("SLURM_JOB_ID", "77"),
            ("SLURM_STEP_ID", "0"),
        ]);
        assert_eq!(slurm.launch.unwrap().local_rank, 1);
        assert_eq!(slurm.launch.unwrap().launcher, &SRUN);
        assert_eq!(slurm.run_key, "slurm=77.0");
        let mpi = read(&[("OMPI_COMM_WORLD_RANK", "1"), ("OMPI_COMM_WORLD_SIZE", "2")]);
        let mpi_launch = mpi.launch.unwrap();
        assert_eq!(
            (mpi_launch.local_rank, mpi_launch.local_rank_set),
            (1, false)
        );
        assert_eq!(
            mpi_launch.local_rank_source(),
            "OMPI_COMM_WORLD_RANK=1 (OMPI_COMM_WORLD_LOCAL_RANK unset)"
        );
        assert!(refusal(&[("RANK", "2"), ("WORLD_SIZE", "2")]).contains("below the world size"));
        assert!(refusal(&[("RANK", "x"), ("WORLD_SIZE", "2")]).contains("RANK=\"x\""));
        assert!(refusal(&[("RANK", "0"), ("WORLD_SIZE", "99999999999999")])
            .contains("WORLD_SIZE=\"99999999999999\" is larger than 4,294,967,295"));
        assert!(
            refusal(&[("RANK", "0"), ("WORLD_SIZE", "2"), ("LOCAL_RANK", "-1")])
                .contains("LOCAL_RANK=\"-1\"")
        );
        let plain = read(&[]);
        assert_eq!(plain.launch, None);
        assert_eq!(plain.run_key, "local");
    }

    #[test]
    fn a_half_set_launcher_is_refused_naming_the_missing_variable() {
        assert_eq!(
            refusal(&[("RANK", "1")]),
            "bad hardware-run option: RANK is set but WORLD_SIZE is not: torchrun sets both \
             for each process it starts; set WORLD_SIZE, or unset RANK to run as a single process"
        );
        assert!(refusal(&[("WORLD_SIZE", "4")])
            .starts_with("bad hardware-run option: WORLD_SIZE is set but RANK is not"));
        assert!(refusal(&[("SLURM_PROCID", "1")])
            .contains("SLURM_PROCID is set but SLURM_NTASKS is not: srun"));
        assert!(refusal(&[("OMPI_COMM_WORLD_SIZE", "2")])
            .contains("OMPI_COMM_WORLD_SIZE is set but OMPI_COMM_WORLD_RANK is not"));
        // Half of srun's variables (a Slurm batch step without --ntasks) around a complete
        // mpirun: mpirun started this process.
        let inside = read(&[
            ("SLURM_PROCID", "0"),
            ("OMPI_COMM_WORLD_RANK", "1"),
            ("OMPI_COMM_WORLD_SIZE", "2"),
        ]);
        assert_eq!(inside.launch.unwrap().launcher, &MPIRUN);
        assert_eq!(
            inside.notes,
            [
                "ignoring SLURM_PROCID (SLURM_NTASKS is not set); using OMPI_COMM_WORLD_RANK=1, \
                 OMPI_COMM_WORLD_SIZE=2 (mpirun)"
            ]
        );
        // A bad value of the launcher that is used is refused, whatever follows.
        assert!(refusal(&[
            ("RANK", "x"),
            ("WORLD_SIZE", "2"),
            ("SLURM_PROCID", "0"),
            ("SLURM_NTASKS", "2")
        ])
        .contains("RANK=\"x\""));
    }

    #[test]
    fn disagreeing_launchers_use_the_first_and_say_so() {
        let both = read(&[
            ("RANK", "5"),
            ("WORLD_SIZE", "16"),
            ("SLURM_PROCID", "1"),
            ("SLURM_NTASKS", "2"),
        ]);
        let launch = both.launch.unwrap();
        assert_eq!(
            (launch.rank, launch.world_size, launch.launcher),
            (5, 16, &TORCHRUN)
        );
        assert_eq!(both.notes.len(), 1);
        assert!(
            both.notes[0].starts_with(
                "using RANK=5, WORLD_SIZE=16 (torchrun); ignoring SLURM_PROCID=1, SLURM_NTASKS=2 (srun), which disagrees"
            ),
            "{}",
            both.notes[0]
        );
        let agreeing = read(&[
            ("SLURM_PROCID", "1"),
            ("SLURM_NTASKS", "2"),
            ("OMPI_COMM_WORLD_RANK", "1"),
            ("OMPI_COMM_WORLD_SIZE", "2"),
        ]);
        assert_eq!(agreeing.launch.unwrap().launcher, &SRUN);
        assert!(agreeing.notes.is_empty());
    }

    #[test]
    fn the_run_key_separates_launches_where_the_launcher_can() {
        let torchrun = |extra: &[(&str, &str)]| {
            let mut pairs = vec![("RANK", "0"), ("WORLD_SIZE", "2")];
            pairs.extend_from_slice(extra);
            read(&pairs).run_key
        };
        // torchrun's default run id is "none" for every job: only the master address counts.
        assert_eq!(
            torchrun(&[
                ("TORCHELASTIC_RUN_ID", "none"),
                ("MASTER_ADDR", "127.0.0.1"),
                ("MASTER_PORT", "29500")
            ]),
            "master=127.0.0.1:29500"
        );
        assert_eq!(
            torchrun(&[
                ("TORCHELASTIC_RUN_ID", "a1"),
                ("MASTER_ADDR", "h"),
                ("MASTER_PORT", "1")
            ]),
            "torchelastic=a1;master=h:1"
        );
        assert_ne!(
            torchrun(&[("MASTER_ADDR", "h"), ("MASTER_PORT", "29500")]),
            torchrun(&[("MASTER_ADDR", "h"), ("MASTER_PORT", "29501")])
        );
        assert_eq!(torchrun(&[("TORCHELASTIC_RUN_ID", "none")]), "torchrun");
        let srun = read(&[
            ("SLURM_PROCID", "0"),
            ("SLURM_NTASKS", "2"),
            ("SLURM_JOB_ID", "77"),
            ("SLURM_STEP_ID", "3"),
            ("MASTER_ADDR", "n1"),
            ("MASTER_PORT", "29500"),
        ]);
        assert_eq!(srun.run_key, "slurm=77.3;master=n1:29500");
        let mpirun = read(&[
            ("OMPI_COMM_WORLD_RANK", "0"),
            ("OMPI_COMM_WORLD_SIZE", "2"),
            ("PMIX_NAMESPACE", "prterun-n1-4242@1"),
            ("TORCHELASTIC_RUN_ID", "not-this-launcher"),
        ]);
        assert_eq!(mpirun.run_key, "pmix=prterun-n1-4242@1");
        assert_eq!(read(&[("TORCHELASTIC_RUN_ID", "x")]).run_key, "local");
    }

    #[test]
    fn one_visible_gpu_per_task_is_gpu_zero() {
        let srun = read(&[
            ("SLURM_PROCID", "3"),
            ("SLURM_NTASKS", "4"),
            ("SLURM_LOCALID", "3"),
            ("CUDA_VISIBLE_DEVICES", "3"),
        ]);
        assert_eq!(srun.device, Some(DeviceChoice::OnlyVisibleGpu));
        let layout = Layout::resolve(4, &srun, 1).unwrap();
        assert_eq!((layout.rank, layout.device), (3, 0));
        let all = read(&[
            ("RANK", "1"),
            ("WORLD_SIZE", "2"),
            ("LOCAL_RANK", "1"),
            ("CUDA_VISIBLE_DEVICES", "0,1"),
        ]);
        assert_eq!(all.device, None);
        assert_eq!(Layout::resolve(2, &all, 2).unwrap().device, 1);
    }

    #[test]
    fn downscale_spellings() {
        assert_eq!(Downscale::parse("off").unwrap(), Downscale::Off);
        assert_eq!(
            Downscale::parse("model").unwrap(),
            Downscale::RankZero(StandIn::Model)
        );
        assert_eq!(
            Downscale::parse("spin:250").unwrap(),
            Downscale::RankZero(StandIn::Spin {
                duration_ns: 250_000
            })
        );
        assert!(Downscale::parse("spin:-1").is_err());
        assert!(Downscale::parse("fast").is_err());
    }

    #[test]
    fn more_ranks_than_gpus_fails_at_once_unless_downscaled() {
        let plain = HwOptions::default();
        let error = Layout::resolve(8, &plain, 1).unwrap_err();
        assert_eq!(error.exit_code(), 2);
        assert!(
            error.to_string().contains("one GPU hosts one rank"),
            "{error}"
        );
        let one = Layout::resolve(1, &plain, 1).unwrap();
        assert_eq!((one.rank, one.world, one.stand_in), (0, 1, None));
        let down = HwOptions {
            downscale: Downscale::RankZero(StandIn::Model),
            ..HwOptions::default()
        };
        let layout = Layout::resolve(8, &down, 1).unwrap();
        assert_eq!(layout.world, 1);
        assert_eq!(layout.stand_in, Some(StandIn::Model));
        assert!(Layout::resolve(8, &plain, 0).is_err());
    }

    #[test]
    fn two_ranks_need_two_processes_even_with_the_gpus_for_them() {
        for gpus in [1, 2, 8] {
            let error = Layout::resolve(2, &HwOptions::default(), gpus).unwrap_err();
            assert!(
                error
                    .to_string()
                    .contains("the scenario has 2 ranks but this is a single process"),
                "{error}"
            );
        }
    }

    #[test]
    fn the_device_flag_is_honoured_and_a_missing_gpu_refused() {
        let flag = |device| HwOptions {
            device: Some(DeviceChoice::Flag(device)),
            ..HwOptions::default()
        };
        assert_eq!(Layout::resolve(1, &flag(1), 2).unwrap().device, 1);
        assert_eq!(
            Layout::resolve(1, &flag(2), 2).unwrap_err().to_string(),
            "cannot place the scenario's ranks: --device 2 asks for GPU 2, but this process sees \
             2 GPU(s) (ordinals 0 to 1)"
        );
        let downscaled = |options: HwOptions| HwOptions {
            downscale: Downscale::RankZero(StandIn::Nccl),
            ..options
        };
        assert_eq!(
            Layout::resolve(4, &downscaled(flag(1)), 2).unwrap().device,
            1
        );
        let error = Layout::resolve(4, &downscaled(flag(5)), 2).unwrap_err();
        assert_eq!(error.exit_code(), 2);
        assert!(
            error.to_string().contains("--device 5 asks for GPU 5"),
            "{error}"
        );
        // A one-process launch, downscaled: the local rank is the GPU.
        let error = Layout::resolve(4, &downscaled(launched(0, 1, 3)), 2).unwrap_err();
        assert!(
            error
                .to_string()
                .contains("LOCAL_RANK=3 asks for GPU 3, but this process sees 2 GPU(s)"),
            "{error}"
        );
        assert_eq!(
            Layout::resolve(4, &downscaled(launched(0, 1, 1)), 2)
                .unwrap()
                .device,
            1
        );
    }

    #[test]
    fn launched_ranks_must_match_the_scenario_and_the_gpus() {
        let ok = Layout::resolve(4, &launched(2, 4, 2), 4).unwrap();
        assert_eq!((ok.rank, ok.world, ok.device, ok.launched), (2, 4, 2, true));
        assert_eq!(
            Layout::resolve(8, &launched(2, 4, 2), 4)
                .unwrap_err()
                .to_string(),
            "cannot place the scenario's ranks: the scenario has 8 ranks but torchrun started 4 \
             processes (WORLD_SIZE=4); start exactly 8, one per GPU"
        );
        let error = Layout::resolve(4, &launched(3, 4, 3), 2)
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("LOCAL_RANK=3 asks for GPU 3, but this process sees 2 GPU(s)")
                && error.contains("start at most 2 processes per node"),
            "{error}"
        );
        let mut down = launched(0, 2, 0);
        down.downscale = Downscale::RankZero(StandIn::Nccl);
        assert!(Layout::resolve(2, &down, 2)
            .unwrap_err()
            .to_string()
            .contains("torchrun started 2 processes (WORLD_SIZE=2)"));
    }

    #[test]
    fn layout_errors_name_the_variables_actually_read() {
        let slurm = read(&[
            ("SLURM_PROCID", "3"),
            ("SLURM_NTASKS", "4"),
            ("SLURM_LOCALID", "3"),
        ]);
        let error = Layout::resolve(2, &slurm, 8).unwrap_err().to_string();
        assert!(
            error.contains("srun started 4 processes (SLURM_NTASKS=4)"),
            "{error}"
        );
        assert!(!error.contains("(WORLD_SIZE)"), "{error}");
        let error = Layout::resolve(4, &slurm, 2).unwrap_err().to_string();
        assert!(error.contains("SLURM_LOCALID=3 asks for GPU 3"), "{error}");
        let mpi = read(&[("OMPI_COMM_WORLD_RANK", "3"), ("OMPI_COMM_WORLD_SIZE", "4")]);
        let error = Layout::resolve(4, &mpi, 2).unwrap_err().to_string();
        assert!(
            error.contains(
                "OMPI_COMM_WORLD_RANK=3 (OMPI_COMM_WORLD_LOCAL_RANK unset) asks for GPU 3"
            ),
            "{error}"
        );
        let mut flagged = launched(3, 4, 3);
        flagged.device = Some(DeviceChoice::Flag(6));
        let error = Layout::resolve(4, &flagged, 4).unwrap_err().to_string();
        assert!(
            error.contains("--device 6 asks for GPU 6") && !error.contains("LOCAL_RANK"),
            "{error}"
        );
    }

    #[test]
    fn the_launch_is_checked_without_a_gpu() {
        assert!(Layout::check_launch(4, &HwOptions::default())
            .unwrap_err()
            .to_string()
            .contains("`torchrun --no-python --nproc-per-node=4 c10dsim hw FILE`"));
        assert!(Layout::check_launch(1, &HwOptions::default()).is_ok());
        let single = HwOptions {
            downscale: Downscale::RankZero(StandIn::Model),
            ..HwOptions::default()
        };
        assert!(Layout::check_launch(4, &single).is_ok());
        assert!(Layout::check_launch(4, &launched(1, 4, 1)).is_ok());
        assert!(Layout::check_launch(4, &launched(1, 2, 1))
            .unwrap_err()
            .to_string()
            .contains("the scenario has 4 ranks but torchrun started 2 processes"));
        let mut down = launched(0, 4, 0);
        down.downscale = Downscale::RankZero(StandIn::Model);
        assert_eq!(Layout::check_launch(4, &down).unwrap_err().exit_code(), 2);
        down.launch = launched(0, 1, 0).launch;
        assert!(Layout::check_launch(4, &down).is_ok());
    }

    #[test]
    fn timeouts_last_from_a_millisecond_to_a_day() {
        let mut options = HwOptions::default();
        options.set_timeout_ms(1).unwrap();
        assert_eq!(options.timeout_ns, Some(1_000_000));
        options.set_timeout_ms(MAX_TIMEOUT_MS).unwrap();
        assert_eq!(options.timeout_ns, Some(86_400_000_000_000));
        for bad in [0, MAX_TIMEOUT_MS + 1, u64::MAX] {
            let error = options.set_timeout_ms(bad).unwrap_err();
            assert_eq!(error.exit_code(), 2);
            assert!(
                error.to_string().contains(&format!("--timeout-ms {bad}:")),
                "{error}"
            );
        }
        assert_eq!(
            options.timeout_ns,
            Some(86_400_000_000_000),
            "a refused value changes nothing"
        );
    }

    #[test]
    fn the_rendezvous_folder_must_exist_and_take_files() {
        let dir = std::env::temp_dir().join(format!("c10dsim-hw-rdv-check-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let options = |path: PathBuf| HwOptions {
            rendezvous_dir: path,
            ..HwOptions::default()
        };
        options(dir.clone()).check_rendezvous_dir().unwrap();
        assert_eq!(
            std::fs::read_dir(&dir).unwrap().count(),
            0,
            "the probe file is removed"
        );
        let missing = options(dir.join("absent"))
            .check_rendezvous_dir()
            .unwrap_err();
        assert_eq!(missing.exit_code(), 2);
        assert!(
            missing.to_string().contains("absent\" cannot be used")
                && missing.to_string().contains("C10DSIM_RENDEZVOUS_DIR"),
            "{missing}"
        );
        let file = dir.join("file");
        std::fs::write(&file, b"").unwrap();
        let not_a_folder = options(file).check_rendezvous_dir().unwrap_err();
        assert!(
            not_a_folder.to_string().contains("is not a folder"),
            "{not_a_folder}"
        );
        // An empty C10DSIM_RENDEZVOUS_DIR shows as "", not as a blank in the sentence.
        let empty = options(PathBuf::new()).check_rendezvous_dir().unwrap_err();
        assert!(
            empty
                .to_string()
                .contains("the NCCL id folder \"\" cannot be used"),
            "{empty}"
        );
        std::fs::remove_dir_all(dir).unwrap();
        assert!(!HwOptions::default().uses_rendezvous());
        assert!(launched(0, 2, 0).uses_rendezvous());
    }
}
