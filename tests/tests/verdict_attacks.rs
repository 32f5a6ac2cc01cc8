//! Attacks on what stockade tells its caller afterwards (found by review): inputs the
//! command controls (its stderr, its processes' command lines, the filesystem it shares
//! with the control directory) must not make `classify` or `stockade run` exhaust
//! memory, print what the command wrote into stockade's own marker lines, or lose a
//! record.

mod support;
use support::*;

use std::os::unix::process::CommandExt;

/// Limits the address space of the process `cmd` starts to `bytes`.
fn with_address_space(cmd: &mut std::process::Command, bytes: u64) -> &mut std::process::Command {
    // SAFETY: the hook runs in the forked child before exec and only calls setrlimit on
    // a local struct, which is async-signal-safe.
    unsafe {
        cmd.pre_exec(move || {
            let limit = libc::rlimit {
                rlim_cur: bytes,
                rlim_max: bytes,
            };
            if libc::setrlimit(libc::RLIMIT_AS, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        })
    }
}

/// `stockade classify` on a stderr of 16 MiB of line breaks ending in a denial: what a
/// command that prints them costs `classify` is what it reads, not 16 bytes per line
/// (the list of its lines alone took 256 MiB, and an executor passing the 64 MiB
/// `classify` accepts made it hold more than 1 GiB). Judged under an address-space
/// limit of 192 MiB.
#[test]
fn classify_reads_a_stderr_of_line_breaks_in_bounded_memory() {
    let fx = Fixture::new();
    let mut stderr = vec![b'\n'; 16 << 20];
    stderr.extend_from_slice(b"cat: x: Permission denied\n");
    let err = fx.root.join("stderr");
    std::fs::write(&err, &stderr).unwrap();
    // Spawns a ConfinedArgv, then classifies it as failed with that stderr.
    let classify = |c: &serde_json::Value, limit: Option<u64>| {
        assert_code(&spawn_argv(c), 0);
        let confined = fx.root.join(format!("confined-{}.json", unique_tag("c")));
        std::fs::write(&confined, c.to_string()).unwrap();
        let mut cmd = fx.stockade([
            "classify",
            "--confined",
            confined.to_str().unwrap(),
            "--exit-code",
            "1",
            "--stderr",
            err.to_str().unwrap(),
        ]);
        if let Some(bytes) = limit {
            with_address_space(&mut cmd, bytes);
        }
        let out = cmd.output().unwrap();
        assert_code(&out, 0);
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()
    };
    let limited = classify(&fx.confine(&["--mode", "read-only", "--", "true"]), Some(192 << 20));
    assert_eq!(limited["outcome"], "denied", "{limited}");
    assert_eq!(limited["detail"], "cat: x: Permission denied", "{limited}");
    // The same verdict without the limit: it bounds memory, it does not change answers.
    let free = classify(&fx.confine(&["--mode", "read-only", "--", "true"]), None);
    assert_eq!(free["outcome"], limited["outcome"]);
    assert_eq!(free["detail"], limited["detail"]);
}
