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
    if name == "stockade" || name == "stockade-runner" {
        assert_not_stale(&path);
        return usable_copy(&path);
    }
    if !shell_safe(&path) {
        // Tests write helper paths into `sh -c` scripts as they are.
        static COPYING: std::sync::Mutex<()> = std::sync::Mutex::new(());
        let _one = COPYING.lock().unwrap_or_else(|e| e.into_inner());
        let dir = fixture_base().join("binaries");
        std::fs::create_dir_all(&dir).unwrap();
        refresh_copy(&path, &dir.join(name));
        return dir.join(name);
    }
    path
}

/// Whether `path` can be written into a shell script unquoted: a checkout in a path with
/// a space in it puts its binaries and target directory in such a path, and many tests
/// build `sh -c` scripts from paths.
fn shell_safe(path: &Path) -> bool {
    path.to_str().is_some_and(|p| {
        p.chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+,:@%=".contains(c))
    })
}

/// The shared scratch directories a confined command may write: stockade refuses to
/// start a launcher or runner beneath them, since a command could replace it.
const SHARED_SCRATCH: [&str; 3] = ["/tmp", "/var/tmp", "/dev/shm"];

fn beneath_shared_scratch(path: &Path) -> bool {
    let path = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
    SHARED_SCRATCH
        .iter()
        .filter_map(|d| Path::new(d).canonicalize().ok())
        .chain(std::env::temp_dir().canonicalize().ok())
        .any(|d| path.starts_with(d))
}

/// `built` itself, or, for a checkout beneath `/tmp` (where stockade rightly refuses to
/// start its own binaries) or in a path with a space, a copy in the fixture base, which is then outside every
/// shared scratch directory: the README's `cargo test --workspace` works from a clone
/// anywhere. The launcher and runner are copied side by side, so the launcher still
/// finds its runner next to itself; a copy is refreshed when the build is newer.
fn usable_copy(built: &Path) -> PathBuf {
    if !beneath_shared_scratch(built) && shell_safe(built) {
        return built.to_path_buf();
    }
    // One refresh at a time in this process: parallel tests would share a partial name.
    static COPYING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = COPYING.lock().unwrap_or_else(|e| e.into_inner());
    let dir = fixture_base().join("binaries");
    std::fs::create_dir_all(&dir).unwrap();
    for name in ["stockade", "stockade-runner"] {
        let sibling = built.with_file_name(name);
        assert_not_stale(&sibling);
        refresh_copy(&sibling, &dir.join(name));
    }
    dir.join(built.file_name().unwrap())
}

/// Copies `built` to `copy` unless the copy is at least as new.
fn refresh_copy(built: &Path, copy: &Path) {
    let dir = copy.parent().unwrap();
    let modified = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    if modified(copy).is_none_or(|c| modified(built).is_some_and(|b| b > c)) {
        // Into a name of this process's own, then renamed over the old copy, so another
        // test process never starts a half-written one; by another process (`cp`), so no
        // descriptor open for writing leaks into a child a parallel test forks (its exec
        // of the copy would fail with ETXTBSY).
        let partial = dir.join(format!(
            ".{}.{}",
            built.file_name().unwrap().to_string_lossy(),
            std::process::id()
        ));
        let st = Command::new("cp")
            .arg(built)
            .arg(&partial)
            .status()
            .unwrap();
        assert!(st.success(), "cp {} {}", built.display(), partial.display());
        std::fs::rename(&partial, copy).unwrap();
    }
}

/// `cargo test` puts the target directory on `LD_LIBRARY_PATH`; beneath `/tmp` that is
/// a place confined commands write, and stockade rightly refuses to start its
/// dynamically linked (debug) runner with such an entry, which every test would inherit.
/// No test binary or binary under test loads a library from there, so those entries go,
/// before `main`, while this process has a single thread.
#[used]
#[unsafe(link_section = ".init_array")]
static DROP_SHARED_LIBRARY_PATH: extern "C" fn() = drop_shared_library_path;

extern "C" fn drop_shared_library_path() {
    const VAR: &str = "LD_LIBRARY_PATH";
    let Some(value) = std::env::var_os(VAR) else {
        return;
    };
    let kept: Vec<PathBuf> = std::env::split_paths(&value)
        .filter(|p| p.as_os_str().is_empty() || !beneath_shared_scratch(p))
        .collect();
    if kept.len() == std::env::split_paths(&value).count() {
        return;
    }
    let kept = std::env::join_paths(kept).unwrap_or_default();
    // SAFETY: this runs from .init_array, before main and before the test harness starts
    // any thread, so nothing reads the environment concurrently.
    unsafe { std::env::set_var(VAR, kept) };
}

/// The test package cannot depend on the binaries it runs, so `cargo test -p
/// stockade-tests` alone would run whatever was built last. Refuse, loudly, a binary
/// older than any source it is built from (policy and its own crate, and their manifests;
/// not Cargo.lock, which changes with other crates' dependencies too).
#[track_caller]
pub fn assert_not_stale(binary: &Path) {
    let built = std::fs::metadata(binary)
        .and_then(|m| m.modified())
        .unwrap_or_else(|e| panic!("{}: {e}", binary.display()));
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let mut newest: Option<(std::time::SystemTime, PathBuf)> = None;
    let mut consider = |p: PathBuf| {
        if let Ok(t) = std::fs::metadata(&p).and_then(|m| m.modified()) {
            if newest.as_ref().is_none_or(|(n, _)| t > *n) {
                newest = Some((t, p));
            }
        }
    };
    fn walk(dir: &Path, f: &mut dyn FnMut(PathBuf)) {
        for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let p = entry.path();
            if p.is_dir() {
                walk(&p, f);
            } else {
                f(p);
            }
        }
    }
    // Each binary is built from policy and its own crate only.
    let own = match binary.file_name().and_then(|n| n.to_str()) {
        Some("stockade-runner") => "runner",
        _ => "launcher",
    };
    for krate in ["policy", own] {
        consider(root.join(krate).join("Cargo.toml"));
        walk(&root.join(krate).join("src"), &mut consider);
    }
    if let Some((changed, source)) = newest {
        assert!(
            changed <= built,
            "stale binary: {} is older than {}; build the workspace first \
             (`cargo build --workspace`, or run `cargo test --workspace`)",
            binary.display(),
            source.display()
        );
    }
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
    /// Whether `run` and `confine` may start the namespace stage. Off by default: most
    /// tests prove the Landlock and seccomp layers, whose answers the stage's read-only
    /// mounts would otherwise mask (EROFS comes before Landlock's EACCES). The stage's
    /// own tests (`tests/stage.rs`) use [`Fixture::staged`].
    pub stage: bool,
    /// Set in the environment of everything this fixture starts (see [`FIXTURE_TAG`]).
    pub tag: String,
    watchdog: Option<Watchdog>,
}

/// The environment variable that marks every process a fixture starts (the launcher,
/// and through the environment it passes on, the command and its descendants), so a
/// deadline or a failed test can find and end them.
pub const FIXTURE_TAG: &str = "STOCKADE_E2E_FIXTURE";

/// Seconds a test may run before its fixture's processes are ended and the test fails;
/// `STOCKADE_TEST_DEADLINE` overrides it. Generous: it is a backstop against hangs (a
/// broken kill path), not a timing assertion.
pub fn test_deadline() -> std::time::Duration {
    let secs = std::env::var("STOCKADE_TEST_DEADLINE")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300);
    std::time::Duration::from_secs(secs)
}

/// Ends a fixture's processes when its deadline passes; dropping it disarms it.
struct Watchdog {
    disarm: std::sync::mpsc::Sender<()>,
    fired: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Watchdog {
    fn arm(tag: String) -> Watchdog {
        let (disarm, wait) = std::sync::mpsc::channel::<()>();
        let fired = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = fired.clone();
        let deadline = test_deadline();
        let thread = std::thread::spawn(move || {
            if let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = wait.recv_timeout(deadline) {
                flag.store(true, std::sync::atomic::Ordering::SeqCst);
                let left = fixture_processes(&tag);
                eprintln!(
                    "DEADLINE: the test ran past {deadline:?}; ending its processes: {left:?}"
                );
                end_fixture_processes(&tag);
            }
        });
        Watchdog {
            disarm,
            fired,
            thread: Some(thread),
        }
    }
}

impl Drop for Fixture {
    /// Ends whatever the test left running (a failed assertion unwinds through here),
    /// and fails the test if its deadline had to end it.
    fn drop(&mut self) {
        if let Some(mut w) = self.watchdog.take() {
            let _ = w.disarm.send(());
            if let Some(t) = w.thread.take() {
                let _ = t.join();
            }
            end_fixture_processes(&self.tag);
            if w.fired.load(std::sync::atomic::Ordering::SeqCst) && !std::thread::panicking() {
                panic!("the test ran past its deadline ({:?})", test_deadline());
            }
        }
    }
}

/// Live processes whose environment carries `FIXTURE_TAG=tag` exactly.
pub fn fixture_processes(tag: &str) -> Vec<(i32, String)> {
    let needle = format!("{FIXTURE_TAG}={tag}\0").into_bytes();
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<i32>().ok())
        else {
            continue;
        };
        let environ = std::fs::read(entry.path().join("environ")).unwrap_or_default();
        if environ
            .windows(needle.len())
            .any(|w| w == needle.as_slice())
        {
            let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
            found.push((pid, text(&cmdline).replace('\0', " ")));
        }
    }
    found
}

/// SIGTERM to every process of the fixture (a launcher then ends its own range), a
/// short wait, then SIGKILL to whatever is left.
pub fn end_fixture_processes(tag: &str) {
    let signal_all = |sig| {
        let procs = fixture_processes(tag);
        for (pid, _) in &procs {
            // SAFETY: kill(2) with a pid and a signal number; no memory is involved.
            unsafe {
                libc::kill(*pid, sig);
            }
        }
        !procs.is_empty()
    };
    if !signal_all(libc::SIGTERM) {
        return;
    }
    for _ in 0..100 {
        std::thread::sleep(std::time::Duration::from_millis(50));
        if fixture_processes(tag).is_empty() {
            return;
        }
    }
    for _ in 0..20 {
        if !signal_all(libc::SIGKILL) {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// Where fixtures live: `$STOCKADE_E2E_SCRATCH` when set, else cargo's target tmp dir, unless the checkout itself lies beneath a
/// root that workspace-write grants (`/tmp`, the temp dir), where "outside every writable
/// root" would not be outside at all, or in a path with a space in it (the tests write
/// fixture paths into shell scripts unquoted); then `$HOME/.cache/stockade-e2e`
/// (without a `$HOME`, `/var/tmp/stockade-e2e`).
pub fn fixture_base() -> PathBuf {
    let canonical = |p: PathBuf| p.canonicalize().unwrap_or(p);
    // The unprivileged CI run cannot write beneath root's target directory: it names a
    // scratch directory of its own (outside /tmp).
    if let Some(dir) = std::env::var_os("STOCKADE_E2E_SCRATCH") {
        std::fs::create_dir_all(&dir).unwrap();
        return canonical(PathBuf::from(dir));
    }
    let granted = [
        canonical(PathBuf::from("/tmp")),
        canonical(std::env::temp_dir()),
    ];
    let under_granted = |p: &Path| granted.iter().any(|g| p.starts_with(g));
    let target = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    std::fs::create_dir_all(&target).unwrap();
    let target = canonical(target);
    // Fixture paths go into `sh -c` scripts unquoted: not a path with a space in it.
    if !under_granted(&target) && shell_safe(&target) {
        return target;
    }
    // Not /var/tmp: a copy of the binaries kept there would be refused like one in /tmp.
    let fallback = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(|h| PathBuf::from(h).join(".cache/stockade-e2e"))
        .unwrap_or_else(|| PathBuf::from("/var/tmp/stockade-e2e"));
    std::fs::create_dir_all(&fallback).unwrap();
    let fallback = canonical(fallback);
    assert!(
        !under_granted(&fallback) && !beneath_shared_scratch(&fallback),
        "no scratch directory outside /tmp and the temp dir: {} and {} are both beneath them",
        target.display(),
        fallback.display()
    );
    fallback
}

impl Fixture {
    pub fn new() -> Fixture {
        let base = fixture_base();
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
        let tag = unique_tag("fx");
        Fixture {
            _root: root,
            root: path,
            ws,
            outside,
            runtime,
            stage: false,
            watchdog: Some(Watchdog::arm(tag.clone())),
            tag,
        }
    }

    /// A fixture whose `run` and `confine` use stockade's defaults, namespace stage
    /// included.
    pub fn staged() -> Fixture {
        let mut fx = Fixture::new();
        fx.stage = true;
        fx
    }

    /// `stockade ARGS` with a controlled environment: the runner named explicitly,
    /// request files under this fixture, no `$TMPDIR`, cwd the workspace.
    pub fn stockade<I, S>(&self, args: I) -> Command
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.stockade_masked(None, args)
    }

    /// `stockade ARGS` as `stockade` above, run under a wrapper helper that changes what
    /// it starts with (`no-landlock`, `no-clone3`, `closed-stdio`), or plainly when
    /// `mask` is `None`.
    pub fn stockade_masked<I, S>(&self, mask: Option<&str>, args: I) -> Command
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let mut cmd = match mask {
            Some(helper) => {
                let mut c = Command::new(bin(helper));
                c.arg(stockade_bin());
                c
            }
            None => Command::new(stockade_bin()),
        };
        let mut args: Vec<std::ffi::OsString> =
            args.into_iter().map(|a| a.as_ref().to_owned()).collect();
        if !self.stage && args.first().is_some_and(|a| a == "run" || a == "confine") {
            args.insert(1, "--no-stage".into());
        }
        cmd.args(args);
        self.environment(&mut cmd);
        cmd
    }

    /// What every command this fixture starts gets: the workspace as cwd, the runner
    /// named explicitly, request files under this fixture, its tag, no `$TMPDIR`, stdin
    /// from /dev/null. For a launcher started some other way (a copy, a wrapper).
    pub fn environment<'a>(&self, cmd: &'a mut Command) -> &'a mut Command {
        cmd.current_dir(&self.ws)
            .env("STOCKADE_RUNNER", runner_bin())
            .env("XDG_RUNTIME_DIR", &self.runtime)
            .env(FIXTURE_TAG, &self.tag)
            .env_remove("TMPDIR")
            .stdin(Stdio::null())
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

    /// Entries left in the private runtime directory (request directories; the sweep's
    /// stamp file `.swept` is not one).
    pub fn leftover_requests(&self) -> Vec<PathBuf> {
        let base = self.runtime.join("stockade");
        match std::fs::read_dir(&base) {
            Ok(rd) => rd
                .map(|e| e.unwrap().path())
                // The sweep's stamp and the remembered namespace trial are the control
                // base's own bookkeeping, not requests.
                .filter(|p| !p.ends_with(".swept") && !p.ends_with(".namespaces"))
                .collect(),
            Err(_) => Vec::new(),
        }
    }
}

/// Spawns a ConfinedArgv `argv` the way an executor would, as a separate process.
pub fn spawn_argv(confined: &serde_json::Value) -> Output {
    let argv = confined_argv(confined);
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

/// A marker unique to one test run, to find the processes a command started: pass it in
/// the command's environment and look for it with [`tagged_processes`].
pub fn unique_tag(label: &str) -> String {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static N: AtomicUsize = AtomicUsize::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!(
        "{label}-{}-{}-{nanos}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// Live (not zombie) processes whose environment or command line contains `tag`.
pub fn tagged_processes(tag: &str) -> Vec<(i32, String)> {
    let needle = tag.as_bytes();
    let contains = |hay: &[u8]| hay.windows(needle.len()).any(|w| w == needle);
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<i32>().ok())
        else {
            continue;
        };
        let dir = entry.path();
        let stat = std::fs::read_to_string(dir.join("stat")).unwrap_or_default();
        let state = stat
            .rfind(')')
            .and_then(|i| stat[i + 1..].split_whitespace().next())
            .unwrap_or("");
        if state == "Z" || state == "X" || state.is_empty() {
            continue;
        }
        let (environ, cmdline) = identity(&dir, &stat);
        if contains(&environ) || contains(&cmdline) {
            found.push((pid, text(&cmdline).replace('\0', " ")));
        }
    }
    found
}

/// A process's environment and command line. In the middle of `execve` both read empty
/// for a moment (the new memory is in place before its arguments are), so a user process
/// (not a kernel thread, whose are always empty) that shows neither is read again: a
/// kept process caught while `setsid` became `sleep` was otherwise missed.
fn identity(dir: &Path, stat: &str) -> (Vec<u8>, Vec<u8>) {
    const PF_KTHREAD: u64 = 0x0020_0000;
    let flags = stat
        .rfind(')')
        .and_then(|i| stat[i + 1..].split_whitespace().nth(6))
        .and_then(|f| f.parse::<u64>().ok())
        .unwrap_or(PF_KTHREAD);
    let read = || {
        (
            std::fs::read(dir.join("environ")).unwrap_or_default(),
            std::fs::read(dir.join("cmdline")).unwrap_or_default(),
        )
    };
    let mut seen = read();
    for _ in 0..200 {
        if flags & PF_KTHREAD != 0 || !seen.0.is_empty() || !seen.1.is_empty() {
            break;
        }
        if !dir.join("stat").exists() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
        seen = read();
    }
    seen
}

/// Kills processes a test deliberately left running.
pub fn kill_tagged(tag: &str) {
    for (pid, _) in tagged_processes(tag) {
        // SAFETY: kill(2) with a pid and a signal number; no memory is involved.
        unsafe {
            libc::kill(pid, libc::SIGKILL);
        }
    }
}

/// Waits (without a deadline that could fail a test on a slow machine, but bounded
/// so a broken command cannot hang the suite) until `path` exists.
pub fn wait_for_file(path: &Path) {
    for _ in 0..60_000 {
        if path.exists() {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    panic!("{} never appeared", path.display());
}

/// `stockade run --json ARGS`, parsed.
pub fn run_json(cmd: &mut Command) -> (Output, serde_json::Value) {
    let out = cmd.output().unwrap();
    let json = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not one JSON document ({e}): {}\nstderr: {}",
            text(&out.stdout),
            text(&out.stderr)
        )
    });
    (out, json)
}

/// A valid workspace-write request running `sh -c SCRIPT` in the fixture's workspace, with a
/// minimal environment.
pub fn request_for(fx: &Fixture, script: &str) -> stockade_policy::LaunchRequest {
    use stockade_policy::guarantees::KernelFacts;
    use stockade_policy::{Mode, Policy};
    let policy = Policy::for_tests(Mode::WorkspaceWrite, fx.ws.clone()).with_root_ids(
        [fx.ws.as_path(), Path::new("/tmp")]
            .iter()
            .map(|p| stockade_policy::roots::RootId::of(p).unwrap())
            .collect(),
    );
    // The least a confined run can rest on: any kernel that runs it covers this.
    let promised = KernelFacts {
        landlock_abi: 1,
        seccomp: true,
        namespaces: false,
        supervisor: false,
        supervisor_writes: false,
    };
    let argv = vec!["sh".into(), "-c".into(), script.into()];
    let mut request =
        stockade_policy::LaunchRequest::for_tests(argv, fx.ws.clone(), policy, promised);
    request.env = vec![("PATH".into(), "/usr/bin:/bin".into())];
    request.binding = binding_for("sh", "/usr/bin:/bin", &fx.ws);
    request
}

/// Binds `req` again after a test changed its argv, environment or cwd, as `confine`
/// would have bound it (a cwd that does not exist gets a made-up identity: the runner
/// fails to enter it before comparing).
pub fn rebind(req: &mut stockade_policy::LaunchRequest) {
    use std::os::unix::ffi::OsStrExt;
    let program = req.argv[0].to_str().unwrap().to_string();
    let search = req
        .env_var("PATH")
        .map(|p| String::from_utf8_lossy(p.as_bytes()).into_owned())
        .unwrap_or_else(|| stockade_policy::binding::DEFAULT_PATH.to_string());
    if req.cwd.is_dir() {
        req.binding = binding_for(&program, &search, &req.cwd);
    } else {
        req.binding.cwd = stockade_policy::binding::CwdBinding::Bound {
            path: req.cwd.clone(),
            id: stockade_policy::roots::FileId {
                dev: 0,
                ino: 0,
                birth: None,
            },
        };
    }
}

/// The binding `confine` would record for `program` over `search` from `cwd` (the
/// policy's rule, with the file examined through std's metadata).
pub fn binding_for(program: &str, search: &str, cwd: &Path) -> stockade_policy::binding::Binding {
    use std::os::unix::fs::MetadataExt;
    use stockade_policy::binding::{
        self, Binding, CwdBinding, ExecBinding, ExecId, Executable, Probe, Resolved, Timestamp,
    };
    let probe = |p: &Path| match std::fs::metadata(cwd.join(p)) {
        Err(e) => Probe::of_open_error(e.raw_os_error().unwrap_or(libc::EIO)),
        Ok(m) => Probe::of_mode(
            m.mode(),
            ExecId {
                dev: m.dev(),
                ino: m.ino(),
                size: m.size(),
                modified: Timestamp {
                    sec: m.mtime(),
                    nsec: m.mtime_nsec() as u32,
                },
                changed: Timestamp {
                    sec: m.ctime(),
                    nsec: m.ctime_nsec() as u32,
                },
            },
        ),
    };
    let executable = match binding::resolve(OsStr::new(program), Some(OsStr::new(search)), probe) {
        Resolved::Found { path, file } => ExecBinding::Found(Executable {
            path: cwd.join(path),
            id: file,
            sha256: None,
        }),
        Resolved::NotFound => ExecBinding::NotFound,
        Resolved::NotExecutable { .. } => ExecBinding::NotExecutable,
    };
    Binding {
        executable,
        cwd: CwdBinding::Bound {
            path: cwd.to_path_buf(),
            id: stockade_policy::roots::FileId::of_dir(cwd).unwrap(),
        },
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

/// Runs `stockade-runner --request PATH --sha256 HEX` directly, as an executor would,
/// with the digest of what is at `path` now (any digest when nothing can be read there).
pub fn run_request(path: &Path) -> Output {
    Command::new(runner_bin())
        .arg("--request")
        .arg(path)
        .arg("--sha256")
        .arg(file_sha256(path))
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

/// The SHA-256 (hex) of the regular file at `path`, or of nothing when there is none
/// (a FIFO is not read: that would block).
pub fn file_sha256(path: &Path) -> String {
    let regular = std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_file());
    let bytes = if regular {
        std::fs::read(path).unwrap_or_default()
    } else {
        Vec::new()
    };
    stockade_policy::digest::sha256_hex(&bytes)
}

pub use stockade_tests::confined_argv;

/// The one launcher failure line, asserting there is exactly one stderr line and it
/// carries the launcher prefix.
#[track_caller]
pub fn launcher_failure_line(out: &Output) -> String {
    let err = text(&out.stderr);
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 1, "expected one stderr line, got: {err:?}");
    assert!(lines[0].starts_with("stockade: "), "{err:?}");
    lines[0].to_string()
}

/// Runs `cmd` to completion like `Command::output`, and also returns the largest
/// resident set (KiB) of that one child as `wait4` reports it (the child and the
/// descendants it waited for), so a measurement is not mixed with other tests' children.
pub fn output_with_rusage(cmd: &mut Command) -> (Output, i64) {
    use std::io::Read;
    // Reaped below with wait4 rather than Child::wait, to get its rusage.
    #[allow(clippy::zombie_processes)]
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out_pipe = child.stdout.take().unwrap();
    let mut err_pipe = child.stderr.take().unwrap();
    let err_reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        err_pipe.read_to_end(&mut buf).unwrap();
        buf
    });
    let mut stdout = Vec::new();
    out_pipe.read_to_end(&mut stdout).unwrap();
    let stderr = err_reader.join().unwrap();
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: wait4 fills the status int and the zeroed rusage we pass; the child is ours
    // and has not been waited for (std's Child does not reap on drop).
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        let r = libc::wait4(pid, &mut status, 0, &mut usage);
        assert_eq!(r, pid, "wait4: {}", std::io::Error::last_os_error());
        usage
    };
    use std::os::unix::process::ExitStatusExt;
    let out = Output {
        status: std::process::ExitStatus::from_raw(status),
        stdout,
        stderr,
    };
    (out, usage.ru_maxrss)
}

/// Both ways the network by name is held: the stage's network namespace, and the
/// proxy-port fallback (`--no-stage`): `(fixture, netns)` pairs. The staged one is
/// skipped, named, where this machine cannot make namespaces (the fallback is what runs
/// there).
pub fn domain_fixtures(name: &str) -> Vec<(Fixture, bool)> {
    let staged = Fixture::staged();
    let c = staged.confine(&["--allow-domain", "example.org", "--", "true"]);
    let netns = c["guarantees"]["domainFilter"]["status"] == "enforced";
    // That request is never spawned: its private directory goes now.
    let status = std::path::Path::new(c["statusPath"].as_str().unwrap());
    let _ = std::fs::remove_dir_all(status.parent().unwrap());
    let mut out = vec![(Fixture::new(), false)];
    if netns {
        out.push((staged, true));
    } else {
        eprintln!("SKIPPED (no namespaces here): {name} with the network namespace");
    }
    out
}

/// Why `uid` (with gid `uid` and no supplementary groups, as `setpriv --clear-groups`
/// starts it) cannot reach each of `paths`, if it cannot: the first directory on the way
/// that does not let it through. Asked of the kernel (a `test -x` run as that user), not
/// worked out from mode bits, so ACLs and mounts answer as they will for the test.
///
/// A test that starts stockade as an ordinary user needs the binaries and its fixture
/// within that user's reach; a checkout beneath `/root` (mode 0700) or a home of mode
/// 0750 puts them out of it, and such a test says `SKIPPED (REASON): NAME` instead.
/// The reason holds no parenthesis: `tests/unprivileged` reads it up to the first `)`.
pub fn unreachable_by(uid: u32, paths: &[&Path]) -> Option<String> {
    for path in paths {
        // Each ancestor from the top, then the path itself.
        let mut chain: Vec<&Path> = path.ancestors().collect();
        chain.reverse();
        let out = Command::new("setpriv")
            .args([
                &format!("--reuid={uid}"),
                &format!("--regid={uid}"),
                "--clear-groups",
                "sh",
                "-c",
                r#"for p; do test -x "$p" || { printf '%s' "$p"; exit 1; }; done"#,
                "sh",
            ])
            .args(&chain)
            .stdin(Stdio::null())
            .output();
        let out = match out {
            Ok(out) => out,
            Err(e) => return Some(format!("cannot start setpriv to switch to uid {uid}: {e}")),
        };
        if out.status.success() {
            continue;
        }
        let blocked = text(&out.stdout);
        if blocked.is_empty() {
            return Some(format!(
                "cannot switch to uid {uid} with setpriv: {}",
                text(&out.stderr).trim()
            ));
        }
        use std::os::unix::fs::MetadataExt;
        let how = std::fs::metadata(&blocked)
            .map(|m| format!("mode {:04o}, owner uid {}", m.mode() & 0o7777, m.uid()))
            .unwrap_or_else(|e| e.to_string());
        return Some(format!(
            "uid {uid} cannot reach {}: {blocked} does not let it through, {how}",
            path.display()
        ));
    }
    None
}

/// Copies a built binary to `dir/name` (creating `dir`), executable.
pub fn copy_binary(from: &Path, dir: &Path, name: &str) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let to = dir.join(name);
    // Copied by another process: a descriptor open for writing in this one would be
    // inherited by whatever a parallel test forks at that moment, and executing the copy
    // would then fail with ETXTBSY ("Text file busy") until that child execs.
    let st = std::process::Command::new("cp")
        .arg(from)
        .arg(&to)
        .status()
        .unwrap();
    assert!(st.success(), "cp {} {}", from.display(), to.display());
    to
}

/// A new pty: its master side, and its slave side.
pub fn pty() -> (std::fs::File, std::os::fd::OwnedFd) {
    use std::os::fd::FromRawFd;
    let (mut master, mut slave) = (-1, -1);
    // SAFETY: openpty writes two descriptors into the integers we pass; the name,
    // termios and window size pointers are null, which it accepts.
    let rc = unsafe {
        libc::openpty(
            &mut master,
            &mut slave,
            std::ptr::null_mut(),
            std::ptr::null(),
            std::ptr::null(),
        )
    };
    assert_eq!(rc, 0, "openpty: {}", std::io::Error::last_os_error());
    // SAFETY: both descriptors were just created by openpty and are owned only here.
    unsafe {
        (
            std::fs::File::from_raw_fd(master),
            std::os::fd::OwnedFd::from_raw_fd(slave),
        )
    }
}
