//! Symmetric ranks (docs/scale.md): before a run, the ranks are partitioned into classes by
//! everything that can make one behave differently from another; the engine simulates one
//! representative per class (its lowest rank) and counts it as its class's members wherever
//! ranks meet (a collective's rendezvous, a lazy communicator init), so that 100,000 identical
//! ranks with three stragglers cost about four.
//!
//! A rank's signature: the ops restricted to some ranks (`ranks = [...]`) that it runs, the
//! `[[perturb]]`s and `[[fault]]`s naming it, the groups it is a member of, and whether it is
//! the root of a lazily created communicator (it publishes the NCCL unique id, R8, R29). A
//! rank that draws a straggler delay from a distribution (its own random stream) is a class of
//! its own. Nothing folds when kernel jitter or the rank speed spread draw per-rank values, when
//! the program has point-to-point traffic (a rank's peer is its own), or when folding is off
//! (`cluster.fold = false`, `--no-fold`): then every rank is simulated.
//!
//! The partition is also what summarises the output: findings and watchdog records are made
//! once per class, folded or not, so that a run with folding and one without give the same
//! Timeline once the folded one is expanded (`Timeline::expand`).

use crate::random::Delay;
use crate::ranks::RankSet;
use crate::scenario::{GroupId, OpKind, Scenario};
use rustc_hash::FxHashMap;

/// The classes of a run and how the engine's simulated ranks map onto them.
#[derive(Debug, Clone)]
pub struct Classes {
    /// Per class, in order of their lowest rank: its ranks.
    members: Vec<RankSet>,
    /// Per rank: its class.
    class_of: Vec<u32>,
    /// One simulated rank per class (else one per rank).
    folded: bool,
    /// Per group: the simulated ranks that are members.
    group_simulated: Vec<Vec<u32>>,
    /// Per group: its classes.
    group_classes: Vec<Vec<u32>>,
}

impl Classes {
    /// The classes of `scenario`'s ranks; simulated once each when `fold` (and the scenario's
    /// `cluster.fold`) allow.
    pub fn of(scenario: &Scenario, fold: bool) -> Classes {
        let ranks = scenario.cluster.ranks;
        let class_of = match signatures(scenario) {
            None => (0..ranks).collect(),
            Some(signatures) => {
                let mut class_by_signature: FxHashMap<Vec<u32>, u32> = FxHashMap::default();
                signatures
                    .into_iter()
                    .map(|signature| {
                        let next = class_by_signature.len() as u32;
                        *class_by_signature.entry(signature).or_insert(next)
                    })
                    .collect()
            }
        };
        Classes::from_partition(scenario, class_of, fold && scenario.cluster.fold)
    }

    /// Every rank a class of its own, simulated and reported one by one (`--detail ranks`).
    pub fn per_rank(scenario: &Scenario) -> Classes {
        Classes::from_partition(scenario, (0..scenario.cluster.ranks).collect(), false)
    }

    fn from_partition(scenario: &Scenario, class_of: Vec<u32>, folded: bool) -> Classes {
        let count = class_of.iter().max().map_or(0, |&c| c as usize + 1);
        let mut members = vec![RankSet::default(); count];
        for (rank, &class) in class_of.iter().enumerate() {
            members[class as usize].push(rank as u32);
        }
        let folded = folded && count < class_of.len();
        let mut classes = Classes {
            members,
            class_of,
            folded,
            group_simulated: Vec::new(),
            group_classes: Vec::new(),
        };
        for group in &scenario.groups {
            let mut in_group: Vec<u32> = group
                .ranks
                .iter()
                .map(|&r| classes.class_of[r as usize])
                .collect();
            in_group.sort_unstable();
            in_group.dedup();
            let simulated = if folded {
                in_group.clone()
            } else {
                group.ranks.clone()
            };
            classes.group_simulated.push(simulated);
            classes.group_classes.push(in_group);
        }
        classes
    }

    /// Whether the engine simulates one rank per class.
    pub fn folded(&self) -> bool {
        self.folded
    }

    /// How many classes.
    pub fn count(&self) -> usize {
        self.members.len()
    }

    /// How many ranks the engine simulates.
    pub fn simulated(&self) -> u32 {
        if self.folded {
            self.members.len() as u32
        } else {
            self.class_of.len() as u32
        }
    }

    /// The class of simulated rank `simulated`.
    pub fn class_of_simulated(&self, simulated: u32) -> u32 {
        if self.folded {
            simulated
        } else {
            self.class_of[simulated as usize]
        }
    }

    /// The rank a simulated rank is: its class's lowest when folded.
    pub fn rank_of(&self, simulated: u32) -> u32 {
        if self.folded {
            self.members[simulated as usize]
                .first()
                .expect("a class has members")
        } else {
            simulated
        }
    }

    /// The simulated rank that stands for `rank`.
    pub fn simulated_of(&self, rank: u32) -> u32 {
        if self.folded {
            self.class_of[rank as usize]
        } else {
            rank
        }
    }

    /// How many ranks a simulated rank counts as.
    pub fn weight(&self, simulated: u32) -> u32 {
        if self.folded {
            self.members[simulated as usize].count() as u32
        } else {
            1
        }
    }

    /// The highest rank a simulated rank stands for.
    pub fn highest_rank(&self, simulated: u32) -> u32 {
        if self.folded {
            self.members[simulated as usize]
                .last()
                .expect("a class has members")
        } else {
            simulated
        }
    }

    /// Whether what a simulated rank finds and logs is kept: a class's findings and watchdog
    /// records are its lowest rank's, which stand for the others' (folded or not).
    pub fn reports(&self, simulated: u32) -> bool {
        self.folded
            || self.members[self.class_of[simulated as usize] as usize].first() == Some(simulated)
    }

    /// The ranks of simulated rank `simulated`'s class.
    pub fn class_members(&self, simulated: u32) -> &RankSet {
        &self.members[self.class_of_simulated(simulated) as usize]
    }

    /// The ranks of class `class`.
    pub fn members(&self, class: u32) -> &RankSet {
        &self.members[class as usize]
    }

    /// The simulated rank of class `class`'s lowest rank.
    pub fn simulated_of_class(&self, class: u32) -> u32 {
        if self.folded {
            class
        } else {
            self.members[class as usize]
                .first()
                .expect("a class has members")
        }
    }

    /// The simulated ranks in `group`.
    pub fn group_simulated(&self, group: GroupId) -> &[u32] {
        &self.group_simulated[group]
    }

    /// The classes in `group`, in order of their lowest rank.
    pub fn group_classes(&self, group: GroupId) -> &[u32] {
        &self.group_classes[group]
    }
}

/// Each rank's signature, or `None` when no two ranks can be folded.
fn signatures(scenario: &Scenario) -> Option<Vec<Vec<u32>>> {
    let per_rank_draws =
        scenario.cluster.kernel_jitter > 0.0 || scenario.cluster.rank_speed_spread > 0.0;
    let point_to_point = scenario.groups.iter().any(|g| g.point_to_point)
        || scenario.ops.iter().any(|op| match &op.kind {
            OpKind::BatchP2p { .. } => true,
            OpKind::Collective { collective, .. } => {
                collective.descriptor().counterpart != *collective
            }
            _ => false,
        });
    if per_rank_draws || point_to_point {
        return None;
    }
    let mut signatures: Vec<Vec<u32>> = vec![Vec::new(); scenario.cluster.ranks as usize];
    let mut feature = 0u32;
    let mut mark = |ranks: &mut dyn Iterator<Item = u32>, feature: u32| {
        for rank in ranks {
            signatures[rank as usize].push(feature);
        }
    };
    for op in &scenario.ops {
        if let Some(ranks) = &op.ranks {
            mark(&mut ranks.iter().copied(), feature);
        }
        feature += 1;
    }
    for perturbation in &scenario.perturbations {
        mark(&mut perturbation.ranks.iter().copied(), feature);
        feature += 1;
    }
    for fault in &scenario.faults {
        mark(&mut fault.ranks.iter().copied(), feature);
        feature += 1;
    }
    for group in &scenario.groups {
        mark(&mut group.ranks.iter().copied(), feature);
        feature += 1;
        if !group.eager_init {
            // The root publishes the NCCL unique id; the others wait for it (R8, R29).
            if let Some(&root) = group.ranks.first() {
                mark(&mut std::iter::once(root), feature);
            }
        }
        feature += 1;
    }
    // A rank that draws a delay from its own random stream is like no other.
    for perturbation in &scenario.perturbations {
        let fixed = |delay: &Delay| matches!(delay, Delay::Fixed { .. });
        if fixed(&perturbation.host_delay) && fixed(&perturbation.gpu_delay) {
            continue;
        }
        for &rank in &perturbation.ranks {
            signatures[rank as usize].extend([u32::MAX, rank]);
        }
    }
    Some(signatures)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::parse;

    fn classes(text: &str) -> Vec<String> {
        let scenario = parse("c.toml", text).unwrap();
        let classes = Classes::of(&scenario, true);
        (0..classes.count() as u32)
            .map(|c| classes.members(c).to_string())
            .collect()
    }

    #[test]
    fn ranks_fold_by_what_can_make_them_differ() {
        let base = "[cluster]\nranks = 8\n[groups.world]\neager_init = true\n[tensors]\nx = \"1MiB\"\n[[op]]\nlabel = \"ar\"\nall_reduce = \"x\"\n";
        assert_eq!(classes(base), ["0-7"]);
        let fault = format!("{base}[[fault]]\nranks = [3]\nat = \"ar\"\nkind = \"hang\"\n");
        assert_eq!(classes(&fault), ["0-2,4-7", "3"]);
        let restricted = format!("{base}[[op]]\nranks = [0, 1]\ngemm = [64, 64, 64]\n");
        assert_eq!(classes(&restricted), ["0-1", "2-7"]);
        let fixed =
            format!("{base}[[perturb]]\nranks = [5, 6]\nbefore = \"ar\"\nhost_delay_us = 500\n");
        assert_eq!(classes(&fixed), ["0-4,7", "5-6"]);
        let drawn = format!(
            "{base}[[perturb]]\nranks = [5, 6]\nbefore = \"ar\"\nhost_delay_us = {{ exponential = {{ mean = 500 }} }}\n"
        );
        assert_eq!(classes(&drawn), ["0-4,7", "5", "6"]);
        let jitter = base.replace("ranks = 8", "ranks = 8\nkernel_jitter_pct = 1");
        assert_eq!(classes(&jitter).len(), 8);
        let groups = format!("{base}[groups.half]\nranks = [0, 1, 2, 3]\neager_init = true\n");
        assert_eq!(classes(&groups), ["0-3", "4-7"]);
    }

    #[test]
    fn the_root_of_a_lazily_created_communicator_is_a_class_of_its_own() {
        let text = "[cluster]\nranks = 4\n[groups.world]\neager_init = false\n[tensors]\nx = \"1MiB\"\n[[op]]\nall_reduce = \"x\"\n";
        assert_eq!(classes(text), ["0", "1-3"]);
    }

    #[test]
    fn unfolded_classes_simulate_every_rank_and_report_once_per_class() {
        let text = "[cluster]\nranks = 4\n[groups.world]\neager_init = true\n[tensors]\nx = \"1MiB\"\n[[op]]\nlabel = \"ar\"\nall_reduce = \"x\"\n[[fault]]\nranks = [2]\nat = \"ar\"\nkind = \"hang\"\n";
        let scenario = parse("c.toml", text).unwrap();
        let folded = Classes::of(&scenario, true);
        assert_eq!(folded.simulated(), 2);
        assert_eq!(
            (folded.rank_of(1), folded.weight(0), folded.highest_rank(0)),
            (2, 3, 3)
        );
        let unfolded = Classes::of(&scenario, false);
        assert_eq!(unfolded.simulated(), 4);
        assert_eq!(
            (0..4).map(|r| unfolded.reports(r)).collect::<Vec<_>>(),
            [true, false, true, false]
        );
        assert_eq!(unfolded.class_members(3).to_string(), "0-1,3");
        assert_eq!(Classes::per_rank(&scenario).count(), 4);
    }
}
