//! Durations on the command line: a whole number with a unit, `500ms`, `30s`, `2m`.
//! A bare number is refused rather than guessed at (seconds? milliseconds?).

use std::time::Duration;

/// Parses `N` followed by `ms`, `s` or `m`.
pub fn parse(text: &str) -> Result<Duration, String> {
    let digits = text.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    let unit = &text[digits.len()..];
    let n: u64 = digits.parse().map_err(|_| {
        format!(
            "{text:?} is not a duration: expected a whole number and a unit, like 500ms, 30s or 2m"
        )
    })?;
    let ms = match unit {
        "ms" => Some(n),
        "s" => n.checked_mul(1000),
        "m" => n.checked_mul(60_000),
        "" => return Err(format!("{text:?} has no unit: write {n}ms, {n}s or {n}m")),
        _ => {
            return Err(format!(
                "{text:?} has an unknown unit {unit:?}: use ms, s or m"
            ));
        }
    };
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
        assert_eq!(parse("0s"), Ok(Duration::ZERO));
    }

    #[test]
    fn bad_durations_say_why() {
        assert!(parse("5").unwrap_err().contains("no unit"));
        assert!(parse("5h").unwrap_err().contains("unknown unit"));
        assert!(parse("").is_err());
        assert!(parse("-1s").is_err());
        assert!(parse("1.5s").is_err());
        assert!(parse("s").is_err());
        assert!(parse("99999999999999999999m").is_err());
        assert!(parse("999999999999m").unwrap_err().contains("too long"));
    }
}
