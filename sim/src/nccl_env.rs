//! NCCL's tuning variables as the scenario names them — `NCCL_ALGO`, `NCCL_PROTO`,
//! `NCCL_NVLS_ENABLE` — and which (algorithm, protocol) pairs they leave for a collective.
//!
//! Below both the scenario parser, which validates with it, and the NCCL cost model
//! (`crate::nccl`), which chooses among the pairs it allows, so neither depends on the other;
//! it uses only `crate::collective`.

use crate::collective::{CollectiveKind, NcclFunction};
use serde::Serialize;

/// An NCCL algorithm that c10dsim models, in the model's tie-break order (NCCL's own numbering
/// puts tree before ring; exact ties do not arise in the calibrated model).
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

/// An NCCL protocol, in NCCL's order (its tie-break order too).
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

/// NCCL's algorithms that c10dsim does not model: `NCCL_ALGO` may name them (to exclude them,
/// typically), but they add nothing to the choice.
const UNMODELLED_ALGORITHMS: [&str; 4] = ["CollNetDirect", "CollNetChain", "NVLSTree", "PAT"];

/// An `NCCL_ALGO` or `NCCL_PROTO` value: what each of NCCL's functions may use. NCCL (2.24 and
/// later) reads `list` — a comma-separated list, or `^list` for everything but it — for every
/// function, then `;function:list` entries that replace it for the functions they name
/// (`ring;allreduce:tree,ring`); names are case-insensitive.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Selection<T> {
    /// What the unprefixed first entry allows (everything, where there is none): sends and
    /// receives, which no function prefix names, read this one.
    pub unprefixed: Vec<T>,
    /// What each function may use, indexed by [`NcclFunction::index`].
    pub per_function: [Vec<T>; 5],
}

impl<T> Selection<T> {
    /// What `collective` may use.
    pub fn for_collective(&self, collective: CollectiveKind) -> &[T] {
        match collective.descriptor().nccl_function {
            Some(function) => &self.per_function[function.index()],
            None => &self.unprefixed,
        }
    }
}

/// Parses an `NCCL_ALGO` value over `Ring`, `Tree`, `NVLS` and the algorithms NCCL has that
/// c10dsim does not model (`CollNetDirect`, `CollNetChain`, `NVLSTree`, `PAT`: accepted, never
/// chosen).
pub fn parse_algorithms(text: &str) -> Result<Selection<Algorithm>, String> {
    parse_selection(
        text,
        &Algorithm::ALL,
        Algorithm::nccl_name,
        &UNMODELLED_ALGORITHMS,
    )
}

/// Parses an `NCCL_PROTO` value over `LL`, `LL128`, `Simple`.
pub fn parse_protocols(text: &str) -> Result<Selection<Protocol>, String> {
    parse_selection(text, &Protocol::ALL, Protocol::nccl_name, &[])
}

fn parse_selection<T: Copy + PartialEq>(
    text: &str,
    all: &[T],
    name: fn(T) -> &'static str,
    unmodelled: &[&str],
) -> Result<Selection<T>, String> {
    let mut selection = Selection {
        unprefixed: all.to_vec(),
        per_function: std::array::from_fn(|_| all.to_vec()),
    };
    let entries = text.split(';').filter(|entry| !entry.is_empty());
    for (position, entry) in entries.enumerate() {
        let (function, list) = match entry.split_once(':') {
            Some((prefix, list)) => {
                let function = NcclFunction::ALL
                    .into_iter()
                    .find(|function| function.nccl_name().eq_ignore_ascii_case(prefix.trim()))
                    .ok_or_else(|| {
                        let known: Vec<&str> =
                            NcclFunction::ALL.iter().map(|f| f.nccl_name()).collect();
                        format!(
                            "unknown function {prefix:?} before ':'; expected one of {}",
                            known.join(", ")
                        )
                    })?;
                (Some(function), list)
            }
            None if position == 0 => (None, entry),
            None => {
                return Err(format!(
                    "every entry after the first needs a function prefix (`allreduce:{entry}`), as NCCL requires"
                ))
            }
        };
        let allowed = parse_list(list, all, name, unmodelled)?;
        match function {
            Some(function) => selection.per_function[function.index()] = allowed,
            None => {
                selection.per_function = std::array::from_fn(|_| allowed.clone());
                selection.unprefixed = allowed;
            }
        }
    }
    Ok(selection)
}

/// One comma-separated list, `^` first to invert it, into the modelled items it allows.
fn parse_list<T: Copy + PartialEq>(
    list: &str,
    all: &[T],
    name: fn(T) -> &'static str,
    unmodelled: &[&str],
) -> Result<Vec<T>, String> {
    let (exclude, list) = match list.strip_prefix('^') {
        Some(rest) => (true, rest),
        None => (false, list),
    };
    let mut named = Vec::new();
    let words = list
        .split(',')
        .map(str::trim)
        .filter(|word| !word.is_empty());
    let mut any = false;
    for word in words {
        any = true;
        if unmodelled
            .iter()
            .any(|known| known.eq_ignore_ascii_case(word))
        {
            continue;
        }
        let item = all
            .iter()
            .copied()
            .find(|&item| name(item).eq_ignore_ascii_case(word))
            .ok_or_else(|| {
                let known: Vec<&str> = all
                    .iter()
                    .map(|&item| name(item))
                    .chain(unmodelled.iter().copied())
                    .collect();
                format!(
                    "unknown name {word:?}; expected a comma-separated list of {} (or ^list to exclude), \
                     optionally per function (`ring;allreduce:tree`)",
                    known.join(", ")
                )
            })?;
        named.push(item);
    }
    if !any {
        return Err(format!("empty list {list:?}"));
    }
    Ok(all
        .iter()
        .copied()
        .filter(|item| named.contains(item) != exclude)
        .collect())
}

/// Whether a `cluster.gpu` preset has NVSwitch multicast (NVLink SHARP): the Hopper parts do,
/// the A100 does not.
pub fn preset_has_nvls(preset: &str) -> bool {
    preset != "a100"
}

/// The (algorithm, protocol) pairs that `NCCL_ALGO` (`algorithms`) and `NCCL_PROTO`
/// (`protocols`) allow for `collective` and that c10dsim models, in tie-break order. Every
/// collective has a ring, all_reduce also a tree and NVLS; as NCCL 2.24 and later, a collective
/// whose `NCCL_ALGO` entry leaves none of its algorithms gets no pair (NCCL fails the call; it
/// no longer falls back to the ring). Sends and receives (all_to_all) keep their ring whatever
/// `NCCL_ALGO` says. NVLS needs `nvls_possible` (multicast hardware, `NCCL_NVLS_ENABLE`, one
/// node) and runs the Simple protocol only.
pub fn allowed_pairs<'a>(
    collective: CollectiveKind,
    algorithms: Option<&'a Selection<Algorithm>>,
    protocols: Option<&'a Selection<Protocol>>,
    nvls_possible: bool,
) -> impl Iterator<Item = (Algorithm, Protocol)> + 'a {
    let function = collective.descriptor().nccl_function;
    let all_reduce = function == Some(NcclFunction::AllReduce);
    let algorithms = algorithms
        .filter(|_| function.is_some())
        .map(|selection| selection.for_collective(collective));
    let protocols = protocols.map(|selection| selection.for_collective(collective));
    let allowed = move |algorithm: Algorithm| algorithms.is_none_or(|a| a.contains(&algorithm));
    Algorithm::ALL
        .into_iter()
        .filter(move |&algorithm| match algorithm {
            Algorithm::Ring => allowed(algorithm),
            Algorithm::Tree => all_reduce && allowed(algorithm),
            Algorithm::Nvls => all_reduce && allowed(algorithm) && nvls_possible,
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

    fn pairs(
        collective: CollectiveKind,
        algo: Option<&str>,
        proto: Option<&str>,
    ) -> Vec<(Algorithm, Protocol)> {
        let algorithms = algo.map(|text| parse_algorithms(text).unwrap());
        let protocols = proto.map(|text| parse_protocols(text).unwrap());
        allowed_pairs(collective, algorithms.as_ref(), protocols.as_ref(), true).collect()
    }

    #[test]
    fn nccl_algo_applies_to_every_collective_without_a_ring_fallback() {
        // NCCL >= 2.24: NCCL_ALGO=Tree leaves all_gather nothing (the call fails).
        assert_eq!(pairs(CollectiveKind::AllGather, Some("Tree"), None), []);
        assert_eq!(pairs(CollectiveKind::Broadcast, Some("^ring"), None), []);
        // Per-function entries: tree for all_reduce, ring for the rest.
        let per_function = Some("ring;allreduce:tree");
        assert!(pairs(CollectiveKind::AllReduce, per_function, None)
            .iter()
            .all(|&(a, _)| a == Algorithm::Tree));
        assert_eq!(
            pairs(CollectiveKind::AllGather, per_function, None).len(),
            3
        );
        // Sends and receives keep their ring whatever NCCL_ALGO says.
        assert_eq!(pairs(CollectiveKind::AllToAll, Some("Tree"), None).len(), 3);
        let nvls = [(Algorithm::Nvls, Protocol::Simple)];
        assert_eq!(pairs(CollectiveKind::AllReduce, Some("NVLS"), None), nvls);
        let algorithms = parse_algorithms("NVLS").unwrap();
        let none = allowed_pairs(CollectiveKind::AllReduce, Some(&algorithms), None, false);
        assert_eq!(none.count(), 0);
        assert_eq!(pairs(CollectiveKind::AllReduce, None, None).len(), 7);
        // NCCL_PROTO per function: all_reduce without LL, the rest LL only.
        let proto = Some("LL;allreduce:^LL");
        assert_eq!(
            pairs(CollectiveKind::ReduceScatter, None, proto),
            [(Algorithm::Ring, Protocol::Ll)]
        );
        assert!(!pairs(CollectiveKind::AllReduce, None, proto)
            .iter()
            .any(|&(_, p)| p == Protocol::Ll));
    }

    #[test]
    fn lists_parse_like_nccl_and_reject_what_nccl_rejects() {
        let all_reduce = |text: &str| {
            parse_algorithms(text).unwrap().per_function[NcclFunction::AllReduce.index()].clone()
        };
        assert_eq!(all_reduce("ring,NVLS"), [Algorithm::Ring, Algorithm::Nvls]);
        assert_eq!(all_reduce("^tree"), [Algorithm::Ring, Algorithm::Nvls]);
        assert_eq!(all_reduce("AllGather:ring"), Algorithm::ALL);
        assert_eq!(
            all_reduce("ring;ALLREDUCE:^ring"),
            [Algorithm::Tree, Algorithm::Nvls]
        );
        // NCCL's algorithms the model lacks are names NCCL accepts: excluding them changes
        // nothing, listing them adds nothing.
        assert_eq!(
            all_reduce("^CollNetDirect,collnetchain,NVLSTree,pat"),
            Algorithm::ALL
        );
        assert_eq!(all_reduce("Ring,PAT"), [Algorithm::Ring]);
        assert_eq!(all_reduce("PAT"), []);
        let protocols = parse_protocols("Simple").unwrap();
        assert_eq!(protocols.unprefixed, [Protocol::Simple]);
        assert!(parse_protocols("LL256")
            .unwrap_err()
            .contains("LL, LL128, SIMPLE"));
        assert!(parse_algorithms("Butterfly")
            .unwrap_err()
            .contains("RING, TREE, NVLS, CollNetDirect, CollNetChain, NVLSTree, PAT"));
        assert!(parse_algorithms("allreduce:tree;ring")
            .unwrap_err()
            .contains("needs a function prefix"));
        assert!(parse_algorithms("alltoall:ring")
            .unwrap_err()
            .contains("unknown function \"alltoall\""));
        assert!(parse_algorithms("allreduce:")
            .unwrap_err()
            .contains("empty list"));
    }
}
