//! Roots mean what they say, across commands: what an earlier confined command plants
//! (a replaced runner, a link, a recreated directory) must not widen a later one. Each
//! chain runs the planting command and the victim for real, checks that nothing outside
//! changed, and has a positive control where the same thing, made honestly, works.

mod support;

use std::path::{Path, PathBuf};
use support::*;

/// The one `stockade: ` refusal line, asserting exit 125 and that nothing else was said.
#[track_caller]
fn refusal(out: &std::process::Output) -> String {
    assert_code(out, 125);
    let err = text(&out.stderr);
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 1, "{err:?}");
    assert!(lines[0].starts_with("stockade: "), "{err:?}");
    lines[0].to_string()
}

#[test]
fn a_runner_beneath_the_workspace_is_refused_and_one_outside_cannot_be_replaced() {
    let fx = Fixture::new();
    let marker = fx.ws.join("ran");
    let script = format!("touch {}", marker.display());
    // The README's old first example: the runner the launcher uses lies in the workspace.
    let exposed = copy_binary(&runner_bin(), &fx.ws.join("target"), "stockade-runner");
    let out = fx
        .stockade(["run", "--", "sh", "-c", &script])
        .env("STOCKADE_RUNNER", &exposed)
        .output()
        .unwrap();
    let line = refusal(&out);
    assert!(line.contains(&exposed.display().to_string()), "{line}");
    assert!(line.contains("writable root"), "{line}");
    assert!(!marker.exists());

    // Positive control: the same binary outside every writable root runs the command,
    // and a confined command that tries to replace it (the planting command) is denied.
    let safe = copy_binary(&runner_bin(), &fx.root.join("bin"), "stockade-runner");
    let before = std::fs::read(&safe).unwrap();
    let plant = format!(
        "cp /bin/true {0} || {{ rm -f {0} && cp /bin/true {0}; }} || mv {1} {1}.old",
        safe.display(),
        safe.parent().unwrap().display()
    );
    let out = fx
        .stockade(["run", "--", "sh", "-c", &plant])
        .env("STOCKADE_RUNNER", &safe)
        .output()
        .unwrap();
    assert_ne!(out.status.code(), Some(0), "{out:?}");
    assert!(text(&out.stderr).contains("Permission denied"), "{out:?}");
    assert_eq!(
        std::fs::read(&safe).unwrap(),
        before,
        "the runner was changed"
    );
    let out = fx
        .stockade(["run", "--", "sh", "-c", &script])
        .env("STOCKADE_RUNNER", &safe)
        .output()
        .unwrap();
    assert_code(&out, 0);
    assert!(marker.exists());
}

#[test]
fn a_runner_beneath_tmp_is_refused() {
    let fx = Fixture::new();
    let dir = tempfile::Builder::new()
        .prefix("stockade-roots-")
        .tempdir_in("/tmp")
        .unwrap();
    let exposed = copy_binary(&runner_bin(), dir.path(), "stockade-runner");
    for mode in ["read-only", "workspace-write"] {
        let out = fx
            .stockade(["run", "--mode", mode, "--", "true"])
            .env("STOCKADE_RUNNER", &exposed)
            .output()
            .unwrap();
        let line = refusal(&out);
        assert!(line.contains("/tmp"), "{line}");
        // confine refuses the same way and writes nothing.
        let out = fx
            .stockade(["confine", "--mode", mode, "--", "true"])
            .env("STOCKADE_RUNNER", &exposed)
            .output()
            .unwrap();
        let _ = refusal(&out);
        assert!(out.stdout.is_empty());
        assert!(fx.leftover_requests().is_empty());
    }
}

#[test]
fn a_launcher_beneath_the_workspace_is_refused() {
    let fx = Fixture::new();
    let exposed = copy_binary(&stockade_bin(), &fx.ws.join("bin"), "stockade");
    let out = fx
        .stockade(["run", "--", "true"])
        .env("STOCKADE_LAUNCHER_UNDER_TEST", "1")
        .output()
        .unwrap();
    assert_code(&out, 0);
    let run = |launcher: &Path| {
        std::process::Command::new(launcher)
            .args(["run", "--", "true"])
            .current_dir(&fx.ws)
            .env("STOCKADE_RUNNER", runner_bin())
            .env("XDG_RUNTIME_DIR", &fx.runtime)
            .env_remove("TMPDIR")
            .output()
            .unwrap()
    };
    let line = refusal(&run(&exposed));
    assert!(
        line.contains("launcher") && line.contains("/ws/bin/stockade"),
        "{line}"
    );
    // Control: the same binary outside every writable root works.
    let safe = copy_binary(&stockade_bin(), &fx.root.join("bin"), "stockade");
    assert_code(&run(&safe), 0);
}

/// Gives `dir` an access ACL granting uid `uid` rwx (what `setfacl -m u:UID:rwx` writes):
/// the xattr's version 2 header, then the entries in the kernel's order.
fn grant_acl(dir: &Path, uid: u32) {
    use std::os::unix::ffi::OsStrExt;
    let mut acl = 2u32.to_le_bytes().to_vec();
    for (tag, perm, id) in [
        (0x01u16, 7u16, u32::MAX), // the owner
        (0x02, 7, uid),            // the named user
        (0x04, 5, u32::MAX),       // the owning group
        (0x10, 7, u32::MAX),       // the mask
        (0x20, 5, u32::MAX),       // others
    ] {
        acl.extend_from_slice(&tag.to_le_bytes());
        acl.extend_from_slice(&perm.to_le_bytes());
        acl.extend_from_slice(&id.to_le_bytes());
    }
    let path = std::ffi::CString::new(dir.as_os_str().as_bytes()).unwrap();
    // SAFETY: NUL-terminated strings and a buffer that outlive the call.
    let rc = unsafe {
        libc::setxattr(
            path.as_ptr(),
            c"system.posix_acl_access".as_ptr(),
            acl.as_ptr().cast(),
            acl.len(),
            0,
        )
    };
    assert_eq!(rc, 0, "setxattr: {}", std::io::Error::last_os_error());
}

#[test]
fn a_runner_in_a_directory_another_group_or_an_acl_can_write_is_refused() {
    if !stockade_tests::is_root() {
        eprintln!(
            "SKIPPED (needs root): a_runner_in_a_directory_another_group_or_an_acl_can_write_is_refused"
        );
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    let fx = Fixture::new();
    let marker = fx.ws.join("ran");
    let script = format!("touch {}", marker.display());
    let dir = fx.root.join("shared-bin");
    let runner = copy_binary(&runner_bin(), &dir, "stockade-runner");
    let run = |what: &str| {
        fx.stockade([what, "--", "sh", "-c", &script])
            .env("STOCKADE_RUNNER", &runner)
            .output()
            .unwrap()
    };
    // Owned by root, closed to others, but writable by a group root's commands do not
    // own (nogroup): any member could rename the runner away after confine checked it
    // and put theirs there, which the executor then starts as root, unconfined.
    std::os::unix::fs::chown(&dir, Some(0), Some(65534)).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o2775)).unwrap();
    for what in ["run", "confine"] {
        let out = run(what);
        let line = refusal(&out);
        assert!(
            line.contains("writable by its group (gid 65534)") && line.contains("shared-bin"),
            "{line}"
        );
        assert!(out.stdout.is_empty(), "{out:?}");
    }
    assert!(fx.leftover_requests().is_empty());
    assert!(!marker.exists());
    // The same through an ACL naming another user, on a directory of root's own group:
    // the group bits then stand for the ACL's mask.
    std::os::unix::fs::chown(&dir, Some(0), Some(0)).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    grant_acl(&dir, 65534);
    let mode = std::fs::metadata(&dir).unwrap().permissions().mode();
    assert_eq!(
        mode & 0o070,
        0o070,
        "the ACL's mask shows as the group bits"
    );
    let line = refusal(&run("run"));
    assert!(line.contains("access control list"), "{line}");
    assert!(!marker.exists());
    // Positive control: the same directory closed to group and others (chmod drops
    // the ACL's mask to r-x, which takes the named entry's write away).
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = run("run");
    assert_code(&out, 0);
    assert!(marker.exists());
}

#[test]
fn a_tmpdir_linked_by_an_earlier_command_into_a_secret_directory_is_not_granted() {
    let fx = Fixture::new();
    let home = fx.root.join("home");
    let ssh = home.join(".ssh");
    std::fs::create_dir_all(&ssh).unwrap();
    let link = PathBuf::from(format!("/tmp/{}", unique_tag("agent-tmp")));
    // The planting command: confined, it may write /tmp.
    let plant = format!("rm -rf {0} && ln -s {1} {0}", link.display(), ssh.display());
    let out = fx
        .stockade(["run", "--", "sh", "-c", &plant])
        .env("HOME", &home)
        .output()
        .unwrap();
    assert_code(&out, 0);
    assert!(link.symlink_metadata().unwrap().file_type().is_symlink());
    // The victim: its $TMPDIR now leads into the home's .ssh.
    let attack = format!("echo key >> {}/authorized_keys", link.display());
    let c = fx
        .stockade(["confine", "--", "sh", "-c", &attack])
        .env("HOME", &home)
        .env("TMPDIR", &link)
        .output()
        .unwrap();
    assert_code(&c, 0);
    let confined: serde_json::Value = serde_json::from_slice(&c.stdout).unwrap();
    let why = confined["notGranted"][0].as_str().unwrap_or_default();
    assert!(
        why.contains("$TMPDIR") && why.contains("symbolic link"),
        "{confined}"
    );
    let out = fx
        .stockade(["run", "--", "sh", "-c", &attack])
        .env("HOME", &home)
        .env("TMPDIR", &link)
        .output()
        .unwrap();
    assert_code(&out, 2);
    assert!(
        text(&out.stderr).contains("[sandbox: file access denied under workspace-write mode]"),
        "{out:?}"
    );
    assert!(!ssh.join("authorized_keys").exists());
    // The same through a link planted in the workspace (not writable by every user).
    let out = fx.run_sh(
        "workspace-write",
        &format!("ln -s {} tmp-link", ssh.display()),
    );
    assert_code(&out, 0);
    let in_ws = fx.ws.join("tmp-link");
    let attack_ws = format!("echo key >> {}/authorized_keys", in_ws.display());
    let out = fx
        .stockade(["run", "--", "sh", "-c", &attack_ws])
        .env("HOME", &home)
        .env("TMPDIR", &in_ws)
        .output()
        .unwrap();
    assert_code(&out, 2);
    assert!(!ssh.join("authorized_keys").exists());
    // `--env TMPDIR=/` does not make the filesystem writable either.
    let escape = format!("touch {}/x", fx.outside.display());
    let out = fx
        .stockade(["run", "--env", "TMPDIR=/", "--", "sh", "-c", &escape])
        .output()
        .unwrap();
    assert_code(&out, 1);
    assert!(text(&out.stderr).contains("Permission denied"), "{out:?}");
    assert!(!fx.outside.join("x").exists());
    let _ = std::fs::remove_file(&link);

    // Positive control: an honest $TMPDIR in the home is granted.
    let tmp = home.join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let honest = format!("echo ok > {}/f", tmp.display());
    let out = fx
        .stockade(["run", "--", "sh", "-c", &honest])
        .env("HOME", &home)
        .env("TMPDIR", &tmp)
        .output()
        .unwrap();
    assert_code(&out, 0);
    assert!(tmp.join("f").exists());
}

#[test]
fn a_writable_root_replaced_by_a_link_after_confine_is_refused_by_the_runner() {
    let fx = Fixture::new();
    let cache = fx.ws.join("cache");
    std::fs::create_dir(&cache).unwrap();
    let cache_arg = cache.to_str().unwrap();
    let write = format!("echo x > {}/f", cache.display());
    // Positive control: confined, then spawned untouched, the root is writable.
    let c = fx.confine(&["--writable", cache_arg, "--", "sh", "-c", &write]);
    assert_code(&spawn_argv(&c), 0);
    assert!(cache.join("f").exists());
    std::fs::remove_file(cache.join("f")).unwrap();

    // The victim is confined first; then an earlier command swaps the root for a link.
    let c = fx.confine(&["--writable", cache_arg, "--", "sh", "-c", &write]);
    let plant = format!("rm -rf cache && ln -s {} cache", fx.outside.display());
    let out = fx.run_sh("workspace-write", &plant);
    assert_code(&out, 0);
    let out = spawn_argv(&c);
    assert_code(&out, 125);
    let line = runner_failure_line(&out);
    assert!(
        line.contains("writable root") && line.contains(cache_arg) && line.contains("replaced"),
        "{line}"
    );
    assert!(!fx.outside.join("f").exists());
    let status = std::fs::read_to_string(c["statusPath"].as_str().unwrap()).unwrap();
    assert!(status.contains("failed root-replaced"), "{status}");
    // Confining again now refuses the planted link as a root.
    let out = fx
        .stockade(["run", "--writable", cache_arg, "--", "sh", "-c", &write])
        .output()
        .unwrap();
    let line = refusal(&out);
    assert!(line.contains("symbolic link"), "{line}");
    assert!(!fx.outside.join("f").exists());
}

#[test]
fn a_workspace_removed_and_recreated_after_confine_is_refused_by_the_runner() {
    let fx = Fixture::new();
    let sub = fx.ws.join("sub");
    std::fs::create_dir(&sub).unwrap();
    let sub_arg = sub.to_str().unwrap();
    let write = &format!("echo x > {}/f", sub.display());
    // Positive control: untouched, the workspace is the one granted.
    let c = fx.confine(&["--workspace", sub_arg, "--", "sh", "-c", write]);
    assert_code(&spawn_argv(&c), 0);
    assert!(sub.join("f").exists());

    let c = fx.confine(&["--workspace", sub_arg, "--", "sh", "-c", write]);
    let out = fx.run_sh("workspace-write", "rm -rf sub && mkdir sub");
    assert_code(&out, 0);
    let out = spawn_argv(&c);
    assert_code(&out, 125);
    let line = runner_failure_line(&out);
    assert!(
        line.contains("workspace root") && line.contains("another directory"),
        "{line}"
    );
    assert!(!sub.join("f").exists());
}

#[test]
fn broad_roots_are_refused_naming_the_flag_and_allowed_with_it() {
    let fx = Fixture::new();
    let home = fx.root.join("home");
    std::fs::create_dir_all(home.join("proj")).unwrap();
    // cd / && stockade run -- touch /etc/x
    let target = PathBuf::from(format!("/etc/{}", unique_tag("stockade-broad")));
    let out = fx
        .stockade(["run", "--", "touch", target.to_str().unwrap()])
        .current_dir("/")
        .output()
        .unwrap();
    let line = refusal(&out);
    assert!(
        line.contains("--allow-broad-root") && line.contains("current directory"),
        "{line}"
    );
    assert!(!target.exists());
    // The home directory and its ancestors, as workspace or --writable.
    let home_arg = home.to_str().unwrap();
    let root_arg = fx.root.to_str().unwrap();
    let rc = home.join(".bashrc");
    let touch = format!("touch {}", rc.display());
    for args in [
        vec!["--workspace", home_arg],
        vec!["--writable", home_arg],
        vec!["--writable", root_arg],
        vec!["--writable", "/"],
    ] {
        let out = fx
            .stockade(["run"])
            .args(&args)
            .args(["--", "sh", "-c", &touch])
            .env("HOME", &home)
            .output()
            .unwrap();
        let line = refusal(&out);
        assert!(line.contains("--allow-broad-root"), "{args:?}: {line}");
        assert!(!rc.exists());
    }
    // Allowed on purpose.
    let out = fx
        .stockade(["run", "--allow-broad-root", "--workspace", home_arg])
        .args(["--", "sh", "-c", &touch])
        .env("HOME", &home)
        .output()
        .unwrap();
    assert_code(&out, 0);
    assert!(rc.exists());
    // Controls: a workspace inside the home is the normal case, and read-only never
    // asks (nothing is writable).
    let out = fx
        .stockade(["run", "--workspace", home.join("proj").to_str().unwrap()])
        .args(["--", "true"])
        .env("HOME", &home)
        .output()
        .unwrap();
    assert_code(&out, 0);
    let out = fx
        .stockade(["run", "--mode", "read-only", "--", "true"])
        .current_dir("/")
        .output()
        .unwrap();
    assert_code(&out, 0);
}

#[test]
fn the_kernel_s_trees_are_refused_as_writable_roots_and_dev_shm_is_not() {
    // A writable /proc/sys lets a command started as root, without any capability,
    // set kernel.core_pattern: the kernel then runs the program it names as root,
    // outside every sandbox, at the next crash. /sys and /dev are the same kind of tree
    // (device attributes, raw disks).
    for fx in [Fixture::new(), Fixture::staged()] {
        let ran = fx.ws.join("ran");
        let touch = format!("touch {}", ran.display());
        for args in [
            vec!["--writable", "/proc/sys/kernel"],
            vec!["--writable", "/sys/kernel"],
            vec!["--writable", "/dev"],
            vec!["--workspace", "/proc/sys"],
        ] {
            let out = fx
                .stockade(["run"])
                .args(&args)
                .args(["--", "sh", "-c", &touch])
                .output()
                .unwrap();
            let line = refusal(&out);
            assert!(
                line.contains("kernel's own interface") && line.contains("--allow-broad-root"),
                "{args:?}: {line}"
            );
            assert!(!ran.exists(), "{args:?}");
        }
        // Controls: /dev/shm is a tmpfs like /tmp, and the refusal can be lifted on
        // purpose.
        for args in [
            vec!["--writable", "/dev/shm"],
            vec!["--allow-broad-root", "--writable", "/sys/kernel"],
        ] {
            let out = fx
                .stockade(["run"])
                .args(&args)
                .args(["--", "sh", "-c", &touch])
                .output()
                .unwrap();
            assert_code(&out, 0);
            assert!(ran.exists(), "{args:?}");
            std::fs::remove_file(&ran).unwrap();
        }
    }
}

/// `stockade-runner --explain` on the request of a ConfinedArgv.
fn explain(confined: &serde_json::Value) -> String {
    let argv = confined["argv"].as_array().unwrap();
    let out = std::process::Command::new(runner_bin())
        .args(["--explain", argv[2].as_str().unwrap()])
        .output()
        .unwrap();
    assert_code(&out, 0);
    text(&out.stdout)
}

#[test]
fn a_hard_link_made_before_the_command_is_followed_and_explain_warns_about_it() {
    let fx = Fixture::new();
    let victim = fx.outside.join("bashrc");
    std::fs::write(&victim, "original\n").unwrap();
    // Control: no link, no warning about the workspace.
    let about_ws = format!("warning: beneath {} ", fx.ws.display());
    let c = fx.confine(&["--", "true"]);
    assert!(!explain(&c).contains(&about_ws), "{}", explain(&c));
    // The documented limit: a file hard-linked into the workspace before the command
    // runs is the same file, and Landlock lets the command write it.
    std::fs::hard_link(&victim, fx.ws.join("alias")).unwrap();
    let c = fx.confine(&["--", "sh", "-c", "echo appended >> alias"]);
    let shown = explain(&c);
    assert!(
        shown.contains(&about_ws) && shown.contains("hard links") && shown.contains("/ws/alias"),
        "{shown}"
    );
    assert_code(&spawn_argv(&c), 0);
    assert_eq!(
        std::fs::read_to_string(&victim).unwrap(),
        "original\nappended\n"
    );
}

/// Whether the ELF file at `path` has a program header naming an interpreter (is
/// dynamically linked), read here independently of the launcher's own check.
fn names_an_interpreter(path: &std::path::Path) -> bool {
    let elf = std::fs::read(path).unwrap();
    let at = |o: usize, n: usize| {
        u64::from_le_bytes({
            let mut b = [0u8; 8];
            b[..n].copy_from_slice(&elf[o..o + n]);
            b
        }) as usize
    };
    let (phoff, phentsize, phnum) = (at(0x20, 8), at(0x36, 2), at(0x38, 2));
    const PT_INTERP: usize = 3;
    (0..phnum).any(|i| at(phoff + i * phentsize, 4) == PT_INTERP)
}

/// `confine`: the executor spawns the argv with its own environment, which the confine
/// call's is built from. `run` starts stockade's helpers with none, so there the same
/// variables reach only the confined command (see `unconfined_helpers`).
#[test]
fn a_dynamic_runner_told_to_load_code_from_the_workspace_is_refused() {
    let fx = Fixture::new();
    let marker = fx.ws.join("ran");
    let script = format!("touch {}", marker.display());
    // The test builds are dynamically linked, so the loader obeys LD_LIBRARY_PATH before
    // the runner confines anything; an empty entry is the current directory, here the
    // workspace where an earlier command could have planted a libc.so.6.
    let ws = fx.ws.to_str().unwrap();
    if !names_an_interpreter(&runner_bin()) {
        // A static build (the musl target's test builds are static): no loader reads
        // these variables, so there is nothing to refuse and the request is written.
        let out = fx
            .stockade(["confine", "--", "sh", "-c", &script])
            .env("LD_LIBRARY_PATH", ":/usr/lib")
            .output()
            .unwrap();
        assert_code(&out, 0);
        return;
    }
    for value in [":/usr/lib".to_string(), format!("{ws}/lib"), "lib".into()] {
        let out = fx
            .stockade(["confine", "--", "sh", "-c", &script])
            .env("LD_LIBRARY_PATH", &value)
            .output()
            .unwrap();
        let line = refusal(&out);
        assert!(line.contains("LD_LIBRARY_PATH"), "{value}: {line}");
        assert!(!marker.exists());
    }
    let out = fx
        .stockade([
            "confine",
            "--env",
            &format!("LD_PRELOAD={ws}/evil.so"),
            "--",
        ])
        .args(["sh", "-c", &script])
        .output()
        .unwrap();
    assert!(refusal(&out).contains("LD_PRELOAD"));
    // A workspace whose name is not UTF-8 is judged by its own name, not a lossy copy
    // (`w\u{fffd}`, which names nothing and so looked safe).
    use std::os::unix::ffi::{OsStrExt, OsStringExt};
    let odd = fx.ws.join(std::ffi::OsStr::from_bytes(b"w\xff"));
    std::fs::create_dir(&odd).unwrap();
    let mut value = odd.clone().into_os_string().into_vec();
    value.extend_from_slice(b"/lib");
    let out = fx
        .stockade([
            std::ffi::OsStr::new("confine"),
            "--workspace".as_ref(),
            odd.as_os_str(),
        ])
        .args(["--", "sh", "-c", &script])
        .env("LD_LIBRARY_PATH", std::ffi::OsString::from_vec(value))
        .output()
        .unwrap();
    assert!(
        refusal(&out).contains("LD_LIBRARY_PATH"),
        "{}",
        text(&out.stderr)
    );
    assert!(!marker.exists());
    // Control: a library path only root can write is fine.
    let c = fx.confine(&["--", "sh", "-c", &script]);
    let argv = confined_argv(&c);
    let out = std::process::Command::new(&argv[0])
        .args(&argv[1..])
        .env("LD_LIBRARY_PATH", "/usr/lib")
        .current_dir(&fx.ws)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_code(&out, 0);
    assert!(marker.exists());
    std::fs::remove_file(&marker).unwrap();
    // `run` starts the runner with no environment: the same variables are no reason to
    // refuse there, and the command still gets them.
    let out = fx
        .stockade(["run", "--", "sh", "-c"])
        .arg(format!("{script}; printf %s \"$LD_LIBRARY_PATH\""))
        .env("LD_LIBRARY_PATH", ":/usr/lib")
        .output()
        .unwrap();
    assert_code(&out, 0);
    assert_eq!(text(&out.stdout), ":/usr/lib");
    assert!(marker.exists());
}
