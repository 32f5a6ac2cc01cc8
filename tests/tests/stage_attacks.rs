//! Attacks on the namespace stage found by review, each with its positive control: the
//! stage must neither widen what a command may do (a host read-only mount made writable)
//! nor break what it may do (relative paths in an inherited working directory), and what
//! an earlier command plants must not turn into a runner failure for every later one.

mod support;

use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Stdio};
use support::*;

fn staged_here(fx: &Fixture) -> bool {
    let out = fx.stockade(["probe", "--json"]).output().unwrap();
    let p: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    p["kernel"]["namespaces"]["available"] == true
}

#[test]
fn an_inherited_working_directory_is_the_one_on_the_new_mounts() {
    let fx = Fixture::staged();
    if !staged_here(&fx) {
        eprintln!("SKIPPED (needs namespaces): an_inherited_working_directory");
        return;
    }
    let c = fx.confine(&["--inherit-cwd", "--", "sh", "-c", "touch rel && echo ok"]);
    assert_eq!(c["argv"][1], "__stage", "{c}");
    let argv = confined_argv(&c);
    let out = Command::new(&argv[0])
        .args(&argv[1..])
        .current_dir(&fx.ws)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_code(&out, 0);
    assert_eq!(text(&out.stdout), "ok\n");
    assert!(fx.ws.join("rel").exists());
}

#[test]
fn a_read_only_mount_inside_a_writable_root_stays_read_only() {
    if !stockade_tests::is_root() {
        eprintln!("SKIPPED (needs root): a_read_only_mount_inside_a_writable_root_stays_read_only");
        return;
    }
    let fx = Fixture::staged();
    if !staged_here(&fx) {
        eprintln!("SKIPPED (needs namespaces): a_read_only_mount_inside_a_writable_root");
        return;
    }
    let src = fx.outside.join("src");
    let ro = fx.ws.join("ro");
    std::fs::create_dir(&src).unwrap();
    std::fs::create_dir(&ro).unwrap();
    let sh = |script: String| {
        let ok = Command::new("sh").arg("-c").arg(&script).status().unwrap();
        assert!(ok.success(), "{script}");
    };
    sh(format!(
        "mount --bind {0} {1} && mount -o remount,bind,ro {1}",
        src.display(),
        ro.display()
    ));
    let out = fx
        .stockade(["run", "--", "sh", "-c"])
        .arg("echo x > ro/file; echo $?; echo y > file && echo wrote")
        .output()
        .unwrap();
    sh(format!("umount {}", ro.display()));
    // The mount the host made read-only stays so; the rest of the workspace is writable.
    assert_eq!(text(&out.stdout), "2\nwrote\n", "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("Read-only file system"));
    assert!(!src.join("file").exists());
    assert!(fx.ws.join("file").exists());
}

#[test]
fn a_protected_file_with_another_name_is_reported_not_protected() {
    let fx = Fixture::staged();
    if !staged_here(&fx) {
        eprintln!("SKIPPED (needs namespaces): a_protected_file_with_another_name");
        return;
    }
    // What an earlier command can leave: `.envrc` with a second name in the workspace.
    std::fs::write(fx.ws.join(".envrc"), "export A=1\n").unwrap();
    std::fs::hard_link(fx.ws.join(".envrc"), fx.ws.join("notes.txt")).unwrap();
    let c = fx.confine(&["--", "true"]);
    let not_granted = c["notGranted"].to_string();
    assert!(
        not_granted.contains(".envrc") && not_granted.contains("hard links"),
        "{c}"
    );
    // It is what the report says: the protected name is bound read-only, and the file
    // changes through the other name all the same.
    let out = fx
        .stockade(["run", "--", "sh", "-c", "echo evil >> notes.txt"])
        .output()
        .unwrap();
    assert_code(&out, 0);
    assert!(
        std::fs::read_to_string(fx.ws.join(".envrc"))
            .unwrap()
            .contains("evil")
    );
    // Control: with one name only, nothing is reported.
    std::fs::remove_file(fx.ws.join("notes.txt")).unwrap();
    let c = fx.confine(&["--", "true"]);
    assert!(!c["notGranted"].to_string().contains(".envrc"), "{c}");
}

#[test]
fn a_planted_link_at_a_protected_name_is_reported_not_a_runner_failure() {
    let fx = Fixture::staged();
    if !staged_here(&fx) {
        eprintln!("SKIPPED (needs namespaces): a_planted_link_at_a_protected_name");
        return;
    }
    let target = fx.ws.join("elsewhere");
    std::fs::write(&target, "x").unwrap();
    std::os::unix::fs::symlink(&target, fx.ws.join(".bashrc")).unwrap();
    let c = fx.confine(&["--", "true"]);
    let not_granted = c["notGranted"].to_string();
    assert!(not_granted.contains(".bashrc"), "{c}");
    let out = spawn_argv(&c);
    assert_code(&out, 0);
    // Control: a real file at that name is protected (the write fails).
    std::fs::remove_file(fx.ws.join(".bashrc")).unwrap();
    std::fs::write(fx.ws.join(".bashrc"), "real").unwrap();
    let out = fx
        .stockade(["run", "--", "sh", "-c", "echo evil > .bashrc"])
        .output()
        .unwrap();
    assert_ne!(out.status.code(), Some(0));
    assert_eq!(
        std::fs::read_to_string(fx.ws.join(".bashrc")).unwrap(),
        "real"
    );
}

#[test]
fn protecting_nothing_and_hiding_roots_under_a_private_tmp_are_refused() {
    let fx = Fixture::staged();
    let out = fx
        .stockade(["run", "--protect", "absent.sh", "--", "touch", "ran"])
        .output()
        .unwrap();
    assert_code(&out, 125);
    assert!(
        text(&out.stderr).contains("absent.sh"),
        "{}",
        text(&out.stderr)
    );
    assert!(!fx.ws.join("ran").exists());
    // Control: an existing path is accepted.
    std::fs::write(fx.ws.join("deploy.sh"), "").unwrap();
    let out = fx
        .stockade(["confine", "--protect", "deploy.sh", "--", "true"])
        .output()
        .unwrap();
    assert_code(&out, 0);

    let in_tmp = tempfile::Builder::new()
        .prefix("stockade-private-tmp-")
        .tempdir_in("/tmp")
        .unwrap();
    let out = fx
        .stockade(["run", "--tmp", "private", "--workspace"])
        .arg(in_tmp.path())
        .args(["--", "touch", "ran"])
        .output()
        .unwrap();
    assert_code(&out, 125);
    assert!(
        text(&out.stderr).contains("--tmp private"),
        "{}",
        text(&out.stderr)
    );
    assert!(!in_tmp.path().join("ran").exists());
}

#[test]
fn a_protected_name_the_command_creates_is_reported() {
    // git reads `.git/commondir` (and the rest of its redirections) only when it exists;
    // a mount needs something to sit on and stockade creates nothing in the user's
    // tree, so a command can create one. `stockade run` says so, in both outputs.
    let fx = Fixture::staged();
    if !staged_here(&fx) {
        eprintln!("SKIPPED (needs namespaces): a_protected_name_the_command_creates");
        return;
    }
    std::fs::create_dir_all(fx.ws.join(".git/hooks")).unwrap();
    let plant = "echo /elsewhere > .git/commondir";
    let out = fx
        .stockade(["run", "--", "sh", "-c", plant])
        .output()
        .unwrap();
    assert_code(&out, 0);
    let commondir = fx.ws.join(".git/commondir");
    assert!(
        text(&out.stderr).contains(&format!(
            "[sandbox: protected path appeared: {}]",
            commondir.display()
        )),
        "{}",
        text(&out.stderr)
    );
    // Now it exists, so the next run protects it, and --json names nothing new.
    let out = fx
        .stockade(["run", "--json", "--", "sh", "-c", "echo x > .git/commondir"])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["exitCode"], 2, "{v}");
    assert_eq!(v["sandbox"]["denied"], true, "{v}");
    assert_eq!(v["protectedAppeared"], serde_json::json!([]));
    assert_eq!(std::fs::read_to_string(&commondir).unwrap(), "/elsewhere\n");
    // Control: a name that appears is named in --json too.
    let out = fx
        .stockade(["run", "--json", "--", "sh", "-c", "touch .envrc"])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        v["protectedAppeared"],
        serde_json::json!([fx.ws.join(".envrc").display().to_string()])
    );
}

// A shared writable root's own metadata. The owner of a directory needs no capability
// to change its mode, so root running a command with the machine's /tmp writable could
// `chmod 0777 /tmp` (no sticky bit: every user can delete every other user's files) or
// `chmod 0700 /tmp` (every other user locked out). Landlock governs no metadata, seccomp
// cannot see the path, and no mount tells the directory from the files in it: the stage
// puts it back and reports it, and `stockade run` checks again after the command.

/// A directory shaped like /tmp (sticky, world-writable), owned by whoever runs the
/// test and granted with `--writable`: the shared-root rule applies to it exactly as to
/// /tmp for root, without touching the machine's /tmp (and as an ordinary user too).
fn shared_dir(fx: &Fixture) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let dir = fx.root.join("shared");
    std::fs::create_dir(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o1777)).unwrap();
    dir
}

fn mode_of(p: &std::path::Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).unwrap().permissions().mode() & 0o7777
}

/// `stockade classify` on a ConfinedArgv spawned as `out`.
fn classify(
    fx: &Fixture,
    confined: &serde_json::Value,
    out: &std::process::Output,
) -> serde_json::Value {
    let file = fx.root.join("confined.json");
    std::fs::write(&file, confined.to_string()).unwrap();
    let mut args: Vec<String> = vec!["classify".into(), "--confined".into()];
    args.push(file.display().to_string());
    match (
        out.status.code(),
        std::os::unix::process::ExitStatusExt::signal(&out.status),
    ) {
        (Some(code), _) => args.extend(["--exit-code".into(), code.to_string()]),
        (None, Some(sig)) => args.extend(["--signal".into(), sig.to_string()]),
        (None, None) => unreachable!(),
    }
    let res = fx.stockade(&args).output().unwrap();
    assert_code(&res, 0);
    serde_json::from_slice(&res.stdout).unwrap()
}

#[test]
fn a_shared_root_the_command_changes_is_put_back_while_it_runs_and_reported() {
    let fx = Fixture::staged();
    if !staged_here(&fx) {
        eprintln!("SKIPPED (needs namespaces): a_shared_root_the_command_changes");
        return;
    }
    let d = shared_dir(&fx);
    let ds = d.to_str().unwrap();
    let run = |json: bool, script: &str| {
        let mut cmd = fx.stockade(["run"]);
        if json {
            cmd.arg("--json");
        }
        cmd.args([
            "--timeout",
            "60s",
            "--writable",
            ds,
            "--",
            "sh",
            "-c",
            script,
        ])
        .output()
        .unwrap()
    };

    // Control: what the grant is for still works, and nothing is reported.
    let out = run(true, &format!("echo x > {ds}/f && chmod 640 {ds}/f"));
    assert_code(&out, 0);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["sandbox"]["tampered"], false, "{v}");
    assert_eq!(v["sharedRootsChanged"], serde_json::json!([]), "{v}");
    assert_eq!(mode_of(&d.join("f")), 0o640);

    // The attack: the directory itself locked to its owner.
    let out = run(true, &format!("chmod 0700 {ds}"));
    assert_code(&out, 0);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["sandbox"]["tampered"], true, "{v}");
    let change = &v["sharedRootsChanged"][0];
    assert_eq!(change["path"], ds, "{v}");
    assert_eq!(change["was"]["mode"], "1777", "{v}");
    assert_eq!(change["found"]["mode"], "0700", "{v}");
    assert_eq!(change["putBack"], true, "{v}");
    assert_eq!(mode_of(&d), 0o1777);

    // Put back while the command still runs, not only at its end: the command waits
    // until it sees the sticky bit again (the --timeout is the backstop if never).
    let out = run(
        false,
        &format!(
            "chmod 0777 {ds}; until [ \"$(stat -c %a {ds})\" = 1777 ]; do sleep 0.01; done; echo back"
        ),
    );
    assert_code(&out, 0);
    assert_eq!(text(&out.stdout), "back\n");
    assert!(
        text(&out.stderr).contains(&format!(
            "[sandbox: shared directory {ds} changed from mode 1777 owner"
        )),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(mode_of(&d), 0o1777);
}

#[test]
fn on_the_confine_path_the_stage_alone_puts_a_shared_root_back_and_classify_says_tampered() {
    // Spawned as an executor would, with no `stockade run` to look afterwards: what is
    // put back here, the stage put back.
    let fx = Fixture::staged();
    if !staged_here(&fx) {
        eprintln!("SKIPPED (needs namespaces): on_the_confine_path_the_stage_alone");
        return;
    }
    let d = shared_dir(&fx);
    let ds = d.to_str().unwrap();
    for pids in ["--isolate-pids", "--share-pids"] {
        let script = format!("chmod 0700 {ds}; exit 3");
        let c = fx.confine(&[pids, "--writable", ds, "--", "sh", "-c", &script]);
        let argv = confined_argv(&c);
        assert!(argv.windows(2).any(|w| w == ["--shared", ds]), "{argv:?}");
        let out = spawn_argv(&c);
        // The command's own exit code comes through the stage's extra process.
        assert_code(&out, 3);
        assert_eq!(mode_of(&d), 0o1777, "{pids}: not put back");
        let v = classify(&fx, &c, &out);
        assert_eq!(v["outcome"], "tampered", "{pids}: {v}");
        assert_eq!(v["sharedRootsChanged"][0]["found"]["mode"], "0700", "{v}");

        // A signal comes through the same way.
        let script = format!("chmod 0777 {ds}; kill -KILL $$");
        let c = fx.confine(&[pids, "--writable", ds, "--", "sh", "-c", &script]);
        let out = spawn_argv(&c);
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(out.status.signal(), Some(libc::SIGKILL), "{pids}: {out:?}");
        assert_eq!(mode_of(&d), 0o1777, "{pids}: not put back after a signal");
        let v = classify(&fx, &c, &out);
        assert_eq!(v["outcome"], "tampered", "{pids}: {v}");

        // Control: a clean run is classified as the command's own.
        let c = fx.confine(&[pids, "--writable", ds, "--", "sh", "-c", "exit 3"]);
        let out = spawn_argv(&c);
        assert_code(&out, 3);
        let v = classify(&fx, &c, &out);
        assert_eq!(v["outcome"], "failed", "{pids}: {v}");
        assert!(v.get("sharedRootsChanged").is_none(), "{v}");
    }
}

#[test]
fn without_the_stage_only_stockade_run_puts_a_shared_root_back() {
    let fx = Fixture::new();
    let d = shared_dir(&fx);
    let ds = d.to_str().unwrap();
    // The runner's supervisor refuses a change to a shared root's own directory (only
    // the workspace's is the command's)...
    let out = fx
        .stockade(["run", "--writable", ds, "--", "chmod", "0700", ds])
        .output()
        .unwrap();
    assert_code(&out, 1);
    assert!(text(&out.stderr).contains("Operation not permitted"));
    assert_eq!(mode_of(&d), 0o1777);
    // ...so what is left to look afterwards is shown where it cannot run (`no-notify`,
    // as under another supervisor).
    let mask = Some("no-notify");
    let out = fx
        .stockade_masked(mask, ["run", "--writable", ds, "--", "chmod", "0700", ds])
        .output()
        .unwrap();
    assert_code(&out, 0);
    assert!(
        text(&out.stderr).contains("; put back]"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(mode_of(&d), 0o1777);
    // The confine path without the stage has nothing that looks: the change stays, and
    // the report said so beforehand.
    let out = fx
        .stockade_masked(
            mask,
            ["confine", "--writable", ds, "--", "chmod", "0700", ds],
        )
        .output()
        .unwrap();
    assert_code(&out, 0);
    let c: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(c["guarantees"]["metadata"]["status"], "unavailable", "{c}");
    assert!(
        c["guarantees"]["metadata"]["note"]
            .as_str()
            .is_some_and(|n| n.contains("only stockade run")),
        "{c}"
    );
    let out = spawn_argv(&c);
    assert_code(&out, 0);
    assert_eq!(mode_of(&d), 0o700);
}

#[test]
fn protected_names_that_appear_are_reported_on_the_confine_path_too() {
    let fx = Fixture::staged();
    if !staged_here(&fx) {
        eprintln!("SKIPPED (needs namespaces): protected_names_that_appear");
        return;
    }
    std::fs::create_dir_all(fx.ws.join(".git/hooks")).unwrap();
    let c = fx.confine(&["--", "sh", "-c", "echo /elsewhere > .git/commondir"]);
    let out = spawn_argv(&c);
    assert_code(&out, 0);
    let v = classify(&fx, &c, &out);
    // Reported, not tampering: `git worktree add` creates `.git/worktrees` rightly.
    assert_eq!(v["outcome"], "ok", "{v}");
    assert_eq!(
        v["protectedAppeared"],
        serde_json::json!([fx.ws.join(".git/commondir").display().to_string()]),
        "{v}"
    );
    // Control: a run that creates none reports none.
    let c = fx.confine(&["--", "touch", "plain"]);
    let out = spawn_argv(&c);
    assert_code(&out, 0);
    let v = classify(&fx, &c, &out);
    assert!(v.get("protectedAppeared").is_none(), "{v}");
    // A hook file that does not exist yet, in a hooks directory that does, is no gap:
    // the whole directory is bound read-only.
    let out = fx
        .stockade([
            "run",
            "--",
            "sh",
            "-c",
            "echo evil > .git/hooks/post-checkout",
        ])
        .output()
        .unwrap();
    assert_ne!(out.status.code(), Some(0));
    assert!(
        text(&out.stderr).contains("Read-only file system"),
        "{}",
        text(&out.stderr)
    );
    assert!(!fx.ws.join(".git/hooks/post-checkout").exists());
}

#[test]
fn a_protected_name_hidden_behind_an_unreadable_directory_is_still_reported() {
    let fx = Fixture::staged();
    if !staged_here(&fx) {
        eprintln!("SKIPPED (needs namespaces): a_protected_name_hidden_behind");
        return;
    }
    // The command creates a redirection git will follow, then makes `.git` unreadable so
    // that the end-of-run look cannot see inside it: absence cannot be shown, so it is
    // reported (the stage's look, and stockade run's).
    let script = "mkdir .git && echo /elsewhere > .git/commondir && chmod 000 .git";
    let commondir = fx.ws.join(".git/commondir").display().to_string();
    let c = fx.confine(&["--", "sh", "-c", script]);
    let out = spawn_argv(&c);
    assert_code(&out, 0);
    let v = classify(&fx, &c, &out);
    let listed = |v: &serde_json::Value| {
        v["protectedAppeared"]
            .as_array()
            .is_some_and(|a| a.iter().any(|p| p == commondir.as_str()))
    };
    assert!(listed(&v), "{v}");
    std::fs::set_permissions(fx.ws.join(".git"), PermissionsExt::from_mode(0o755)).unwrap();
    std::fs::remove_dir_all(fx.ws.join(".git")).unwrap();
    let out = fx
        .stockade(["run", "--json", "--", "sh", "-c", script])
        .output()
        .unwrap();
    assert_code(&out, 0);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(listed(&v), "{v}");
    std::fs::set_permissions(fx.ws.join(".git"), PermissionsExt::from_mode(0o755)).unwrap();
    // Control: the same names made without hiding them are reported as well, and a
    // readable workspace with none of them reports none.
    std::fs::remove_dir_all(fx.ws.join(".git")).unwrap();
    let c = fx.confine(&["--", "touch", "plain"]);
    let out = spawn_argv(&c);
    assert_code(&out, 0);
    let v = classify(&fx, &c, &out);
    assert!(v.get("protectedAppeared").is_none(), "{v}");
}

/// The descriptors `pid` holds, as their link targets.
fn open_files(pid: i32) -> Vec<String> {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| std::fs::read_link(e.path()).ok())
        .map(|p| p.display().to_string())
        .collect()
}

/// Every process below `pid`, with its `comm`.
fn descendants(pid: i32) -> Vec<(i32, String)> {
    let mut parents = vec![pid];
    let mut out = Vec::new();
    let all: Vec<(i32, i32, String)> = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| {
            let p: i32 = e.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(format!("/proc/{p}/stat")).ok()?;
            let (comm, rest) = stat.split_once(" (")?.1.rsplit_once(") ")?;
            let ppid = rest.split(' ').nth(1)?.parse().ok()?;
            Some((p, ppid, comm.to_string()))
        })
        .collect();
    while let Some(parent) = parents.pop() {
        for (p, pp, comm) in &all {
            if *pp == parent {
                out.push((*p, comm.clone()));
                parents.push(*p);
            }
        }
    }
    out
}

#[test]
fn the_stage_that_stockade_run_starts_holds_none_of_the_launchers_descriptors() {
    // `stockade run` runs the stage in the child it forks rather than executing it: the
    // stage processes (which outlive the command's start, and init its end) must hold no
    // descriptor of the launcher's that an execve would have closed (its signalfd, its
    // cgroup files, the private directory's report pipe).
    let fx = Fixture::staged();
    if !staged_here(&fx) {
        eprintln!("SKIPPED (needs namespaces): the_stage_that_stockade_run_starts");
        return;
    }
    let ready = fx.ws.join("ready");
    let mut launcher = fx
        .stockade(["run", "--", "sh", "-c", "touch ready && exec sleep 30"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for_file(&ready);
    let pid = launcher.id() as i32;
    // Positive control: the launcher itself holds its signalfd, so the look below sees
    // such descriptors where they are.
    let own = open_files(pid);
    let stage: Vec<(i32, String)> = descendants(pid)
        .into_iter()
        .filter(|(_, comm)| comm != "sleep")
        .collect();
    let held: Vec<(i32, Vec<String>)> = stage.iter().map(|(p, _)| (*p, open_files(*p))).collect();
    // SAFETY: signalling the launcher this test started.
    unsafe { libc::kill(pid, libc::SIGTERM) };
    let _ = launcher.wait();
    assert!(
        own.iter().any(|f| f.contains("signalfd")),
        "the launcher holds no signalfd: {own:?}"
    );
    assert!(!stage.is_empty(), "no stage process found below {pid}");
    for (p, files) in held {
        assert!(
            !files
                .iter()
                .any(|f| f.contains("signalfd") || f.starts_with("/sys/fs/cgroup")),
            "stage process {p} holds a launcher descriptor: {files:?}"
        );
    }
}

/// A shared root below a directory the command can write: the command moves that
/// directory away and puts a link in its place, so the root's path now leads outside
/// every writable root. What `stockade run` puts back afterwards must be the directory
/// that was the root (wherever it went), never what the path leads to now: following the
/// link, the launcher itself changed a directory outside the sandbox to the root's mode
/// (as root, `/usr/share` made 1777 by a command that could only write in its roots).
#[test]
fn a_shared_root_moved_away_and_replaced_by_a_link_is_put_back_where_it_went() {
    for fx in [Fixture::new(), Fixture::staged()] {
        let parent = fx.ws.join("a");
        let root = parent.join("share");
        std::fs::create_dir_all(&root).unwrap();
        std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o1777)).unwrap();
        // What the link will lead to: a directory of the same name outside every root.
        let target = fx.outside.join("share");
        std::fs::create_dir(&target).unwrap();
        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o755)).unwrap();
        let (p, r, o) = (
            parent.to_str().unwrap(),
            root.to_str().unwrap(),
            fx.outside.to_str().unwrap(),
        );
        // The command changes the root (so there is something to put back), then moves
        // its parent away and links the old name to the outside.
        let script = format!("chmod 0700 {r} && mv {p} {p}.old && ln -s {o} {p} && echo swapped");
        // Without the stage the supervisor would refuse the chmod of the root itself:
        // taken away (`no-notify`) to show what `stockade run` puts back.
        let mask = (!fx.stage).then_some("no-notify");
        let out = fx
            .stockade_masked(mask, ["run", "--writable", r, "--", "sh", "-c", &script])
            .output()
            .unwrap();
        assert_code(&out, 0);
        assert_eq!(text(&out.stdout), "swapped\n", "stage {}", fx.stage);
        assert_eq!(
            mode_of(&target),
            0o755,
            "stage {}: the launcher changed a directory outside the sandbox through a link",
            fx.stage
        );
        // Control: the change the command made is still found and put back, on the very
        // directory that was the root.
        assert!(
            text(&out.stderr).contains(&format!(
                "[sandbox: shared directory {r} changed from mode 1777"
            )),
            "stage {}: {}",
            fx.stage,
            text(&out.stderr)
        );
        assert_eq!(
            mode_of(&fx.ws.join("a.old/share")),
            0o1777,
            "stage {}",
            fx.stage
        );
    }
}

#[test]
fn a_hidden_or_protected_path_whose_name_is_not_utf8_is_bound_by_the_stage() {
    // ConfinedArgv's argv is a list of strings: the stage's paths once travelled as lossy
    // copies (`sec\u{fffd}`), which name nothing, so the stage bound, pinned and masked
    // nothing there. A hidden file inside the workspace could then be renamed out of
    // hiding for the next command to read, a protected file was written while reported
    // protected, and a workspace whose own name is not UTF-8 was read-only.
    use std::os::unix::ffi::OsStrExt;
    let fx = Fixture::staged();
    if !staged_here(&fx) {
        eprintln!("SKIPPED (needs namespaces): a_hidden_or_protected_path_whose_name_is_not_utf8");
        return;
    }
    let name = |b: &[u8]| std::ffi::OsStr::from_bytes(b).to_os_string();
    let (secret, protected) = (name(b"sec\xff"), name(b"prot\xff"));
    std::fs::write(fx.ws.join(&secret), b"TOKEN=t").unwrap();
    std::fs::write(fx.ws.join(&protected), b"kept").unwrap();
    let script = "s=$(printf 'sec\\377'); p=$(printf 'prot\\377');\
        cat \"$s\" >/dev/null 2>&1 && echo READ;\
        mv \"$s\" leaked 2>/dev/null && echo MOVED;\
        echo changed > \"$p\" 2>/dev/null && echo WROTE-PROTECTED;\
        echo y > plain && echo WROTE-PLAIN";
    let run = |extra: &[&std::ffi::OsStr]| {
        fx.stockade(["run"])
            .args(extra)
            .args(["--", "sh", "-c", script])
            .output()
            .unwrap()
    };
    let out = run(&["--hide".as_ref(), &secret, "--protect".as_ref(), &protected]);
    assert_eq!(text(&out.stdout), "WROTE-PLAIN\n", "{}", text(&out.stderr));
    assert!(fx.ws.join(&secret).exists() && !fx.ws.join("leaked").exists());
    assert_eq!(std::fs::read(fx.ws.join(&protected)).unwrap(), b"kept");
    // Positive control: neither hidden nor protected, the same script reads, moves and
    // writes.
    let out = run(&[]);
    assert_eq!(
        text(&out.stdout),
        "READ\nMOVED\nWROTE-PROTECTED\nWROTE-PLAIN\n",
        "{}",
        text(&out.stderr)
    );
    // A workspace whose own name is not UTF-8 is writable under the stage.
    let odd = fx.ws.join(name(b"ws\xfe"));
    std::fs::create_dir(&odd).unwrap();
    let out = fx
        .stockade([
            std::ffi::OsStr::new("run"),
            "--workspace".as_ref(),
            odd.as_os_str(),
        ])
        .args([
            "--",
            "sh",
            "-c",
            "echo x > \"$(printf 'ws\\376')/new\" && echo WROTE",
        ])
        .output()
        .unwrap();
    assert_eq!(text(&out.stdout), "WROTE\n", "{}", text(&out.stderr));
}

/// The runner counts the stage as run only from traces it leaves: with shared pids and
/// no network by name, the trace used to be a read-only `/` alone, which a machine can
/// have of its own (an image booted read-only). There an argv edited to start the runner
/// directly ran the command without the stage while the report said `enforced`. The
/// request now records the mount namespace `confine` ran in, and the runner refuses to
/// count a stage that left it in that one.
#[test]
fn an_argv_with_the_stage_stripped_is_refused_on_a_machine_whose_root_is_read_only() {
    if !stockade_tests::is_root() {
        eprintln!("SKIPPED (needs root): an_argv_with_the_stage_stripped_on_a_read_only_root");
        return;
    }
    let fx = Fixture::staged();
    if !staged_here(&fx) {
        eprintln!(
            "SKIPPED (needs namespaces): an_argv_with_the_stage_stripped_on_a_read_only_root"
        );
        return;
    }
    if !kernel_tells_mount_namespace_ids() {
        eprintln!(
            "SKIPPED (kernel before 6.11, no mount namespace ids): an_argv_with_the_stage_stripped_on_a_read_only_root"
        );
        return;
    }
    // A mount namespace in which `/` is read-only and only the fixture is writable, held
    // open by a shell that waits; every step below enters it.
    struct Holder(std::process::Child);
    impl Drop for Holder {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let mut holder = Command::new("unshare")
        .args(["-m", "--propagation", "private", "sh", "-c"])
        .arg(
            "mount --bind \"$0\" \"$0\" && mount -o remount,bind,ro / && echo ready && exec sleep 1000",
        )
        .arg(&fx.root)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let out = holder.stdout.take().unwrap();
    let holder = Holder(holder);
    let mut ready = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(out), &mut ready).unwrap();
    assert_eq!(ready, "ready\n");
    let inside = |cmd: &Command| {
        let mut c = Command::new("nsenter");
        // The workspace entered by path inside the namespace, not by nsenter's --wd,
        // which keeps the directory of the mount outside: unreachable there, and musl's
        // getcwd(3) then fails where glibc's walks up to a name.
        c.arg("-t")
            .arg(holder.0.id().to_string())
            .arg("-m")
            .args(["--", "sh", "-c", "cd \"$0\" && exec \"$@\""])
            .arg(&fx.ws)
            .arg(cmd.get_program())
            .args(cmd.get_args());
        for (k, v) in cmd.get_envs() {
            match v {
                Some(v) => c.env(k, v),
                None => c.env_remove(k),
            };
        }
        c.current_dir(&fx.ws).stdin(Stdio::null());
        c
    };
    let confine = || {
        let out = inside(&fx.stockade([
            "confine",
            "--share-pids",
            "--mode",
            "workspace-write",
            "--",
            "touch",
            "ran",
        ]))
        .output()
        .unwrap();
        assert_code(&out, 0);
        let c: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(c["guarantees"]["metadata"]["status"], "enforced", "{c}");
        confined_argv(&c)
    };
    // Control: the argv as printed runs the command there.
    let argv = confine();
    assert_eq!(argv[1], "__stage", "{argv:?}");
    let out = inside(Command::new(&argv[0]).args(&argv[1..]))
        .output()
        .unwrap();
    assert_code(&out, 0);
    assert!(fx.ws.join("ran").exists());
    std::fs::remove_file(fx.ws.join("ran")).unwrap();
    // The same with the stage cut off: `/` is read-only and the pids are shared, as the
    // stage would leave them, but this is the namespace `confine` ran in.
    let argv = confine();
    let dash = argv.iter().position(|a| a == "--").unwrap();
    let out = inside(Command::new(&argv[dash + 1]).args(&argv[dash + 2..]))
        .output()
        .unwrap();
    drop(holder);
    assert_code(&out, 125);
    let line = runner_failure_line(&out);
    assert!(line.contains("less than was reported"), "{line}");
    assert!(
        line.contains("still in the mount namespace confine ran in"),
        "{line}"
    );
    assert!(!fx.ws.join("ran").exists(), "the command ran");
}

/// Whether this kernel tells a mount namespace's id (`NS_GET_MNTNS_ID`, Linux 6.11):
/// before it, the runner has only the read-only `/` to go by and the stripped argv of
/// the test above runs, as documented.
fn kernel_tells_mount_namespace_ids() -> bool {
    use std::os::fd::AsRawFd;
    let Ok(ns) = std::fs::File::open("/proc/self/ns/mnt") else {
        return false;
    };
    let mut id: u64 = 0;
    // SAFETY: the request writes one u64 into `id`, alive across the call, on a
    // descriptor this function owns.
    let r = unsafe {
        libc::ioctl(
            ns.as_raw_fd(),
            stockade_policy::stage::NS_GET_MNTNS_ID as _,
            &mut id as *mut u64,
        )
    };
    r == 0
}

/// The namespace `confine` ran in may be gone by the time the argv is spawned (an
/// executor that confines inside a throwaway `unshare -m`): the kernel hands its number
/// to the next namespace, which may be the stage's own. Compared by device and inode, the
/// stage's namespace looked like confine's and the runner refused; the 64-bit id the
/// request records now is never reused.
#[test]
fn an_argv_confined_in_a_namespace_that_is_gone_still_runs() {
    if !stockade_tests::is_root() {
        eprintln!("SKIPPED (needs root): an_argv_confined_in_a_namespace_that_is_gone_still_runs");
        return;
    }
    let fx = Fixture::staged();
    if !staged_here(&fx) {
        eprintln!("SKIPPED (needs namespaces): an_argv_confined_in_a_namespace_that_is_gone");
        return;
    }
    for round in 0..5 {
        let confine = fx.stockade(["confine", "--mode", "read-only", "--", "echo", "hello"]);
        let mut cmd = Command::new("unshare");
        cmd.arg("-m")
            .arg("--")
            .arg(confine.get_program())
            .args(confine.get_args());
        for (k, v) in confine.get_envs() {
            match v {
                Some(v) => cmd.env(k, v),
                None => cmd.env_remove(k),
            };
        }
        let out = cmd
            .current_dir(&fx.ws)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert_code(&out, 0);
        let c: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(c["argv"][1], "__stage", "{c}");
        let out = spawn_argv(&c);
        assert_code(&out, 0);
        assert_eq!(text(&out.stdout), "hello\n", "round {round}");
    }
}

/// `stockade ARGS` as uid/gid 65534 (no supplementary groups), from `fx`'s root
/// directory (the workspace may be one it cannot enter).
fn as_nobody(fx: &Fixture, args: &[&str]) -> std::process::Output {
    Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(stockade_bin())
        .args(args)
        .current_dir(&fx.root)
        .env("STOCKADE_RUNNER", runner_bin())
        .env("XDG_RUNTIME_DIR", &fx.runtime)
        .env("HOME", fx.root.join("home"))
        .env_remove("TMPDIR")
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

#[test]
fn names_the_invoker_cannot_look_up_are_not_reported_as_appeared() {
    // A workspace its own user cannot search: whether `.git/hooks`, `.envrc`... exist
    // cannot be known, before the run or after. That is not the command's doing, so no
    // "protected path appeared" is said of them; ConfinedArgv says what is known.
    if !stockade_tests::is_root() {
        eprintln!("SKIPPED (needs root): names_the_invoker_cannot_look_up");
        return;
    }
    let fx = Fixture::staged();
    if !staged_here(&fx) {
        eprintln!("SKIPPED (needs namespaces): names_the_invoker_cannot_look_up");
        return;
    }
    if let Some(why) = unreachable_by(
        65534,
        &[&stockade_bin(), &runner_bin(), fx.root.parent().unwrap()],
    ) {
        eprintln!("SKIPPED ({why}): names_the_invoker_cannot_look_up_are_not_reported_as_appeared");
        return;
    }
    std::fs::create_dir(fx.root.join("home")).unwrap();
    let chown = Command::new("chown")
        .args(["-R", "65534:65534"])
        .arg(&fx.root)
        .output()
        .unwrap();
    assert!(chown.status.success(), "{}", text(&chown.stderr));
    let ws = fx.ws.to_str().unwrap();
    let appeared = "protected path appeared";
    std::fs::set_permissions(&fx.ws, PermissionsExt::from_mode(0o600)).unwrap();
    let out = as_nobody(&fx, &["run", "--workspace", ws, "--", "true"]);
    std::fs::set_permissions(&fx.ws, PermissionsExt::from_mode(0o700)).unwrap();
    assert_code(&out, 0);
    assert!(
        !text(&out.stderr).contains(appeared),
        "{}",
        text(&out.stderr)
    );
    std::fs::set_permissions(&fx.ws, PermissionsExt::from_mode(0o600)).unwrap();
    let out = as_nobody(&fx, &["confine", "--workspace", ws, "--", "true"]);
    std::fs::set_permissions(&fx.ws, PermissionsExt::from_mode(0o700)).unwrap();
    assert_code(&out, 0);
    let c: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let not_granted = c["notGranted"].to_string();
    assert!(
        not_granted.contains(&format!("{ws}/.envrc")) && not_granted.contains("cannot look it up"),
        "{not_granted}"
    );
    let _ = std::fs::remove_dir_all(
        std::path::Path::new(c["statusPath"].as_str().unwrap())
            .parent()
            .unwrap(),
    );
    // Control: in a workspace the user can search, a name the command creates is
    // reported, and none is said to have appeared when none did.
    let script = format!("touch {ws}/.envrc");
    let out = as_nobody(&fx, &["run", "--workspace", ws, "--", "sh", "-c", &script]);
    assert_code(&out, 0);
    let envrc = format!("[sandbox: {appeared}: {ws}/.envrc]");
    assert!(text(&out.stderr).contains(&envrc), "{}", text(&out.stderr));
    let out = as_nobody(&fx, &["run", "--workspace", ws, "--", "true"]);
    assert_code(&out, 0);
    assert!(
        !text(&out.stderr).contains(appeared),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn a_shared_root_seen_open_to_everyone_at_the_start_is_never_put_back_that_way() {
    // A second sandbox that started while another command had taken the sticky bit off a
    // shared root must not "put back" that weakened state once the first was repaired:
    // two commands together would otherwise leave /tmp without its sticky bit for good.
    // A directory of the test's own, granted with --writable, stands in for /tmp.
    let fx = Fixture::staged();
    if !staged_here(&fx) {
        eprintln!("SKIPPED (needs namespaces): a_shared_root_seen_open_to_everyone");
        return;
    }
    let d = shared_dir(&fx);
    let ds = d.to_str().unwrap();
    let run = |script: &str| {
        fx.stockade(["run", "--writable", ds, "--", "sh", "-c", script])
            .output()
            .unwrap()
    };
    // Control: from 1777, a change is put back.
    let out = run(&format!("chmod 0777 {ds}"));
    assert_code(&out, 0);
    assert_eq!(mode_of(&d), 0o1777, "{}", text(&out.stderr));
    // Seen at 0777 when the run began, repaired to 1777 meanwhile: left repaired.
    std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o777)).unwrap();
    let out = run(&format!("chmod 1777 {ds}"));
    assert_code(&out, 0);
    assert_eq!(mode_of(&d), 0o1777, "{}", text(&out.stderr));
}
