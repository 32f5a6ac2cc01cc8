//! The private control directories: where they live (the control base), how each is made
//! and checked, and how leftovers are swept. A private directory holds a launch request
//! and its status file (`confine`), or spilled output (`run --json`).
//!
//! # The control base
//!
//! Request and status files are trusted because no confined command can reach them, so
//! the base must lie outside every place a confined command of this user can write. It
//! is, in order (the first that applies is used; a later one is never tried instead):
//!
//! 1. `$STOCKADE_CONTROL_DIR` itself, when set (it must be absolute);
//! 2. `$XDG_RUNTIME_DIR/stockade`, when `XDG_RUNTIME_DIR` is set and absolute;
//! 3. `/run/user/UID/stockade`, when `/run/user/UID` exists;
//! 4. `/run/stockade-0`, for root (`/run` is root's);
//! 5. `$HOME/.local/state/stockade`: a user's own state directory, which no default
//!    policy grants (unlike `~/.cache`, which package managers write and users therefore
//!    grant with `--writable`). The base is cleaned by age, so nothing accumulates there.
//!
//! Its parent is resolved through symbolic links first, and the result is refused when
//! it lies beneath `/tmp`, `/dev/shm` or a `$TMPDIR` a command could be granted (shared
//! places workspace-write commands may write), when an existing ancestor belongs to another user
//! (root excepted) or is writable by group or others without the sticky bit, or when
//! the base itself is a link, not ours, or open to group or others. Each refusal is an
//! error naming the base and the way out (`STOCKADE_CONTROL_DIR`), never a silent move
//! to another candidate. `confine` also refuses a policy whose writable roots contain
//! the base.
//!
//! # Private directories
//!
//! Each is a fresh 0700 directory named `PREFIX-SECONDS-RANDOM` (SECONDS: its creation
//! time; a request directory adds `-INODE`, its status file's), holding 0600 files
//! created exclusively. The age of a leftover is read from its
//! name, which a confined command cannot change (the base is outside its writable
//! roots), not from timestamps, which it can (Landlock does not govern metadata).
//!
//! # Sweeping
//!
//! At most once every [`SWEEP_EVERY`] (a stamp file in the base records the last sweep;
//! every other `confine` pays one `stat`), the directory names are listed and the private
//! directories older than [`STALE_AFTER`] are removed: those of executors that never
//! classified, and spill directories of launchers that died.

use crate::control::error::ControlError;
use crate::control::no_replace::rename_no_replace;
use crate::error::LauncherError;
use std::ffi::{OsStr, OsString};
use std::fs::{DirBuilder, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use stockade_policy::LaunchRequest;
use stockade_policy::stage_report::REPORT_FILE;
use stockade_policy::status::STATUS_FILE;
use stockade_policy::trust::{self, FileFacts, FileKind, Untrusted};

/// The environment variable that names the control base.
pub const CONTROL_DIR_ENV: &str = "STOCKADE_CONTROL_DIR";
/// The name of the request file inside its private directory.
pub const REQUEST_FILE: &str = "request";
/// The prefix of a private directory holding a request and its status file.
pub const PRIVATE_PREFIX: &str = "req-";
/// The prefix of a private directory holding spilled output.
pub const SPILL_PREFIX: &str = "out-";
/// The names of the spill files a spill directory may hold (one per captured stream).
pub const SPILL_FILES: [&str; 2] = ["stdout", "stderr"];
/// A private directory this old is a leftover: its executor never classified (or its
/// launcher died). A command still running after this long loses its status file and is
/// classified by the exit-code rules.
pub const STALE_AFTER: Duration = Duration::from_secs(24 * 60 * 60);
/// The files a private directory made ahead (`control::spare`) holds empty, besides its
/// status file, for its request to write in place.
const MADE_AHEAD: [&str; 2] = [REQUEST_FILE, stockade_policy::attribution::SCOPE_FILE];
/// How long a private directory made ahead (`control::spare`) may wait to be taken.
pub const SPARE_KEPT_FOR: Duration = Duration::from_secs(30);
/// How often the base is swept at most.
pub const SWEEP_EVERY: Duration = Duration::from_secs(10 * 60);
/// The stamp file whose modification time records the last sweep.
const SWEEP_STAMP: &str = ".swept";
/// How many random letters and digits a private directory's name carries after its
/// creation time. The sweep takes only names of exactly this shape for its own, so a
/// directory of the user's that merely starts like one (`out-2020-backups`) is not.
const RANDOM_LEN: usize = 12;
/// The length of the random part in the names of earlier builds.
const LEGACY_RANDOM_LEN: usize = 6;

/// Shared temporary directories: `/tmp` is a writable root of every workspace-write
/// policy, and `/dev/shm` is a world-writable memory filesystem. The base is never
/// beneath one of them, nor beneath a `$TMPDIR` a command could be granted. (`/var/tmp`, which no
/// default policy grants, is judged like any other place: by the policy check.)
const SHARED_TEMP_DIRS: [&str; 2] = ["/tmp", "/dev/shm"];

fn unusable(path: &Path, reason: impl Into<String>) -> LauncherError {
    ControlError::PrivateDir {
        path: path.to_path_buf(),
        reason: reason.into(),
    }
    .into()
}

/// The trust rule (`stockade_policy::trust`) applied to `meta`, as `lstat` or `fstat`
/// gave it.
pub fn trusted(meta: &std::fs::Metadata, expected: FileKind) -> Result<(), Untrusted> {
    trust::judge(
        &FileFacts::of(meta),
        expected,
        nix::unistd::geteuid().as_raw(),
    )
}

/// The variables the control base is read from: the process's environment, or a
/// stand-in in tests.
type Vars<'a> = &'a dyn Fn(&str) -> Option<OsString>;

fn process_vars(name: &str) -> Option<OsString> {
    std::env::var_os(name)
}

/// The variable `name` as a path, when it is set and absolute.
fn absolute(name: &str, var: Vars) -> Option<PathBuf> {
    var(name).map(PathBuf::from).filter(|p| p.is_absolute())
}

/// Every place a control base of this user may be, whichever the environment of the
/// `confine` that made it: all are hidden from every confined command (see
/// `stockade_policy::hidden`), since another command may have run with another
/// `XDG_RUNTIME_DIR` or `STOCKADE_CONTROL_DIR`.
pub fn base_candidates() -> Vec<PathBuf> {
    candidates(nix::unistd::geteuid().as_raw(), &process_vars)
}

/// [`base_candidates`] for `uid` with the variables `var` gives. Only places that can
/// hold requests while a command runs: those that exist, those a launcher makes in one
/// step (their parent exists), and those made with their parents on first use (the
/// base this environment selects, and an ordinary user's home fallback, which every
/// environment without `XDG_RUNTIME_DIR` and `/run/user/UID` selects: cron, ssh without
/// logind). `/run/stockade-UID` is a default for root alone: another user's is one only
/// where it was made. A place that can hold nothing costs every command a carve-out of
/// its parent and hides nothing.
fn candidates(uid: u32, var: Vars) -> Vec<PathBuf> {
    let exists = |p: &Path| p.symlink_metadata().is_ok();
    let mut out = Vec::new();
    out.extend(absolute(CONTROL_DIR_ENV, var));
    out.extend(absolute("XDG_RUNTIME_DIR", var).map(|dir| dir.join("stockade")));
    out.push(PathBuf::from(format!("/run/user/{uid}/stockade")));
    let run_own = PathBuf::from(format!("/run/stockade-{uid}"));
    if uid == 0 || exists(&run_own) {
        out.push(run_own);
    }
    let home_base = absolute("HOME", var).map(|home| home.join(HOME_BASE));
    out.extend(home_base.clone());
    let mut first_use: Vec<PathBuf> = selection(uid, var)
        .ok()
        .map(|s| s.base())
        .into_iter()
        .collect();
    if uid != 0 {
        first_use.extend(home_base);
    }
    out.retain(|c| exists(c) || c.parent().is_some_and(exists) || first_use.contains(c));
    // Never a place beneath a shared temporary directory: no base may lie there (see
    // `ensure_base`), and whatever is found there was made by someone else (another
    // user, or a confined command through its writable `/tmp`). Hiding it would let them
    // choose what later commands lose sight of, and carve `/tmp` for every later command.
    out.dedup();
    out
}

/// Other users' control bases, those that exist in the places a base of theirs is made
/// by default: `/run/user/UID/stockade`, `/run/stockade-UID`, and `.local/state/stockade`
/// beneath each home of the passwd database. Hidden from a command that keeps a DAC
/// capability (see `stockade_policy::roots::Invoker`). Two directory listings and one
/// `lstat` per account. A base another user put elsewhere (`STOCKADE_CONTROL_DIR`)
/// cannot be found.
pub fn other_users_bases(passwd: &str) -> Vec<PathBuf> {
    let own = nix::unistd::geteuid().as_raw();
    let other = |uid: &str| uid.parse::<u32>().is_ok_and(|u| u != own);
    let is_dir = |p: &Path| p.symlink_metadata().is_ok_and(|m| m.is_dir());
    let names = |dir: &str| -> Vec<String> {
        std::fs::read_dir(dir)
            .map(|rd| {
                rd.filter_map(|e| e.ok()?.file_name().into_string().ok())
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut out: Vec<PathBuf> = names("/run/user")
        .into_iter()
        .filter(|n| other(n))
        .map(|n| Path::new("/run/user").join(n).join("stockade"))
        .chain(
            names("/run")
                .into_iter()
                .filter(|n| n.strip_prefix("stockade-").is_some_and(other))
                .map(|n| Path::new("/run").join(n)),
        )
        .collect();
    out.extend(passwd.lines().filter_map(|line| {
        let fields: Vec<&str> = line.split(':').collect();
        let home = fields.get(5).filter(|h| h.starts_with('/'))?;
        other(fields.get(2)?).then(|| Path::new(home).join(".local/state/stockade"))
    }));
    out.retain(|p| is_dir(p));
    out.sort();
    out.dedup();
    out
}

/// The home fallback's base, beneath `HOME`.
const HOME_BASE: &str = ".local/state/stockade";

/// Where the environment puts the control base (see the module comment), before any
/// check and before anything is made.
enum Selection {
    /// A directory named outright: by a variable, `/run/user/UID/stockade` or
    /// `/run/stockade-0`.
    Named(PathBuf),
    /// The home fallback beneath this `HOME`.
    Home(PathBuf),
}

impl Selection {
    fn base(&self) -> PathBuf {
        match self {
            Selection::Named(dir) => dir.clone(),
            Selection::Home(home) => home.join(HOME_BASE),
        }
    }
}

fn selection(uid: u32, var: Vars) -> Result<Selection, LauncherError> {
    if let Some(dir) = var(CONTROL_DIR_ENV) {
        let dir = PathBuf::from(dir);
        if !dir.is_absolute() {
            return Err(unusable(
                &dir,
                format!("{CONTROL_DIR_ENV} must be an absolute path"),
            ));
        }
        return Ok(Selection::Named(dir));
    }
    if let Some(dir) = absolute("XDG_RUNTIME_DIR", var) {
        return Ok(Selection::Named(dir.join("stockade")));
    }
    let run_user = PathBuf::from(format!("/run/user/{uid}"));
    if run_user.is_dir() {
        return Ok(Selection::Named(run_user.join("stockade")));
    }
    if uid == 0 && Path::new("/run").is_dir() {
        return Ok(Selection::Named(PathBuf::from("/run/stockade-0")));
    }
    if let Some(home) = absolute("HOME", var) {
        return Ok(Selection::Home(home));
    }
    Err(unusable(
        Path::new("/"),
        format!(
            "no control directory: none of {CONTROL_DIR_ENV}, XDG_RUNTIME_DIR, /run/user/{uid} or HOME is available; set {CONTROL_DIR_ENV} to a private directory"
        ),
    ))
}

/// The selected base, with the home fallback's `.local/state` made if missing.
fn selected_base() -> Result<PathBuf, LauncherError> {
    match selection(nix::unistd::geteuid().as_raw(), &process_vars)? {
        Selection::Named(dir) => Ok(dir),
        Selection::Home(home) => home_state(&home).map(|state| state.join("stockade")),
    }
}

/// `HOME/.local/state`, made if missing (0700, as XDG's tools make it), when neither
/// `.local` nor `.local/state` is a symbolic link. A link there would move the base
/// wherever it points, and a command granted `~/.local` (as `pip --user` wants) in one
/// session could point it into a workspace: every later `confine` of a session without
/// `XDG_RUNTIME_DIR` would keep its requests and status records where a workspace-write
/// command reads and rewrites them.
fn home_state(home: &Path) -> Result<PathBuf, LauncherError> {
    let local = home.join(".local");
    let state = local.join("state");
    for step in [&local, &state] {
        if std::fs::symlink_metadata(step).is_ok_and(|m| m.file_type().is_symlink()) {
            return Err(unusable(
                &state.join("stockade"),
                format!(
                    "{} is a symbolic link: a command that can write where it leads could read and change other commands' requests there; make it a directory or set {CONTROL_DIR_ENV} to a private directory",
                    step.display()
                ),
            ));
        }
    }
    if !state.exists() {
        DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&state)
            .map_err(|e| unusable(&state, format!("cannot create it: {e}")))?;
    }
    Ok(state)
}

/// `path` with its parent resolved through symbolic links (the last component is kept:
/// the base itself must not be a link, which [`ensure_base`] checks).
fn resolve_parent(path: &Path) -> Result<PathBuf, LauncherError> {
    let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
        return Err(unusable(path, "it has no parent directory"));
    };
    let parent = parent.canonicalize().map_err(|e| {
        unusable(
            path,
            format!(
                "its parent directory cannot be resolved: {e}; create it or set {CONTROL_DIR_ENV}"
            ),
        )
    })?;
    Ok(parent.join(name))
}

/// The shared temporary directories (resolved), beneath which no base may lie: those of
/// [`SHARED_TEMP_DIRS`], and `$TMPDIR` when a confined command could be granted it (the
/// rule `placement` holds the binaries to). A `$TMPDIR` no command is ever granted (empty
/// or relative, which mean the default, `/`, a home directory or an ancestor of one, one
/// outside the places temporary directories live) is no place a confined command
/// writes: counting it would refuse every base beneath it, every base at all for `/` or
/// an empty value, with a message blaming confined commands.
fn shared_temp_dirs() -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = SHARED_TEMP_DIRS
        .iter()
        .map(|p| {
            Path::new(p)
                .canonicalize()
                .unwrap_or_else(|_| PathBuf::from(p))
        })
        .collect();
    if let Some(tmpdir) = absolute("TMPDIR", &process_vars)
        && let Ok(granted) = stockade_policy::roots::check_implicit_tmpdir(
            &tmpdir,
            &crate::control::placement::identity(),
            &[],
        )
    {
        out.push(granted);
    }
    out
}

/// Refuses an existing ancestor of `base` that someone else could change: owned by
/// another user (root excepted), or writable by group or others without the sticky bit.
fn check_ancestors(base: &Path) -> Result<(), LauncherError> {
    let euid = nix::unistd::geteuid().as_raw();
    for dir in base.ancestors().skip(1) {
        let Ok(meta) = std::fs::symlink_metadata(dir) else {
            continue;
        };
        let mode = meta.mode();
        let open = mode & 0o022 != 0 && mode & 0o1000 == 0;
        if (meta.uid() != 0 && meta.uid() != euid) || open {
            return Err(unusable(
                base,
                format!(
                    "its ancestor {} (uid {}, mode {:04o}) could be changed by another user; set {CONTROL_DIR_ENV} to a private directory",
                    dir.display(),
                    meta.uid(),
                    mode & 0o7777
                ),
            ));
        }
    }
    Ok(())
}

/// Creates `base` (0700) if needed and checks that nobody else controls it.
pub(crate) fn ensure_base(base: &Path) -> Result<(), LauncherError> {
    match DirBuilder::new().mode(0o700).create(base) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(unusable(base, e.to_string())),
    }
    let meta = std::fs::symlink_metadata(base).map_err(|e| unusable(base, e.to_string()))?;
    trusted(&meta, FileKind::Directory).map_err(|u| {
        unusable(
            base,
            format!("{u}; fix it (chmod 700, or remove it) or set {CONTROL_DIR_ENV}"),
        )
    })?;
    Ok(())
}

/// The control base: selected, resolved, checked and created (see the module comment).
/// Every refusal is an error; another base is never tried instead.
pub fn base() -> Result<PathBuf, LauncherError> {
    let selected = selected_base()?;
    let base = resolve_parent(&selected)?;
    if let Some(temp) = shared_temp_dirs().iter().find(|t| base.starts_with(t)) {
        return Err(unusable(
            &base,
            format!(
                "it lies beneath {}, which confined commands may write; set {CONTROL_DIR_ENV} or XDG_RUNTIME_DIR to a private directory elsewhere",
                temp.display()
            ),
        ));
    }
    if base.parent() == Some(Path::new("")) || base.parent().is_none() {
        return Err(unusable(&base, "it is the root directory"));
    }
    check_ancestors(&base)?;
    ensure_base(&base)?;
    Ok(base)
}

/// The writable root among `roots` that `base` lies beneath (or equals), if any. Both are
/// canonical paths.
pub fn root_containing<'a>(base: &Path, roots: &'a [PathBuf]) -> Option<&'a PathBuf> {
    roots.iter().find(|r| base.starts_with(r))
}

/// Creates a fresh 0700 directory in `base` named `prefix`, its creation time in seconds
/// and random characters, and keeps it (the caller removes it).
pub fn create_private_dir(base: &Path, prefix: &str) -> Result<PathBuf, LauncherError> {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let dir = tempfile::Builder::new()
        .prefix(&format!("{prefix}{now}-"))
        .rand_bytes(RANDOM_LEN)
        .permissions(std::fs::Permissions::from_mode(0o700))
        .tempdir_in(base)
        .map_err(|e| unusable(base, e.to_string()))?;
    Ok(dir.keep())
}

/// What a private directory's name says, when it is one of ours by name:
/// `req-SECONDS-RANDOM` or `req-SECONDS-RANDOM-INODE` (the status file's inode, added
/// once the file exists), or `out-SECONDS-RANDOM`, where SECONDS and INODE are decimal
/// digits and RANDOM is exactly [`RANDOM_LEN`] ASCII letters and digits.
struct Name {
    created: u64,
    inode: Option<u64>,
}

fn parse_name(name: &OsStr) -> Option<Name> {
    fn number(s: &str) -> Option<u64> {
        // `parse` alone would take a leading `+`.
        if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        s.parse().ok()
    }
    let name = name.to_str()?;
    let (rest, spill) = match name.strip_prefix(PRIVATE_PREFIX) {
        Some(rest) => (rest, false),
        None => (name.strip_prefix(SPILL_PREFIX)?, true),
    };
    let mut parts = rest.split('-');
    let created = number(parts.next()?)?;
    let random = parts.next()?;
    let inode = match (parts.next(), parts.next()) {
        (None, _) => None,
        (Some(ino), None) if !spill => Some(number(ino)?),
        _ => return None,
    };
    // Builds before this one used 6 random characters; a request directory they made
    // (which has its inode by the time anyone reads it) is still read and swept after an
    // upgrade.
    let lengths: &[usize] = match inode {
        Some(_) => &[RANDOM_LEN, LEGACY_RANDOM_LEN],
        None => &[RANDOM_LEN],
    };
    if !lengths.contains(&random.len()) || !random.bytes().all(|b| b.is_ascii_alphanumeric()) {
        return None;
    }
    Some(Name { created, inode })
}

/// The creation time (seconds since the epoch) a private directory's name carries, when
/// it is one of ours by name.
pub fn created_at(name: &OsStr) -> Option<u64> {
    parse_name(name).map(|n| n.created)
}

/// The inode of the status file a request directory's name records
/// (`req-SECONDS-RANDOM-INODE`), when it records one.
pub fn status_inode(name: &OsStr) -> Option<u64> {
    parse_name(name)?.inode
}

/// Whether a private directory created at `created` (seconds) is older than
/// [`STALE_AFTER`] at `now`.
pub fn is_stale(created: u64, now: SystemTime) -> bool {
    let now = now
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    now.saturating_sub(created) > STALE_AFTER.as_secs()
}

/// Creates `path` as a new 0600 file for writing; fails if anything is there already,
/// a symbolic link included.
pub fn create_private_file(path: &Path) -> std::io::Result<File> {
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
}

/// Opens the empty file made ahead at `path` for writing, when it still is exactly that:
/// a regular file of ours, closed to others, with one link and nothing in it. Anything
/// else fails as `create_private_file` fails on a file that is there already.
fn open_made_ahead(path: &Path) -> std::io::Result<File> {
    // Non-blocking: a FIFO planted at the name fails the open instead of stalling it.
    let file = OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
        .open(path)?;
    let meta = file.metadata()?;
    if trusted(&meta, FileKind::Regular).is_err() || meta.nlink() != 1 || meta.len() != 0 {
        return Err(std::io::Error::from(std::io::ErrorKind::AlreadyExists));
    }
    Ok(file)
}

/// Reserves room for `len` bytes of `file` on its filesystem without changing its size
/// (`FALLOC_FL_KEEP_SIZE`), so that appending up to that much later cannot fail for want
/// of space. For the records written while the command runs (the stage's report, the
/// proxy's refusals): a command that can fill the filesystem holding the control
/// directory (an ordinary user's `~/.local/state` beside a workspace in the home) would
/// otherwise make those writes fail and the findings vanish from the verdict. A
/// filesystem that cannot reserve is left as it is.
pub fn reserve(file: &File, len: usize) {
    use std::os::fd::AsRawFd;
    // SAFETY: fallocate on a descriptor this process owns, with integer arguments.
    unsafe {
        libc::fallocate(
            file.as_raw_fd(),
            libc::FALLOC_FL_KEEP_SIZE,
            0,
            len as libc::off_t,
        );
    }
}

/// Removes one private directory, when it is a real directory of ours holding nothing
/// but the files stockade puts in a directory of its kind: those files, then the
/// directory. Never recursively, and nothing at all from a directory that holds
/// anything else: one that merely looks like ours by name (the control base is whatever
/// `STOCKADE_CONTROL_DIR` names, which may hold the user's own directories) keeps what
/// it holds.
pub fn remove_private(dir: &Path) {
    let Ok(meta) = std::fs::symlink_metadata(dir) else {
        return;
    };
    // A real directory of ours (never a link); a mode someone changed does not keep it.
    match trusted(&meta, FileKind::Directory) {
        Ok(()) | Err(Untrusted::TooOpen { .. }) => {}
        Err(_) => return,
    }
    if meta.mode() & 0o700 != 0o700 {
        let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700));
    }
    let is_spill = dir
        .file_name()
        .and_then(OsStr::to_str)
        .is_some_and(|n| n.starts_with(SPILL_PREFIX));
    let names: &[&str] = if is_spill {
        &SPILL_FILES
    } else {
        &[
            REQUEST_FILE,
            STATUS_FILE,
            REPORT_FILE,
            stockade_policy::network_denials::LOG_FILE,
            stockade_policy::attribution::SCOPE_FILE,
        ]
    };
    // Anything else inside (a name stockade never writes there, or a directory by one
    // of its names) means the directory is not one of ours after all: nothing in it is
    // touched. A directory that cannot be listed (no descriptor left to list it with,
    // as when the status file could not be made for the same reason) is removed only if
    // empty, which rmdir(2) alone ensures.
    let Ok(entries) = std::fs::read_dir(dir) else {
        let _ = std::fs::remove_dir(dir);
        return;
    };
    for entry in entries {
        let Ok(entry) = entry else { return };
        let ours = entry
            .file_name()
            .to_str()
            .is_some_and(|n| names.contains(&n))
            && entry.file_type().is_ok_and(|t| t.is_file());
        if !ours {
            return;
        }
    }
    for name in names {
        let _ = std::fs::remove_file(dir.join(name));
    }
    let _ = std::fs::remove_dir(dir);
}

/// Sweeps `base` when the last sweep is older than [`SWEEP_EVERY`] (or its stamp is
/// missing or in the future): removes the private directories whose names say they are
/// older than [`STALE_AFTER`], and the spares nobody took (`is_abandoned_spare`).
pub fn sweep(base: &Path) {
    let stamp = base.join(SWEEP_STAMP);
    let now = SystemTime::now();
    let due = match std::fs::symlink_metadata(&stamp).and_then(|m| m.modified()) {
        Ok(last) => match now.duration_since(last) {
            Ok(age) => age >= SWEEP_EVERY,
            // A stamp in the future was set by hand: sweep.
            Err(_) => true,
        },
        Err(_) => true,
    };
    if !due {
        return;
    }
    // Record the sweep first, so concurrent `confine`s do not all sweep. A stamp that
    // cannot be opened (a command may `chmod 000` it: it owns it) is replaced; if even
    // that fails, the sweep still runs, so leftovers never pile up for good.
    let record = || {
        File::options()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&stamp)
            .and_then(|f| f.set_modified(now))
    };
    if record().is_err() {
        let _ = std::fs::remove_file(&stamp);
        let _ = record();
    }
    let Ok(entries) = std::fs::read_dir(base) else {
        return;
    };
    for entry in entries.flatten() {
        let Some(created) = created_at(&entry.file_name()) else {
            continue;
        };
        if is_stale(created, now) || is_abandoned_spare(&entry.path(), created, now) {
            remove_private(&entry.path());
        }
    }
}

/// Whether `dir` is a spare (its request file made ahead, still empty) too old to be
/// taken by anyone: its server was killed before it could remove it. A spare is taken
/// only while younger than [`SPARE_KEPT_FOR`] and written at once; should a taker have
/// stalled past this age, its write fails and its `confine` with it.
fn is_abandoned_spare(dir: &Path, created: u64, now: SystemTime) -> bool {
    let now = now
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    now.saturating_sub(created) > 2 * SPARE_KEPT_FOR.as_secs()
        && std::fs::symlink_metadata(dir.join(REQUEST_FILE))
            .is_ok_and(|m| m.file_type().is_file() && m.len() == 0)
}

/// A private directory holding one request and its status file.
#[derive(Debug)]
pub struct PrivateDir {
    path: PathBuf,
    /// The request and scope files were made ahead, empty (a spare, see `spare`): they
    /// are written in place instead of created.
    made_ahead: bool,
}

impl PrivateDir {
    /// Creates a fresh private directory in `base` and its empty status file, and names
    /// the directory `req-SECONDS-RANDOM-INODE` after the status file's inode, so that
    /// `classify` can tell the file from a replacement. Sweeps the base first (when due).
    pub fn create(base: &Path) -> Result<PrivateDir, LauncherError> {
        sweep(base);
        let made = PrivateDir {
            path: create_private_dir(base, PRIVATE_PREFIX)?,
            made_ahead: false,
        };
        let named = made.create_file(STATUS_FILE, &[]).and_then(|status| {
            let ino = std::fs::symlink_metadata(&status)
                .map_err(|e| unusable(&status, e.to_string()))?
                .ino();
            let mut name = made.path.clone().into_os_string();
            name.push(format!("-{ino}"));
            let named = PathBuf::from(name);
            // Never over anything already there (rename(2) would replace an empty
            // directory).
            rename_no_replace(&made.path, &named).map_err(|e| unusable(&named, e.to_string()))?;
            Ok(named)
        });
        match named {
            Ok(path) => Ok(PrivateDir {
                path,
                made_ahead: false,
            }),
            Err(e) => {
                made.remove();
                Err(e)
            }
        }
    }

    /// A fresh private directory with its request and scope files made too, empty: the
    /// spare `stockade serve` keeps for its next request. Creating files is most of what
    /// the directory costs where the control base is on a disk filesystem (ext4 looks
    /// for an inode that was not freed recently, which takes longer the more were).
    pub fn create_ahead(base: &Path) -> Result<PrivateDir, LauncherError> {
        let mut dir = PrivateDir::create(base)?;
        let made = MADE_AHEAD
            .iter()
            .try_for_each(|name| dir.create_file(name, &[]).map(|_| ()));
        match made {
            Ok(()) => {
                dir.made_ahead = true;
                Ok(dir)
            }
            Err(e) => {
                dir.remove();
                Err(e)
            }
        }
    }

    /// Whether this directory and its files are still as they were made: a directory of
    /// ours closed to others, at its path, with its status file (the name's inode) and,
    /// when made ahead, its request and scope files of ours, empty and linked once.
    pub fn intact(&self) -> bool {
        let dir_ok = std::fs::symlink_metadata(&self.path)
            .is_ok_and(|m| trusted(&m, FileKind::Directory).is_ok());
        let status_ok = std::fs::symlink_metadata(self.status_path()).is_ok_and(|m| {
            status_inode(self.path.file_name().unwrap_or_default()) == Some(m.ino())
        });
        let empty = |name: &str| {
            std::fs::symlink_metadata(self.path.join(name)).is_ok_and(|m| {
                trusted(&m, FileKind::Regular).is_ok() && m.nlink() == 1 && m.len() == 0
            })
        };
        let files_ok = !self.made_ahead || MADE_AHEAD.iter().all(|name| empty(name));
        dir_ok && status_ok && files_ok
    }

    /// The directory itself (the journal records its name).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Where the status file is.
    pub fn status_path(&self) -> PathBuf {
        self.path.join(STATUS_FILE)
    }

    /// Where the proxy host records refused connections (it creates the file; see
    /// `stockade_policy::network_denials`).
    pub fn network_record_path(&self) -> PathBuf {
        self.path.join(stockade_policy::network_denials::LOG_FILE)
    }

    /// Creates the namespace stage's report file, empty (see
    /// `stockade_policy::stage_report`).
    pub fn create_report(&self) -> Result<PathBuf, LauncherError> {
        let path = self.create_file(REPORT_FILE, &[])?;
        // Room for every line the stage may write, reserved now (see `reserve`).
        if let Ok(file) = OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&path)
        {
            reserve(&file, stockade_policy::stage_report::MAX_REPORT_BYTES);
        }
        Ok(path)
    }

    /// Writes what the policy refuses (see `stockade_policy::attribution::Scope`), for
    /// naming each refusal once the command settled.
    pub fn write_scope(
        &self,
        scope: &stockade_policy::attribution::Scope,
    ) -> Result<(), LauncherError> {
        let bytes = serde_json::to_vec(scope).map_err(LauncherError::Json)?;
        self.create_file(stockade_policy::attribution::SCOPE_FILE, &bytes)
            .map(|_| ())
    }

    /// Creates `name` as a new 0600 file holding `bytes`; fails if it exists (unless it
    /// is the empty file made ahead for it, see `create_ahead`).
    fn create_file(&self, name: &str, bytes: &[u8]) -> Result<PathBuf, LauncherError> {
        let path = self.path.join(name);
        let ahead = self.made_ahead && MADE_AHEAD.contains(&name);
        let write = || -> std::io::Result<()> {
            let mut file = if ahead {
                open_made_ahead(&path)?
            } else {
                create_private_file(&path)?
            };
            file.write_all(bytes)?;
            file.flush()
        };
        write().map_err(|source| ControlError::WriteRequest {
            path: path.clone(),
            source,
        })?;
        Ok(path)
    }

    /// Writes `request` as a new 0600 file; fails if the file already exists. Returns
    /// its path and the SHA-256 of its bytes (hex), which the runner checks.
    pub fn write_request(
        &self,
        request: &LaunchRequest,
    ) -> Result<(PathBuf, String), LauncherError> {
        let bytes = request.encode().map_err(ControlError::Encode)?;
        let path = self.create_file(REQUEST_FILE, &bytes)?;
        Ok((path, stockade_policy::digest::sha256_hex(&bytes)))
    }

    /// Removes the directory and what stockade put in it.
    pub fn remove(self) {
        remove_private(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_home_fallback_refuses_a_linked_local_or_state_and_makes_a_missing_one() {
        let dir = tempfile::tempdir().unwrap();
        // Made when missing, a real directory: the control base goes there.
        let home = dir.path().join("plain");
        std::fs::create_dir(&home).unwrap();
        assert_eq!(home_state(&home).unwrap(), home.join(".local/state"));
        assert!(home.join(".local/state").is_dir());
        // A link at either step, even to a directory of the same user, is refused by
        // name: it could lead into a workspace.
        let elsewhere = dir.path().join("workspace");
        std::fs::create_dir_all(elsewhere.join("state")).unwrap();
        for (name, link, to) in [
            ("local", ".local", elsewhere.clone()),
            ("state", ".local/state", elsewhere.join("state")),
        ] {
            let home = dir.path().join(name);
            std::fs::create_dir_all(home.join(".local")).unwrap();
            if name == "local" {
                std::fs::remove_dir(home.join(".local")).unwrap();
            }
            std::os::unix::fs::symlink(&to, home.join(link)).unwrap();
            let err = home_state(&home).unwrap_err().to_string();
            assert!(
                err.contains("is a symbolic link") && err.contains(link),
                "{name}: {err}"
            );
        }
    }

    #[test]
    fn the_candidates_are_the_places_that_can_hold_requests() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        std::fs::create_dir(&home).unwrap();
        // A uid without /run/user/UID or /run/stockade-UID.
        let uid = 3_999_999;
        assert!(!Path::new(&format!("/run/user/{uid}")).exists());
        let vars = |name: &str| (name == "HOME").then(|| home.clone().into_os_string());
        // A user's first run: nothing of `.local` exists yet, and the base this
        // environment selects is listed all the same (it is made before the command
        // runs); `/run/stockade-UID` is not, a default for root alone.
        assert_eq!(candidates(uid, &vars), vec![home.join(HOME_BASE)]);
        let root = candidates(0, &vars);
        assert!(root.contains(&PathBuf::from("/run/stockade-0")), "{root:?}");
        // Root's home fallback is not its default (`/run/stockade-0` is): listed only
        // where it exists or a launcher makes it in one step.
        assert!(!root.contains(&home.join(HOME_BASE)), "{root:?}");
        // With `XDG_RUNTIME_DIR` naming the base, a user's home fallback is listed all
        // the same: a `confine` from cron or ssh, without that variable, makes it with
        // its parents while this command runs.
        let runtime = dir.path().join("runtime");
        std::fs::create_dir(&runtime).unwrap();
        let xdg = |name: &str| match name {
            "XDG_RUNTIME_DIR" => Some(runtime.clone().into_os_string()),
            _ => vars(name),
        };
        assert_eq!(
            candidates(uid, &xdg),
            vec![runtime.join("stockade"), home.join(HOME_BASE)]
        );
        std::fs::create_dir_all(home.join(".local/state")).unwrap();
        let made = candidates(0, &xdg);
        assert!(made.contains(&home.join(HOME_BASE)), "{made:?}");
    }

    #[test]
    fn the_age_is_read_from_the_name() {
        let now = UNIX_EPOCH + Duration::from_secs(1_000_000);
        let name = |s: &str| created_at(OsStr::new(s));
        assert_eq!(name("req-999999-abcDEF012345"), Some(999_999));
        assert_eq!(name("out-5-abcDEF012345"), Some(5));
        for bad in [
            "req-abc",
            "req-12-",
            "foo-12-abcDEF012345",
            "req--abcDEF012345",
            ".swept",
            "req-1",
            "req-+5-abcDEF012345",
            // The random part is exactly RANDOM_LEN letters and digits.
            "out-2020-backups",
            "out-5-abcDEF01234",
            "out-5-abcDEF0123456",
            "out-5-abcDEF01234_",
            // Only request directories carry an inode; nothing follows it.
            "out-5-abcDEF012345-7",
            "req-5-abcDEF012345-7-8",
            "req-5-abcDEF012345-x",
        ] {
            assert_eq!(name(bad), None, "{bad}");
        }
        let day = STALE_AFTER.as_secs();
        assert!(is_stale(1_000_000 - day - 1, now));
        assert!(!is_stale(1_000_000 - day, now));
        // A name from the future is not stale.
        assert!(!is_stale(2_000_000, now));
        assert_eq!(created_at(OsStr::new("req-5-abcDEF012345-77")), Some(5));
        assert_eq!(status_inode(OsStr::new("req-5-abcDEF012345-77")), Some(77));
        for bad in [
            "req-5-abcDEF012345",
            "req-5-abcDEF012345-x",
            "req-5-abcDEF012345-7-8",
            "out-5-abcDEF012345-7",
            "req-5-abc-77",
            "req-5-abcdef",
        ] {
            assert_eq!(status_inode(OsStr::new(bad)), None, "{bad}");
        }
        // A request directory of an earlier build (6 random characters) is still read.
        assert_eq!(status_inode(OsStr::new("req-5-abcDEF-77")), Some(77));
        assert_eq!(created_at(OsStr::new("req-5-abcDEF")), None);
    }

    #[test]
    fn a_new_private_directory_is_named_as_the_sweep_reads_names() {
        let base = tempfile::tempdir().unwrap();
        for prefix in [PRIVATE_PREFIX, SPILL_PREFIX] {
            let dir = create_private_dir(base.path(), prefix).unwrap();
            assert!(created_at(dir.file_name().unwrap()).is_some(), "{dir:?}");
        }
    }

    #[test]
    fn a_directory_holding_anything_stockade_never_writes_keeps_everything() {
        let base = tempfile::tempdir().unwrap();
        let make = |name: &str, files: &[&str]| {
            let d = base.path().join(name);
            std::fs::create_dir(&d).unwrap();
            for f in files {
                std::fs::write(d.join(f), "x").unwrap();
            }
            d
        };
        let ours = make("out-5-abcDEF012345", &["stdout", "stderr"]);
        let users = make("out-6-abcDEF012345", &["stdout", "photo.jpg"]);
        let nested = make("req-7-abcDEF012345-9", &["status"]);
        std::fs::create_dir(nested.join("request")).unwrap();
        for d in [&ours, &users, &nested] {
            remove_private(d);
        }
        assert!(!ours.exists(), "a spill directory of ours was left");
        assert!(
            users.join("stdout").exists() && users.join("photo.jpg").exists(),
            "files were removed from a directory that is not ours"
        );
        assert!(nested.join("status").exists() && nested.join("request").is_dir());
    }

    #[test]
    fn a_directory_made_ahead_is_written_in_place_once_and_one_changed_is_not_intact() {
        let base = tempfile::tempdir().unwrap();
        let ahead = PrivateDir::create_ahead(base.path()).unwrap();
        for name in [
            REQUEST_FILE,
            stockade_policy::attribution::SCOPE_FILE,
            STATUS_FILE,
        ] {
            assert_eq!(std::fs::metadata(ahead.path().join(name)).unwrap().len(), 0);
        }
        assert!(ahead.intact());
        ahead.create_file(REQUEST_FILE, b"first").unwrap();
        assert_eq!(
            std::fs::read(ahead.path().join(REQUEST_FILE)).unwrap(),
            b"first"
        );
        // Written once: a second write fails as a second create of a fresh one does.
        assert!(ahead.create_file(REQUEST_FILE, b"again").is_err());
        let fresh = PrivateDir::create(base.path()).unwrap();
        fresh.create_file(REQUEST_FILE, b"first").unwrap();
        assert!(fresh.create_file(REQUEST_FILE, b"again").is_err());
        // Changed behind its maker's back: not intact (control: a new one is).
        type Change = (&'static str, fn(&Path));
        let changes: [Change; 4] = [
            ("request written", |d| {
                std::fs::write(d.join(REQUEST_FILE), "x").unwrap()
            }),
            ("request a link", |d| {
                std::fs::remove_file(d.join(REQUEST_FILE)).unwrap();
                std::os::unix::fs::symlink("/etc/passwd", d.join(REQUEST_FILE)).unwrap();
            }),
            ("scope linked twice", |d| {
                let scope = d.join(stockade_policy::attribution::SCOPE_FILE);
                std::fs::hard_link(&scope, d.join("other")).unwrap();
            }),
            ("status replaced", |d| {
                std::fs::write(d.join("new"), "").unwrap();
                std::fs::rename(d.join("new"), d.join(STATUS_FILE)).unwrap();
            }),
        ];
        for (what, change) in changes {
            let dir = PrivateDir::create_ahead(base.path()).unwrap();
            assert!(dir.intact(), "{what}: intact before");
            change(dir.path());
            assert!(!dir.intact(), "{what}: still intact");
        }
    }

    #[test]
    fn the_sweep_removes_spares_nobody_took_and_keeps_young_ones_and_used_ones() {
        let base = tempfile::tempdir().unwrap();
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs();
        let make = |created: u64, random: &str, request: &str| {
            let d = base.path().join(format!("req-{created}-{random}-7"));
            std::fs::create_dir(&d).unwrap();
            for (name, bytes) in [(REQUEST_FILE, request), (STATUS_FILE, "")] {
                std::fs::write(d.join(name), bytes).unwrap();
            }
            d
        };
        let abandoned = make(now - 300, "abcDEF012345", "");
        let young = make(now, "bcdDEF012345", "");
        let used = make(now - 300, "cdeDEF012345", "a request");
        sweep(base.path());
        assert!(!abandoned.exists(), "a spare nobody can take was left");
        assert!(
            young.join(REQUEST_FILE).exists(),
            "a spare that may be taken went"
        );
        assert!(used.join(REQUEST_FILE).exists(), "a used directory went");
    }

    #[test]
    fn root_containing_finds_the_root_the_base_is_beneath() {
        let roots = vec![PathBuf::from("/home/u/ws"), PathBuf::from("/home/u")];
        assert_eq!(
            root_containing(Path::new("/home/u/.local/state/stockade"), &roots),
            Some(&PathBuf::from("/home/u"))
        );
        assert_eq!(
            root_containing(Path::new("/run/user/1/stockade"), &roots),
            None
        );
        assert_eq!(root_containing(Path::new("/home/u/wsx"), &roots[..1]), None);
    }
}
