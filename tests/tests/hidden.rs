//! Hidden paths: credential stores, `--hide` paths and stockade's own control
//! directories cannot be read by any confined command, while everything beside them
//! stays readable (each denial has a positive control: the same read with the path not
//! hidden, or the sibling next to it).

mod support;
use std::path::{Path, PathBuf};
use support::*;

/// The marker a denied read leaves.
fn marker(mode: &str) -> String {
    format!("[sandbox: file access denied under {mode} mode]")
}

/// A shell script that reports `READ path` or `DENIED path` for each path.
fn probe_reads(paths: &[PathBuf]) -> String {
    let mut s = String::new();
    for p in paths {
        let p = p.display();
        s.push_str(&format!(
            "if cat '{p}' >/dev/null 2>&1; then echo 'READ {p}'; else echo 'DENIED {p}'; fi\n"
        ));
    }
    s
}

/// The request file a ConfinedArgv names (after `--request`, with or without the stage).
fn request_of(confined: &serde_json::Value) -> String {
    let argv = confined_argv(confined);
    let at = argv
        .iter()
        .position(|a| a == "--request")
        .expect("--request");
    argv[at + 1].clone()
}

fn verdicts(out: &std::process::Output) -> Vec<String> {
    text(&out.stdout).lines().map(str::to_string).collect()
}

/// The default store locations that are directories (every other one is a file).
const DIRECTORY_STORES: &[&str] = &[
    ".ssh",
    ".aws",
    ".config/gh",
    ".config/glab-cli",
    ".config/hub",
    ".kube",
    ".gnupg",
    ".password-store",
    ".local/share/keyrings",
    ".config/gcloud",
    ".azure",
    ".oci",
    ".config/doctl",
    ".config/rclone",
    ".terraform.d",
    ".mozilla",
    ".thunderbird",
    ".config/google-chrome",
    ".config/google-chrome-beta",
    ".config/google-chrome-unstable",
    ".config/chromium",
    ".config/BraveSoftware",
    ".config/microsoft-edge",
    ".config/microsoft-edge-beta",
    ".config/vivaldi",
    ".config/opera",
];

/// A fake home holding every default credential store: a directory store gets a file
/// `secret` inside it (the one read), a file store is the file read.
fn fake_home(fx: &Fixture) -> (PathBuf, Vec<PathBuf>) {
    let home = fx.root.join("home");
    let mut secrets = Vec::new();
    let stores = stockade_policy::credentials::STORES.iter();
    for rel in stores.flat_map(|s| s.home) {
        let p = home.join(rel);
        if !DIRECTORY_STORES.contains(rel) {
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, b"secret").unwrap();
            secrets.push(p);
        } else {
            std::fs::create_dir_all(&p).unwrap();
            std::fs::write(p.join("secret"), b"secret").unwrap();
            secrets.push(p.join("secret"));
        }
    }
    std::fs::write(home.join(".bashrc"), b"rc").unwrap();
    std::fs::create_dir_all(home.join(".config/git")).unwrap();
    std::fs::write(home.join(".config/git/config"), b"[core]").unwrap();
    std::fs::create_dir_all(home.join(".cargo/bin")).unwrap();
    std::fs::write(home.join(".cargo/config.toml"), b"").unwrap();
    (home, secrets)
}

/// Where the environment moves a store, the store is hidden there: a file named by a
/// variable, a list of files, and entries beneath a directory a variable names. What
/// lies beside them stays readable, and the same paths with the variables unset, or
/// with `--no-default-hide`, are readable (the variables are what hid them).
#[test]
fn credential_stores_moved_by_the_environment_are_hidden_where_they_are() {
    for fx in [Fixture::new(), Fixture::staged()] {
        let o = fx.outside.join("stores");
        let file = |rel: &str| {
            let p = o.join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, b"secret").unwrap();
            p
        };
        let secrets = [
            file("aws/shared-credentials"),
            file("kube/one"),
            file("kube/two"),
            file("docker/config.json"),
            file("gnupg/private-keys-v1.d/key"),
            file("cargo/credentials.toml"),
            file("xdg/gh/hosts.yml"),
            file("xdg/git/credentials"),
            file("pgpass"),
            file("history"),
        ];
        let beside = [
            file("docker/other.json"),
            file("cargo/config.toml"),
            file("xdg/git/config"),
            file("kube/three"),
        ];
        let at = |rel: &str| o.join(rel).into_os_string();
        let mut kubeconfig = at("kube/one");
        kubeconfig.push(":");
        kubeconfig.push(at("kube/two"));
        let vars = [
            ("AWS_SHARED_CREDENTIALS_FILE", at("aws/shared-credentials")),
            ("KUBECONFIG", kubeconfig),
            ("DOCKER_CONFIG", at("docker")),
            ("GNUPGHOME", at("gnupg")),
            ("CARGO_HOME", at("cargo")),
            ("XDG_CONFIG_HOME", at("xdg")),
            ("PGPASSFILE", at("pgpass")),
            ("HISTFILE", at("history")),
        ];
        let all: Vec<PathBuf> = secrets.iter().chain(&beside).cloned().collect();
        let script = probe_reads(&all);
        for mode in ["read-only", "workspace-write"] {
            let what = format!("stage {} {mode}", fx.stage);
            let mut cmd = fx.stockade(["run", "--mode", mode, "--", "sh", "-c", &script]);
            cmd.envs(vars.iter().cloned());
            let v = verdicts(&cmd.output().unwrap());
            for s in &secrets {
                let denied = format!("DENIED {}", s.display());
                assert!(
                    v.contains(&denied),
                    "{what}: {} readable: {v:?}",
                    s.display()
                );
            }
            for s in &beside {
                let read = format!("READ {}", s.display());
                assert!(
                    v.contains(&read),
                    "{what}: {} unreadable: {v:?}",
                    s.display()
                );
            }
            // Controls: without the variables, and with the defaults dropped.
            let unset = fx.stockade(["run", "--mode", mode, "--", "sh", "-c", &script]);
            let mut dropped = fx.stockade(["run", "--mode", mode, "--no-default-hide"]);
            dropped
                .args(["--", "sh", "-c", &script])
                .envs(vars.iter().cloned());
            for mut control in [unset, dropped] {
                let v = verdicts(&control.output().unwrap());
                for s in &all {
                    let read = format!("READ {}", s.display());
                    assert!(v.contains(&read), "{what} control: {}: {v:?}", s.display());
                }
            }
        }
    }
}

/// A store moved by an `--env` entry (the command's own environment, not the caller's)
/// is hidden as well.
#[test]
fn a_store_moved_by_an_env_entry_is_hidden_too() {
    for fx in [Fixture::new(), Fixture::staged()] {
        let store = fx.outside.join("env-pgpass");
        std::fs::write(&store, b"secret").unwrap();
        let script = probe_reads(std::slice::from_ref(&store));
        let entry = format!("PGPASSFILE={}", store.display());
        let run = |flags: &[&str]| {
            let mut cmd = fx.stockade(["run"]);
            cmd.args(flags)
                .args(["--", "sh", "-c", &script])
                .env_remove("PGPASSFILE");
            verdicts(&cmd.output().unwrap())
        };
        let v = run(&["--env", &entry]);
        assert!(v.contains(&format!("DENIED {}", store.display())), "{v:?}");
        // Control: without the entry the same file is readable.
        let v = run(&[]);
        assert!(v.contains(&format!("READ {}", store.display())), "{v:?}");
    }
}

/// With `--inherit-env` the command gets the environment the runner is spawned with,
/// which `confine` never saw: the stores that environment moves are hidden as well.
#[test]
fn with_inherit_env_the_stores_the_spawn_environment_moves_are_hidden_too() {
    for fx in [Fixture::new(), Fixture::staged()] {
        let store = fx.outside.join("spawn-kubeconfig");
        let beside = fx.outside.join("spawn-other");
        for p in [&store, &beside] {
            std::fs::write(p, b"secret").unwrap();
        }
        let script = probe_reads(&[store.clone(), beside.clone()]);
        let spawn = |kubeconfig: Option<&Path>| {
            let c = fx.confine(&["--inherit-env", "--", "sh", "-c", &script]);
            let argv = confined_argv(&c);
            let mut cmd = std::process::Command::new(&argv[0]);
            cmd.args(&argv[1..])
                .stdin(std::process::Stdio::null())
                .env_remove("TMPDIR")
                .env_remove("KUBECONFIG");
            if let Some(k) = kubeconfig {
                cmd.env("KUBECONFIG", k);
            }
            verdicts(&cmd.output().unwrap())
        };
        let v = spawn(Some(&store));
        assert!(v.contains(&format!("DENIED {}", store.display())), "{v:?}");
        assert!(v.contains(&format!("READ {}", beside.display())), "{v:?}");
        // Control: spawned without the variable, the same file is readable.
        let v = spawn(None);
        assert!(v.contains(&format!("READ {}", store.display())), "{v:?}");
    }
}

/// A variable that puts a store on the home itself, a device or a directory holding the
/// workspace hides nothing there (that would hide what commands need, or fail every
/// confine), and ConfinedArgv's `notGranted` says so; commands run as ever.
#[test]
fn a_store_variable_naming_the_home_a_device_or_the_workspace_hides_nothing_and_is_reported() {
    let fx = Fixture::new();
    let home = fx.root.join("home");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(home.join(".profile"), b"rc").unwrap();
    let mut cmd = fx.stockade(["confine", "--mode", "workspace-write", "--", "true"]);
    cmd.env("HOME", &home)
        .env("GNUPGHOME", &home)
        .env("HISTFILE", "/dev/null")
        .env("GH_CONFIG_DIR", &fx.root);
    let out = cmd.output().unwrap();
    assert_code(&out, 0);
    let c: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let not_granted = c["notGranted"].to_string();
    for var in ["$GNUPGHOME", "$HISTFILE", "$GH_CONFIG_DIR"] {
        assert!(not_granted.contains(var), "{var}: {not_granted}");
    }
    let _ = std::fs::remove_dir_all(
        Path::new(c["statusPath"].as_str().unwrap())
            .parent()
            .unwrap(),
    );
    // The workload: the home stays readable, /dev/null usable, the workspace writable.
    let script = format!(
        "cat '{}' && echo x >/dev/null && touch made && echo WORKED",
        home.join(".profile").display()
    );
    let out = fx
        .stockade([
            "run",
            "--mode",
            "workspace-write",
            "--",
            "sh",
            "-c",
            &script,
        ])
        .env("HOME", &home)
        .env("GNUPGHOME", &home)
        .env("HISTFILE", "/dev/null")
        .env("GH_CONFIG_DIR", &fx.root)
        .output()
        .unwrap();
    assert_code(&out, 0);
    assert!(text(&out.stdout).contains("WORKED"));
}

#[test]
fn every_default_secret_is_unreadable_while_siblings_hostname_and_ls_home_stay_readable() {
    for fx in [Fixture::new(), Fixture::staged()] {
        let (home, secrets) = fake_home(&fx);
        let siblings = [
            home.join(".bashrc"),
            home.join(".config/git/config"),
            home.join(".cargo/config.toml"),
            PathBuf::from("/etc/hostname"),
        ];
        let mut all = secrets.clone();
        all.extend(siblings.iter().cloned());
        // A directory beside a hidden path keeps directory rights too (listing it), not
        // only the file rights under it.
        let script = format!(
            "{}ls -a '{h}' | grep -qx .bashrc && echo LISTED\nls '{h}/.config' | grep -qx git && echo LISTED_BESIDE\n",
            probe_reads(&all),
            h = home.display()
        );
        for mode in ["read-only", "workspace-write"] {
            let out = fx
                .stockade(["run", "--mode", mode, "--", "sh", "-c", &script])
                .env("HOME", &home)
                .output()
                .unwrap();
            let v = verdicts(&out);
            for s in &secrets {
                assert!(
                    v.contains(&format!("DENIED {}", s.display())),
                    "{mode}: {} readable: {v:?}",
                    s.display()
                );
            }
            for s in &siblings {
                assert!(
                    v.contains(&format!("READ {}", s.display())),
                    "{mode}: {} unreadable: {v:?}",
                    s.display()
                );
            }
            assert!(v.contains(&"LISTED".to_string()), "{mode}: ls ~: {v:?}");
            assert!(
                v.contains(&"LISTED_BESIDE".to_string()),
                "{mode}: ls ~/.config: {v:?}"
            );

            // Positive control: without the defaults every store is readable again, so the
            // denials above are this layer's, not the filesystem's.
            let out = fx
                .stockade(["run", "--mode", mode, "--no-default-hide", "--", "sh", "-c"])
                .arg(&script)
                .env("HOME", &home)
                .output()
                .unwrap();
            let v = verdicts(&out);
            for s in all.iter() {
                assert!(
                    v.contains(&format!("READ {}", s.display())),
                    "{mode} --no-default-hide: {}: {v:?}",
                    s.display()
                );
            }
        }
    }
}

#[test]
fn a_hide_path_is_unreadable_directly_through_a_link_and_through_proc() {
    for fx in [Fixture::new(), Fixture::staged()] {
        let secret = fx.outside.join("vault");
        std::fs::create_dir(&secret).unwrap();
        std::fs::write(secret.join("key"), b"k").unwrap();
        std::fs::write(fx.outside.join("plain"), b"p").unwrap();
        std::os::unix::fs::symlink(&secret, fx.outside.join("link")).unwrap();
        let denied = [
            secret.join("key"),
            fx.outside.join("link/key"),
            Path::new("/proc/self/root").join(secret.join("key").strip_prefix("/").unwrap()),
        ];
        let script = probe_reads(&[denied.to_vec(), vec![fx.outside.join("plain")]].concat());
        for mode in ["read-only", "workspace-write"] {
            // The hidden path named through the link hides its target too.
            for hide in [&secret, &fx.outside.join("link")] {
                let out = fx
                    .stockade(["run", "--mode", mode, "--no-default-hide", "--hide"])
                    .arg(hide)
                    .args(["--", "sh", "-c", &script])
                    .output()
                    .unwrap();
                let v = verdicts(&out);
                for d in &denied {
                    assert!(
                        v.contains(&format!("DENIED {}", d.display())),
                        "{mode}: {v:?}"
                    );
                }
                assert!(
                    v.contains(&format!("READ {}", fx.outside.join("plain").display())),
                    "{mode}: {v:?}"
                );
            }
            // Positive control: not hidden, all of it reads.
            let out = fx.run_sh(mode, &script);
            assert!(
                verdicts(&out).iter().all(|l| l.starts_with("READ ")),
                "{mode}: {:?}",
                verdicts(&out)
            );
        }
    }
}

#[test]
fn a_hidden_read_is_a_denial_with_the_marker_and_names_are_listable_only_without_the_stage() {
    for fx in [Fixture::new(), Fixture::staged()] {
        let secret = fx.outside.join("vault");
        std::fs::create_dir(&secret).unwrap();
        std::fs::write(secret.join("key"), b"k").unwrap();
        let out = fx
            .stockade(["run", "--mode", "workspace-write", "--hide"])
            .arg(&secret)
            .args(["--", "sh", "-c"])
            .arg(format!("ls '{0}'; cat '{0}/key'", secret.display()))
            .output()
            .unwrap();
        assert_code(&out, 1);
        let err = text(&out.stderr);
        if fx.stage {
            // Covered by the stage's empty mount of mode 000: not even the names.
            assert_eq!(text(&out.stdout), "", "{err}");
            assert!(err.contains("cannot open directory"), "{err}");
        } else {
            // The carve-out's documented limit: the names inside stay listable.
            assert_eq!(text(&out.stdout), "key\n");
        }
        assert!(err.contains("Permission denied"), "{err}");
        assert!(err.contains(&marker("workspace-write")), "{err}");
        // Positive control: not hidden, it lists and reads.
        let out = fx.run_sh(
            "workspace-write",
            &format!("ls '{0}'; cat '{0}/key'", secret.display()),
        );
        assert_code(&out, 0);
        assert_eq!(text(&out.stdout), "key\nk");
    }
}

#[test]
fn a_hidden_path_in_the_workspace_cannot_be_read_nor_moved_out_of_hiding() {
    // Landlock lets a command rename what it cannot read; renamed, the file would be
    // readable by the next command. Under the namespace stage the hidden path is a
    // read-only mount point (rename and removal: EBUSY); without it, such a policy is
    // refused.
    let fx = Fixture::staged();
    std::fs::write(fx.ws.join(".env"), b"TOKEN=t").unwrap();
    std::fs::create_dir(fx.ws.join("src")).unwrap();
    std::fs::write(fx.ws.join("src/main.c"), b"int main;").unwrap();
    std::fs::write(fx.ws.join("README"), b"r").unwrap();
    let script = "cat .env >/dev/null 2>&1 && echo READ-ENV;\
        cat src/main.c >/dev/null && echo READ-SRC;\
        echo more >> README && cat README >/dev/null && echo RW-README;\
        echo new > src/new && cat src/new >/dev/null && echo RW-SRC-NEW;\
        echo x > fresh && echo WROTE-FRESH; cat fresh >/dev/null 2>&1 && echo READ-FRESH;\
        mv .env leaked 2>/dev/null && echo MOVED-ENV;\
        rm -f .env 2>/dev/null && echo REMOVED-ENV; true";
    let out = fx
        .stockade(["run", "--mode", "workspace-write", "--hide", ".env"])
        .args(["--", "sh", "-c", script])
        .output()
        .unwrap();
    let v = verdicts(&out);
    assert_eq!(
        v,
        [
            "READ-SRC",
            "RW-README",
            "RW-SRC-NEW",
            // Under the stage `.env` is covered by an empty mount, not carved out of
            // the workspace's grant, so a file created beside it reads as any other
            // (the carve-out's documented limit is gone).
            "WROTE-FRESH",
            "READ-FRESH"
        ],
        "{}",
        text(&out.stderr)
    );
    assert!(fx.ws.join(".env").exists() && !fx.ws.join("leaked").exists());
    // Without the stage the same policy is refused, and nothing runs.
    let unstaged = Fixture::new();
    std::fs::write(unstaged.ws.join(".env"), b"TOKEN=t").unwrap();
    let out = unstaged
        .stockade(["run", "--hide", ".env", "--", "touch", "ran"])
        .output()
        .unwrap();
    assert_code(&out, 125);
    let err = text(&out.stderr);
    assert!(
        err.contains("SANDBOX_UNAVAILABLE") && err.contains(".env"),
        "{err}"
    );
    assert!(!unstaged.ws.join("ran").exists());
    // Positive control: not hidden, it reads and it moves.
    let out = fx.run_sh("workspace-write", "cat .env && mv .env moved");
    assert_code(&out, 0);
    assert_eq!(text(&out.stdout), "TOKEN=t");
    assert!(fx.ws.join("moved").exists());
}

#[test]
fn hiding_an_ancestor_of_the_workspace_or_a_writable_root_is_refused() {
    let fx = Fixture::new();
    let extra = fx.outside.join("extra");
    std::fs::create_dir(&extra).unwrap();
    for (hide, extra_args) in [
        (fx.ws.clone(), vec![]),
        (fx.root.clone(), vec![]),
        (
            fx.outside.clone(),
            vec!["--writable".to_string(), extra.display().to_string()],
        ),
    ] {
        for sub in ["run", "confine"] {
            let out = fx
                .stockade([sub, "--hide"])
                .arg(&hide)
                .args(&extra_args)
                .args(["--", "true"])
                .output()
                .unwrap();
            assert_code(&out, 125);
            let line = launcher_failure_line(&out);
            assert!(line.contains(&hide.display().to_string()), "{line}");
            assert!(line.contains("hidden path"), "{line}");
            assert!(fx.leftover_requests().is_empty());
        }
    }
}

#[test]
fn a_hide_path_that_cannot_be_resolved_is_refused_not_dropped() {
    let fx = Fixture::new();
    let secret = fx.outside.join("key");
    std::fs::write(&secret, "SECRET-KEY\n").unwrap();
    // (Fixture::new runs without the stage: Landlock alone hides.) A file named with a trailing slash resolves to nothing (ENOTDIR): dropped, it
    // would leave the file readable while the report said hidden paths were enforced.
    let slashed = format!("{}/", secret.display());
    for sub in ["run", "confine"] {
        let out = fx
            .stockade([sub, "--hide", &slashed, "--", "cat"])
            .arg(&secret)
            .output()
            .unwrap();
        assert_code(&out, 125);
        let line = launcher_failure_line(&out);
        assert!(
            line.contains(&slashed) && line.contains("cannot resolve"),
            "{line}"
        );
        assert!(!text(&out.stdout).contains("SECRET"), "{out:?}");
        assert!(fx.leftover_requests().is_empty());
    }
    // Control: named as it is, the file is hidden; a path that does not exist is
    // accepted and hides nothing, as documented.
    let out = fx
        .stockade(["run", "--hide"])
        .arg(&secret)
        .args(["--", "cat"])
        .arg(&secret)
        .output()
        .unwrap();
    assert_ne!(out.status.code(), Some(0), "{out:?}");
    assert!(!text(&out.stdout).contains("SECRET"), "{out:?}");
    let out = fx
        .stockade(["run", "--hide"])
        .arg(fx.outside.join("no-such-file"))
        .args(["--", "true"])
        .output()
        .unwrap();
    assert_code(&out, 0);
}

#[test]
fn one_commands_request_and_spill_files_are_unreadable_from_another() {
    for fx in [Fixture::new(), Fixture::staged()] {
        // A pending request of another command (with a secret kept in its environment).
        let pending = fx.confine(&["--keep-env", "E2E_SECRET", "--", "true"]);
        let request = PathBuf::from(request_of(&pending));
        assert!(request.exists());
        // A spill file that survived a --json run.
        let (out, json) = run_json(&mut fx.stockade([
            "run",
            "--json",
            "--max-output",
            "10",
            "--",
            "sh",
            "-c",
            "seq 1 1000",
        ]));
        assert_code(&out, 0);
        let spill = PathBuf::from(json["stdout"]["spillPath"].as_str().expect("a spill file"));
        assert!(spill.exists());
        let script = probe_reads(&[request.clone(), spill.clone()]);
        for mode in ["read-only", "workspace-write"] {
            for flags in [vec![], vec!["--no-default-hide"]] {
                let out = fx
                    .stockade(["run", "--mode", mode])
                    .args(&flags)
                    .args(["--", "sh", "-c", &script])
                    .output()
                    .unwrap();
                assert_eq!(
                    verdicts(&out),
                    [
                        format!("DENIED {}", request.display()),
                        format!("DENIED {}", spill.display())
                    ],
                    "{mode} {flags:?}"
                );
            }
        }
        // Positive control: the same reads, unconfined, succeed.
        let out = fx.run_sh("danger-full-access", &script);
        assert!(
            verdicts(&out).iter().all(|l| l.starts_with("READ ")),
            "{:?}",
            verdicts(&out)
        );
        let _ = std::fs::remove_file(&spill);
    }
}

#[test]
fn root_system_secrets_are_hidden_by_default() {
    if !stockade_tests::is_root() {
        eprintln!("SKIPPED (needs root): root_system_secrets_are_hidden_by_default");
        return;
    }
    for fx in [Fixture::new(), Fixture::staged()] {
        let shadow = Path::new("/etc/shadow");
        if !shadow.exists() {
            eprintln!("SKIPPED (no /etc/shadow): root_system_secrets_are_hidden_by_default");
            return;
        }
        let script = probe_reads(&[shadow.to_path_buf(), PathBuf::from("/etc/hostname")]);
        for mode in ["read-only", "workspace-write"] {
            let out = fx.run_sh(mode, &script);
            assert_eq!(
                verdicts(&out),
                ["DENIED /etc/shadow", "READ /etc/hostname"],
                "{mode}"
            );
            let out = fx
                .stockade(["run", "--mode", mode, "--no-default-hide", "--", "sh", "-c"])
                .arg(&script)
                .output()
                .unwrap();
            assert_eq!(
                verdicts(&out),
                ["READ /etc/shadow", "READ /etc/hostname"],
                "{mode}"
            );
        }
    }
}

/// A loop device attached to a file, detached when dropped.
struct LoopDevice(PathBuf);

impl LoopDevice {
    /// `None` where no loop device can be attached (no `losetup`, no loop driver).
    fn attach(backing: &Path) -> Option<LoopDevice> {
        let out = std::process::Command::new("losetup")
            .args(["--find", "--show"])
            .arg(backing)
            .output()
            .ok()?;
        let dev = text(&out.stdout).trim().to_string();
        (out.status.success() && dev.starts_with("/dev/")).then(|| LoopDevice(dev.into()))
    }
}

impl Drop for LoopDevice {
    fn drop(&mut self) {
        let _ = std::process::Command::new("losetup")
            .arg("-d")
            .arg(&self.0)
            .status();
    }
}

/// A 64 KiB file in the fixture's `outside` holding `secret` at 4 KiB: a "filesystem"
/// to attach to a loop device.
fn disk_image(fx: &Fixture, name: &str, secret: &[u8]) -> PathBuf {
    let backing = fx.outside.join(name);
    let mut bytes = vec![0u8; 64 * 1024];
    bytes[4096..4096 + secret.len()].copy_from_slice(secret);
    std::fs::write(&backing, &bytes).unwrap();
    backing
}

#[test]
fn block_devices_are_hidden_by_default_from_root() {
    // Root owns every block device node and reads it without any capability: the raw
    // bytes of a filesystem hold every hidden path on it (/etc/shadow, /root/.ssh, a
    // --hide file) and every other user's private files. Here the "filesystem" is a
    // file holding a secret, attached to a loop device.
    if !stockade_tests::is_root() {
        eprintln!("SKIPPED (needs root): block_devices_are_hidden_by_default_from_root");
        return;
    }
    for fx in [Fixture::new(), Fixture::staged()] {
        let backing = disk_image(&fx, "disk.img", b"BLOCK-DEVICE-SECRET-4c1d");
        let Some(dev) = LoopDevice::attach(&backing) else {
            eprintln!(
                "SKIPPED (no loop device to attach): block_devices_are_hidden_by_default_from_root"
            );
            return;
        };
        let dev_path = dev.0.display().to_string();
        let script = format!(
            "{}grep -a -c BLOCK-DEVICE-SECRET '{dev_path}' 2>/dev/null || true",
            probe_reads(&[dev.0.clone(), PathBuf::from("/dev/null")])
        );
        for mode in ["read-only", "workspace-write"] {
            let out = fx.run_sh(mode, &script);
            assert_eq!(
                verdicts(&out),
                [format!("DENIED {dev_path}"), "READ /dev/null".into()],
                "{mode}: {}",
                text(&out.stderr)
            );
            // Control: with the defaults dropped the device reads, secret and all.
            let out = fx
                .stockade(["run", "--mode", mode, "--no-default-hide", "--", "sh", "-c"])
                .arg(&script)
                .output()
                .unwrap();
            assert_eq!(
                verdicts(&out),
                [
                    format!("READ {dev_path}"),
                    "READ /dev/null".into(),
                    "1".into()
                ],
                "{mode}: {}",
                text(&out.stderr)
            );
        }
    }
}

/// Held by a test that makes loop devices: two at once would pick the same number.
static NEW_LOOP_DEVICES: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// A loop device made for the occasion (a new node in `/dev`), removed when dropped.
struct NewLoopDevice {
    number: u32,
}

impl NewLoopDevice {
    /// The first loop device number from 100 on that has no node yet: `None` where
    /// `losetup` or the loop driver is missing.
    fn free() -> Option<NewLoopDevice> {
        let number = (100..1000).find(|n| !Path::new(&format!("/dev/loop{n}")).exists())?;
        Path::new("/dev/loop-control")
            .exists()
            .then_some(NewLoopDevice { number })
    }

    fn path(&self) -> PathBuf {
        PathBuf::from(format!("/dev/loop{}", self.number))
    }

    /// Makes the node and attaches `backing` to it; whether that worked.
    fn attach(&self, backing: &Path) -> bool {
        std::process::Command::new("losetup")
            .arg(self.path())
            .arg(backing)
            .status()
            .is_ok_and(|s| s.success())
    }
}

impl Drop for NewLoopDevice {
    fn drop(&mut self) {
        let _ = std::process::Command::new("losetup")
            .arg("-d")
            .arg(self.path())
            .status();
        // LOOP_CTL_REMOVE: the node goes too.
        let _ = std::process::Command::new("python3")
            .args([
                "-c",
                "import fcntl,os,sys;fcntl.ioctl(os.open('/dev/loop-control',os.O_RDWR),0x4C81,int(sys.argv[1]))",
            ])
            .arg(self.number.to_string())
            .status();
    }
}

#[test]
fn a_block_device_that_appears_while_a_command_runs_is_hidden_too() {
    // The stage covers each hidden path with a mount, and its /dev is the machine's: a
    // block device whose node the kernel adds while the command runs (a loop device
    // attached by someone else, a snapshot) was covered by no mask, and read raw under
    // the stage. Without the stage the carve-out gave a rule to each entry of /dev that
    // was there at the start, and a new node had none.
    const NAME: &str = "a_block_device_that_appears_while_a_command_runs_is_hidden_too";
    if !stockade_tests::is_root() {
        eprintln!("SKIPPED (needs root): {NAME}");
        return;
    }
    let _one_at_a_time = NEW_LOOP_DEVICES.lock().unwrap_or_else(|e| e.into_inner());
    for fx in [Fixture::staged(), Fixture::new()] {
        let backing = disk_image(&fx, "late.img", b"LATE-BLOCK-DEVICE-SECRET-77e0");
        for hidden in [true, false] {
            let Some(dev) = NewLoopDevice::free() else {
                eprintln!("SKIPPED (no loop driver): {NAME}");
                return;
            };
            let dev_path = dev.path();
            let ready = fx.ws.join("ready");
            let attached = fx.ws.join("attached");
            let _ = std::fs::remove_file(&ready);
            let _ = std::fs::remove_file(&attached);
            // The command says it started, waits until the device is attached, then
            // reads it.
            let script = format!(
                ": > '{}'; i=0; while [ ! -e '{}' ] && [ $i -lt 6000 ]; do sleep 0.01; i=$((i+1)); done\n{}grep -a -c LATE-BLOCK-DEVICE-SECRET '{}' 2>/dev/null || true",
                ready.display(),
                attached.display(),
                probe_reads(std::slice::from_ref(&dev_path)),
                dev_path.display()
            );
            let mut args = vec!["run", "--mode", "workspace-write"];
            if !hidden {
                args.push("--no-default-hide");
            }
            args.extend(["--", "sh", "-c", &script]);
            let child = fx
                .stockade(&args)
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            while !ready.exists() {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            assert!(dev.attach(&backing), "losetup {}", dev_path.display());
            std::fs::write(&attached, "").unwrap();
            let out = child.wait_with_output().unwrap();
            let expected = if hidden {
                vec![format!("DENIED {}", dev_path.display())]
            } else {
                // Control: with the defaults dropped the new device reads, secret and all.
                vec![format!("READ {}", dev_path.display()), "1".into()]
            };
            assert_eq!(
                verdicts(&out),
                expected,
                "staged {}, hidden {hidden}: {}",
                fx.stage,
                text(&out.stderr)
            );
        }
    }
}

#[test]
fn a_block_device_attached_after_confine_is_hidden_too() {
    // `confine` lists the block devices to hide when it makes the policy; the executor
    // spawns its argv later. A device attached in between was not on the list, and the
    // carve-out, which lists /dev again when the runner starts, gave it a rule like any
    // entry beside a hidden one: read raw, with and without the stage.
    const NAME: &str = "a_block_device_attached_after_confine_is_hidden_too";
    if !stockade_tests::is_root() {
        eprintln!("SKIPPED (needs root): {NAME}");
        return;
    }
    let _one_at_a_time = NEW_LOOP_DEVICES.lock().unwrap_or_else(|e| e.into_inner());
    for fx in [Fixture::new(), Fixture::staged()] {
        let backing = disk_image(&fx, "after.img", b"AFTER-CONFINE-SECRET-5a21");
        for hidden in [true, false] {
            let Some(dev) = NewLoopDevice::free() else {
                eprintln!("SKIPPED (no loop driver): {NAME}");
                return;
            };
            let dev_path = dev.path();
            let script = format!(
                "{}grep -a -c AFTER-CONFINE-SECRET '{}' 2>/dev/null || true",
                probe_reads(std::slice::from_ref(&dev_path)),
                dev_path.display()
            );
            let mut args = vec!["confine", "--mode", "read-only"];
            if !hidden {
                args.push("--no-default-hide");
            }
            args.extend(["--", "sh", "-c", &script]);
            let out = fx.stockade(&args).output().unwrap();
            assert_code(&out, 0);
            let confined: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
            assert!(dev.attach(&backing), "losetup {}", dev_path.display());
            let out = spawn_argv(&confined);
            let expected = if hidden {
                vec![format!("DENIED {}", dev_path.display())]
            } else {
                // Control: with the defaults dropped the new device reads, secret and all.
                vec![format!("READ {}", dev_path.display()), "1".into()]
            };
            assert_eq!(
                verdicts(&out),
                expected,
                "staged {}, hidden {hidden}: {}",
                fx.stage,
                text(&out.stderr)
            );
        }
    }
}

#[test]
fn explain_probe_and_guarantees_show_the_hidden_set() {
    for fx in [Fixture::new(), Fixture::staged()] {
        let secret = fx.outside.join("vault");
        std::fs::create_dir(&secret).unwrap();
        let confined = fx.confine(&[
            "--mode",
            "read-only",
            "--hide",
            &secret.display().to_string(),
            "--",
            "true",
        ]);
        assert_eq!(
            confined["guarantees"]["hiddenPaths"]["status"], "enforced",
            "{confined}"
        );
        let out = std::process::Command::new(runner_bin())
            .arg("--explain")
            .arg(request_of(&confined))
            .output()
            .unwrap();
        assert_code(&out, 0);
        let explained = text(&out.stdout);
        let hidden = explained
            .split("hidden (never readable):\n")
            .nth(1)
            .expect("a hidden section");
        assert!(
            hidden.contains(&format!(
                "  {}  (by {}",
                secret.display(),
                if fx.stage {
                    "the stage's empty read-only mount"
                } else {
                    "Landlock carve-out)"
                }
            )),
            "{explained}"
        );
        assert!(
            // The control base holds this request's own directory: carved out either way.
            hidden.contains(&format!(
                "  {}  (by Landlock carve-out",
                fx.runtime.join("stockade").display()
            )),
            "{explained}"
        );
        let out = fx.stockade(["probe", "--json"]).output().unwrap();
        assert_code(&out, 0);
        let probe: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let listed: Vec<&str> = probe["hidden"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        let base = fx.runtime.join("stockade");
        assert!(listed.contains(&base.to_str().unwrap()), "{listed:?}");
    }
}

#[test]
fn classify_calls_a_hidden_read_a_denial() {
    for fx in [Fixture::new(), Fixture::staged()] {
        let secret = fx.outside.join("vault");
        std::fs::create_dir(&secret).unwrap();
        std::fs::write(secret.join("key"), b"k").unwrap();
        let key = secret.join("key").display().to_string();
        let hide = secret.display().to_string();
        let verdict = |confined: &serde_json::Value| {
            let out = spawn_argv(confined);
            let file = fx.root.join("confined.json");
            std::fs::write(&file, confined.to_string()).unwrap();
            let stderr = fx.root.join("stderr");
            std::fs::write(&stderr, &out.stderr).unwrap();
            let code = out.status.code().unwrap().to_string();
            let res = fx
                .stockade(["classify", "--confined"])
                .arg(&file)
                .args(["--exit-code", &code, "--stderr"])
                .arg(&stderr)
                .output()
                .unwrap();
            assert_code(&res, 0);
            serde_json::from_slice::<serde_json::Value>(&res.stdout).unwrap()
        };
        let c = fx.confine(&["--mode", "read-only", "--hide", &hide, "--", "cat", &key]);
        let v = verdict(&c);
        assert_eq!(v["outcome"], "denied", "{v}");
        assert_eq!(v["runnerFailed"], false, "{v}");
        // Positive control: not hidden, the same read succeeds.
        let c = fx.confine(&["--mode", "read-only", "--", "cat", &key]);
        let v = verdict(&c);
        assert_ne!(v["outcome"], "denied", "{v}");
        assert_eq!(v["denied"], false, "{v}");
    }
}

#[test]
fn fifos_sockets_and_mount_points_beside_a_hidden_path_neither_hang_nor_break_the_runner() {
    for fx in [Fixture::new(), Fixture::staged()] {
        let secret = fx.outside.join("vault");
        std::fs::create_dir(&secret).unwrap();
        std::fs::write(secret.join("key"), b"k").unwrap();
        let fifo = fx.outside.join("fifo");
        let status = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(status.success());
        let _socket = std::os::unix::net::UnixListener::bind(fx.outside.join("sock")).unwrap();
        std::fs::write(fx.outside.join("plain"), b"p").unwrap();
        // As root, also a mount point: a bind mount of a directory holding a readable file.
        let mounted = fx.outside.join("mnt");
        std::fs::create_dir(&mounted).unwrap();
        let source = fx.root.join("mnt-source");
        std::fs::create_dir(&source).unwrap();
        std::fs::write(source.join("inside"), b"i").unwrap();
        let bound = stockade_tests::is_root()
            && std::process::Command::new("mount")
                .args(["--bind"])
                .arg(&source)
                .arg(&mounted)
                .status()
                .is_ok_and(|s| s.success());
        let mut readable = vec![fx.outside.join("plain")];
        if bound {
            readable.push(mounted.join("inside"));
        } else {
            eprintln!(
                "no bind mount (not root, or mount refused): the mount point part is skipped"
            );
        }
        let script = probe_reads(&[vec![secret.join("key")], readable.clone()].concat());
        let out = fx
            .stockade(["run", "--mode", "read-only", "--timeout", "60s", "--hide"])
            .arg(&secret)
            .args(["--", "sh", "-c", &script])
            .output()
            .unwrap();
        if bound {
            let _ = std::process::Command::new("umount").arg(&mounted).status();
        }
        assert_code(&out, 0);
        let mut want = vec![format!("DENIED {}", secret.join("key").display())];
        want.extend(readable.iter().map(|p| format!("READ {}", p.display())));
        assert_eq!(verdicts(&out), want, "{}", text(&out.stderr));
    }
}

/// A command that may write where a default hidden name lies (`--writable ~/.cargo`, a
/// workspace `~/.config`) can plant a link there. Followed, it hid whatever it named
/// from every later command: `/usr` made them all exit 126, `/` or the workspace made
/// every `confine` fail with 125 ("hidden path / contains ..."), a directory of the home
/// lost its contents. Such a link is not followed: nothing is hidden for it, later
/// commands run and read, and ConfinedArgv's `notGranted` (and `--explain`) name it.
#[test]
fn a_default_name_planted_as_a_link_in_a_writable_root_hides_nothing_and_is_reported() {
    for fx in [Fixture::new(), Fixture::staged()] {
        let home = fx.root.join("home");
        let cargo = home.join(".cargo");
        let name = cargo.join("credentials.toml");
        let projects = home.join("projects");
        std::fs::create_dir_all(&cargo).unwrap();
        std::fs::create_dir_all(&projects).unwrap();
        std::fs::write(projects.join("notes.txt"), "visible\n").unwrap();
        let usr = PathBuf::from("/usr");
        for (target, readable) in [
            (usr.clone(), usr.join("bin/env")),
            (PathBuf::from("/"), PathBuf::from("/etc/hostname")),
            (fx.ws.clone(), fx.ws.join("file")),
            (projects.clone(), projects.join("notes.txt")),
        ] {
            let what = format!("link to {}, stage {}", target.display(), fx.stage);
            std::fs::write(fx.ws.join("file"), "ws\n").unwrap();
            let _ = std::fs::remove_file(&name);
            // The attack: a confined command with ~/.cargo writable plants the link.
            let plant = fx
                .stockade(["run", "--writable"])
                .arg(&cargo)
                .args(["--", "ln", "-s"])
                .args([&target, &name])
                .env("HOME", &home)
                .output()
                .unwrap();
            assert_code(&plant, 0);
            assert!(name.symlink_metadata().is_ok(), "{what}: not planted");
            // Later commands, with and without that root, still run and read the target.
            // A command that cannot write ~/.cargo takes the link for the user's own (the
            // documented limit): it may hide a directory of the home from it, never `/`, a
            // system directory, a root or an ancestor of one.
            let later = if target == projects {
                &[true][..]
            } else {
                &[true, false][..]
            };
            for &writable in later {
                let mut cmd = fx.stockade(["run"]);
                if writable {
                    cmd.arg("--writable").arg(&cargo);
                }
                let out = cmd
                    .args(["--", "sh", "-c"])
                    .arg(cat_or_denied(&readable))
                    .env("HOME", &home)
                    .output()
                    .unwrap();
                assert_code(&out, 0);
                assert!(
                    text(&out.stdout).ends_with("READ\n"),
                    "{what}, writable {writable}: {} unreadable: {out:?}",
                    readable.display()
                );
            }
            // confine does not fail, and says what it did not follow.
            let out = fx
                .stockade(["confine", "--writable"])
                .arg(&cargo)
                .args(["--", "true"])
                .env("HOME", &home)
                .output()
                .unwrap();
            assert_code(&out, 0);
            let c: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
            let not_granted = c["notGranted"].to_string();
            assert!(
                not_granted.contains(&name.display().to_string())
                    && not_granted.contains("not followed"),
                "{what}: {c}"
            );
            let argv = confined_argv(&c);
            let request = argv
                .iter()
                .position(|a| a == "--request")
                .map(|i| argv[i + 1].clone())
                .unwrap();
            let explain = std::process::Command::new(runner_bin())
                .arg("--explain")
                .arg(request)
                .output()
                .unwrap();
            let explained = text(&explain.stdout);
            assert!(
                explained.contains(&format!("not hidden: hidden path {}", name.display())),
                "{what}: {explained}"
            );
            assert_code(&spawn_argv(&c), 0);
        }
    }
}

/// `cat PATH`, then `READ` or `DENIED`.
fn cat_or_denied(path: &Path) -> String {
    format!(
        "cat '{}' >/dev/null 2>&1 && echo READ || echo DENIED",
        path.display()
    )
}

/// The control: a default name the user linked to a real secret stays hidden, whether
/// the link lies outside every writable root (`~/.netrc -> ~/vault/netrc`) or inside
/// one (`~/.cargo/credentials.toml -> ~/vault/cargo-token`, with `~/.cargo` writable),
/// as long as it leads to a file of the home outside every writable root: the one kind
/// of target a planted link may name.
#[test]
fn a_default_name_the_user_linked_to_a_secret_file_stays_hidden() {
    for fx in [Fixture::new(), Fixture::staged()] {
        let home = fx.root.join("home");
        let vault = home.join("vault");
        let cargo = home.join(".cargo");
        std::fs::create_dir_all(&vault).unwrap();
        std::fs::create_dir_all(&cargo).unwrap();
        std::fs::write(vault.join("netrc"), "machine m password p\n").unwrap();
        std::fs::write(vault.join("cargo-token"), "token\n").unwrap();
        std::os::unix::fs::symlink(vault.join("netrc"), home.join(".netrc")).unwrap();
        std::os::unix::fs::symlink(vault.join("cargo-token"), cargo.join("credentials.toml"))
            .unwrap();
        let secrets = [
            home.join(".netrc"),
            vault.join("netrc"),
            cargo.join("credentials.toml"),
            vault.join("cargo-token"),
        ];
        let script = probe_reads(&secrets);
        for (mode, writable) in [("read-only", false), ("workspace-write", true)] {
            for default_hide in [true, false] {
                let mut cmd = fx.stockade(["run", "--mode", mode]);
                if writable {
                    cmd.arg("--writable").arg(&cargo);
                }
                if !default_hide {
                    cmd.arg("--no-default-hide");
                }
                let out = cmd
                    .args(["--", "sh", "-c", &script])
                    .env("HOME", &home)
                    .output()
                    .unwrap();
                let v = verdicts(&out);
                // Without the defaults (the control) every one is readable.
                let want = if default_hide { "DENIED" } else { "READ" };
                for s in &secrets {
                    assert!(
                        v.contains(&format!("{want} {}", s.display())),
                        "{mode}, stage {}, default hide {default_hide}: {}: {v:?} {}",
                        fx.stage,
                        s.display(),
                        text(&out.stderr)
                    );
                }
            }
        }
    }
}

/// The ConfinedArgv `confined` with the stage's `--mask PATH` flags taken out: the stage
/// then covers nothing, and binds a hidden path inside a writable root read-only as
/// before (a mount root of the planted file itself).
fn without_masks(confined: &serde_json::Value) -> serde_json::Value {
    let argv = confined_argv(confined);
    let mut kept = Vec::new();
    let mut it = argv.iter();
    while let Some(a) = it.next() {
        if a == "--mask" {
            it.next();
            continue;
        }
        kept.push(a.clone());
    }
    assert_ne!(
        kept.len(),
        argv.len(),
        "the stage was asked to mask: {argv:?}"
    );
    let mut edited = confined.clone();
    edited["argv"] = serde_json::json!(kept);
    edited
}

#[test]
fn a_planted_empty_unreadable_file_at_a_hidden_path_does_not_pass_for_the_stage_s_mask() {
    // A command that can write where a hidden path lies could leave there an empty file
    // of mode 000, for a later command's runner to take for the stage's mask and skip
    // the carve-out; had it then moved the real file back (a rename in the same root),
    // that command would read it. The runner takes only a mount of the stage's own
    // kind: here the stage is kept from masking (its --mask flags taken out) and binds
    // the planted file read-only, a mount root of mode 000 and size 0 all the same, and
    // the carve-out must still be there. What shows it: a file created directly in the
    // carved workspace after confinement gets no rule of its own.
    let fx = Fixture::staged();
    let env = fx.ws.join(".env");
    std::fs::write(&env, b"").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&env, std::fs::Permissions::from_mode(0o000)).unwrap();
    let script = "echo x > fresh && cat fresh >/dev/null 2>&1 && echo READ-FRESH;\
        stat -c %a .env; cat .env 2>/dev/null; mv .env moved 2>/dev/null && echo MOVED; true";
    let confine = || {
        fx.confine(&[
            "--mode",
            "workspace-write",
            "--hide",
            ".env",
            "--",
            "sh",
            "-c",
            script,
        ])
    };
    let out = spawn_argv(&without_masks(&confine()));
    assert_code(&out, 0);
    assert_eq!(verdicts(&out), ["0"], "{}", text(&out.stderr));
    assert!(env.exists() && !fx.ws.join("moved").exists());
    // Control: with the stage's own mask the runner leaves .env out of the carve-out, so
    // the fresh file reads.
    std::fs::remove_file(fx.ws.join("fresh")).unwrap();
    let out = spawn_argv(&confine());
    assert_code(&out, 0);
    assert_eq!(verdicts(&out), ["READ-FRESH", "0"], "{}", text(&out.stderr));
    assert!(env.exists() && !fx.ws.join("moved").exists());
}

#[test]
fn under_the_stage_a_hidden_path_is_an_empty_unreadable_mount_and_its_original_stays_out_of_reach()
{
    // Covered by the stage: a hidden directory and a hidden file read as an empty mount
    // of mode 000 (nothing listed, nothing read), in /proc/self/mountinfo; through a
    // link and through /proc/self/root as well. Control: not hidden, both read.
    let fx = Fixture::staged();
    let vault = fx.outside.join("vault");
    std::fs::create_dir(&vault).unwrap();
    std::fs::write(vault.join("key"), b"k").unwrap();
    let token = fx.outside.join("token");
    std::fs::write(&token, b"t").unwrap();
    std::os::unix::fs::symlink(&vault, fx.outside.join("link")).unwrap();
    let script = format!(
        "cat '{v}/key' 2>/dev/null && echo READ-KEY; cat '{o}/link/key' 2>/dev/null && echo READ-LINK;\
         cat /proc/self/root'{v}/key' 2>/dev/null && echo READ-PROC; ls '{v}' 2>/dev/null && echo LISTED;\
         cat '{t}' 2>/dev/null && echo READ-TOKEN; grep -c ' {v} \\| {t} ' /proc/self/mountinfo; true",
        v = vault.display(),
        o = fx.outside.display(),
        t = token.display()
    );
    let out = fx
        .stockade(["run", "--mode", "read-only", "--hide"])
        .arg(&vault)
        .arg("--hide")
        .arg(&token)
        .args(["--", "sh", "-c", &script])
        .output()
        .unwrap();
    assert_code(&out, 0);
    assert_eq!(verdicts(&out), ["2"], "{}", text(&out.stderr));
    let out = fx.run_sh("read-only", &script);
    assert_eq!(
        verdicts(&out),
        [
            "kREAD-KEY",
            "kREAD-LINK",
            "kREAD-PROC",
            "key",
            "LISTED",
            "tREAD-TOKEN",
            "0"
        ],
        "{}",
        text(&out.stderr)
    );
}

/// Under the stage a hidden path is covered by an empty mount, and the runner leaves a
/// covered path out of its Landlock carve-out. A mount hides what lies beneath only in
/// its own mount namespace: a directory descriptor opened outside it, passed in over a
/// unix socket (`SCM_RIGHTS`, which `--allow-unix-sockets` allows; an earlier
/// `--no-stage` command left running could be the sender), reaches the file beneath the
/// mask. With unix sockets allowed nothing counts as covered: the carve-out hides the
/// path for any lookup. Controls: the same descriptor reads the file when it is not
/// hidden, and reads a sibling of it when it is.
#[test]
fn a_directory_received_over_a_unix_socket_does_not_reach_beneath_a_mask() {
    let fx = Fixture::staged();
    let dir = fx.outside.join("passed");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("secret"), "TOPSECRET").unwrap();
    std::fs::write(dir.join("sibling"), "plain").unwrap();
    let sock = fx.outside.join("dir.sock");
    let hide = dir.join("secret");
    let attempt = |hidden: bool, name: &str| {
        let mut sender = std::process::Command::new(bin("attack"))
            .args(["send-dir", sock.to_str().unwrap(), dir.to_str().unwrap()])
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        while !sock.exists() {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let attack = bin("attack");
        let mut args = vec!["run", "--mode", "read-only", "--allow-unix-sockets"];
        if hidden {
            args.extend(["--hide", hide.to_str().unwrap()]);
        }
        args.extend([
            "--",
            attack.to_str().unwrap(),
            "recv-dir-read",
            sock.to_str().unwrap(),
            name,
        ]);
        let out = fx.stockade(&args).output().unwrap();
        let _ = sender.kill();
        let _ = sender.wait();
        let _ = std::fs::remove_file(&sock);
        text(&out.stdout).trim().to_string()
    };
    assert_eq!(
        attempt(false, "secret"),
        "ok",
        "not hidden: the descriptor reads"
    );
    assert_eq!(attempt(true, "sibling"), "ok", "a sibling of a hidden path");
    assert_eq!(
        attempt(true, "secret"),
        "errno EACCES",
        "a descriptor from outside the stage's mount namespace read a hidden file"
    );
}

/// Character devices that read past the sandbox, which root can open (their nodes are
/// its own): `/dev/userfaultfd` makes a userfaultfd with one ioctl, where the seccomp
/// filter refuses the system call (only Landlock's device-ioctl rule, ABI 5, refuses that
/// ioctl); `/dev/vcs` reads the console's screen (SCSI generic, NVMe passthrough, flash,
/// input and raw HID devices are found by driver the same way; this machine has none).
/// Hidden by default, so they cannot be opened at all. Control: with the defaults
/// dropped each opens.
#[test]
fn raw_character_devices_are_hidden_by_default_from_root() {
    const NAME: &str = "raw_character_devices_are_hidden_by_default_from_root";
    if !stockade_tests::is_root() {
        eprintln!("SKIPPED (needs root): {NAME}");
        return;
    }
    let devices: Vec<&str> = ["/dev/userfaultfd", "/dev/vcs"]
        .into_iter()
        .filter(|d| Path::new(d).exists())
        .collect();
    if devices.is_empty() {
        eprintln!("SKIPPED (neither /dev/userfaultfd nor /dev/vcs on this machine): {NAME}");
        return;
    }
    for device in devices {
        let script =
            format!("if (exec 3<{device}) 2>/dev/null; then echo opened; else echo refused; fi");
        for fx in [Fixture::new(), Fixture::staged()] {
            let out = fx.run_sh("read-only", &script);
            assert_eq!(
                text(&out.stdout),
                "refused\n",
                "{device}: {}",
                text(&out.stderr)
            );
            let out = fx
                .stockade([
                    "run",
                    "--mode",
                    "read-only",
                    "--no-default-hide",
                    "--",
                    "sh",
                    "-c",
                ])
                .arg(&script)
                .output()
                .unwrap();
            assert_eq!(
                text(&out.stdout),
                "opened\n",
                "{device}: {}",
                text(&out.stderr)
            );
        }
    }
}

#[test]
fn the_system_secrets_are_hidden_from_an_ordinary_user_who_can_read_them() {
    if !stockade_tests::is_root() {
        eprintln!("SKIPPED (needs root to start a user in the shadow group): the_system_secrets");
        return;
    }
    let shadow = Path::new("/etc/shadow");
    let gid = std::fs::metadata(shadow).map(|m| {
        use std::os::unix::fs::MetadataExt;
        (m.gid(), m.mode())
    });
    let Ok((gid, mode)) = gid else {
        eprintln!("SKIPPED (no /etc/shadow): the_system_secrets");
        return;
    };
    if gid == 0 || mode & 0o040 == 0 {
        eprintln!("SKIPPED (/etc/shadow is readable by no group but root's): the_system_secrets");
        return;
    }
    let fx = Fixture::new();
    if let Some(why) = unreachable_by(
        65534,
        &[&stockade_bin(), &runner_bin(), fx.root.parent().unwrap()],
    ) {
        eprintln!("SKIPPED ({why}): the_system_secrets");
        return;
    }
    let chown = std::process::Command::new("chown")
        .args(["-R", "65534:65534"])
        .arg(&fx.root)
        .output()
        .unwrap();
    assert!(chown.status.success(), "{}", text(&chown.stderr));
    let script = probe_reads(&[shadow.to_path_buf(), PathBuf::from("/etc/hostname")]);
    // uid 65534, in the group that reads /etc/shadow (as a daemon's account may be) or not.
    let run = |groups: &str, extra: &[&str]| {
        let mut cmd = std::process::Command::new("setpriv");
        cmd.args(["--reuid=65534", "--regid=65534"]);
        match groups {
            "" => cmd.arg("--clear-groups"),
            g => cmd.arg(format!("--groups={g}")),
        };
        cmd.arg(stockade_bin())
            .args(["run", "--no-stage", "--mode", "read-only"])
            .args(extra)
            .args(["--", "sh", "-c", &script]);
        fx.environment(&mut cmd).env("HOME", &fx.root);
        cmd.output().unwrap()
    };
    let member = run(&gid.to_string(), &[]);
    assert_eq!(
        verdicts(&member),
        ["DENIED /etc/shadow", "READ /etc/hostname"],
        "{}",
        text(&member.stderr)
    );
    // Control: the same member with the default hidden paths off reads it.
    let open = run(&gid.to_string(), &["--no-default-hide"]);
    assert_eq!(verdicts(&open), ["READ /etc/shadow", "READ /etc/hostname"]);
    // Not a member: Unix refuses it, with or without stockade (not hidden: no rule is
    // spent on it).
    let other = run("", &[]);
    assert_eq!(
        verdicts(&other),
        ["DENIED /etc/shadow", "READ /etc/hostname"]
    );
}
