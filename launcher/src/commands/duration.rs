//! Durations on the command line: a whole, positive number with a unit, `500ms`, `30s`,
//! `2m`, `1h`. A bare number is refused rather than guessed at (seconds? milliseconds?),
//! and so is zero: a timeout or grace period of nothing is a mistake, not a choice.

use std::time::Duration;

/// Parses `N` followed by `ms`, `s`, `m` or `h`, with N at least 1.
pub fn parse(text: &str) -> Result<Duration, String> {
    if let Some(rest) = text
        .strip_prefix('-')
        .filter(|r| r.starts_with(|c: char| c.is_ascii_digit()))
    {
        return Err(format!(
            "{text:?} is negative: a duration is a positive whole number with a unit, like {rest}"
        ));
    }
    let digits = text.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    let unit = &text[digits.len()..];
    let n: u64 = digits.parse().map_err(|_| {
        format!(
            "{text:?} is not a duration: expected a whole number and a unit, like 500ms, 30s, 2m or 1h"
        )
    })?;
    let ms = match unit {
        "ms" => Some(n),
        "s" => n.checked_mul(1000),
        "m" => n.checked_mul(60_000),
        "h" => n.checked_mul(3_600_000),
        "" => {
            return Err(format!(
                "{text:?} has no unit: write {n}ms, {n}s, {n}m or {n}h"
            ));
        }
        _ => {
            return Err(format!(
                "{text:?} has an unknown unit {unit:?}: use ms, s, m or h"
            ));
        }
    };
    if n == 0 {
        return Err(format!(
            "{text:?} is zero: give a positive duration, at least 1ms"
        ));
    }
    // Bounded so deadlines never overflow an Instant.
    match ms {
        Some(ms) if ms <= MAX_MS => Ok(Duration::from_millis(ms)),
        _ => Err(format!(
            "{text:?} is too long: at most {} days",
            MAX_MS / 86_400_000
        )),
    }
}

/// About 100 years: longer is a mistake, not a timeout.
const MAX_MS: u64 = 100 * 365 * 86_400_000;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units() {
        assert_eq!(parse("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse("1ms"), Ok(Duration::from_millis(1)));
    }

    #[test]
    fn bad_durations_say_why() {
        assert!(parse("5").unwrap_err().contains("no unit"));
        assert!(parse("5d").unwrap_err().contains("unknown unit"));
        assert!(parse("0s").unwrap_err().contains("zero"));
        assert!(parse("0ms").unwrap_err().contains("zero"));
        assert!(parse("-1s").unwrap_err().contains("negative"));
        assert!(parse("").is_err());
        assert!(parse("1.5s").is_err());
        assert!(parse("s").is_err());
        assert!(parse("99999999999999999999m").is_err());
        assert!(parse("999999999999m").unwrap_err().contains("too long"));
        assert!(parse("99999999h").unwrap_err().contains("too long"));
    }
}
