//! Parsing of sizes with units (`"25MiB"`, `1024`) and conversions of times to integer nanoseconds.

/// Longest single time a scenario may state, and longest drawn delay (one day).
pub const MAX_TIME_NS: u64 = 86_400 * 1_000_000_000;

/// Longest duration a cost model gives a kernel or a transfer (1,000 days): longer is "never"
/// for any run (its time cap is at most a day), and sums of a few stay far from `u64::MAX`. A
/// rate a scenario sets near zero (`network.nvlink_gbps = 1e-13`) would otherwise give a
/// duration past `u64::MAX`, whose sums wrap into short ones.
pub const MAX_MODELLED_NS: u64 = 1_000 * MAX_TIME_NS;

/// A modelled duration in nanoseconds, rounded and held to `0..=MAX_MODELLED_NS` (an infinite
/// one, from a rate that underflowed to zero, is the longest).
pub fn modelled_ns(ns: f64) -> u64 {
    if ns.is_nan() {
        return MAX_MODELLED_NS;
    }
    ns.round().clamp(0.0, MAX_MODELLED_NS as f64) as u64
}

/// Parses a size such as `"25MiB"`, `"1 KiB"`, `"64MB"` or `"4096"` into bytes.
///
/// Binary units (`KiB`, `MiB`, `GiB`, `TiB`) are powers of 1024, decimal ones (`KB`, `MB`, `GB`,
/// `TB`) powers of 1000; `B` or no unit means bytes. Fractions are allowed when they give whole
/// bytes (`"1.5KiB"` = 1536).
pub fn parse_size_bytes(text: &str) -> Result<u64, String> {
    let trimmed = text.trim();
    // `-1MiB`; not `--json`, a flag given where a size was expected.
    let negative = trimmed
        .strip_prefix('-')
        .is_some_and(|rest| rest.starts_with(|c: char| c.is_ascii_digit() || c == '.'));
    if negative {
        return Err(format!(
            "a size cannot be negative, found {text:?}; expected one such as \"25MiB\", \"1KiB\" or \"4096\""
        ));
    }
    let split_at = trimmed
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '_'))
        .unwrap_or(trimmed.len());
    let (number_text, unit_text) = trimmed.split_at(split_at);
    let number_text = number_text.replace('_', "");
    if number_text.is_empty() {
        return Err(format!(
            "expected a size such as \"25MiB\", \"1KiB\" or \"4096\", found {text:?}"
        ));
    }
    let multiplier: u64 = match unit_text.trim() {
        "" | "B" => 1,
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        "TiB" => 1 << 40,
        "KB" | "kB" => 1_000,
        "MB" => 1_000_000,
        "GB" => 1_000_000_000,
        "TB" => 1_000_000_000_000,
        other => {
            return Err(format!(
                "unknown size unit {other:?} in {text:?}; expected B, KiB, MiB, GiB, TiB, KB, MB, GB or TB"
            ))
        }
    };
    let value: f64 = number_text
        .parse()
        .map_err(|_| format!("expected a number before the unit in {text:?}"))?;
    let bytes = value * multiplier as f64;
    if !bytes.is_finite() || bytes < 0.0 || bytes > u64::MAX as f64 / 2.0 {
        return Err(format!("size {text:?} is out of range"));
    }
    if bytes.fract() != 0.0 {
        return Err(format!("size {text:?} is not a whole number of bytes"));
    }
    Ok(bytes as u64)
}

/// Formats a byte count the way the scenario files write it (`25MiB`, `1KiB`, `100B`).
pub fn format_size(bytes: u64) -> String {
    for (unit, scale) in BINARY_UNITS {
        if bytes >= scale && bytes.is_multiple_of(scale) {
            return format!("{}{unit}", bytes / scale);
        }
    }
    format!("{bytes}B")
}

/// The binary size units, largest first.
const BINARY_UNITS: [(&str, u64); 4] = [
    ("TiB", 1 << 40),
    ("GiB", 1 << 30),
    ("MiB", 1 << 20),
    ("KiB", 1 << 10),
];

/// A size for a person to read: in the largest binary unit it reaches, whole where it is
/// (`24MiB`), else to two decimals (`32.00GiB` for 34,359,738,360 bytes, which [`format_size`]
/// writes exactly as `34359738360B`).
pub fn format_size_readable(bytes: u64) -> String {
    match BINARY_UNITS.iter().find(|&&(_, scale)| bytes >= scale) {
        Some(&(unit, scale)) if bytes.is_multiple_of(scale) => format!("{}{unit}", bytes / scale),
        Some(&(unit, scale)) => format!("{:.2}{unit}", bytes as f64 / scale as f64),
        None => format!("{bytes}B"),
    }
}

/// A size as PyTorch's messages write it (c10's `format_size`): bytes up to 1024, then KiB up
/// to 1 MiB, MiB up to 1 GiB, else GiB, to two decimals (`512 bytes`, `2.00 MiB`,
/// `1024.00 MiB` for 1 GiB).
pub fn format_size_as_pytorch(bytes: u64) -> String {
    const KIB: u64 = 1 << 10;
    const MIB: u64 = 1 << 20;
    const GIB: u64 = 1 << 30;
    match bytes {
        0..=KIB => format!("{bytes} bytes"),
        1025..=MIB => format!("{:.2} KiB", bytes as f64 / KIB as f64),
        1_048_577..=GIB => format!("{:.2} MiB", bytes as f64 / MIB as f64),
        _ => format!("{:.2} GiB", bytes as f64 / GIB as f64),
    }
}

/// Converts microseconds given as a float (scenario files) to integer nanoseconds, rounding to
/// the nearest nanosecond.
pub fn us_to_ns(us: f64) -> u64 {
    (us * 1_000.0).round().max(0.0) as u64
}

/// Converts integer nanoseconds to microseconds for reports.
pub fn ns_to_us(ns: u64) -> f64 {
    ns as f64 / 1_000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_modelled_duration_is_held_below_a_thousand_days() {
        assert_eq!(modelled_ns(1234.4), 1234);
        assert_eq!(modelled_ns(-3.0), 0);
        assert_eq!(modelled_ns(1e30), MAX_MODELLED_NS);
        assert_eq!(modelled_ns(f64::INFINITY), MAX_MODELLED_NS);
        assert_eq!(modelled_ns(f64::NAN), MAX_MODELLED_NS);
        assert!(MAX_MODELLED_NS.checked_mul(100).is_some());
    }

    #[test]
    fn sizes_read_as_pytorch_writes_them() {
        assert_eq!(format_size_as_pytorch(512), "512 bytes");
        assert_eq!(format_size_as_pytorch(1024), "1024 bytes");
        assert_eq!(format_size_as_pytorch(1536), "1.50 KiB");
        assert_eq!(format_size_as_pytorch(2 << 20), "2.00 MiB");
        assert_eq!(format_size_as_pytorch(1 << 30), "1024.00 MiB");
        assert_eq!(format_size_as_pytorch(25_000_000), "23.84 MiB");
        assert_eq!(format_size_as_pytorch(3 << 30), "3.00 GiB");
    }

    #[test]
    fn sizes_read_in_the_largest_unit_they_reach() {
        assert_eq!(format_size_readable(34_359_738_360), "32.00GiB");
        assert_eq!(format_size_readable(328_705 << 10), "321.00MiB");
        assert_eq!(format_size_readable(24 << 20), "24MiB");
        assert_eq!(format_size_readable(25_000_000), "23.84MiB");
        assert_eq!(format_size_readable(1000), "1000B");
    }

    #[test]
    fn sizes_parse_with_binary_and_decimal_units() {
        assert_eq!(parse_size_bytes("25MiB"), Ok(25 * 1024 * 1024));
        assert_eq!(parse_size_bytes("1 KiB"), Ok(1024));
        assert_eq!(parse_size_bytes("64MB"), Ok(64_000_000));
        assert_eq!(parse_size_bytes("4096"), Ok(4096));
        assert_eq!(parse_size_bytes("1.5KiB"), Ok(1536));
        assert_eq!(parse_size_bytes("1_024B"), Ok(1024));
    }

    #[test]
    fn bad_sizes_are_explained() {
        assert!(parse_size_bytes("25 MiBs")
            .unwrap_err()
            .contains("unknown size unit"));
        assert!(parse_size_bytes("MiB")
            .unwrap_err()
            .contains("expected a size"));
        assert!(parse_size_bytes("1.3B")
            .unwrap_err()
            .contains("whole number"));
        // A negative size says so; a flag where a size was expected is not called negative.
        assert!(parse_size_bytes("-1MiB")
            .unwrap_err()
            .starts_with("a size cannot be negative"));
        assert!(parse_size_bytes("--json")
            .unwrap_err()
            .starts_with("expected a size"));
    }

    #[test]
    fn sizes_format_back() {
        assert_eq!(format_size(25 * 1024 * 1024), "25MiB");
        assert_eq!(format_size(1000), "1000B");
        assert_eq!(format_size(1 << 30), "1GiB");
    }

    #[test]
    fn times_round_to_nanoseconds() {
        assert_eq!(us_to_ns(4.15), 4150);
        assert_eq!(us_to_ns(0.0004), 0);
        assert_eq!(ns_to_us(3_584_432), 3584.432);
    }
}
