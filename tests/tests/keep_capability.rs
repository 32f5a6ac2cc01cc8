//! `--keep-capability`: a command started as root keeps exactly the file-access
//! capabilities named (and holds none without the flag), which lets it reach a workspace
//! owned by another uid, while the sandbox's other layers still hold: Landlock's write
//! rules and hidden paths, the stage's read-only system, and the stage's watch over shared
//! roots. Each denial has its control: the same action succeeding where the policy (or
//! the capability) allows it.

mod support;

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Output;
use support::*;

/// A uid and gid nobody on the machine uses: files of "another user".
const OTHER: u32 = 4242;
const EROFS: &str = "Read-only file system";

fn chown(p: &Path, uid: u32) {
    std::os::unix::fs::chown(p, Some(uid), Some(uid)).unwrap();
}

fn chmod(p: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
}

fn owner_and_mode(p: &Path) -> (u32, u32) {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(p).unwrap();
    (m.uid(), m.mode() & 0o7777)
}

/// `stockade run [ARGS] -- sh -c SCRIPT`.
fn sh(fx: &Fixture, args: &[&str], script: &str) -> Output {
    fx.stockade(["run"])
        .args(args)
        .args(["--", "sh", "-c", script])
        .output()
        .unwrap()
}

fn staged_here(fx: &Fixture) -> bool {
    let out = fx.stockade(["probe", "--json"]).output().unwrap();
    let p: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    p["kernel"]["namespaces"]["available"] == true
}

/// Both layers' fixtures: Landlock and seccomp alone, and with the namespace stage where
/// this machine has it.
fn fixtures() -> Vec<(&'static str, Fixture)> {
    let mut all = vec![("unstaged", Fixture::new())];
    let staged = Fixture::staged();
    if staged_here(&staged) {
        all.push(("staged", staged));
    } else {
        eprintln!("(no namespaces here: the staged half is skipped)");
    }
    all
}

/// Removes capability `cap` from the bounding set of the process about to exec: root
/// gets its bounding set at `execve`, so what runs lacks exactly that one.
fn without_capability(cmd: &mut std::process::Command, cap: u32) {
    // SAFETY: the closure runs in the forked child before exec and only calls prctl,
    // which is async-signal-safe.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_CAPBSET_DROP, cap as libc::c_ulong, 0, 0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

const CAP_DAC_OVERRIDE: u32 = 1;

#[test]
fn a_workspace_of_another_uid_is_writable_by_root_only_with_dac_override() {
    if !stockade_tests::is_root() {
        eprintln!(
            "SKIPPED (needs root): a_workspace_of_another_uid_is_writable_by_root_only_with_dac_override"
        );
        return;
    }
    for (what, fx) in fixtures() {
        // The bind-mounted workspace of a container: someone else's, not writable by
        // others.
        chown(&fx.ws, OTHER);
        chmod(&fx.ws, 0o755);
        let out = sh(&fx, &[], "echo x > made");
        assert_ne!(out.status.code(), Some(0), "{what}: {out:?}");
        assert!(
            text(&out.stderr).contains("Permission denied"),
            "{what}: {}",
            text(&out.stderr)
        );
        assert!(!fx.ws.join("made").exists(), "{what}");

        let out = sh(
            &fx,
            &["--keep-capability", "dac_override"],
            "echo x > made && cat made",
        );
        assert_code(&out, 0);
        assert_eq!(text(&out.stdout), "x\n", "{what}");

        // The executor's path: confine (here with the kernel's spelling) and spawn.
        std::fs::remove_file(fx.ws.join("made")).unwrap();
        let c = fx.confine(&[
            "--keep-capability",
            "CAP_DAC_OVERRIDE",
            "--",
            "sh",
            "-c",
            "echo y > made",
        ]);
        let out = spawn_argv(&c);
        assert_code(&out, 0);
        assert_eq!(std::fs::read_to_string(fx.ws.join("made")).unwrap(), "y\n");
    }
}

#[test]
fn the_command_and_what_it_starts_hold_exactly_the_kept_capabilities() {
    if !stockade_tests::is_root() {
        eprintln!(
            "SKIPPED (needs root): the_command_and_what_it_starts_hold_exactly_the_kept_capabilities"
        );
        return;
    }
    let sets = |out: &Output| -> Vec<String> {
        assert_code(out, 0);
        text(&out.stdout)
            .lines()
            .filter(|l| l.starts_with("Cap"))
            .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
            .collect()
    };
    let all = |hex: &str| -> Vec<String> {
        ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"]
            .iter()
            .map(|n| format!("{n}: {hex}"))
            .collect()
    };
    for (what, fx) in fixtures() {
        // The command itself, and a program it starts (another execve).
        for argv in [
            &["cat", "/proc/self/status"][..],
            &["sh", "-c", "cat /proc/self/status; true"],
        ] {
            let out = fx.stockade(["run", "--"]).args(argv).output().unwrap();
            assert_eq!(sets(&out), all("0000000000000000"), "{what} {argv:?}");
            let out = fx
                .stockade([
                    "run",
                    "--keep-capability",
                    "dac_override",
                    "--keep-capability",
                    "CAP_FOWNER",
                    "--",
                ])
                .args(argv)
                .output()
                .unwrap();
            // CAP_DAC_OVERRIDE is 1, CAP_FOWNER 3.
            assert_eq!(sets(&out), all("000000000000000a"), "{what} {argv:?}");
        }
    }
}

#[test]
fn landlock_still_denies_writes_outside_the_roots_with_every_capability_kept() {
    if !stockade_tests::is_root() {
        eprintln!(
            "SKIPPED (needs root): landlock_still_denies_writes_outside_the_roots_with_every_capability_kept"
        );
        return;
    }
    // Landlock and seccomp alone: the stage's read-only mounts would answer first.
    let fx = Fixture::new();
    // Another user's directory: only the capability lets root write it at all.
    chown(&fx.outside, OTHER);
    chmod(&fx.outside, 0o755);
    let target = fx.outside.join("f");
    let script = format!("echo x > {}", target.display());
    let all = [
        "--keep-capability",
        "chown",
        "--keep-capability",
        "dac_override",
        "--keep-capability",
        "dac_read_search",
        "--keep-capability",
        "fowner",
    ];
    let out = sh(&fx, &all, &script);
    assert_ne!(out.status.code(), Some(0), "{out:?}");
    assert!(
        text(&out.stderr).contains("[sandbox: file access denied under workspace-write mode]"),
        "{}",
        text(&out.stderr)
    );
    assert!(!target.exists());
    // Control: granted, the same write succeeds, which it could not without the
    // capability (the denial above is Landlock's, not the owner's).
    let outside = fx.outside.to_str().unwrap();
    let granted = [&all[..], &["--writable", outside]].concat();
    let out = sh(&fx, &granted, &script);
    assert_code(&out, 0);
    assert!(target.exists());
    std::fs::remove_file(&target).unwrap();
    let out = sh(&fx, &["--writable", outside], &script);
    assert_ne!(out.status.code(), Some(0), "{out:?}");
    assert!(!target.exists());
}

#[test]
fn a_hidden_path_stays_unreadable_with_the_read_capabilities_kept() {
    if !stockade_tests::is_root() {
        eprintln!(
            "SKIPPED (needs root): a_hidden_path_stays_unreadable_with_the_read_capabilities_kept"
        );
        return;
    }
    for (what, fx) in fixtures() {
        // Another user's private file: unreadable to root without a capability.
        let secret = fx.outside.join("secret");
        std::fs::write(&secret, "s3cret\n").unwrap();
        chown(&secret, OTHER);
        chmod(&secret, 0o600);
        let script = format!("cat {}", secret.display());
        let hide = ["--hide", secret.to_str().unwrap()];
        for caps in [
            &["--keep-capability", "dac_read_search"][..],
            &["--keep-capability", "dac_override"],
            &[
                "--keep-capability",
                "dac_read_search",
                "--keep-capability",
                "dac_override",
            ],
        ] {
            let out = sh(&fx, &[caps, &hide[..]].concat(), &script);
            assert_ne!(out.status.code(), Some(0), "{what} {caps:?}: {out:?}");
            assert!(!text(&out.stdout).contains("s3cret"), "{what} {caps:?}");
            // Control: not hidden, the capability reads it.
            let out = sh(&fx, caps, &script);
            assert_code(&out, 0);
            assert_eq!(text(&out.stdout), "s3cret\n", "{what} {caps:?}");
        }
        // Control: without a capability the owner's mode keeps root out anyway.
        let out = sh(&fx, &[], &script);
        assert_ne!(out.status.code(), Some(0), "{what}: {out:?}");
        assert!(!text(&out.stdout).contains("s3cret"), "{what}");
    }
}

#[test]
fn owners_and_modes_outside_the_roots_stay_read_only_with_chown_and_fowner_kept() {
    if !stockade_tests::is_root() {
        eprintln!(
            "SKIPPED (needs root): owners_and_modes_outside_the_roots_stay_read_only_with_chown_and_fowner_kept"
        );
        return;
    }
    let fx = Fixture::staged();
    if !staged_here(&fx) {
        eprintln!("SKIPPED (needs namespaces): owners_and_modes_outside_the_roots_stay_read_only");
        return;
    }
    let keep = ["--keep-capability", "chown", "--keep-capability", "fowner"];
    let outside = fx.outside.join("f");
    let inside = fx.ws.join("f");
    for f in [&outside, &inside] {
        std::fs::write(f, "").unwrap();
        chown(f, OTHER);
        chmod(f, 0o644);
    }
    for (change, want) in [
        ("chown 4343:4343", (4343, 0o644)),
        ("chmod 600", (OTHER, 0o600)),
    ] {
        let out = sh(&fx, &keep, &format!("{change} {}", outside.display()));
        assert_ne!(out.status.code(), Some(0), "{change}: {out:?}");
        assert!(text(&out.stderr).contains(EROFS), "{}", text(&out.stderr));
        assert_eq!(owner_and_mode(&outside), (OTHER, 0o644), "{change}");
        // Control: inside the workspace the capabilities do what they are kept for...
        let out = sh(&fx, &keep, &format!("{change} {}", inside.display()));
        assert_code(&out, 0);
        assert_eq!(owner_and_mode(&inside), want, "{change}");
        chown(&inside, OTHER);
        chmod(&inside, 0o644);
        // ...which root without them cannot do to a file it does not own.
        let out = sh(&fx, &[], &format!("{change} {}", inside.display()));
        assert_ne!(out.status.code(), Some(0), "{change}: {out:?}");
        assert_eq!(owner_and_mode(&inside), (OTHER, 0o644), "{change}");
    }
}

#[test]
fn a_shared_root_given_away_with_chown_is_taken_back_by_the_stage() {
    if !stockade_tests::is_root() {
        eprintln!(
            "SKIPPED (needs root): a_shared_root_given_away_with_chown_is_taken_back_by_the_stage"
        );
        return;
    }
    // On the confine path, with no `stockade run` to look afterwards: the stage's
    // watcher, which no longer owns the directory once the command gave it away, must
    // still be able to take it back.
    let fx = Fixture::staged();
    if !staged_here(&fx) {
        eprintln!("SKIPPED (needs namespaces): a_shared_root_given_away_with_chown");
        return;
    }
    // Shaped like /tmp and owned by root, so the rule for the machine's /tmp applies
    // without touching it.
    let d = fx.root.join("shared");
    std::fs::create_dir(&d).unwrap();
    chmod(&d, 0o1777);
    let ds = d.to_str().unwrap();
    for pids in ["--isolate-pids", "--share-pids"] {
        // Not read back with stat: the watcher may put it back before stat runs (no
        // timing assumed); the report's `found` below proves the change happened.
        let script = format!("chown {OTHER}:{OTHER} {ds} && echo gave");
        let c = fx.confine(&[
            pids,
            "--keep-capability",
            "chown",
            "--writable",
            ds,
            "--",
            "sh",
            "-c",
            &script,
        ]);
        let out = spawn_argv(&c);
        assert_code(&out, 0);
        // The command did give it away...
        assert_eq!(text(&out.stdout), "gave\n", "{pids}");
        // ...and it is root's again, as it was.
        assert_eq!(owner_and_mode(&d), (0, 0o1777), "{pids}: not taken back");
        let report = fx.root.join("confined.json");
        std::fs::write(&report, c.to_string()).unwrap();
        let res = fx
            .stockade(["classify", "--confined", report.to_str().unwrap()])
            .args(["--exit-code", "0"])
            .output()
            .unwrap();
        assert_code(&res, 0);
        let v: serde_json::Value = serde_json::from_slice(&res.stdout).unwrap();
        assert_eq!(v["outcome"], "tampered", "{pids}: {v}");
        assert_eq!(v["sharedRootsChanged"][0]["putBack"], true, "{v}");
        assert_eq!(v["sharedRootsChanged"][0]["found"]["uid"], OTHER, "{v}");
    }
}

#[test]
fn a_capability_off_the_allow_list_is_refused_and_nothing_runs() {
    let fx = Fixture::new();
    let ran = fx.ws.join("ran");
    let script = format!("touch {}", ran.display());
    for name in [
        "sys_admin",
        "CAP_SETUID",
        "setgid",
        "sys_ptrace",
        "net_admin",
        "net_raw",
        "sys_module",
        "mknod",
        "setfcap",
        "linux_immutable",
        "fsetid",
        "all",
        "",
    ] {
        for sub in ["run", "confine"] {
            let out = fx
                .stockade([sub, "--keep-capability", name, "--", "sh", "-c", &script])
                .output()
                .unwrap();
            assert_code(&out, 125);
            let line = launcher_failure_line(&out);
            assert!(
                line.contains("CAP_CHOWN, CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER"),
                "{name}: {line}"
            );
            if !name.is_empty() && name != "all" {
                let upper = name.to_uppercase();
                let bare = upper.trim_start_matches("CAP_");
                assert!(
                    line.contains(&format!("CAP_{bare} cannot be kept")),
                    "{line}"
                );
            }
            assert!(out.stdout.is_empty(), "{sub} {name}");
            assert!(
                !ran.exists(),
                "{sub} --keep-capability {name} ran the command"
            );
        }
    }
    assert!(fx.leftover_requests().is_empty());
    // Where nothing is confined there is nothing to keep, and in read-only mode owners
    // and modes cannot change at all: refused like every flag that means nothing there.
    for args in [
        &[
            "--mode",
            "danger-full-access",
            "--keep-capability",
            "dac_override",
        ][..],
        &["--mode", "read-only", "--keep-capability", "chown"],
        &["--mode", "read-only", "--keep-capability", "fowner"],
    ] {
        let out = fx
            .stockade(["run"])
            .args(args)
            .args(["--", "sh", "-c", &script])
            .output()
            .unwrap();
        assert_code(&out, 125);
        assert!(
            launcher_failure_line(&out).contains("has no effect"),
            "{args:?}"
        );
        assert!(!ran.exists(), "{args:?}");
    }
}

#[test]
fn a_caller_that_does_not_hold_the_capability_is_refused() {
    let fx = Fixture::new();
    let ran = fx.ws.join("ran");
    let script = format!("touch {}", ran.display());
    let mut cmd = fx.stockade(["run", "--keep-capability", "dac_override", "--", "sh", "-c"]);
    cmd.arg(&script);
    if stockade_tests::is_root() {
        // Root without it: a container's root may lack some capabilities.
        without_capability(&mut cmd, CAP_DAC_OVERRIDE);
    }
    let out = cmd.output().unwrap();
    assert_code(&out, 125);
    let line = launcher_failure_line(&out);
    assert!(
        line.starts_with("stockade: --keep-capability CAP_DAC_OVERRIDE: this process"),
        "{line}"
    );
    assert!(line.contains("does not hold it"), "{line}");
    assert!(!ran.exists());
    if stockade_tests::is_root() {
        // Control: one it does hold is kept.
        let mut cmd = fx.stockade(["run", "--keep-capability", "fowner", "--", "sh", "-c"]);
        cmd.arg(&script);
        without_capability(&mut cmd, CAP_DAC_OVERRIDE);
        assert_code(&cmd.output().unwrap(), 0);
        assert!(ran.exists());
    } else {
        assert!(line.contains("only root holds capabilities"), "{line}");
    }
}

#[test]
fn the_runner_refuses_to_start_without_a_capability_the_request_keeps() {
    if !stockade_tests::is_root() {
        eprintln!(
            "SKIPPED (needs root): the_runner_refuses_to_start_without_a_capability_the_request_keeps"
        );
        return;
    }
    // Confined by root, spawned by a process that lacks the capability: keeping less
    // than the report says would show up as a denial of the very file it was kept for.
    let fx = Fixture::new();
    let ran = fx.ws.join("ran");
    let script = format!("touch {}", ran.display());
    let c = fx.confine(&[
        "--keep-capability",
        "dac_override",
        "--",
        "sh",
        "-c",
        &script,
    ]);
    let argv = confined_argv(&c);
    let mut cmd = std::process::Command::new(&argv[0]);
    cmd.args(&argv[1..]).stdin(std::process::Stdio::null());
    without_capability(&mut cmd, CAP_DAC_OVERRIDE);
    let out = cmd.output().unwrap();
    assert_code(&out, 125);
    let line = runner_failure_line(&out);
    assert!(
        line.contains("capabilities: the request keeps CAP_DAC_OVERRIDE"),
        "{line}"
    );
    assert!(!ran.exists());
    // Control: the same request spawned with it runs.
    let c = fx.confine(&[
        "--keep-capability",
        "dac_override",
        "--",
        "sh",
        "-c",
        &script,
    ]);
    assert_code(&spawn_argv(&c), 0);
    assert!(ran.exists());
}

#[test]
fn confine_and_explain_name_the_kept_capabilities() {
    if !stockade_tests::is_root() {
        eprintln!("SKIPPED (needs root): confine_and_explain_name_the_kept_capabilities");
        return;
    }
    let fx = Fixture::new();
    let explain = |c: &serde_json::Value| {
        let argv = confined_argv(c);
        let file = &argv[argv.iter().position(|a| a == "--request").unwrap() + 1];
        let out = fx.stockade(["explain", file]).output().unwrap();
        assert_code(&out, 0);
        text(&out.stdout)
    };
    let plain = fx.confine(&["--", "true"]);
    assert_eq!(plain["guarantees"]["capabilities"]["status"], "enforced");
    assert!(
        explain(&plain).contains("capabilities: none: every set is cleared"),
        "{}",
        explain(&plain)
    );
    let kept = fx.confine(&[
        "--keep-capability",
        "dac_read_search",
        "--keep-capability",
        "chown",
        "--",
        "true",
    ]);
    let caps = &kept["guarantees"]["capabilities"];
    assert_eq!(caps["status"], "not-requested", "{caps}");
    assert_eq!(caps["required"], false, "{caps}");
    let note = caps["note"].as_str().unwrap();
    assert!(
        note.contains("keeps CAP_CHOWN, CAP_DAC_READ_SEARCH"),
        "{note}"
    );
    // Not a file effect the mode promises: the same enforcement as without.
    assert_eq!(kept["enforcement"], plain["enforcement"]);
    let shown = explain(&kept);
    assert!(
        shown.contains("capabilities: the command keeps CAP_CHOWN, CAP_DAC_READ_SEARCH"),
        "{shown}"
    );
    let reported = |shown: &str| -> Vec<String> {
        let line = shown
            .lines()
            .find_map(|l| l.strip_prefix("guarantees reported enforced: "))
            .unwrap_or_else(|| panic!("{shown}"));
        line.split(", ").map(str::to_string).collect()
    };
    assert!(
        !reported(&shown).contains(&"capabilities".to_string()),
        "{shown}"
    );
    assert!(reported(&explain(&plain)).contains(&"capabilities".to_string()));
}

#[test]
fn open_by_handle_at_stays_refused_with_dac_read_search_kept() {
    if !stockade_tests::is_root() {
        eprintln!(
            "SKIPPED (needs root): open_by_handle_at_stays_refused_with_dac_read_search_kept"
        );
        return;
    }
    // The one call CAP_DAC_READ_SEARCH opens beyond reading: a file opened by handle
    // passes no path on the way. Held now, only the filter stands in its way (the file
    // is one every mode may read, so nothing else would refuse it).
    let fx = Fixture::new();
    let attack = |mode: &str, keep: &[&str]| {
        let out = fx
            .stockade(["run", "--mode", mode])
            .args(keep)
            .arg("--")
            .arg(bin("attack"))
            .args(["open-by-handle", "/etc/passwd"])
            .output()
            .unwrap();
        text(&out.stdout).lines().next().unwrap_or("").to_string()
    };
    let keep = ["--keep-capability", "dac_read_search"];
    for mode in ["read-only", "workspace-write"] {
        assert_eq!(attack(mode, &keep), "errno EPERM", "{mode}");
    }
    // Control: unconfined, the call opens the file.
    assert_eq!(attack("danger-full-access", &[]), "ok");
}

#[test]
fn under_securebits_noroot_the_kept_capabilities_still_reach_the_command() {
    if !stockade_tests::is_root() {
        eprintln!(
            "SKIPPED (needs root): under_securebits_noroot_the_kept_capabilities_still_reach_the_command"
        );
        return;
    }
    // A container may run root with SECBIT_NOROOT: uid 0 then gets nothing at execve by
    // being root, and only ambient capabilities pass through. The runner is given
    // CAP_DAC_OVERRIDE that way here, and must pass it on the same way.
    let fx = Fixture::new();
    let c = fx.confine(&[
        "--keep-capability",
        "dac_override",
        "--",
        "grep",
        "^Cap",
        "/proc/self/status",
    ]);
    let argv = confined_argv(&c);
    let mut cmd = std::process::Command::new(&argv[0]);
    cmd.args(&argv[1..]).stdin(std::process::Stdio::null());
    // SAFETY: the closure runs in the forked child before exec and only makes system
    // calls (capget, capset, prctl) on locals.
    unsafe {
        cmd.pre_exec(|| {
            #[repr(C)]
            struct Header {
                version: u32,
                pid: libc::c_int,
            }
            let mut h = Header {
                version: 0x2008_0522,
                pid: 0,
            };
            let mut d = [[0u32; 3]; 2];
            if libc::syscall(libc::SYS_capget, &mut h as *mut Header, d.as_mut_ptr()) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // Inheritable too: an ambient capability must be both.
            d[0][2] |= 1 << CAP_DAC_OVERRIDE;
            let ok = libc::syscall(libc::SYS_capset, &mut h as *mut Header, d.as_ptr()) == 0
                && libc::prctl(
                    libc::PR_CAP_AMBIENT,
                    libc::PR_CAP_AMBIENT_RAISE as libc::c_ulong,
                    CAP_DAC_OVERRIDE as libc::c_ulong,
                    0,
                    0,
                ) == 0
                // SECBIT_NOROOT.
                && libc::prctl(libc::PR_SET_SECUREBITS, 1 as libc::c_ulong, 0, 0, 0) == 0;
            if !ok {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let out = cmd.output().unwrap();
    assert_code(&out, 0);
    let eff = text(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:").map(|v| v.trim().to_string()))
        .unwrap();
    assert_eq!(eff, "0000000000000002", "{}", text(&out.stdout));
    // Control: under the same bits without the flag the command holds none.
    let c = fx.confine(&["--", "grep", "^CapEff", "/proc/self/status"]);
    let argv = confined_argv(&c);
    let mut cmd = std::process::Command::new(&argv[0]);
    cmd.args(&argv[1..]).stdin(std::process::Stdio::null());
    // SAFETY: as above: one prctl in the child before exec.
    unsafe {
        cmd.pre_exec(|| {
            if libc::prctl(libc::PR_SET_SECUREBITS, 1 as libc::c_ulong, 0, 0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let out = cmd.output().unwrap();
    assert_code(&out, 0);
    assert_eq!(text(&out.stdout).trim(), "CapEff:\t0000000000000000");
}

/// Removes a directory tree made for a test, whatever happens to the test.
struct RemoveTree(std::path::PathBuf);

impl Drop for RemoveTree {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A 0700 tree of `OTHER`'s at `dir`, shaped like a control base: a request directory
/// holding a spill file of their command's output. Returns the spill file.
fn other_users_base(dir: &Path) -> std::path::PathBuf {
    let request = dir.join("req-1-abc");
    std::fs::create_dir_all(&request).unwrap();
    let spill = request.join("stdout");
    std::fs::write(&spill, "their output\n").unwrap();
    for p in [dir, request.as_path(), spill.as_path()] {
        chown(p, OTHER);
        chmod(p, 0o700);
    }
    spill
}

#[test]
fn another_users_control_base_is_hidden_from_a_command_keeping_a_read_capability() {
    // Other users' control bases are private by their 0700 modes alone, which a kept DAC
    // capability reads past: their spill files hold their commands' output.
    if !stockade_tests::is_root() {
        eprintln!("SKIPPED (needs root): another_users_control_base_is_hidden");
        return;
    }
    let base = std::path::PathBuf::from(format!("/run/stockade-{OTHER}"));
    if base.symlink_metadata().is_ok() {
        eprintln!(
            "SKIPPED ({} exists already): another_users_control_base",
            base.display()
        );
        return;
    }
    let _remove = RemoveTree(base.clone());
    let spill = other_users_base(&base);
    for (what, fx) in fixtures() {
        // Control: the same tree anywhere else is read with the capability, so what
        // keeps the base out is the hiding, not the modes.
        let elsewhere = other_users_base(&fx.outside.join("not-a-base"));
        for cap in ["dac_read_search", "dac_override"] {
            let caps = ["--keep-capability", cap];
            let out = sh(&fx, &caps, &format!("cat {}", spill.display()));
            assert_ne!(out.status.code(), Some(0), "{what} {cap}: {out:?}");
            assert!(!text(&out.stdout).contains("their output"), "{what} {cap}");
            let out = sh(&fx, &caps, &format!("cat {}", elsewhere.display()));
            assert_code(&out, 0);
            assert_eq!(text(&out.stdout), "their output\n", "{what} {cap}");
        }
        // Workload: without a DAC capability the base is not carved (the modes keep the
        // command out) and commands run as ever.
        let out = sh(&fx, &[], "echo ran");
        assert_code(&out, 0);
    }
}
