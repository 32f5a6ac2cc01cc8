//! Classifying a settled process: did the runner fail, did the sandbox deny an access,
//! or did the command just fail?
//!
//! These functions give exactly the harness's answers on the same inputs
//! (`../shared/CONTEXT.md`, section 1). An exit code of `None` means the process was
//! killed by a signal.

use crate::confined::RunnerFailureRule;

/// The runner failure detail, if the rules say the runner itself failed: the first
/// stderr line (after removing informational lines) that contains a non-blank fatal
/// signature of a rule whose exit codes admit `exit_code`.
pub fn runner_failure_detail(
    exit_code: Option<i32>,
    stderr: &str,
    rules: &[RunnerFailureRule],
) -> Option<String> {
    let code = match exit_code {
        None | Some(0) => return None,
        Some(c) => c,
    };
    let lines: Vec<&str> = split_lines(stderr);
    for rule in rules {
        if let Some(allowed) = &rule.allowed_exit_codes
            && !allowed.contains(&code)
        {
            continue;
        }
        let informational: Vec<String> = rule
            .informational_lines
            .iter()
            .flatten()
            .map(|l| l.to_lowercase())
            .collect();
        let signatures: Vec<String> = rule
            .fatal_signatures
            .iter()
            .filter(|s| !s.trim().is_empty())
            .map(|s| s.to_lowercase())
            .collect();
        for line in &lines {
            let lower = line.to_lowercase();
            if informational.contains(&lower) {
                continue;
            }
            if signatures.iter().any(|s| lower.contains(s.as_str())) {
                return Some((*line).to_string());
            }
        }
    }
    None
}

/// Whether stderr carries one of the denial signatures of a failed process. A process
/// that exited 0 or was killed by a signal was never denied.
pub fn is_denied(exit_code: Option<i32>, stderr: &str, signatures: &[String]) -> bool {
    match exit_code {
        None | Some(0) => false,
        Some(_) => {
            let lower = stderr.to_lowercase();
            signatures.iter().any(|s| lower.contains(s.as_str()))
        }
    }
}

/// Splits on `\n` and `\r\n`, as the harness's `/\r?\n/` does.
fn split_lines(s: &str) -> Vec<&str> {
    s.split('\n')
        .map(|l| l.strip_suffix('\r').unwrap_or(l))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::confined::{denial_signatures, runner_failure_rules};
    use crate::mode::Mode;

    fn rule(codes: Option<Vec<i32>>, fatal: &[&str], info: Option<&[&str]>) -> RunnerFailureRule {
        RunnerFailureRule {
            allowed_exit_codes: codes,
            fatal_signatures: fatal.iter().map(|s| s.to_string()).collect(),
            informational_lines: info.map(|i| i.iter().map(|s| s.to_string()).collect()),
        }
    }

    #[test]
    fn exit_zero_or_signal_is_never_a_runner_failure() {
        let rules = runner_failure_rules(Mode::ReadOnly);
        for code in [None, Some(0)] {
            assert_eq!(
                runner_failure_detail(code, "stockade-runner: boom", &rules),
                None
            );
        }
    }

    #[test]
    fn the_stockade_rule_matches_only_exit_125() {
        let rules = runner_failure_rules(Mode::WorkspaceWrite);
        let err = "some output\nstockade-runner: workspace root /x cannot be opened\n";
        assert_eq!(
            runner_failure_detail(Some(125), err, &rules).as_deref(),
            Some("stockade-runner: workspace root /x cannot be opened")
        );
        assert_eq!(runner_failure_detail(Some(127), err, &rules), None);
        assert_eq!(runner_failure_detail(Some(1), err, &rules), None);
    }

    #[test]
    fn signatures_match_case_insensitively_within_one_line() {
        let rules = vec![rule(None, &["Landlock-Run: "], None)];
        assert_eq!(
            runner_failure_detail(Some(3), "x\r\nLANDLOCK-RUN: bad\r\n", &rules).as_deref(),
            Some("LANDLOCK-RUN: bad")
        );
        // A signature split over two lines does not match.
        let rules = vec![rule(None, &["a b"], None)];
        assert_eq!(runner_failure_detail(Some(1), "a\nb", &rules), None);
    }

    #[test]
    fn informational_lines_are_removed_first_by_exact_full_line_equality() {
        let rules = vec![rule(
            Some(vec![125]),
            &["landlock-run: "],
            Some(&["landlock-run: partial enforcement"]),
        )];
        let stderr = "LANDLOCK-RUN: PARTIAL ENFORCEMENT\nhello\n";
        assert_eq!(runner_failure_detail(Some(125), stderr, &rules), None);
        // Not a full-line match: still fatal.
        let stderr = "landlock-run: partial enforcement!\n";
        assert!(runner_failure_detail(Some(125), stderr, &rules).is_some());
    }

    #[test]
    fn blank_fatal_signatures_never_match() {
        let rules = vec![rule(None, &["", "  "], None)];
        assert_eq!(runner_failure_detail(Some(1), "anything", &rules), None);
    }

    #[test]
    fn first_matching_rule_wins_and_rules_without_codes_match_any_nonzero() {
        let rules = vec![
            rule(Some(vec![2]), &["second"], None),
            rule(None, &["first"], None),
        ];
        assert_eq!(
            runner_failure_detail(Some(9), "second\nfirst", &rules).as_deref(),
            Some("first")
        );
        assert_eq!(
            runner_failure_detail(Some(2), "first\nsecond", &rules).as_deref(),
            Some("second")
        );
    }

    #[test]
    fn denial_needs_a_failed_exit_and_a_signature_anywhere() {
        let sigs = denial_signatures(Mode::ReadOnly);
        let err = "bash: /etc/x: Permission denied\n";
        assert!(is_denied(Some(1), err, &sigs));
        assert!(!is_denied(Some(0), err, &sigs));
        assert!(!is_denied(None, err, &sigs));
        assert!(!is_denied(Some(1), "No such file or directory", &sigs));
        assert!(!is_denied(Some(1), err, &[]));
    }
}
