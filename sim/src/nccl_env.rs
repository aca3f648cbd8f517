//! NCCL's tuning variables as the scenario names them — `NCCL_ALGO`, `NCCL_PROTO`,
//! `NCCL_NVLS_ENABLE` — and which (algorithm, protocol) pairs they leave for a collective.
//!
//! Below both the scenario parser, which validates with it, and the NCCL cost model
//! (`crate::nccl`), which chooses among the pairs it allows, so neither depends on the other;
//! it uses only `crate::collective`.

use crate::collective::CollectiveKind;
use serde::Serialize;

/// An NCCL algorithm, in NCCL's tie-break order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub enum Algorithm {
    Ring,
    Tree,
    /// NVLink SHARP: the NVSwitch reduces; single-node groups on presets with NVSwitch multicast.
    Nvls,
}

impl Algorithm {
    pub const ALL: [Algorithm; 3] = [Algorithm::Ring, Algorithm::Tree, Algorithm::Nvls];

    /// The word NCCL prints in kernel names and accepts in `NCCL_ALGO` (case-insensitively).
    pub fn nccl_name(self) -> &'static str {
        match self {
            Algorithm::Ring => "RING",
            Algorithm::Tree => "TREE",
            Algorithm::Nvls => "NVLS",
        }
    }
}

/// An NCCL protocol, in NCCL's tie-break order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub enum Protocol {
    Ll,
    Ll128,
    Simple,
}

impl Protocol {
    pub const ALL: [Protocol; 3] = [Protocol::Ll, Protocol::Ll128, Protocol::Simple];

    /// The word NCCL prints in kernel names and accepts in `NCCL_PROTO` (case-insensitively).
    pub fn nccl_name(self) -> &'static str {
        match self {
            Protocol::Ll => "LL",
            Protocol::Ll128 => "LL128",
            Protocol::Simple => "SIMPLE",
        }
    }

    pub fn index(self) -> usize {
        self as usize
    }
}

/// Parses an `NCCL_ALGO` value: a comma-separated list of `Ring`, `Tree`, `NVLS`
/// (case-insensitive), or `^list` for every algorithm except those. Returns the allowed set.
pub fn parse_algorithms(text: &str) -> Result<Vec<Algorithm>, String> {
    parse_list(text, &Algorithm::ALL, Algorithm::nccl_name)
}

/// Parses an `NCCL_PROTO` value: a comma-separated list of `LL`, `LL128`, `Simple`
/// (case-insensitive), or `^list` for every protocol except those. Returns the allowed set.
pub fn parse_protocols(text: &str) -> Result<Vec<Protocol>, String> {
    parse_list(text, &Protocol::ALL, Protocol::nccl_name)
}

fn parse_list<T: Copy + PartialEq>(
    text: &str,
    all: &[T],
    name: fn(T) -> &'static str,
) -> Result<Vec<T>, String> {
    let (exclude, list) = match text.strip_prefix('^') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let mut named = Vec::new();
    for word in list.split(',').map(str::trim) {
        let item = all
            .iter()
            .copied()
            .find(|&item| name(item).eq_ignore_ascii_case(word))
            .ok_or_else(|| {
                let known: Vec<&str> = all.iter().map(|&item| name(item)).collect();
                format!(
                    "unknown name {word:?}; expected a comma-separated list of {} (or ^list to exclude)",
                    known.join(", ")
                )
            })?;
        named.push(item);
    }
    let allowed: Vec<T> = all
        .iter()
        .copied()
        .filter(|item| named.contains(item) != exclude)
        .collect();
    if allowed.is_empty() {
        return Err(format!("{text:?} leaves nothing to choose from"));
    }
    Ok(allowed)
}

/// Whether a `cluster.gpu` preset has NVSwitch multicast (NVLink SHARP): the Hopper parts do,
/// the A100 does not.
pub fn preset_has_nvls(preset: &str) -> bool {
    preset != "a100"
}

/// The (algorithm, protocol) pairs that `NCCL_ALGO` (`algorithms`) and `NCCL_PROTO`
/// (`protocols`) allow and NCCL supports for `collective`, in NCCL's tie-break order. Only
/// all_reduce chooses an algorithm (the others always use a ring, whatever `NCCL_ALGO` says);
/// NVLS needs `nvls_possible` (multicast hardware, `NCCL_NVLS_ENABLE`, one node) and runs the
/// Simple protocol only.
pub fn allowed_pairs<'a>(
    collective: CollectiveKind,
    algorithms: Option<&'a [Algorithm]>,
    protocols: Option<&'a [Protocol]>,
    nvls_possible: bool,
) -> impl Iterator<Item = (Algorithm, Protocol)> + 'a {
    let chooses = collective.descriptor().chooses_algorithm;
    let allowed = move |algorithm: Algorithm| algorithms.is_none_or(|a| a.contains(&algorithm));
    Algorithm::ALL
        .into_iter()
        .filter(move |&algorithm| match algorithm {
            Algorithm::Ring => !chooses || allowed(algorithm),
            Algorithm::Tree => chooses && allowed(algorithm),
            Algorithm::Nvls => chooses && allowed(algorithm) && nvls_possible,
        })
        .flat_map(move |algorithm| {
            Protocol::ALL
                .into_iter()
                .filter(move |&protocol| {
                    (algorithm != Algorithm::Nvls || protocol == Protocol::Simple)
                        && protocols.is_none_or(|p| p.contains(&protocol))
                })
                .map(move |protocol| (algorithm, protocol))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_all_reduce_chooses_and_nvls_needs_its_conditions() {
        let tree = [Algorithm::Tree];
        let pairs: Vec<_> =
            allowed_pairs(CollectiveKind::AllGather, Some(&tree), None, true).collect();
        assert_eq!(pairs.len(), 3, "all_gather keeps its ring: {pairs:?}");
        assert!(pairs.iter().all(|&(a, _)| a == Algorithm::Ring));
        let nvls = [Algorithm::Nvls];
        assert_eq!(
            allowed_pairs(CollectiveKind::AllReduce, Some(&nvls), None, false).count(),
            0
        );
        let pairs: Vec<_> =
            allowed_pairs(CollectiveKind::AllReduce, Some(&nvls), None, true).collect();
        assert_eq!(pairs, [(Algorithm::Nvls, Protocol::Simple)]);
        assert_eq!(
            allowed_pairs(CollectiveKind::AllReduce, None, None, true).count(),
            7
        );
    }

    #[test]
    fn lists_parse_like_nccl_and_reject_unknown_names() {
        assert_eq!(
            parse_algorithms("ring,NVLS").unwrap(),
            [Algorithm::Ring, Algorithm::Nvls]
        );
        assert_eq!(
            parse_algorithms("^tree").unwrap(),
            [Algorithm::Ring, Algorithm::Nvls]
        );
        assert_eq!(parse_protocols("Simple").unwrap(), [Protocol::Simple]);
        assert!(parse_protocols("LL256")
            .unwrap_err()
            .contains("LL, LL128, SIMPLE"));
        assert!(parse_algorithms("^ring,tree,nvls")
            .unwrap_err()
            .contains("nothing to choose from"));
    }
}
