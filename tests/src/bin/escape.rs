//! Ways a command tries to outlive or stall its supervisor, for the supervision tests.
//! - `zombie-leader FILE`: the thread-group leader exits while another thread keeps
//!   running; that thread creates FILE once the leader is gone, then sleeps for ever.
//! - `fork-loop FILE`: ignores SIGTERM, creates FILE, then forks and exits in a loop,
//!   each child starting a new session, so no process lives long and none stays in a
//!   known group.

use std::time::Duration;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .as_slice()
    {
        ["zombie-leader", file] => zombie_leader(file),
        ["fork-loop", file] => fork_loop(file),
        _ => {
            eprintln!("usage: escape zombie-leader FILE | fork-loop FILE");
            std::process::exit(2);
        }
    }
}

fn zombie_leader(file: &str) -> ! {
    let leader = std::process::id();
    let file = file.to_string();
    std::thread::spawn(move || {
        // Wait until the leader shows as a zombie, then say so.
        loop {
            let stat = std::fs::read_to_string(format!("/proc/{leader}/stat")).unwrap_or_default();
            let state = stat
                .rfind(')')
                .and_then(|i| stat[i + 1..].split_whitespace().next());
            if state == Some("Z") {
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        std::fs::write(&file, b"").expect("write the ready file");
        loop {
            std::thread::sleep(Duration::from_secs(1000));
        }
    });
    // SAFETY: exit(2) ends only the calling thread; the other thread keeps the process.
    unsafe {
        libc::syscall(libc::SYS_exit, 0);
    }
    unreachable!("SYS_exit returned");
}

fn fork_loop(file: &str) -> ! {
    // SAFETY: sets the ignore disposition for one signal; no handler runs.
    unsafe {
        libc::signal(libc::SIGTERM, libc::SIG_IGN);
    }
    std::fs::write(file, b"").expect("write the ready file");
    loop {
        // SAFETY: fork in a single-threaded process; each side makes only system calls.
        match unsafe { libc::fork() } {
            0 => {
                // SAFETY: setsid changes only this process's session.
                unsafe {
                    libc::setsid();
                }
            }
            // SAFETY: _exit ends this generation without running destructors.
            pid if pid > 0 => unsafe { libc::_exit(0) },
            _ => std::thread::sleep(Duration::from_millis(1)),
        }
    }
}
