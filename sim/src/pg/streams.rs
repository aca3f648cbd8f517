//! The streams of a rank as ProcessGroupNCCL and the program see them: the scenario's streams
//! (the default one first), then one internal NCCL stream per group the rank belongs to, in
//! group order, whether or not the program uses it (R9), at high priority where the group or
//! `TORCH_NCCL_HIGH_PRIORITY` asks; a send/recv pair on an eager world's communicator has none
//! of its own (R11). Both engines lay out a rank's streams from here; the
//! lowering names them by these indices.

use crate::scenario::{Priority, Scenario};
use crate::timeline::{StreamInfo, StreamKind, StreamRef};

/// Every stream of `rank`, indexed by [`StreamRef`].
pub fn rank_streams(scenario: &Scenario, rank: u32) -> Vec<StreamInfo> {
    let mut streams: Vec<StreamInfo> = scenario
        .streams
        .iter()
        .enumerate()
        .map(|(index, stream)| StreamInfo {
            name: stream.name.clone(),
            kind: if index == 0 {
                StreamKind::Default
            } else {
                StreamKind::User
            },
            high_priority: stream.priority == Priority::High,
        })
        .collect();
    for (group, declared) in scenario.groups.iter().enumerate() {
        if declared.has_rank(rank) && scenario.communicator(group) == group {
            streams.push(StreamInfo {
                name: format!("nccl:{}", declared.name),
                kind: StreamKind::Nccl,
                high_priority: scenario.group_stream_high_priority(group),
            });
        }
    }
    streams
}

/// Per group: its internal stream on `rank` (R9), `None` where the rank is not a member; a
/// pair on the eager world's communicator has the world's (R11).
pub fn group_streams(scenario: &Scenario, rank: u32) -> Vec<Option<StreamRef>> {
    let mut next = scenario.streams.len();
    let mut streams: Vec<Option<StreamRef>> = Vec::with_capacity(scenario.groups.len());
    for (group, declared) in scenario.groups.iter().enumerate() {
        let communicator = scenario.communicator(group);
        let stream = if communicator != group {
            declared
                .has_rank(rank)
                .then_some(streams[communicator])
                .flatten()
        } else {
            declared.has_rank(rank).then(|| {
                next += 1;
                (next - 1) as StreamRef
            })
        };
        streams.push(stream);
    }
    streams
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::parse;

    #[test]
    fn internal_streams_follow_the_scenarios_one_per_member_group_r9() {
        let text = "[cluster]\nranks = 4\n[env]\n[streams]\nside = { priority = \"high\" }\n[groups.pair]\nranks = [0, 1]\nhigh_priority = true\n[groups.far]\nranks = [2, 3]\n[[op]]\nkernel = { us = 1, sms = 1 }\n";
        let scenario = parse("streams.toml", text).unwrap();
        let names: Vec<(String, StreamKind, bool)> = rank_streams(&scenario, 0)
            .into_iter()
            .map(|s| (s.name, s.kind, s.high_priority))
            .collect();
        assert_eq!(
            names,
            [
                ("default".to_string(), StreamKind::Default, false),
                ("side".to_string(), StreamKind::User, true),
                ("nccl:world".to_string(), StreamKind::Nccl, false),
                ("nccl:pair".to_string(), StreamKind::Nccl, true),
            ]
        );
        assert_eq!(group_streams(&scenario, 0), [Some(2), Some(3), None]);
        assert_eq!(group_streams(&scenario, 3), [Some(2), None, Some(3)]);
    }
}
