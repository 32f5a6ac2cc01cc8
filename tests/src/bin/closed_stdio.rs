//! `closed-stdio CMD ARGS...`: runs CMD with its stdin and stdout closed (stderr kept
//! for diagnostics), to prove what a program does when started that way.
#![allow(clippy::undocumented_unsafe_blocks)] // A test helper made of raw system calls.

use std::os::unix::process::CommandExt;

fn main() {
    let args: Vec<_> = std::env::args_os().skip(1).collect();
    if args.is_empty() {
        eprintln!("usage: closed-stdio CMD [ARGS...]");
        std::process::exit(2);
    }
    unsafe {
        libc::close(0);
        libc::close(1);
    }
    let err = std::process::Command::new(&args[0]).args(&args[1..]).exec();
    eprintln!("closed-stdio: cannot exec {:?}: {err}", args[0]);
    std::process::exit(127);
}
