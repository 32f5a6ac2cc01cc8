//! The runner failure tag: what makes the in-band runner-failure rule unforgeable.
//!
//! An executor that judges runner failure only from stderr (exit 125 and a line carrying
//! a signature) can be fooled by a command that prints the runner's prefix and exits
//! 125. So `confine` draws a fresh random tag per command, passes it to the runner in
//! its argv (`--failure-tag TAG`), and puts `stockade-runner: [TAG]` in the ConfinedArgv's
//! `runnerFailureRules`. The runner prints the tag in its failure line; the command never
//! learns it: the runner overwrites it in its own argv memory (what `/proc/PID/cmdline`
//! shows) as its first step, `execve` replaces the rest, the request file never holds it,
//! and the ConfinedArgv stays in the executor's memory. What remains: a process already
//! running that reads the runner's cmdline in the instant between its `execve` and its
//! `main` could pass the tag on; the out-of-band status record has no such window.

use crate::exit::RUNNER_PREFIX;

/// The runner flag that carries the tag.
pub const FLAG: &str = "--failure-tag";
/// The longest tag the runner accepts.
pub const MAX_LEN: usize = 64;

/// Whether `tag` is one the runner prints: 1 to [`MAX_LEN`] lower-case hex digits, so it
/// can neither break the line nor hide a signature of its own.
pub fn is_valid(tag: &str) -> bool {
    (1..=MAX_LEN).contains(&tag.len())
        && tag
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// The start of the runner's failure line: the prefix, then the tag when there is one.
pub fn line_prefix(tag: Option<&str>) -> String {
    match tag {
        Some(tag) => format!("{RUNNER_PREFIX}[{tag}] "),
        None => RUNNER_PREFIX.to_string(),
    }
}

/// The fatal signature that matches the runner's failure line for `tag` and nothing a
/// command that does not know the tag can print.
pub fn signature(tag: &str) -> String {
    format!("{RUNNER_PREFIX}[{tag}]")
}

/// A tag from 16 random bytes (the launcher's part).
pub fn from_bytes(bytes: &[u8; 16]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Overwrites the value of every `--failure-tag` in a process's own argument memory,
/// which is what `/proc/PID/cmdline` shows to every process, confined ones included. The
/// runner and the launcher's namespace stage call it from their C `main`, after copying
/// their arguments (std reads them lazily from the same memory): from then on the tag is
/// only in private memory, which `execve` discards.
///
/// # Safety
/// `argv` must hold `argc` valid NUL-terminated strings in writable memory (what the
/// kernel hands `main`), and no other thread may read them during the call.
pub unsafe fn scrub_from_argv(argc: std::ffi::c_int, argv: *const *const std::ffi::c_char) {
    let argc = usize::try_from(argc).unwrap_or(0);
    for i in 1..argc.saturating_sub(1) {
        // SAFETY: by the contract above, argv[i] is a valid NUL-terminated string.
        let flag = unsafe { std::ffi::CStr::from_ptr(*argv.add(i)) };
        if flag.to_bytes() != FLAG.as_bytes() {
            continue;
        }
        // SAFETY: argv[i + 1] is one of those strings, in writable memory that nothing
        // else reads now; its `len` bytes (not the NUL) are overwritten in place.
        unsafe {
            let value = *argv.add(i + 1) as *mut u8;
            let len = std::ffi::CStr::from_ptr(value.cast()).to_bytes().len();
            std::ptr::write_bytes(value, b'x', len);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_are_hex_and_the_signature_matches_only_the_tagged_line() {
        let tag = from_bytes(&[0xab; 16]);
        assert!(is_valid(&tag));
        for bad in ["", "AB", "a b", "a\nb", "]", &"a".repeat(MAX_LEN + 1)] {
            assert!(!is_valid(bad), "{bad:?}");
        }
        let line = format!("{}request file is truncated", line_prefix(Some(&tag)));
        assert!(line.starts_with(RUNNER_PREFIX));
        assert!(line.contains(&signature(&tag)));
        let forged = format!("{RUNNER_PREFIX}request file is truncated");
        assert!(!forged.contains(&signature(&tag)));
        assert_eq!(line_prefix(None), RUNNER_PREFIX);
    }
}
