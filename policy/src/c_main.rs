//! The arguments a C `main` received, for the two binaries that enter there.
//!
//! `std::env::args_os` is filled from `argv` only by glibc, which hands it to std's
//! initialiser; under musl (and any C library that does not) it is empty in a binary
//! that enters at the C `main`. Both binaries therefore read their arguments here.

use std::ffi::{CStr, OsStr, OsString, c_char, c_int};
use std::os::unix::ffi::OsStrExt;

/// The arguments as `main` received them.
///
/// # Safety
/// `argv` holds `argc` valid NUL-terminated strings, as the kernel lays them out, and
/// nothing changes them during the call.
pub unsafe fn arguments(argc: c_int, argv: *const *const c_char) -> Vec<OsString> {
    let count = usize::try_from(argc).unwrap_or(0);
    (0..count)
        .map(|i| {
            // SAFETY: i < argc, and each of those entries is a valid C string.
            let arg = unsafe { CStr::from_ptr(*argv.add(i)) };
            OsStr::from_bytes(arg.to_bytes()).to_os_string()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_argument_is_read_byte_for_byte_up_to_argc() {
        let words: [&CStr; 3] = [c"stockade", c"--x", c"\xff not utf-8"];
        let argv: Vec<*const c_char> = words
            .iter()
            .map(|w| w.as_ptr())
            .chain([std::ptr::null()])
            .collect();
        // SAFETY: argv holds three valid C strings and a terminating null.
        let args = unsafe { arguments(3, argv.as_ptr()) };
        assert_eq!(args.len(), 3);
        assert_eq!(args[2].as_bytes(), b"\xff not utf-8");
        // SAFETY: as above; fewer than there are.
        let first = unsafe { arguments(1, argv.as_ptr()) };
        assert_eq!(first, vec![OsString::from("stockade")]);
        // SAFETY: nothing is read for a count of zero or less.
        assert!(unsafe { arguments(-1, argv.as_ptr()) }.is_empty());
    }
}
