//! Test helper: the `#!` window's racer. Watches one file with inotify and, on its
//! NTH open event, exchanges it once with another file (`renameat2(RENAME_EXCHANGE)`),
//! as another command of the same user could: the runner has checked the script by then,
//! and its interpreter, which opens it again by name, reads the other file.
//!
//! usage: racer FILE OTHER NTH
//! Prints `ready` once the watch is in place, `swapped` after the exchange, then exits;
//! the test ends it when the run finished without an NTH open.

use std::ffi::CString;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;

fn cstring(arg: &std::ffi::OsStr) -> CString {
    CString::new(arg.as_bytes()).expect("no NUL in a path")
}

fn fail(what: &str) -> ! {
    eprintln!("racer: {what}: {}", std::io::Error::last_os_error());
    std::process::exit(2)
}

fn main() {
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    let [file, other, nth] = args.as_slice() else {
        eprintln!("usage: racer FILE OTHER NTH");
        std::process::exit(2)
    };
    let nth: usize = nth.to_str().and_then(|n| n.parse().ok()).unwrap_or(2);
    let (file, other) = (cstring(file), cstring(other));
    // SAFETY: no pointers; returns a new descriptor or -1.
    let fd = unsafe { libc::inotify_init1(libc::IN_CLOEXEC) };
    if fd < 0 {
        fail("inotify_init1");
    }
    // SAFETY: `file` is a valid NUL-terminated path for the duration of the call.
    if unsafe { libc::inotify_add_watch(fd, file.as_ptr(), libc::IN_OPEN) } < 0 {
        fail("inotify_add_watch");
    }
    println!("ready");
    let _ = std::io::stdout().flush();
    let mut opens = 0;
    let mut buf = [0u8; 4096];
    loop {
        // SAFETY: reads into `buf`, which outlives the call, at most its length.
        let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
        if n <= 0 {
            fail("read");
        }
        // Each event is a header plus its (here empty) name; count the headers.
        let mut at = 0usize;
        while at + std::mem::size_of::<libc::inotify_event>() <= n as usize {
            // SAFETY: the kernel wrote a whole event at `at`; read_unaligned copes with
            // the byte buffer's alignment.
            let event: libc::inotify_event =
                unsafe { std::ptr::read_unaligned(buf.as_ptr().add(at).cast()) };
            at += std::mem::size_of::<libc::inotify_event>() + event.len as usize;
            if event.mask & libc::IN_OPEN != 0 {
                opens += 1;
            }
            if opens == nth {
                // SAFETY: both paths are valid NUL-terminated strings for the call.
                // (Through syscall(2): musl has no renameat2 wrapper.)
                let rc = unsafe {
                    libc::syscall(
                        libc::SYS_renameat2,
                        libc::AT_FDCWD,
                        file.as_ptr(),
                        libc::AT_FDCWD,
                        other.as_ptr(),
                        libc::RENAME_EXCHANGE,
                    )
                };
                if rc != 0 {
                    fail("renameat2");
                }
                println!("swapped");
                return;
            }
        }
    }
}
