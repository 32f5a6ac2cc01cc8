//! Workspace-write's `metadata` guarantee without the namespace stage: in a container
//! whose seccomp profile refuses `unshare` (the `no-userns` helper plays one) and with
//! `--no-stage`, the runner's supervisor answers every mode, owner and time change
//! (seccomp user notification). Each attack on a file outside the writable roots, by
//! path, through `/proc/self/fd`, through a descriptor, through a link in the workspace,
//! is refused (EPERM) and the file is unchanged; each has its control: the same call on
//! a file inside the workspace succeeds, and the same call unconfined succeeds.
//!
//! These run as root and, through `tests/unprivileged`, as an ordinary user: every call
//! here is one an owner may make.

mod support;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use support::*;

const WS: &str = "workspace-write";
const DANGER: &str = "danger-full-access";
/// The stand-in for a container's default seccomp profile.
const CONTAINER: Option<&str> = Some("no-userns");

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn mode_of(p: &Path) -> u32 {
    std::fs::symlink_metadata(p).unwrap().permissions().mode() & 0o7777
}

fn mtime_of(p: &Path) -> i64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(p).unwrap().mtime()
}

/// `attack ARGS` under `stockade run --mode MODE` (with the fixture's `--no-stage`
/// unless it is staged), inside the container stand-in when `mask` says so, with stdin
/// on `stdin`: its one-line answer.
#[track_caller]
fn attack(fx: &Fixture, mask: Option<&str>, mode: &str, stdin: &Path, args: &[&str]) -> String {
    let mut cmd = fx.stockade_masked(mask, ["run", "--mode", mode, "--"]);
    cmd.arg(bin("attack"))
        .args(args)
        .stdin(std::fs::File::open(stdin).unwrap());
    answer(&cmd.output().unwrap())
}

#[track_caller]
fn answer(out: &Output) -> String {
    let stdout = text(&out.stdout);
    let line = stdout.lines().next().unwrap_or("").to_string();
    let want = if line.starts_with("errno ") { 1 } else { 0 };
    assert_eq!(
        out.status.code(),
        Some(want),
        "answer {line:?}\nstdout: {stdout}\nstderr: {}",
        text(&out.stderr)
    );
    line
}

/// Every way to reach a file's metadata the attack helper has, on `file` (stdin is
/// opened on it too).
fn calls(file: &str) -> Vec<Vec<String>> {
    let v = |a: &[&str]| a.iter().map(|x| x.to_string()).collect();
    vec![
        v(&["chmod", file, "600"]),
        v(&["fchmod", file, "640"]),
        v(&["chmod", "/proc/self/fd/0", "604"]),
        v(&["chmod", "/dev/stdin", "606"]),
        v(&["fd-metadata", "0", "660"]),
        v(&["futimesat-fd", "0"]),
        v(&["chown-self", file]),
        v(&["touch", file]),
    ]
}

/// The attacks on `outside` are refused and leave it as it was; the same calls on
/// `inside` succeed; unconfined, on `outside` too.
fn refused_outside_allowed_inside(fx: &Fixture, mask: Option<&str>) {
    let outside = fx.outside.join("victim");
    let inside = fx.ws.join("mine");
    for f in [&outside, &inside] {
        std::fs::write(f, "x").unwrap();
        std::fs::set_permissions(f, std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    let old = 1_000_000_000;
    let set_old = |p: &Path| {
        let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs(old as u64);
        std::fs::File::options()
            .write(true)
            .open(p)
            .unwrap()
            .set_modified(t)
            .unwrap();
    };
    set_old(&outside);
    for args in calls(s(&outside)) {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        assert_eq!(
            attack(fx, mask, WS, &outside, &args),
            "errno EPERM",
            "{args:?}"
        );
        assert_eq!(mode_of(&outside), 0o644, "{args:?}");
        assert_eq!(mtime_of(&outside), old, "{args:?}");
    }
    // Control: inside the workspace every one of them works.
    for args in calls(s(&inside)) {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        assert_eq!(attack(fx, mask, WS, &inside, &args), "ok", "{args:?}");
    }
    assert_eq!(
        mode_of(&inside),
        0o660,
        "fd-metadata's mode was the last set"
    );
    // Control: unconfined, the same calls change the file outside.
    for args in calls(s(&outside)) {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        assert_eq!(attack(fx, None, DANGER, &outside, &args), "ok", "{args:?}");
    }
    assert_ne!(mtime_of(&outside), old);
}

#[test]
fn with_no_stage_metadata_outside_the_roots_cannot_change_and_inside_it_can() {
    let fx = Fixture::new();
    refused_outside_allowed_inside(&fx, None);
    let c = fx.confine(&["--", "true"]);
    assert_eq!(c["guarantees"]["metadata"]["status"], "enforced", "{c}");
    assert_eq!(
        c["guarantees"]["metadata"]["needs"],
        "namespace-stage or seccomp-notify"
    );
    assert_eq!(c["enforcement"], "full", "{c}");
    // The supervisor, the command's parent, is out of its reach: no signal, no SIGIO
    // owner, no memory. Control: unconfined, the parent (the launcher) is reachable.
    let devnull = Path::new("/dev/null");
    // Its memory: Landlock refuses ptrace access to a process outside the domain, and
    // the supervisor is not dumpable (EACCES or EPERM, by who asks).
    for (args, errno) in [
        (["kill-parent"], "EPERM"),
        (["setown-parent"], "EPERM"),
        (["proc-mem-parent"], "EACCES|EPERM"),
    ] {
        let got = attack(&fx, None, WS, devnull, &args);
        let name = got.strip_prefix("errno ").unwrap_or(&got);
        assert!(errno.split('|').any(|e| e == name), "{args:?}: {got}");
        assert_eq!(attack(&fx, None, DANGER, devnull, &args), "ok", "{args:?}");
    }
}

#[test]
fn in_a_container_without_namespaces_metadata_outside_the_roots_cannot_change() {
    let fx = Fixture::staged();
    refused_outside_allowed_inside(&fx, CONTAINER);
    let out = fx
        .stockade_masked(CONTAINER, ["confine", "--", "true"])
        .output()
        .unwrap();
    assert_code(&out, 0);
    let c: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(c["guarantees"]["metadata"]["status"], "enforced", "{c}");
    // Protected paths: the same supervisor performs every write of a name there
    // (tests/protected_writes.rs), so the container gets what the stage gives.
    assert_eq!(c["guarantees"]["protectedPaths"]["status"], "enforced");
    assert_eq!(c["enforcement"], "full", "{c}");
}

#[test]
fn a_link_in_the_workspace_does_not_lead_the_supervisor_outside() {
    let fx = Fixture::new();
    let outside = fx.outside.join("target");
    std::fs::write(&outside, "x").unwrap();
    std::fs::set_permissions(&outside, std::fs::Permissions::from_mode(0o644)).unwrap();
    let link = fx.ws.join("link");
    std::os::unix::fs::symlink(&outside, &link).unwrap();
    let devnull = Path::new("/dev/null");
    for args in [
        ["chmod", s(&link), "600"],
        ["chmod", "link", "600"],
        ["fchmod", "link", "600"],
    ] {
        assert_eq!(
            attack(&fx, None, WS, devnull, &args),
            "errno EPERM",
            "{args:?}"
        );
    }
    assert_eq!(mode_of(&outside), 0o644);
    // The link's own owner is inside the workspace: lchown-like calls reach the link.
    // Control: a link to a file inside the workspace is followed there.
    let mine = fx.ws.join("mine");
    std::fs::write(&mine, "x").unwrap();
    std::os::unix::fs::symlink(&mine, fx.ws.join("mylink")).unwrap();
    assert_eq!(
        attack(&fx, None, WS, devnull, &["chmod", "mylink", "600"]),
        "ok"
    );
    assert_eq!(mode_of(&mine), 0o600);
}

#[test]
fn protected_paths_and_shared_roots_keep_their_metadata_in_a_container() {
    let fx = Fixture::staged();
    let hooks = fx.ws.join(".git/hooks");
    std::fs::create_dir_all(&hooks).unwrap();
    let hook = hooks.join("pre-commit");
    std::fs::write(&hook, "#!/bin/sh\n").unwrap();
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o644)).unwrap();
    let config = fx.ws.join(".git/config");
    std::fs::write(&config, "[core]\n").unwrap();
    std::fs::set_permissions(&config, std::fs::Permissions::from_mode(0o644)).unwrap();
    let other = fx.ws.join(".git/description");
    std::fs::write(&other, "x").unwrap();
    let devnull = Path::new("/dev/null");
    for p in [&hook, &config] {
        assert_eq!(
            attack(&fx, CONTAINER, WS, devnull, &["chmod", s(p), "755"]),
            "errno EPERM",
            "{}",
            p.display()
        );
        assert_eq!(mode_of(p), 0o644);
    }
    // Control: beside them, in the same repository, modes change.
    assert_eq!(
        attack(&fx, CONTAINER, WS, devnull, &["chmod", s(&other), "600"]),
        "ok"
    );
    assert_eq!(mode_of(&other), 0o600);
}

#[test]
fn builds_that_set_modes_and_times_on_their_outputs_work_without_the_stage() {
    for (fx, mask) in [(Fixture::new(), None), (Fixture::staged(), CONTAINER)] {
        let script = "set -e
            mkdir -p src out; echo 'echo hi' > src/tool
            install -m 755 src/tool out/tool; test -x out/tool
            install -d -m 700 out/private; test \"$(stat -c %a out/private)\" = 700
            cp -p out/tool out/copy; test -x out/copy
            touch -d 2001-01-01 out/copy; test out/copy -ot out/tool
            chmod -R go-rwx out; test \"$(stat -c %a out/tool)\" = 700
            tar cf t.tar out; rm -r out; tar xf t.tar; test -x out/tool
            echo done";
        let out = fx
            .stockade_masked(mask, ["run", "--mode", WS, "--", "sh", "-c", script])
            .output()
            .unwrap();
        assert_code(&out, 0);
        assert_eq!(text(&out.stdout).trim(), "done");
    }
}

/// The supervisor is the process the executor spawned: it exits with the command's
/// status, dies of the command's signal, and passes on the signals it is sent.
#[test]
fn the_executor_sees_the_commands_exit_status_and_signals_through_the_supervisor() {
    let fx = Fixture::new();
    let spawn = |script: &str| {
        let c = fx.confine(&["--", "sh", "-c", script]);
        let argv = confined_argv(&c);
        Command::new(&argv[0])
            .args(&argv[1..])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .env_remove("TMPDIR")
            .spawn()
            .unwrap()
    };
    use std::os::unix::process::ExitStatusExt;
    let status = spawn("exit 7").wait().unwrap();
    assert_eq!(status.code(), Some(7));
    let status = spawn("kill -KILL $$").wait().unwrap();
    assert_eq!(status.signal(), Some(libc::SIGKILL));
    // A SIGTERM sent to the spawned process reaches the command, whose trap answers.
    let mut child =
        spawn("trap 'echo got-term; exit 3' TERM; echo ready; while :; do sleep 0.05; done");
    let mut stdout = child.stdout.take().unwrap();
    let mut first = [0u8; 6];
    std::io::Read::read_exact(&mut stdout, &mut first).unwrap();
    assert_eq!(&first, b"ready\n");
    // SAFETY: kill with a pid this test spawned.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let status = child.wait().unwrap();
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stdout, &mut rest).unwrap();
    assert_eq!(rest.trim(), "got-term");
    assert_eq!(status.code(), Some(3));
}

/// Fail closed: a ConfinedArgv promised the supervisor (`metadata` reported enforced),
/// spawned where its filter cannot be installed (another supervisor's listener above,
/// played by `no-notify`), is a runner failure that runs nothing, never a run with
/// metadata unheld. Control: the same argv spawned plainly runs.
#[test]
fn a_supervisor_that_cannot_be_installed_fails_the_run_before_the_command() {
    let fx = Fixture::new();
    let marker = fx.ws.join("ran");
    let script = format!("touch {}", marker.display());
    let spawn = |mask: Option<&str>| {
        let c = fx.confine(&["--", "sh", "-c", &script]);
        assert_eq!(c["guarantees"]["metadata"]["status"], "enforced", "{c}");
        let argv = confined_argv(&c);
        let mut cmd = match mask {
            Some(helper) => {
                let mut cmd = Command::new(bin(helper));
                cmd.args(&argv);
                cmd
            }
            None => {
                let mut cmd = Command::new(&argv[0]);
                cmd.args(&argv[1..]);
                cmd
            }
        };
        cmd.stdin(Stdio::null())
            .env_remove("TMPDIR")
            .output()
            .unwrap()
    };
    let out = spawn(Some("no-notify"));
    assert_code(&out, 125);
    let line = runner_failure_line(&out);
    assert!(
        line.contains("the kernel refused the metadata supervisor's filter"),
        "{line}"
    );
    assert!(!marker.exists(), "the command ran");
    let out = spawn(None);
    assert_code(&out, 0);
    assert!(marker.exists());
}

/// `stockade run --json ARGS -- sh -c SCRIPT` in `fx` (with `--no-stage` unless staged),
/// inside the container stand-in when `mask` says so: its output and JSON.
fn run_json_sh(
    fx: &Fixture,
    mask: Option<&str>,
    args: &[&str],
    script: &str,
) -> (Output, serde_json::Value) {
    let mut all = vec!["run", "--json"];
    all.extend(args);
    all.extend(["--", "sh", "-c", script]);
    run_json(&mut fx.stockade_masked(mask, all))
}

/// The one record of a denial, with `denied` and the marker (stockade run without
/// `--json`) said.
#[track_caller]
fn the_denial(fx: &Fixture, mask: Option<&str>, script: &str) -> serde_json::Value {
    let (_, v) = run_json_sh(fx, mask, &[], script);
    assert_eq!(v["sandbox"]["denied"], true, "{v}");
    let records = v["denials"].as_array().unwrap();
    assert_eq!(records.len(), 1, "{v}");
    assert_eq!(records[0]["evidence"], "policy-check", "{v}");
    let out = fx
        .stockade_masked(mask, ["run", "--", "sh", "-c", script])
        .output()
        .unwrap();
    assert!(text(&out.stderr).contains("[sandbox:"), "{out:?}");
    records[0].clone()
}

fn file_0644(f: &Path) {
    std::fs::create_dir_all(f.parent().unwrap()).unwrap();
    std::fs::write(f, "x").unwrap();
    std::fs::set_permissions(f, std::fs::Permissions::from_mode(0o644)).unwrap();
}

/// Without the stage the supervisor refuses a metadata change with EPERM, Unix's word
/// too: one outside the roots is named, with the grant that allows it; one inside the
/// roots that Unix refuses (chown to another user) is not.
#[test]
fn the_supervisors_refusals_are_named_with_their_grant_and_unix_refusals_are_not() {
    let fx = Fixture::new();
    let victim = fx.outside.join("victim");
    file_0644(&victim);
    let chmod = format!("chmod 600 {}", s(&victim));
    let r = the_denial(&fx, None, &chmod);
    assert_eq!(r["kind"], "metadata", "{r}");
    assert_eq!(r["path"], s(&victim), "{r}");
    let grant = format!("--writable {}", s(&fx.outside));
    assert_eq!(r["grant"], grant.as_str(), "{r}");
    assert_eq!(mode_of(&victim), 0o644);
    // Control: with the grant the record names, the change is made and nothing named.
    let (out, v) = run_json_sh(&fx, None, &["--writable", s(&fx.outside)], &chmod);
    assert_eq!(v["exitCode"], 0, "{v} {out:?}");
    assert_eq!(v["denials"], serde_json::json!([]), "{v}");
    assert_eq!(mode_of(&victim), 0o600);

    // Inside the workspace the supervisor makes the change as the command; the kernel
    // refuses an ordinary user's chown to root anyway: no denial. As root, the same
    // chown is made (the control).
    std::fs::write(fx.ws.join("mine"), "x").unwrap();
    let (out, v) = run_json_sh(&fx, None, &[], "chown 0 mine");
    if stockade_tests::is_root() {
        assert_eq!(v["exitCode"], 0, "{v} {out:?}");
    } else {
        assert!(
            v["stderr"]["text"]
                .as_str()
                .unwrap()
                .contains("Operation not permitted"),
            "{v}"
        );
        assert_ne!(v["exitCode"], 0, "{v}");
    }
    assert_eq!(v["sandbox"]["denied"], false, "{v}");
    assert_eq!(v["denials"], serde_json::json!([]), "{v}");
}

/// In a container (no stage) the supervisor holds the default protected paths' metadata:
/// its refusal there is named a protected path, with `--no-default-protect`.
#[test]
fn the_supervisors_refusal_on_a_protected_path_is_named_in_a_container() {
    let fx = Fixture::staged();
    let config = fx.ws.join(".git/config");
    file_0644(&config);
    let r = the_denial(&fx, CONTAINER, "chmod 600 .git/config");
    assert_eq!(r["kind"], "protected-path", "{r}");
    assert_eq!(r["path"], s(&config), "{r}");
    assert_eq!(r["grant"], "--no-default-protect", "{r}");
    assert_eq!(mode_of(&config), 0o644);
    // Control: with the grant the record names, the change is made and nothing named.
    let (out, v) = run_json_sh(
        &fx,
        CONTAINER,
        &["--no-default-protect"],
        "chmod 600 .git/config",
    );
    assert_eq!(v["exitCode"], 0, "{v} {out:?}");
    assert_eq!(v["denials"], serde_json::json!([]), "{v}");
    assert_eq!(mode_of(&config), 0o600);
}

/// An ext4 image with the `encrypt` feature, loop-mounted at `at` until dropped.
struct EncryptingFs {
    at: std::path::PathBuf,
}

impl EncryptingFs {
    /// `None` (with the reason) where this machine cannot make one: not root, no
    /// `mkfs.ext4` or loop device, or a kernel without ext4 encryption.
    fn mount(image: &Path, at: &Path) -> Result<EncryptingFs, String> {
        if !stockade_tests::is_root() {
            return Err("needs root to mount a loop device".into());
        }
        if !Path::new("/sys/fs/ext4/features/encryption").exists() {
            return Err("the kernel's ext4 has no encryption".into());
        }
        let run = |cmd: &mut Command| match cmd.output() {
            Ok(o) if o.status.success() => Ok(()),
            Ok(o) => Err(format!("{cmd:?}: {}", text(&o.stderr))),
            Err(e) => Err(format!("{cmd:?}: {e}")),
        };
        run(Command::new("truncate").args(["-s", "8M", s(image)]))?;
        run(Command::new("mkfs.ext4").args(["-q", "-F", "-O", "encrypt", s(image)]))?;
        std::fs::create_dir_all(at).unwrap();
        run(Command::new("mount").args(["-o", "loop", s(image), s(at)]))?;
        Ok(EncryptingFs { at: at.into() })
    }
}

impl Drop for EncryptingFs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.at).status();
    }
}

/// Setting an encryption policy on an empty directory outside the roots is a change for
/// good (nothing can be created in it without the key): refused without the stage, by
/// the supervisor in workspace-write (EOPNOTSUPP, as for `chattr`) and by the filter in
/// read-only mode (EPERM). Control: unconfined, the same ioctl succeeds and the
/// directory then refuses a new file.
#[test]
fn an_encryption_policy_outside_the_roots_is_refused_without_the_stage() {
    let fx = Fixture::new();
    let mounted = match EncryptingFs::mount(&fx.outside.join("ext4.img"), &fx.outside.join("enc")) {
        Ok(m) => m,
        Err(why) => {
            eprintln!("SKIPPED ({why}): an_encryption_policy_outside_the_roots_is_refused");
            return;
        }
    };
    let dir = |name: &str| {
        let d = mounted.at.join(name);
        std::fs::create_dir(&d).unwrap();
        d
    };
    let null = Path::new("/dev/null");
    let container = Fixture::staged();
    for (fx, mode, mask, want) in [
        (&fx, WS, None, "errno EOPNOTSUPP"),
        (&container, WS, CONTAINER, "errno EOPNOTSUPP"),
        (&fx, "read-only", None, "errno EPERM"),
    ] {
        let d = dir(&format!("{mode}-{}", mask.is_some()));
        let got = attack(fx, mask, mode, null, &["encrypt-dir", s(&d)]);
        assert_eq!(got, want, "{mode} {mask:?}");
        std::fs::write(d.join("still-usable"), "x").unwrap();
    }
    let d = dir("unconfined");
    assert_eq!(
        attack(&fx, None, DANGER, null, &["encrypt-dir", s(&d)]),
        "ok"
    );
    let refused = std::fs::write(d.join("new"), "x").unwrap_err();
    assert_eq!(refused.raw_os_error(), Some(libc::ENOKEY), "{refused}");
}
