//! Run options: which rank this process is, where the NCCL unique id is exchanged, and the
//! single-GPU downscale mode. Everything here is plain logic, tested without a GPU.

use crate::error::HwError;
use std::path::PathBuf;

/// The rank of this process as a launcher (torchrun, srun, mpirun) describes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LaunchEnv {
    /// Global rank (`RANK`).
    pub rank: u32,
    /// Number of processes (`WORLD_SIZE`).
    pub world_size: u32,
    /// Rank on this node (`LOCAL_RANK`): the GPU ordinal this process drives.
    pub local_rank: u32,
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

/// Options of [`crate::run_scenario`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HwOptions {
    /// This process's rank, from the launcher; `None` for a plain single process.
    pub launch: Option<LaunchEnv>,
    /// Folder shared by all ranks where each group's first rank publishes the NCCL unique id
    /// (R29). One host: any local folder; several hosts: a shared file system.
    pub rendezvous_dir: PathBuf,
    /// Distinguishes this job's id files from an earlier job's in the same folder.
    pub run_key: String,
    pub downscale: Downscale,
    /// Overrides every group's `timeout` (`init_process_group(timeout=…)`, default 10 min) for
    /// the watchdog, blocking waits and the id rendezvous (R26, R15, R29).
    pub timeout_ns: Option<u64>,
    /// GPU ordinal to drive; `None` means `LOCAL_RANK` (0 for a plain process). Set to 0 when
    /// the launcher gave each process exactly one visible GPU (`CUDA_VISIBLE_DEVICES`, as
    /// `srun --gpus-per-task=1` does).
    pub device: Option<usize>,
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
        }
    }
}

impl HwOptions {
    /// Reads the launcher's variables from the process environment (see [`HwOptions::from_vars`]).
    pub fn from_env() -> Result<HwOptions, HwError> {
        HwOptions::from_vars(|name| std::env::var(name).ok())
    }

    /// Reads rank, world size and local rank from the first launcher whose variables are set:
    /// torchrun (`RANK`, `WORLD_SIZE`, `LOCAL_RANK`), srun (`SLURM_PROCID`, `SLURM_NTASKS`,
    /// `SLURM_LOCALID`), Open MPI (`OMPI_COMM_WORLD_RANK`, `…_SIZE`, `…_LOCAL_RANK`).
    /// `C10DSIM_RENDEZVOUS_DIR` overrides the id folder; the run key comes from
    /// `TORCHELASTIC_RUN_ID`, else `SLURM_JOB_ID`.`SLURM_STEP_ID`, else
    /// `MASTER_ADDR`:`MASTER_PORT`. A launched process whose `CUDA_VISIBLE_DEVICES` names one
    /// GPU drives that one (ordinal 0).
    pub fn from_vars(get: impl Fn(&str) -> Option<String>) -> Result<HwOptions, HwError> {
        const LAUNCHERS: [[&str; 3]; 3] = [
            ["RANK", "WORLD_SIZE", "LOCAL_RANK"],
            ["SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"],
            [
                "OMPI_COMM_WORLD_RANK",
                "OMPI_COMM_WORLD_SIZE",
                "OMPI_COMM_WORLD_LOCAL_RANK",
            ],
        ];
        let number = |name: &str, text: String| -> Result<u32, HwError> {
            text.trim().parse::<u32>().map_err(|_| {
                HwError::BadOptions(format!("{name}={text:?} is not a non-negative integer"))
            })
        };
        let mut launch = None;
        for [rank_var, world_var, local_var] in LAUNCHERS {
            let (Some(rank), Some(world)) = (get(rank_var), get(world_var)) else {
                continue;
            };
            let rank = number(rank_var, rank)?;
            let world_size = number(world_var, world)?;
            let local_rank = match get(local_var) {
                Some(local) => number(local_var, local)?,
                None => rank,
            };
            if world_size == 0 || rank >= world_size {
                return Err(HwError::BadOptions(format!(
                    "{rank_var}={rank} with {world_var}={world_size}: the rank must be below the world size"
                )));
            }
            launch = Some(LaunchEnv {
                rank,
                world_size,
                local_rank,
            });
            break;
        }
        let run_key = get("TORCHELASTIC_RUN_ID")
            .or_else(|| {
                get("SLURM_JOB_ID")
                    .map(|job| format!("{job}.{}", get("SLURM_STEP_ID").unwrap_or_default()))
            })
            .or_else(|| {
                let addr = get("MASTER_ADDR")?;
                Some(format!("{addr}:{}", get("MASTER_PORT").unwrap_or_default()))
            })
            .unwrap_or_else(|| "local".to_string());
        let rendezvous_dir = get("C10DSIM_RENDEZVOUS_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(std::env::temp_dir);
        let one_visible_gpu = get("CUDA_VISIBLE_DEVICES")
            .is_some_and(|list| !list.trim().is_empty() && !list.contains(','));
        Ok(HwOptions {
            launch,
            rendezvous_dir,
            run_key,
            device: (launch.is_some() && one_visible_gpu).then_some(0),
            ..HwOptions::default()
        })
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
    /// Decides the layout, or says at once why the scenario cannot run here: NCCL refuses two
    /// ranks of one communicator on one GPU, so every rank needs its own GPU and process.
    pub fn resolve(
        scenario_ranks: u32,
        options: &HwOptions,
        device_count: usize,
    ) -> Result<Layout, HwError> {
        if device_count == 0 {
            return Err(HwError::NoDevice(
                "the driver reports 0 CUDA devices".to_string(),
            ));
        }
        match (options.launch, options.downscale) {
            (Some(launch), Downscale::RankZero(_)) if launch.world_size > 1 => {
                Err(HwError::Layout(format!(
                    "downscale runs rank 0 alone in one process, but the launcher started {} processes; \
                     start one process, or drop the downscale to run all {scenario_ranks} ranks",
                    launch.world_size
                )))
            }
            (Some(launch), Downscale::Off) => {
                if launch.world_size != scenario_ranks {
                    return Err(HwError::Layout(format!(
                        "the scenario has {scenario_ranks} ranks but the launcher started {} processes \
                         (WORLD_SIZE); start exactly {scenario_ranks}, one per GPU",
                        launch.world_size
                    )));
                }
                let device = options.device.unwrap_or(launch.local_rank as usize);
                if device >= device_count {
                    return Err(HwError::Layout(format!(
                        "LOCAL_RANK {} needs GPU {device} but this node has {device_count} GPU(s); one GPU \
                         hosts one rank (NCCL refuses two ranks of a communicator on one GPU): start at \
                         most {device_count} processes per node",
                        launch.local_rank
                    )));
                }
                Ok(Layout {
                    rank: launch.rank,
                    world: launch.world_size,
                    device,
                    launched: true,
                    stand_in: None,
                })
            }
            (launch, Downscale::RankZero(stand_in)) => Ok(Layout {
                rank: 0,
                world: 1,
                device: options
                    .device
                    .unwrap_or(launch.map_or(0, |l| l.local_rank as usize))
                    .min(device_count - 1),
                launched: false,
                stand_in: (scenario_ranks > 1).then_some(stand_in),
            }),
            (None, Downscale::Off) => {
                if scenario_ranks == 1 {
                    return Ok(Layout {
                        rank: 0,
                        world: 1,
                        device: 0,
                        launched: false,
                        stand_in: None,
                    });
                }
                let gpus = if device_count >= scenario_ranks as usize {
                    format!(
                        "this node has {device_count} GPUs, enough: launch one process per GPU with \
                         `torchrun --no-python --nproc-per-node={scenario_ranks} c10dsim hw FILE`"
                    )
                } else {
                    format!(
                        "this node has {device_count} GPU(s), and one GPU hosts one rank (NCCL refuses \
                         two ranks of a communicator on one GPU): run on {scenario_ranks} GPUs with one \
                         process each (torchrun/srun)"
                    )
                };
                Err(HwError::Layout(format!(
                    "the scenario has {scenario_ranks} ranks but this is a single process (no RANK/WORLD_SIZE \
                     in the environment); {gpus}, or ask for the downscale (rank 0 alone, 1-rank \
                     communicators, see docs/hw.md)"
                )))
            }
        }
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

    #[test]
    fn torchrun_variables_give_the_rank() {
        let options = HwOptions::from_vars(vars(&[
            ("RANK", "3"),
            ("WORLD_SIZE", "8"),
            ("LOCAL_RANK", "3"),
            ("TORCHELASTIC_RUN_ID", "job42"),
            ("C10DSIM_RENDEZVOUS_DIR", "/shared/ids"),
        ]))
        .unwrap();
        assert_eq!(
            options.launch,
            Some(LaunchEnv {
                rank: 3,
                world_size: 8,
                local_rank: 3
            })
        );
        assert_eq!(options.run_key, "job42");
        assert_eq!(options.rendezvous_dir, PathBuf::from("/shared/ids"));
    }

    #[test]
    fn slurm_and_mpi_variables_are_read_and_bad_ones_refused() {
        let slurm = HwOptions::from_vars(vars(&[
            ("SLURM_PROCID", "5"),
            ("SLURM_NTASKS", "16"),
            ("SLURM_LOCALID", "1"),
            ("SLURM_JOB_ID", "77"),
            ("SLURM_STEP_ID", "0"),
        ]))
        .unwrap();
        assert_eq!(slurm.launch.unwrap().local_rank, 1);
        assert_eq!(slurm.run_key, "77.0");
        let mpi = HwOptions::from_vars(vars(&[
            ("OMPI_COMM_WORLD_RANK", "1"),
            ("OMPI_COMM_WORLD_SIZE", "2"),
        ]))
        .unwrap();
        assert_eq!(mpi.launch.unwrap().local_rank, 1);
        assert!(HwOptions::from_vars(vars(&[("RANK", "2"), ("WORLD_SIZE", "2")])).is_err());
        assert!(HwOptions::from_vars(vars(&[("RANK", "x"), ("WORLD_SIZE", "2")])).is_err());
        let plain = HwOptions::from_vars(vars(&[])).unwrap();
        assert_eq!(plain.launch, None);
        assert_eq!(plain.run_key, "local");
    }

    #[test]
    fn one_visible_gpu_per_task_is_gpu_zero() {
        let srun = HwOptions::from_vars(vars(&[
            ("SLURM_PROCID", "3"),
            ("SLURM_NTASKS", "4"),
            ("SLURM_LOCALID", "3"),
            ("CUDA_VISIBLE_DEVICES", "3"),
        ]))
        .unwrap();
        assert_eq!(srun.device, Some(0));
        let layout = Layout::resolve(4, &srun, 1).unwrap();
        assert_eq!((layout.rank, layout.device), (3, 0));
        let all = HwOptions::from_vars(vars(&[
            ("RANK", "1"),
            ("WORLD_SIZE", "2"),
            ("LOCAL_RANK", "1"),
            ("CUDA_VISIBLE_DEVICES", "0,1"),
        ]))
        .unwrap();
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
    fn launched_ranks_must_match_the_scenario_and_the_gpus() {
        let launched = |rank, world, local| HwOptions {
            launch: Some(LaunchEnv {
                rank,
                world_size: world,
                local_rank: local,
            }),
            ..HwOptions::default()
        };
        let ok = Layout::resolve(4, &launched(2, 4, 2), 4).unwrap();
        assert_eq!((ok.rank, ok.world, ok.device, ok.launched), (2, 4, 2, true));
        assert!(Layout::resolve(8, &launched(2, 4, 2), 4)
            .unwrap_err()
            .to_string()
            .contains("WORLD_SIZE"));
        assert!(Layout::resolve(4, &launched(3, 4, 3), 2)
            .unwrap_err()
            .to_string()
            .contains("LOCAL_RANK 3"));
        let mut down = launched(0, 2, 0);
        down.downscale = Downscale::RankZero(StandIn::Nccl);
        assert!(Layout::resolve(2, &down, 2).is_err());
    }
}
