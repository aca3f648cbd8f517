//! Sets of ranks as sorted, disjoint, inclusive ranges (`[[0, 2], [4, 99999]]`): how a folded
//! Timeline says which ranks a record stands for (docs/scale.md), and how messages name many
//! ranks at once ("ranks 0-2,4-99999 (99,999 ranks)"); and lists of ranks or iterations as a
//! user writes them (`0-2,9`, `--records-for`). The one way text lists ranks. Pure.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::ops::RangeInclusive;

/// Ranks as sorted, disjoint, non-adjacent inclusive ranges.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct RankSet(Vec<[u32; 2]>);

impl RankSet {
    /// The set of `ranks`, in any order, duplicates allowed.
    pub fn from_ranks(ranks: impl IntoIterator<Item = u32>) -> RankSet {
        let mut sorted: Vec<u32> = ranks.into_iter().collect();
        sorted.sort_unstable();
        sorted.dedup();
        let mut set = RankSet::default();
        for rank in sorted {
            set.push(rank);
        }
        set
    }

    /// The set `first..=last`.
    pub fn range(first: u32, last: u32) -> RankSet {
        RankSet(vec![[first, last]])
    }

    /// Adds `rank`, which must be above every rank already in the set.
    pub fn push(&mut self, rank: u32) {
        match self.0.last_mut() {
            Some(last) if last[1].checked_add(1) == Some(rank) => last[1] = rank,
            Some(last) => {
                debug_assert!(rank > last[1], "ranks are pushed in increasing order");
                self.0.push([rank, rank]);
            }
            None => self.0.push([rank, rank]),
        }
    }

    /// The set `text` names as [`RankSet`]'s `Display` writes it (`0-2,4-99999`), or `None`
    /// for text it does not write (out of order, overlapping, adjacent ranges, not ranges).
    pub fn parse(text: &str) -> Option<RankSet> {
        let ranges = parse_ranges(text).ok()?;
        let set = RankSet(ranges.iter().map(|r| [*r.start(), *r.end()]).collect());
        (set.is_well_formed() && set.to_string() == text).then_some(set)
    }

    /// Every rank of both sets.
    pub fn union(&self, other: &RankSet) -> RankSet {
        let mut ranges: Vec<[u32; 2]> = self.0.iter().chain(&other.0).copied().collect();
        ranges.sort_unstable();
        let mut set = RankSet::default();
        for [first, last] in ranges {
            match set.0.last_mut() {
                Some(previous) if u64::from(first) <= u64::from(previous[1]) + 1 => {
                    previous[1] = previous[1].max(last);
                }
                _ => set.0.push([first, last]),
            }
        }
        set
    }

    /// Adds every rank of `other`, in place: without a new allocation where `other` lies
    /// at or past this set's last range (ranks that arrive in increasing order).
    pub fn union_with(&mut self, other: &RankSet) {
        let Some(&[other_first, _]) = other.0.first() else {
            return;
        };
        if self.0.last().is_some_and(|last| other_first < last[0]) {
            *self = self.union(other);
            return;
        }
        for &[first, last] in &other.0 {
            match self.0.last_mut() {
                Some(previous) if u64::from(first) <= u64::from(previous[1]) + 1 => {
                    previous[1] = previous[1].max(last);
                }
                _ => self.0.push([first, last]),
            }
        }
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether the ranges are as this type makes them: each `[first, last]` with first ≤ last,
    /// ascending, apart. A set read from a file may be neither.
    pub fn is_well_formed(&self) -> bool {
        self.0.iter().all(|[first, last]| first <= last)
            && self
                .0
                .windows(2)
                .all(|pair| u64::from(pair[0][1]) + 1 < u64::from(pair[1][0]))
    }

    /// How many ranks.
    /// `one` for a set of one rank, else `many`: a message's words agree with its ranks.
    pub fn one_or_many<T>(&self, one: T, many: T) -> T {
        if self.count() == 1 {
            one
        } else {
            many
        }
    }

    pub fn count(&self) -> u64 {
        self.0
            .iter()
            .map(|[first, last]| u64::from(last - first) + 1)
            .sum()
    }

    pub fn first(&self) -> Option<u32> {
        self.0.first().map(|range| range[0])
    }

    pub fn last(&self) -> Option<u32> {
        self.0.last().map(|range| range[1])
    }

    pub fn contains(&self, rank: u32) -> bool {
        let index = self.0.partition_point(|range| range[1] < rank);
        self.0.get(index).is_some_and(|range| range[0] <= rank)
    }

    /// The ranks, in increasing order.
    pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.0.iter().flat_map(|&[first, last]| first..=last)
    }

    /// The inclusive ranges.
    pub fn ranges(&self) -> &[[u32; 2]] {
        &self.0
    }

    /// "rank 3" or "ranks 0-2,4-99999 (99,999 ranks)"; "no rank" when empty.
    pub fn named(&self) -> String {
        match self.count() {
            0 => "no rank".to_string(),
            1 => format!("rank {self}"),
            count => format!("ranks {self} ({} ranks)", thousands(count)),
        }
    }
}

/// The ranges, comma-separated: `0-2,4-99999`, `3`.
impl fmt::Display for RankSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (index, &[first, last]) in self.0.iter().enumerate() {
            if index > 0 {
                f.write_str(",")?;
            }
            if first == last {
                write!(f, "{first}")?;
            } else {
                write!(f, "{first}-{last}")?;
            }
        }
        Ok(())
    }
}

/// `99999` → `99,999`.
pub fn thousands(value: u64) -> String {
    let digits = value.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (index, digit) in digits.chars().enumerate() {
        if index > 0 && (digits.len() - index).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

/// Parses `0-2,4,7-9` (spaces around items allowed) into inclusive ranges, in the order given.
/// The message says which item is wrong and what was expected.
pub fn parse_ranges(text: &str) -> Result<Vec<RangeInclusive<u32>>, String> {
    if text.trim().is_empty() {
        return Err("expected a list such as 0-2,4,7 (numbers and ranges), found nothing".into());
    }
    text.split(',')
        .map(|item| {
            let item = item.trim();
            let number = |part: &str| {
                part.trim().parse::<u32>().map_err(|_| {
                    format!("{item:?} is not a number or a range such as 0-2 (numbers from 0 to 4294967295)")
                })
            };
            match item.split_once('-') {
                Some((start, end)) => {
                    let (start, end) = (number(start)?, number(end)?);
                    if start > end {
                        return Err(format!(
                            "{item:?} ends before it starts (write {end}-{start})"
                        ));
                    }
                    Ok(start..=end)
                }
                None => number(item).map(|value| value..=value),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_become_ranges_and_are_named_with_their_count() {
        let set = RankSet::from_ranks([4, 0, 2, 1, 99_999, 5, 2]);
        assert_eq!(set.ranges(), [[0, 2], [4, 5], [99_999, 99_999]]);
        assert_eq!(set.to_string(), "0-2,4-5,99999");
        assert_eq!(set.count(), 6);
        assert_eq!(set.named(), "ranks 0-2,4-5,99999 (6 ranks)");
        assert_eq!(RankSet::from_ranks([3]).named(), "rank 3");
        assert_eq!(RankSet::parse("0-2,4-5,99999"), Some(set.clone()));
        for unwritten in ["", "0-2,3", "4,1", "1-3,2", " 1", "x", "[1]"] {
            assert_eq!(RankSet::parse(unwritten), None, "{unwritten:?}");
        }
        assert_eq!(RankSet::default().named(), "no rank");
        assert_eq!(
            RankSet::range(0, 99_998).named(),
            "ranks 0-99998 (99,999 ranks)"
        );
        assert!(set.contains(4) && set.contains(99_999) && !set.contains(3));
        assert_eq!(set.iter().collect::<Vec<_>>(), [0, 1, 2, 4, 5, 99_999]);
    }

    #[test]
    fn a_union_merges_overlapping_and_adjacent_ranges() {
        let a = RankSet::from_ranks([0, 1, 7]);
        let b = RankSet::from_ranks([2, 3, 9]);
        assert_eq!(a.union(&b).ranges(), [[0, 3], [7, 7], [9, 9]]);
        let sets = [
            RankSet::default(),
            RankSet::from_ranks([0, 1, 7]),
            RankSet::from_ranks([2, 3, 9]),
            RankSet::from_ranks([7, 8]),
            RankSet::from_ranks([5, 6, 10, 12, u32::MAX]),
            RankSet::range(1, 11),
        ];
        for a in &sets {
            for b in &sets {
                let mut in_place = a.clone();
                in_place.union_with(b);
                assert_eq!(in_place, a.union(b), "{a} with {b}");
                assert!(in_place.is_well_formed());
            }
        }
        assert_eq!(thousands(1_234_567), "1,234,567");
        assert_eq!(thousands(999), "999");
    }

    #[test]
    fn lists_parse_back_and_bad_items_are_named() {
        assert_eq!(parse_ranges(" 0-2, 9 ").unwrap(), vec![0..=2, 9..=9]);
        let written = RankSet::from_ranks([0, 1, 2, 4, 8, 9]).to_string();
        let parsed = parse_ranges(&written).unwrap();
        let contains = |v: u32| parsed.iter().any(|range| range.contains(&v));
        assert!([0, 1, 2, 4, 8, 9].into_iter().all(contains));
        assert!(![3, 5, 10].into_iter().any(contains));
        assert!(parse_ranges("").unwrap_err().contains("found nothing"));
        assert!(parse_ranges("1,x")
            .unwrap_err()
            .contains("\"x\" is not a number"));
        assert!(parse_ranges("5-2").unwrap_err().contains("write 2-5"));
        assert!(parse_ranges("1-").unwrap_err().contains("\"1-\""));
        assert!(parse_ranges("-1").unwrap_err().contains("\"-1\""));
    }
}
