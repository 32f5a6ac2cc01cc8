//! Exit codes and the stderr prefix that make up the runner failure contract.
//!
//! They follow the conventions of `timeout`, `env` and `nice`, which users already know:
//! 125 the wrapper itself failed, 126 found but could not execute, 127 not found,
//! 128+N killed by signal N; otherwise the child's own code.

/// The runner (or the launcher) failed before the target started. Nothing ran.
pub const RUNNER_FAILURE: i32 = 125;
/// The target program was found but could not be executed.
pub const CANNOT_EXECUTE: i32 = 126;
/// The target program was not found.
pub const NOT_FOUND: i32 = 127;
/// The command timed out (used by `stockade run --timeout`).
pub const TIMED_OUT: i32 = 124;
/// Added to a signal number when the command was killed by that signal.
pub const SIGNAL_BASE: i32 = 128;

/// Every line the runner itself prints on stderr begins with this prefix, and it prints
/// at most one such line per run.
pub const RUNNER_PREFIX: &str = "stockade-runner: ";

/// `message` made to fit on one line: carriage returns and newlines (a path may hold
/// them) escaped as `\r` and `\n`. Used for the runner's failure line and for the
/// message of its `failed` status record, which carry the same text.
pub fn one_line(message: &str) -> String {
    message.replace('\r', "\\r").replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_escapes_line_breaks_and_keeps_the_rest() {
        assert_eq!(one_line("a\nb\r\nc d"), "a\\nb\\r\\nc d");
    }
}
