//! How the runner takes a launch request: every decode and trust failure is named, exits
//! 125 with one `stockade-runner: ` line, and runs nothing; a request runs at most once.

mod support;
use std::os::unix::fs::PermissionsExt;
use stockade_policy::request::{FORMAT_VERSION, MAX_REQUEST_BYTES};
use support::*;

/// A request whose command leaves a marker in the workspace, so "ran nothing" is
/// checkable.
fn marked(fx: &Fixture) -> (Vec<u8>, std::path::PathBuf) {
    let marker = fx.ws.join("ran");
    let req = request_for(fx, &format!("echo once >> {}", marker.display()));
    (req.encode().unwrap(), marker)
}

#[track_caller]
fn refused(fx: &Fixture, path: &std::path::Path, marker: &std::path::Path, needle: &str) -> String {
    let out = run_request(path);
    assert_code(&out, 125);
    let line = runner_failure_line(&out);
    assert!(line.contains(needle), "expected {needle:?} in {line:?}");
    assert!(out.stdout.is_empty());
    assert!(!marker.exists(), "a refused request ran its command");
    let _ = fx;
    line
}

#[test]
fn a_valid_request_runs_once_and_cannot_be_replayed() {
    let fx = Fixture::new();
    let (bytes, marker) = marked(&fx);
    let path = write_request_bytes(&fx, "req", &bytes);
    let out = run_request(&path);
    assert_code(&out, 0);
    assert!(out.stderr.is_empty() && out.stdout.is_empty());
    assert_eq!(std::fs::read_to_string(&marker).unwrap(), "once\n");
    assert!(!path.exists(), "the request was not consumed");
    // Replay: refused, and the command did not run a second time.
    let out = run_request(&path);
    assert_code(&out, 125);
    assert!(runner_failure_line(&out).contains("it ran already"));
    assert_eq!(std::fs::read_to_string(&marker).unwrap(), "once\n");
}

#[test]
fn each_decode_error_is_named_and_runs_nothing() {
    let fx = Fixture::new();
    let (good, marker) = marked(&fx);

    let mut bad_magic = good.clone();
    bad_magic[0] ^= 0xff;
    let mut bad_version = good.clone();
    bad_version[8..10].copy_from_slice(&(FORMAT_VERSION + 1).to_le_bytes());
    let truncated = good[..good.len() - 3].to_vec();
    let mut trailing = good.clone();
    trailing.extend_from_slice(b"extra");
    let mut corrupt = good.clone();
    for b in &mut corrupt[14..] {
        *b = 0xff;
    }
    let oversized = vec![0u8; MAX_REQUEST_BYTES + 10];

    let cases: [(&str, Vec<u8>, &str); 7] = [
        ("magic", bad_magic, "bad magic"),
        ("version", bad_version, "format version"),
        ("truncated", truncated, "truncated"),
        ("trailing", trailing, "trailing bytes"),
        ("corrupt", corrupt, "corrupt"),
        ("oversized", oversized, "too large"),
        ("empty", Vec::new(), "truncated"),
    ];
    for (name, bytes, needle) in cases {
        let path = write_request_bytes(&fx, name, &bytes);
        let line = refused(&fx, &path, &marker, needle);
        // Which file: the executor may hold several requests.
        assert!(line.contains(&path.display().to_string()), "{line}");
        if name == "oversized" {
            // Larger than any request confine writes: not one, so left as it is.
            assert!(path.exists(), "an oversized file was removed");
        } else {
            assert!(
                !path.exists(),
                "{name}: an undecodable request (with its digest) must still be consumed"
            );
        }
    }
}

#[test]
fn each_validation_error_is_named_and_runs_nothing() {
    let fx = Fixture::new();
    let marker = fx.ws.join("ran");
    let script = format!("echo once >> {}", marker.display());
    type Edit = fn(&mut stockade_policy::LaunchRequest);
    let cases: [(&str, Edit, &str); 5] = [
        ("argv", |r| r.argv.clear(), "empty argv"),
        (
            "cwd",
            |r| r.cwd = "relative/dir".into(),
            "not an absolute path",
        ),
        (
            "envname",
            |r| r.env.push(("A=B".into(), "x".into())),
            "contains '='",
        ),
        ("envnul", |r| r.env.push(("A".into(), "x\0y".into())), "NUL"),
        (
            "argnul",
            |r| r.argv.push("a\0b".into()),
            "argv[3] contains a NUL",
        ),
    ];
    for (name, edit, needle) in cases {
        let mut req = request_for(&fx, &script);
        edit(&mut req);
        let path = write_request_bytes(&fx, name, &req.encode().unwrap());
        refused(&fx, &path, &marker, needle);
    }
}

#[test]
fn untrusted_files_are_refused() {
    let fx = Fixture::new();
    let (good, marker) = marked(&fx);

    // Readable by group.
    let open = write_request_bytes(&fx, "open", &good);
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o640)).unwrap();
    refused(&fx, &open, &marker, "mode 0640");

    // Owned by another user (we are root in CI; chown needs it).
    if stockade_tests::is_root() {
        let foreign = write_request_bytes(&fx, "foreign", &good);
        let c = std::ffi::CString::new(foreign.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: `c` is a valid NUL-terminated path for the duration of the call.
        let rc = unsafe { libc::chown(c.as_ptr(), 65534, 65534) };
        assert_eq!(rc, 0, "chown as root");
        refused(&fx, &foreign, &marker, "owned by uid 65534");
        assert!(foreign.exists(), "a foreign file is not ours to remove");
    } else {
        eprintln!(
            "SKIPPED (needs root): untrusted_files_are_refused (a file owned by another user)"
        );
    }

    // A symlink to a valid request is not followed.
    let target = write_request_bytes(&fx, "target", &good);
    let link = fx.root.join("link");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    refused(&fx, &link, &marker, "symbolic link");
    assert!(target.exists());

    // A directory and a FIFO are not regular files (and the FIFO must not hang).
    let dir = fx.root.join("dir");
    std::fs::create_dir(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    refused(&fx, &dir, &marker, "not a regular file");
    let fifo = fx.root.join("fifo");
    let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: `c` is a valid NUL-terminated path for the duration of the call.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    refused(&fx, &fifo, &marker, "not a regular file");

    // Missing.
    refused(&fx, &fx.root.join("absent"), &marker, "does not exist");

    // Positive control: the same bytes in a private file we own run.
    let ok = write_request_bytes(&fx, "ok", &good);
    assert_code(&run_request(&ok), 0);
    assert!(marker.exists());
}

#[test]
fn explain_shows_a_request_without_consuming_it() {
    let fx = Fixture::new();
    let (good, marker) = marked(&fx);
    let path = write_request_bytes(&fx, "req", &good);
    let out = std::process::Command::new(runner_bin())
        .arg("--explain")
        .arg(&path)
        .output()
        .unwrap();
    assert_code(&out, 0);
    let shown = text(&out.stdout);
    assert!(
        shown.contains("the runner would accept this request"),
        "{shown}"
    );
    assert!(shown.contains("mode:        workspace-write"), "{shown}");
    assert!(shown.contains("full access beneath"), "{shown}");
    assert!(shown.contains(&fx.ws.display().to_string()), "{shown}");
    assert!(path.exists(), "--explain consumed the request");
    assert!(!marker.exists(), "--explain ran the command");
    // And the request still runs afterwards.
    assert_code(&run_request(&path), 0);
    assert!(marker.exists());

    // An untrusted file is shown with the reason it would be refused.
    let open = write_request_bytes(&fx, "open", &good);
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o644)).unwrap();
    let out = std::process::Command::new(runner_bin())
        .arg("--explain")
        .arg(&open)
        .output()
        .unwrap();
    assert_code(&out, 0);
    assert!(text(&out.stdout).contains("would refuse this file"));
}

/// `stockade explain` (the runner's `--explain`) and the runner itself read only a
/// request in a regular file of storage: a FIFO is refused without hanging, and a file of
/// the kernel's own filesystems is refused before it is read, even where owner and mode
/// would pass (as root `/proc/kmsg` does, and reading it consumes the kernel log;
/// `/proc/self/environ` is the runner's own, 0400, for any user).
#[test]
fn explain_reads_only_regular_files_not_fifos_or_the_kernel_log() {
    let fx = Fixture::new();
    let (good, marker) = marked(&fx);
    let explain = |path: &std::path::Path| {
        fx.stockade(["explain".as_ref(), path.as_os_str()])
            .output()
            .unwrap()
    };

    // Positive control: a request in a regular file is read and shown.
    let ok = write_request_bytes(&fx, "ok", &good);
    let out = explain(&ok);
    assert_code(&out, 0);
    assert!(
        text(&out.stdout).contains("the runner would accept this request"),
        "{}",
        text(&out.stdout)
    );

    let fifo = fx.root.join("fifo");
    let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: `c` is a valid NUL-terminated path for the duration of the call.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let out = explain(&fifo);
    assert_code(&out, 125);
    assert!(
        runner_failure_line(&out).contains("is not a regular file"),
        "{}",
        text(&out.stderr)
    );

    let mut kernel = vec![std::path::PathBuf::from("/proc/self/environ")];
    if stockade_tests::is_root() {
        kernel.push("/proc/kmsg".into());
    } else {
        eprintln!(
            "SKIPPED (needs root): explain_reads_only_regular_files_not_fifos_or_the_kernel_log (/proc/kmsg)"
        );
    }
    for path in &kernel {
        let out = explain(path);
        assert_code(&out, 125);
        let line = runner_failure_line(&out);
        assert!(
            line.contains("the kernel's proc filesystem") && line.contains("nothing was read"),
            "{}: {line}",
            path.display()
        );
        assert!(out.stdout.is_empty(), "{}", text(&out.stdout));
    }
    // The runner itself refuses the same file the same way, and runs nothing.
    refused(
        &fx,
        std::path::Path::new("/proc/self/environ"),
        &marker,
        "the kernel's proc filesystem",
    );
}

#[test]
fn the_runners_usage_errors_are_one_line_and_exit_125_and_consume_nothing() {
    let fx = Fixture::new();
    let marker = fx.ws.join("ran");
    // A request whose digest has a pair starting with 0, so that it can also be spelled
    // with a sign ("+a" for "0a", which a lenient hex parser reads as the same byte).
    let (path, digest) = (0..)
        .find_map(|i| {
            let mut req = request_for(&fx, &format!("echo once >> {}", marker.display()));
            req.env.push(("PAD".into(), i.to_string().into()));
            let bytes = req.encode().unwrap();
            let digest = stockade_policy::digest::sha256_hex(&bytes);
            let zero_pair = (0..32).any(|k| digest.as_bytes()[2 * k] == b'0');
            zero_pair.then(|| (write_request_bytes(&fx, "req", &bytes), digest))
        })
        .unwrap();
    let signed: String = digest
        .as_bytes()
        .chunks(2)
        .map(|pair| match pair {
            [b'0', d] => format!("+{}", *d as char),
            _ => String::from_utf8(pair.to_vec()).unwrap(),
        })
        .collect();
    assert_ne!(signed, digest);
    let p = path.to_str().unwrap();
    let d = digest.as_str();
    let cases: &[(&[&str], &str)] = &[
        (&[], "missing arguments"),
        (&["--bogus"], "unknown argument \"--bogus\""),
        (&["--request"], "--request needs a FILE"),
        (&["--request", p], "must be followed by --sha256"),
        (&["--request", p, "--sha256"], "64 hexadecimal digits"),
        (&["--request", p, "--sha256", "zz"], "not \"zz\""),
        (
            &["--request", p, "--sha256", &signed],
            "64 hexadecimal digits",
        ),
        (
            &["--request", p, "--sha256", d, "--failure-tag"],
            "needs a TAG",
        ),
        (
            &["--request", p, "--sha256", d, "--failure-tag", "XYZ"],
            "--failure-tag takes",
        ),
        (
            &["--request", p, "--sha256", d, "extra"],
            "unexpected argument \"extra\"",
        ),
        (
            &[
                "--request",
                p,
                "--sha256",
                d,
                "--failure-tag",
                "ab",
                "extra",
            ],
            "unexpected argument \"extra\"",
        ),
        (&["--explain"], "--explain needs a FILE"),
        (&["--explain", p, "extra"], "unexpected argument \"extra\""),
        (&["--version", "extra"], "unexpected argument \"extra\""),
    ];
    for (args, needle) in cases {
        let out = std::process::Command::new(runner_bin())
            .args(*args)
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        assert_code(&out, 125);
        let line = runner_failure_line(&out);
        assert!(
            line.contains(needle),
            "{args:?}: expected {needle:?} in {line:?}"
        );
        assert!(line.contains("usage: stockade-runner"), "{line}");
        assert!(out.stdout.is_empty(), "{args:?}");
        assert!(path.exists(), "{args:?} consumed the request");
        assert!(!marker.exists(), "{args:?} ran the command");
    }
    // Positive control: the same file with its digest as `confine` spells it runs.
    let out = std::process::Command::new(runner_bin())
        .args(["--request", p, "--sha256", d])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_code(&out, 0);
    assert_eq!(std::fs::read_to_string(&marker).unwrap(), "once\n");
}
