//! The launcher's side of the binding (the rule is `stockade_policy::binding`): `confine`
//! resolves `argv[0]` and pins down the executable and the working directory; for
//! `danger-full-access`, which has no runner, `stockade run` checks them itself just
//! before the command starts, and the child executes the file it verified.

use crate::control::error::ControlError;
use crate::error::LauncherError;
use nix::fcntl::{OFlag, open};
use nix::sys::stat::{FileStat, Mode, fstat};
use std::ffi::{CString, OsStr, OsString};
use std::fs::File;
use std::io::{self, Read};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use stockade_policy::binding::{
    self, Binding, CwdBinding, Drift, ExecBinding, ExecId, Executable, MAX_HASHED_BYTES, Probe,
    Resolved, Timestamp,
};
use stockade_policy::digest::Sha256;
use stockade_policy::roots::FileId;

fn timestamp(sec: i64, nsec: i64) -> Timestamp {
    Timestamp {
        sec,
        nsec: nsec.clamp(0, 999_999_999) as u32,
    }
}

fn exec_id(st: &FileStat) -> ExecId {
    ExecId {
        dev: st.st_dev,
        ino: st.st_ino,
        size: st.st_size.max(0) as u64,
        modified: timestamp(st.st_mtime, st.st_mtime_nsec),
        changed: timestamp(st.st_ctime, st.st_ctime_nsec),
    }
}

/// One candidate, looked at as the runner looks at it: on an `O_PATH` descriptor.
fn probe(path: &Path) -> Probe<ExecId> {
    match open(path, OFlag::O_PATH | OFlag::O_CLOEXEC, Mode::empty()) {
        Err(e) => Probe::of_open_error(e as i32),
        Ok(fd) => match fstat(&fd) {
            Err(e) => Probe::Failed(e as i32),
            Ok(st) => Probe::of_mode(st.st_mode, exec_id(&st)),
        },
    }
}

/// The SHA-256 of the file at `path`, which must still be the file `id` describes.
fn content_digest(path: &Path, id: &ExecId) -> Result<[u8; 32], ControlError> {
    let err = |source: io::Error| ControlError::BindExecutable {
        path: path.to_path_buf(),
        why: format!("cannot read it to hash it: {source}"),
    };
    if id.size > MAX_HASHED_BYTES {
        return Err(ControlError::BindExecutable {
            path: path.to_path_buf(),
            why: format!(
                "it is {} bytes, more than the {MAX_HASHED_BYTES} bytes {} hashes",
                id.size,
                binding::HASH_FLAG
            ),
        });
    }
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(err)?;
    let same = |file: &File| -> Result<(), ControlError> {
        let st = fstat(file).map_err(|e| err(e.into()))?;
        match id.difference(&exec_id(&st)) {
            None => Ok(()),
            Some(_) => Err(ControlError::BindExecutable {
                path: path.to_path_buf(),
                why: "it changed while it was being hashed".into(),
            }),
        }
    };
    same(&file)?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 64 * 1024];
    let mut reader = (&file).take(id.size + 1);
    loop {
        match reader.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => h.update(&buf[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(err(e)),
        }
    }
    same(&file)?;
    Ok(h.finish())
}

/// Resolves `program` over `search` (the `PATH` the command will get) from the current
/// directory, as the runner will, and pins down what it finds; with `hash`, its content
/// too. `cwd`: the current directory (made part of the binding unless `inherit_cwd`).
pub fn bind(
    program: &OsStr,
    search: Option<&OsStr>,
    cwd: &Path,
    inherit_cwd: bool,
    hash: bool,
) -> Result<Binding, LauncherError> {
    let executable = match binding::resolve(program, search, probe) {
        Resolved::NotFound => ExecBinding::NotFound,
        Resolved::NotExecutable { .. } => ExecBinding::NotExecutable,
        Resolved::Found { path, file: id } => {
            // `./tool` is shown as CWD/tool, not CWD/./tool.
            let path: std::path::PathBuf = cwd
                .components()
                .chain(
                    path.components()
                        .filter(|c| *c != std::path::Component::CurDir),
                )
                .collect();
            let sha256 = if hash {
                Some(content_digest(&path, &id)?)
            } else {
                None
            };
            ExecBinding::Found(Executable { path, id, sha256 })
        }
    };
    let cwd = if inherit_cwd {
        CwdBinding::Inherited
    } else {
        CwdBinding::Bound {
            path: cwd.to_path_buf(),
            id: FileId::of_dir(cwd).map_err(LauncherError::CurrentDir)?,
        }
    };
    Ok(Binding { executable, cwd })
}

/// A `danger-full-access` executable checked by the launcher, ready for the child to
/// execute from a descriptor of its own.
#[derive(Clone, Debug)]
pub struct Verified {
    /// What the child executes by name when it must (a script): the candidate as found,
    /// relative to the current directory when the name or the `PATH` entry is.
    pub path: CString,
    pub id: ExecId,
    /// An interpreter opens it again by name (`binding::started_by_name`): the receipt
    /// cannot say the binding held.
    pub by_name: bool,
    argv: Vec<CString>,
    envp: Vec<CString>,
}

/// Checks, just before `danger-full-access` starts, that the binding still holds: the
/// same rule, the same comparison as the runner's. `None` when nothing was found then
/// and now (the start fails as it would have: 127 or 126).
pub fn check(
    binding: &Binding,
    argv: &[String],
    env: &[(OsString, OsString)],
) -> Result<Option<Verified>, LauncherError> {
    let program = OsStr::new(argv.first().map(String::as_str).unwrap_or_default());
    let cwd_now = FileId::of_dir(Path::new(".")).map_err(LauncherError::CurrentDir)?;
    binding
        .cwd
        .check(cwd_now)
        .map_err(ControlError::BindingChanged)?;
    let search = stockade_policy::environment::lookup(env, "PATH").map(OsString::as_os_str);
    let resolved = binding::resolve(program, search, probe);
    binding
        .executable
        .check(program, resolved.seen(|id| id))
        .map_err(ControlError::BindingChanged)?;
    let (Resolved::Found { path, file: id }, ExecBinding::Found(bound)) =
        (resolved, &binding.executable)
    else {
        return Ok(None);
    };
    // The candidate as found (relative to the current directory, which the child keeps):
    // a script started by name then sees the same `$0` as under `execvp`.
    if bound.sha256.is_some() {
        let now = content_digest(&path, &id)?;
        bound
            .check_content(&path, &now)
            .map_err(ControlError::BindingChanged)?;
    }
    let cstring = |b: &[u8]| {
        CString::new(b).map_err(|_| LauncherError::Internal("a NUL byte in the command"))
    };
    let by_name = started_by_name(&path, &id);
    Ok(Some(Verified {
        path: cstring(path.as_os_str().as_bytes())?,
        id,
        by_name,
        argv: argv
            .iter()
            .map(|a| cstring(a.as_bytes()))
            .collect::<Result<_, _>>()?,
        envp: env
            .iter()
            .map(|(k, v)| {
                let mut kv = k.as_bytes().to_vec();
                kv.push(b'=');
                kv.extend_from_slice(v.as_bytes());
                cstring(&kv)
            })
            .collect::<Result<_, _>>()?,
    }))
}

/// Whether the verified file at `path` is one an interpreter opens again by name, judged
/// on its first bytes read from a descriptor that is still the verified file. A file the
/// launcher cannot read (mode `--x`) no interpreter could read either: not by name.
fn started_by_name(path: &Path, id: &ExecId) -> bool {
    let Ok(file) = File::options()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC | libc::O_NOCTTY)
        .open(path)
    else {
        return false;
    };
    let same = file
        .metadata()
        .is_ok_and(|m| id.difference(&exec_id_of(&m)).is_none());
    let mut header = [0u8; 4];
    let header = (same && (&file).read_exact(&mut header).is_ok()).then_some(header);
    // Another file now (the child's own check refuses it) or too short: by name.
    binding::started_by_name(header)
}

/// The identity of a file from its metadata, as [`exec_id`] gives it from `fstat`.
fn exec_id_of(m: &std::fs::Metadata) -> ExecId {
    use std::os::unix::fs::MetadataExt;
    ExecId {
        dev: m.dev(),
        ino: m.ino(),
        size: m.size(),
        modified: timestamp(m.mtime(), m.mtime_nsec()),
        changed: timestamp(m.ctime(), m.ctime_nsec()),
    }
}

/// Why the child did not execute the verified file.
#[derive(Debug)]
pub enum ChildExec {
    /// The path leads to another file than the launcher checked.
    Changed,
    Failed(io::Error),
}

impl Verified {
    /// In the forked child, right before `execve`: opens the path, checks it is still the
    /// verified file, and executes it from that descriptor. Returns `Ok` when the file
    /// must be executed by name (an interpreter opens a script by name), which the caller
    /// then does; `Err` when it changed or cannot be executed. The launcher has one
    /// thread, so the child may allocate (see supervise/spawn.rs).
    pub fn exec_in_child(&self) -> Result<(), ChildExec> {
        let failed = |e: nix::Error| ChildExec::Failed(e.into());
        let path = Path::new(OsStr::from_bytes(self.path.as_bytes()));
        let fd = open(path, OFlag::O_PATH | OFlag::O_CLOEXEC, Mode::empty()).map_err(failed)?;
        let st = fstat(&fd).map_err(failed)?;
        if self.id.difference(&exec_id(&st)).is_some() {
            return Err(ChildExec::Changed);
        }
        match nix::unistd::execveat(
            &fd,
            c"",
            &self.argv,
            &self.envp,
            nix::fcntl::AtFlags::AT_EMPTY_PATH,
        ) {
            Ok(never) => match never {},
            // A script (ENOENT: the interpreter could not open a close-on-exec
            // descriptor by name) or a file only /bin/sh runs (ENOEXEC): by name, then.
            Err(nix::errno::Errno::ENOENT | nix::errno::Errno::ENOEXEC) => Ok(()),
            Err(e) => Err(failed(e)),
        }
    }

    /// The drift when the child found another file than the launcher checked.
    pub fn changed_in_child(&self) -> Drift {
        Drift::Executable {
            program: self
                .argv
                .first()
                .map(|a| a.to_string_lossy().into_owned())
                .unwrap_or_default(),
            then: format!("{} as the launcher checked it", self.path.to_string_lossy()),
            now: "another file, put there just before it started".into(),
        }
    }
}
