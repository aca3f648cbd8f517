//! Sets of ranks (or iterations) written as ranges, the one way text lists them:
//! `0-2,4-99999 (99,999)` rather than a hundred thousand numbers. Pure: formatting and parsing
//! only.
//!
//! ```
//! use sim::rank_set::{format_ranges, format_count, parse_ranges};
//! assert_eq!(format_ranges(&[0, 1, 2, 4, 5, 9]), "0-2,4-5,9");
//! assert_eq!(format_count(99_999), "99,999");
//! assert_eq!(parse_ranges("0-2,9").unwrap(), vec![0..=2, 9..=9]);
//! ```

use std::ops::RangeInclusive;

/// `values` (any order, duplicates allowed) as sorted, merged inclusive ranges.
pub fn ranges(values: &[u32]) -> Vec<RangeInclusive<u32>> {
    let mut sorted = values.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut out: Vec<RangeInclusive<u32>> = Vec::new();
    for value in sorted {
        match out.last_mut() {
            Some(last) if last.end().checked_add(1) == Some(value) => {
                *last = *last.start()..=value;
            }
            _ => out.push(value..=value),
        }
    }
    out
}

/// `0-2,4,7-9`: the values as ranges (sorted, merged); `none` for an empty set.
pub fn format_ranges(values: &[u32]) -> String {
    let ranges = ranges(values);
    if ranges.is_empty() {
        return "none".into();
    }
    ranges
        .iter()
        .map(|range| {
            if range.start() == range.end() {
                range.start().to_string()
            } else {
                format!("{}-{}", range.start(), range.end())
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// A count with thousands separators: `99,999`.
pub fn format_count(count: u64) -> String {
    let digits = count.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (index, digit) in digits.chars().enumerate() {
        if index > 0 && (digits.len() - index).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

/// `ranks 0-2,4 (4)`, or `rank 3` for one: how a table names the ranks a row stands for.
pub fn describe_ranks(ranks: &[u32]) -> String {
    let set = ranges(ranks);
    let count: u64 = set.iter().map(|r| u64::from(r.end() - r.start()) + 1).sum();
    match count {
        0 => "no rank".into(),
        1 => format!("rank {}", set[0].start()),
        _ => format!("ranks {} ({})", format_ranges(ranks), format_count(count)),
    }
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

/// True when `value` is in one of `ranges`.
pub fn contains(ranges: &[RangeInclusive<u32>], value: u32) -> bool {
    ranges.iter().any(|range| range.contains(&value))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sets_are_written_as_merged_sorted_ranges() {
        assert_eq!(format_ranges(&[]), "none");
        assert_eq!(format_ranges(&[7]), "7");
        assert_eq!(format_ranges(&[3, 1, 2, 2, 0]), "0-3");
        assert_eq!(format_ranges(&[9, 0, 2, 1, 5, 6]), "0-2,5-6,9");
        assert_eq!(
            format_ranges(&[u32::MAX, u32::MAX - 1]),
            "4294967294-4294967295"
        );
        let mut most: Vec<u32> = (0..100_000).collect();
        most.remove(3);
        assert_eq!(describe_ranks(&most), "ranks 0-2,4-99999 (99,999)");
        assert_eq!(describe_ranks(&[5]), "rank 5");
        assert_eq!(describe_ranks(&[]), "no rank");
    }

    #[test]
    fn counts_get_thousands_separators() {
        assert_eq!(format_count(0), "0");
        assert_eq!(format_count(999), "999");
        assert_eq!(format_count(1_000), "1,000");
        assert_eq!(format_count(1_234_567), "1,234,567");
    }

    #[test]
    fn lists_parse_back_and_bad_items_are_named() {
        assert_eq!(parse_ranges(" 0-2, 9 ").unwrap(), vec![0..=2, 9..=9]);
        let written = format_ranges(&[0, 1, 2, 4, 8, 9]);
        let parsed = parse_ranges(&written).unwrap();
        assert!([0, 1, 2, 4, 8, 9].iter().all(|&v| contains(&parsed, v)));
        assert!(![3, 5, 10].iter().any(|&v| contains(&parsed, v)));
        assert!(parse_ranges("").unwrap_err().contains("found nothing"));
        assert!(parse_ranges("1,x")
            .unwrap_err()
            .contains("\"x\" is not a number"));
        assert!(parse_ranges("5-2").unwrap_err().contains("write 2-5"));
        assert!(parse_ranges("1-").unwrap_err().contains("\"1-\""));
        assert!(parse_ranges("-1").unwrap_err().contains("\"-1\""));
    }
}
