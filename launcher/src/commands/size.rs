//! Sizes on the command line: a whole number of bytes, optionally with a binary unit.
//!
//! `K`/`KiB` is 1024 bytes, `M`/`MiB` 1024², `G`/`GiB` 1024³; a bare number is bytes.
//! The single letters are binary too, as in `ulimit`, `dd` and `sort -S`, so `64M` and
//! `64MiB` are the same. `KB`, `MB` and `GB` are refused because people mean both
//! 1000 and 1024 by them; the error names the spelling to use.

/// Parses a size in bytes: `4096`, `64K`, `64KiB`, `16M`, `16MiB`, `1G`, `1GiB`.
pub fn parse(text: &str) -> Result<u64, String> {
    if text.starts_with('-') && text[1..].starts_with(|c: char| c.is_ascii_digit()) {
        return Err(format!(
            "{text:?} is negative: a size is a whole number of bytes, like 65536, 64K or 16M"
        ));
    }
    let digits = text.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    let unit = &text[digits.len()..];
    let n: u64 = digits.parse().map_err(|_| {
        format!("{text:?} is not a size: expected a whole number of bytes, like 65536, 64K or 16M")
    })?;
    let scale: u64 = match unit {
        "" | "B" => 1,
        "K" | "k" | "KiB" => 1 << 10,
        "M" | "MiB" => 1 << 20,
        "G" | "GiB" => 1 << 30,
        "KB" | "kB" | "MB" | "GB" => {
            let letter = &unit[..1].to_ascii_uppercase();
            return Err(format!(
                "{text:?} is ambiguous (1000 or 1024?): write {n}{letter} or {n}{letter}iB (binary units: 1K = 1024 bytes)"
            ));
        }
        _ => {
            return Err(format!(
                "{text:?} has an unknown unit {unit:?}: use bytes or K, M, G (also KiB, MiB, GiB; binary: 1K = 1024 bytes)"
            ));
        }
    };
    n.checked_mul(scale)
        .ok_or_else(|| format!("{text:?} is too large"))
}

/// [`parse`] for a size held in memory.
pub fn parse_usize(text: &str) -> Result<usize, String> {
    let n = parse(text)?;
    usize::try_from(n).map_err(|_| format!("{text:?} is too large"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_are_binary() {
        assert_eq!(parse("0"), Ok(0));
        assert_eq!(parse("64000"), Ok(64_000));
        assert_eq!(parse("100B"), Ok(100));
        assert_eq!(parse("64K"), Ok(64 * 1024));
        assert_eq!(parse("64k"), Ok(64 * 1024));
        assert_eq!(parse("64KiB"), Ok(64 * 1024));
        assert_eq!(parse("64M"), Ok(64 << 20));
        assert_eq!(parse("64MiB"), Ok(64 << 20));
        assert_eq!(parse("2G"), Ok(2 << 30));
        assert_eq!(parse("2GiB"), Ok(2 << 30));
        assert_eq!(parse_usize("1K"), Ok(1024));
    }

    #[test]
    fn bad_sizes_say_why() {
        assert!(parse("64MB").unwrap_err().contains("64M or 64MiB"));
        assert!(parse("1kB").unwrap_err().contains("1K or 1KiB"));
        assert!(parse("64T").unwrap_err().contains("unknown unit"));
        assert!(parse("-1M").unwrap_err().contains("negative"));
        assert!(parse("1.5M").unwrap_err().contains("not a size"));
        assert!(parse("").is_err());
        assert!(parse("M").is_err());
        assert!(parse("99999999999G").unwrap_err().contains("too large"));
    }
}
