//! The entry points of the `hw_options` and `hw_merge` fuzz targets (`fuzz/`, cargo fuzz) and of
//! the stable test that replays their corpus (`analysis/tests/fuzz_corpus.rs`): what `c10dsim hw`
//! reads before it touches a GPU, and the per-process Timelines `c10dsim hw-merge` joins, from
//! any bytes, checked against what the run and the readers of the result rely on. Pure logic:
//! no GPU, no environment, no file.

use crate::options::{Downscale, HwOptions, Layout, StandIn};
use sim::timeline::Timeline;

/// Scenario rank counts and GPU counts every reading is resolved against.
const SCENARIO_RANKS: [u32; 4] = [1, 2, 8, u32::MAX];
const DEVICE_COUNTS: [usize; 3] = [0, 1, 8];

/// The input's lines: `NAME=value` lines are the launcher's environment
/// ([`HwOptions::from_vars`]), any other line a `--downscale` spelling ([`Downscale::parse`]).
/// Each reading that succeeds is resolved into a [`Layout`] for several scenarios and GPU counts,
/// and the layout must keep the promises the run relies on (a GPU that exists, a rank inside the
/// world, a launched world as large as the scenario, a spin that lasts). Accepted when the
/// environment reads and a layout resolves.
pub fn launch_options(data: &[u8]) -> bool {
    let Ok(text) = std::str::from_utf8(data) else {
        return false;
    };
    let mut vars: Vec<(&str, &str)> = Vec::new();
    let mut downscales = vec![Downscale::Off];
    for line in text.lines() {
        match line.split_once('=') {
            Some((name, value)) => vars.push((name, value)),
            None => downscales.extend(Downscale::parse(line).ok()),
        }
    }
    // A name set on two lines: the first counts.
    let get = |name: &str| {
        (vars.iter())
            .find(|(var, _)| *var == name)
            .map(|(_, value)| value.to_string())
    };
    let Ok(read) = HwOptions::from_vars(get) else {
        return false;
    };
    if let Some(launch) = read.launch {
        assert!(launch.rank < launch.world_size, "{launch:?}");
    }
    let mut accepted = false;
    for downscale in downscales {
        if let Downscale::RankZero(StandIn::Spin { duration_ns }) = downscale {
            assert!(duration_ns > 0, "a spin stand-in that lasts no time");
        }
        let options = HwOptions {
            downscale,
            ..read.clone()
        };
        for scenario_ranks in SCENARIO_RANKS {
            for device_count in DEVICE_COUNTS {
                let Ok(layout) = Layout::resolve(scenario_ranks, &options, device_count) else {
                    continue;
                };
                assert!(layout.device < device_count, "{layout:?} of {device_count}");
                assert!(layout.rank < layout.world, "{layout:?}");
                assert!(layout.world <= scenario_ranks, "{layout:?}");
                if layout.launched {
                    assert_eq!(layout.world, scenario_ranks, "{layout:?}");
                }
                accepted = true;
            }
        }
    }
    accepted
}

/// `c10dsim hw-merge PARTS…`: the parts are the input's NUL-separated pieces, each read as a
/// Timeline (`Timeline::from_json`) and joined by [`crate::merge_ranks`]; what the merge writes
/// must read back as a Timeline, as `diff`, `run --against` and `calibrate` read it, else it
/// panics, as the merge's bug. Accepted when the parts merge.
pub fn merge_parts(data: &[u8]) -> bool {
    let Ok(text) = std::str::from_utf8(data) else {
        return false;
    };
    let Ok(parts) = (text.split('\0').enumerate())
        .map(|(index, part)| Timeline::from_json(part).map(|t| (format!("part{index}"), t)))
        .collect::<Result<Vec<_>, _>>()
    else {
        return false;
    };
    let Ok(merged) = crate::merge_ranks(parts) else {
        return false;
    };
    let written = serde_json::to_string(&merged).expect("a Timeline serialises");
    if let Err(why) = Timeline::from_json(&written) {
        panic!("the merged Timeline does not read back: {why}\n{written}");
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_torchrun_environment_resolves_and_a_bad_one_is_refused() {
        assert!(launch_options(
            b"RANK=1\nWORLD_SIZE=2\nLOCAL_RANK=1\nmodel\n"
        ));
        assert!(!launch_options(b"RANK=2\nWORLD_SIZE=2\n"));
        assert!(!launch_options(b"\xff"));
    }

    #[test]
    fn a_spin_shorter_than_a_nanosecond_is_refused() {
        // Found while writing the target: 0.1 ns was a spin of 0 ns, which failed its layout
        // check (kept in fuzz/regressions/hw_options/).
        assert!(Downscale::parse("spin:0.0001").is_err());
        assert!(Downscale::parse("spin:0.0006").is_err());
        assert_eq!(
            Downscale::parse("spin:0.001").unwrap(),
            Downscale::RankZero(StandIn::Spin { duration_ns: 1 })
        );
    }
}
