//! Shared fixtures for the end-to-end tests: where the binaries are, a scratch area
//! outside every writable root, and helpers to run commands under stockade.
#![allow(dead_code)]

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// The directory holding the workspace's built binaries (`target/debug`): this test
/// executable lives in its `deps/` subdirectory.
pub fn bin_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    exe.parent()
        .and_then(Path::parent)
        .expect("target dir")
        .to_path_buf()
}

pub fn bin(name: &str) -> PathBuf {
    let path = bin_dir().join(name);
    assert!(
        path.exists(),
        "{} is not built; run the suite with `cargo test --workspace`",
        path.display()
    );
    path
}

pub fn stockade_bin() -> PathBuf {
    bin("stockade")
}

pub fn runner_bin() -> PathBuf {
    bin("stockade-runner")
}

/// A scratch area for one test, deliberately *outside* `/tmp` (which workspace-write
/// grants): under cargo's target tmp dir. It holds a workspace, a directory outside
/// every writable root, and the private runtime dir for request files.
pub struct Fixture {
    _root: tempfile::TempDir,
    pub root: PathBuf,
    pub ws: PathBuf,
    pub outside: PathBuf,
    pub runtime: PathBuf,
}

impl Fixture {
    pub fn new() -> Fixture {
        let base = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
        std::fs::create_dir_all(&base).unwrap();
        let root = tempfile::Builder::new()
            .prefix("e2e-")
            .tempdir_in(&base)
            .unwrap();
        let path = root.path().canonicalize().unwrap();
        let ws = path.join("ws");
        let outside = path.join("outside");
        let runtime = path.join("runtime");
        for d in [&ws, &outside, &runtime] {
            std::fs::create_dir(d).unwrap();
        }
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&runtime, std::fs::Permissions::from_mode(0o700)).unwrap();
        Fixture {
            _root: root,
            root: path,
            ws,
            outside,
            runtime,
        }
    }

    /// `stockade ARGS` with a controlled environment: the runner named explicitly,
    /// request files under this fixture, no `$TMPDIR`, cwd the workspace.
    pub fn stockade<I, S>(&self, args: I) -> Command
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let mut cmd = Command::new(stockade_bin());
        cmd.args(args)
            .current_dir(&self.ws)
            .env("STOCKADE_RUNNER", runner_bin())
            .env("XDG_RUNTIME_DIR", &self.runtime)
            .env_remove("TMPDIR")
            .stdin(Stdio::null());
        cmd
    }

    /// `stockade run --mode MODE -- sh -c SCRIPT`, collected.
    pub fn run_sh(&self, mode: &str, script: &str) -> Output {
        self.stockade(["run", "--mode", mode, "--", "sh", "-c", script])
            .output()
            .unwrap()
    }

    /// `stockade confine ARGS`, parsed as JSON; panics unless it succeeded.
    pub fn confine(&self, args: &[&str]) -> serde_json::Value {
        let out = self
            .stockade(std::iter::once(&"confine").chain(args))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "confine failed: {}",
            text(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).expect("confine prints JSON")
    }

    /// Entries left in the private runtime directory (request directories).
    pub fn leftover_requests(&self) -> Vec<PathBuf> {
        let base = self.runtime.join("stockade");
        match std::fs::read_dir(&base) {
            Ok(rd) => rd.map(|e| e.unwrap().path()).collect(),
            Err(_) => Vec::new(),
        }
    }
}

/// Spawns a ConfinedArgv `argv` the way an executor would, as a separate process.
pub fn spawn_argv(confined: &serde_json::Value) -> Output {
    let argv: Vec<String> = confined["argv"]
        .as_array()
        .expect("argv")
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect();
    Command::new(&argv[0])
        .args(&argv[1..])
        .stdin(Stdio::null())
        .env_remove("TMPDIR")
        .output()
        .unwrap()
}

pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Asserts the exit code, showing both streams when it differs.
#[track_caller]
pub fn assert_code(out: &Output, code: i32) {
    assert_eq!(
        out.status.code(),
        Some(code),
        "expected exit {code}\nstdout: {}\nstderr: {}",
        text(&out.stdout),
        text(&out.stderr)
    );
}

/// The one runner failure line, asserting there is exactly one stderr line and it
/// carries the runner prefix.
#[track_caller]
pub fn runner_failure_line(out: &Output) -> String {
    let err = text(&out.stderr);
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 1, "expected one stderr line, got: {err:?}");
    assert!(lines[0].starts_with("stockade-runner: "), "{err:?}");
    lines[0].to_string()
}

/// A valid read-only request running `sh -c SCRIPT` in the fixture's workspace, with a
/// minimal environment.
pub fn request_for(fx: &Fixture, script: &str) -> stockade_policy::LaunchRequest {
    use stockade_policy::guarantees::Enforcement;
    use stockade_policy::{Mode, Policy};
    stockade_policy::LaunchRequest {
        argv: vec!["sh".into(), "-c".into(), script.into()],
        cwd: fx.ws.clone(),
        env: vec![("PATH".into(), "/usr/bin:/bin".into())],
        policy: Policy {
            mode: Mode::WorkspaceWrite,
            workspace: fx.ws.clone(),
            writable_roots: Vec::new(),
            tmpdir: None,
            network: stockade_policy::Network::Deny,
            allow_tcp_connect: Vec::new(),
            allow_unix_sockets: false,
            keep_fds: Vec::new(),
        },
        enforcement: Enforcement::Full,
        guarantees: Vec::new(),
        status_path: None,
    }
}

/// Writes raw request bytes as a private (0600) file in the fixture and returns its path.
pub fn write_request_bytes(fx: &Fixture, name: &str, bytes: &[u8]) -> PathBuf {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let path = fx.root.join(name);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)
        .unwrap();
    f.write_all(bytes).unwrap();
    path
}

/// Runs `stockade-runner --request PATH` directly, as an executor would.
pub fn run_request(path: &Path) -> Output {
    Command::new(runner_bin())
        .arg("--request")
        .arg(path)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}
