//! Byte sizes as people write them (`512`, `64K`, `25M`, `2G`, powers of 1024), read and written.
//! Uses nothing of the crate's.

/// A size that is not a number of bytes with an optional K, M or G suffix, or is 0.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "bad size `{}`: expected a number of bytes, at least 1, with an optional K, M or G suffix, like 64K",
    kernbench_core::Quoted(&self.0)
)]
pub struct ParseSizeError(pub String);

/// Parses a size in bytes: `512`, `64K`, `1M`, `2G` (K, M, G are powers of 1024; `KB`, `KiB` and a
/// trailing `B` are accepted too).
///
/// # Errors
/// [`ParseSizeError`] for anything else, for 0, and for a size beyond `u64`.
///
/// # Examples
/// ```
/// use kernbench::size::parse_size;
/// assert_eq!(parse_size("64K").unwrap(), 65536);
/// assert_eq!(parse_size("25MiB").unwrap(), 25 << 20);
/// assert!(parse_size("64Q").is_err());
/// assert!(parse_size("0").is_err());
/// ```
pub fn parse_size(text: &str) -> Result<u64, ParseSizeError> {
    let bad = || ParseSizeError(text.to_owned());
    let trimmed = text.trim();
    let split = trimmed.find(|c: char| !c.is_ascii_digit()).unwrap_or(trimmed.len());
    let (digits, unit) = trimmed.split_at(split);
    let scale: u64 = match unit.to_ascii_uppercase().as_str() {
        "" | "B" => 1,
        "K" | "KB" | "KIB" => 1 << 10,
        "M" | "MB" | "MIB" => 1 << 20,
        "G" | "GB" | "GIB" => 1 << 30,
        _ => return Err(bad()),
    };
    let n: u64 = digits.parse().map_err(|_| bad())?;
    n.checked_mul(scale).filter(|&bytes| bytes > 0).ok_or_else(bad)
}

/// A size as people write it, the inverse of [`parse_size`]: `512`, `64K`, `25M`, `3G`; a size that
/// is not a whole number of a unit stays in the next smaller one.
///
/// # Examples
/// ```
/// use kernbench::size::format_size;
/// assert_eq!(format_size(25 << 20), "25M");
/// assert_eq!(format_size(1536), "1536");
/// ```
pub fn format_size(bytes: u64) -> String {
    for (shift, unit) in [(30, "G"), (20, "M"), (10, "K")] {
        if bytes >= 1 << shift && bytes % (1 << shift) == 0 {
            return format!("{}{unit}", bytes >> shift);
        }
    }
    bytes.to_string()
}
