//! The managed process range: everything a command starts, however it detaches.
//!
//! Two kinds of containment, best first:
//! - **cgroup**: a fresh cgroup v2 child group (on the `cgroup2` mount: see
//!   `cgroup2_mount`) under the nearest group of the launcher's own (itself or an
//!   ancestor) that this user may manage: root's own group, or a subtree delegated to the
//!   user (systemd's user manager delegates `user@UID.service`; delegation is ownership of
//!   the group's directory and its `cgroup.procs`). The command is created inside it
//!   (spawn.rs), so every descendant is a member whatever it does with sessions and
//!   process groups; kill is `cgroup.kill`, emptiness is `populated 0` in
//!   `cgroup.events`. The group's files are opened once, before the command starts, so
//!   that ending it needs no new descriptor (the command may have lowered the launcher's
//!   open-file limit).
//! - **subreaper**: the launcher is a child subreaper and the command leads its own
//!   process group, so orphans (double forks, `setsid` daemons) re-parent to the launcher
//!   instead of init: every process of the range is a descendant of the launcher, and the
//!   range is empty exactly when the launcher has no child left to wait for (`ECHILD`).
//!   `/proc` is read only to find what to end, by following each process's `children`
//!   links from the launcher down (or, where the kernel has no such links, by scanning
//!   every process).
//!
//! The launcher is a subreaper in both cases, so it reaps whatever is orphaned.
//!
//! A process is live until its whole thread group has exited: a thread-group leader that
//! exits while another thread runs shows as a zombie but is not gone.

use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI32, Ordering};
use stockade_policy::receipt::CleanupProof;

/// Which containment holds the range; its name appears in results.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Cgroup,
    Subreaper,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Cgroup => "cgroup",
            Kind::Subreaper => "subreaper",
        }
    }
}

/// Why no cgroup could be created for the command.
#[derive(Debug)]
pub enum CgroupError {
    NoMount,
    NoMembership,
    /// Neither the launcher's group nor any ancestor may be managed by this user.
    NotDelegated {
        group: PathBuf,
    },
    Create {
        dir: PathBuf,
        source: std::io::Error,
    },
    Open {
        path: PathBuf,
        source: std::io::Error,
    },
}

impl std::fmt::Display for CgroupError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CgroupError::NoMount => write!(f, "no cgroup2 filesystem is mounted"),
            CgroupError::NoMembership => write!(f, "this process has no cgroup v2 membership"),
            CgroupError::NotDelegated { group } => write!(
                f,
                "neither {} nor a group above it is delegated to this user \
                 (its directory and cgroup.procs must be writable)",
                group.display()
            ),
            CgroupError::Create { dir, source } => {
                write!(f, "cannot create {}: {source}", dir.display())
            }
            CgroupError::Open { path, source } => {
                write!(f, "cannot open {}: {source}", path.display())
            }
        }
    }
}

impl std::error::Error for CgroupError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            CgroupError::Create { source, .. } | CgroupError::Open { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// A cgroup created for one command, its directory and control files open: the child is
/// created straight into it (spawn.rs), and watching and ending it opens nothing new.
#[derive(Debug)]
pub struct Cgroup {
    dir: PathBuf,
    fd: OwnedFd,
    procs: File,
    events: File,
    /// `cgroup.kill` (Linux 5.14); without it members are killed one by one.
    kill: Option<File>,
}

impl Cgroup {
    /// Creates a fresh child group under the nearest group of ours this user may manage,
    /// or says why it cannot.
    pub fn create() -> Result<Cgroup, CgroupError> {
        let mount = cgroup2_mount().ok_or(CgroupError::NoMount)?;
        let own = own_cgroup().ok_or(CgroupError::NoMembership)?;
        let own_dir = mount.join(own.trim_start_matches('/'));
        let parent = managed_ancestor(&mount, &own_dir).ok_or(CgroupError::NotDelegated {
            group: own_dir.clone(),
        })?;
        sweep_dead_groups(&parent);
        let dir = parent.join(format!(
            "stockade-{}-{}",
            std::process::id(),
            random_suffix()
        ));
        std::fs::create_dir(&dir).map_err(|source| CgroupError::Create {
            dir: dir.clone(),
            source,
        })?;
        let opened = (|| {
            let open = |name: &str, write: bool| {
                let path = dir.join(name);
                OpenOptions::new()
                    .read(!write)
                    .write(write)
                    .open(&path)
                    .map_err(|source| CgroupError::Open { path, source })
            };
            let fd = File::open(&dir)
                .map(OwnedFd::from)
                .map_err(|source| CgroupError::Open {
                    path: dir.clone(),
                    source,
                })?;
            let procs = open("cgroup.procs", false)?;
            let events = open("cgroup.events", false)?;
            let kill = open("cgroup.kill", true).ok();
            Ok((fd, procs, events, kill))
        })();
        match opened {
            Ok((fd, procs, events, kill)) => Ok(Cgroup {
                dir,
                fd,
                procs,
                events,
                kill,
            }),
            Err(e) => {
                let _ = std::fs::remove_dir(&dir);
                Err(e)
            }
        }
    }

    /// The group's directory, for `clone3(CLONE_INTO_CGROUP)`.
    pub fn dir_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// The group's `cgroup.procs`, for a child that joins by writing itself into it
    /// (kernels without `CLONE_INTO_CGROUP`).
    pub fn open_procs(&self) -> std::io::Result<File> {
        OpenOptions::new()
            .write(true)
            .open(self.dir.join("cgroup.procs"))
    }

    /// `populated 0`/`1` from `cgroup.events`; `None` when it cannot be read.
    fn populated(&self) -> Option<bool> {
        let events = read_again(&self.events)?;
        events
            .lines()
            .find_map(|l| l.strip_prefix("populated "))
            .map(|v| v.trim() != "0")
    }

    fn pids(&self) -> Option<Vec<i32>> {
        read_again(&self.procs).map(|t| parse_pids(&t))
    }

    /// Writes `value` to the group's control file `name` (`memory.max`, ...).
    pub fn write_control(&self, name: &str, value: &str) -> std::io::Result<()> {
        write_file(&self.dir.join(name), value.as_bytes())
    }

    /// The content of the group's control file `name`, `None` when it cannot be read.
    pub fn read_control(&self, name: &str) -> Option<String> {
        read_small(self.dir.join(name))
    }

    /// The descriptors this value holds open, which a forked guardian keeps
    /// (`lifeline`).
    pub fn descriptors(&self) -> Vec<RawFd> {
        let mut fds = vec![
            self.fd.as_raw_fd(),
            self.procs.as_raw_fd(),
            self.events.as_raw_fd(),
        ];
        fds.extend(self.kill.as_ref().map(|k| k.as_raw_fd()));
        fds
    }

    /// Ends every member and removes the group: what the guardian does once the
    /// launcher died (`lifeline`). `cgroup.kill` where the kernel has it (it also
    /// refuses new forks in the group), else rounds of SIGKILL to each member; bounded,
    /// since nobody waits for the guardian.
    pub fn end_all(&self) {
        for _ in 0..1000 {
            match self.populated() {
                Some(false) | None => break,
                Some(true) => {}
            }
            let killed = self
                .kill
                .as_ref()
                .is_some_and(|mut k| k.write_all(b"1").is_ok());
            if !killed {
                for pid in self.pids().unwrap_or_default() {
                    let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
                }
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        self.remove();
    }

    /// Removes the (empty) group. The kernel may still be finishing exited members, so a
    /// busy group is retried briefly.
    pub fn remove(&self) {
        for _ in 0..50 {
            match std::fs::remove_dir(&self.dir) {
                Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
                    std::thread::sleep(std::time::Duration::from_millis(2));
                }
                _ => return,
            }
        }
    }
}

/// Removes the empty groups launchers that died left under `parent` (`stockade-PID-*`
/// whose PID is gone): killed before their guardian started (`lifeline`), or with
/// `--keep-background`. Removing a group that still has members fails (EBUSY) and
/// leaves it, and a live launcher's group is never touched.
fn sweep_dead_groups(parent: &Path) {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix("stockade-"))
            .and_then(|rest| rest.split('-').next())
            .and_then(|pid| pid.parse::<i32>().ok())
        else {
            continue;
        };
        let gone = kill(Pid::from_raw(pid), None) == Err(nix::errno::Errno::ESRCH);
        if gone {
            let _ = std::fs::remove_dir(entry.path());
        }
    }
}

/// The group to create ours under: the launcher's own group, else the nearest ancestor
/// (below the mount's root) whose directory and `cgroup.procs` this user may write. The
/// kernel lets a process move (or be created) into a group only with write access to
/// `cgroup.procs` of the common ancestor of where it is and where it goes, which is the
/// chosen group itself.
fn managed_ancestor(mount: &Path, own: &Path) -> Option<PathBuf> {
    let writable = |p: &Path| {
        nix::unistd::access(p, nix::unistd::AccessFlags::W_OK).is_ok()
            && nix::unistd::access(&p.join("cgroup.procs"), nix::unistd::AccessFlags::W_OK).is_ok()
    };
    let mut dir = own;
    loop {
        if writable(dir) {
            return Some(dir.to_path_buf());
        }
        dir = dir.parent()?;
        if !dir.starts_with(mount) || dir == mount {
            return None;
        }
    }
}

/// A command's range once it is running.
#[derive(Debug)]
pub struct Range {
    cgroup: Option<Cgroup>,
    /// The direct child, which leads its own process group.
    leader: Pid,
    /// The executables (device, inode) of the helpers that pass the signals they get on
    /// to the command: this launcher (the stage and the proxy host run it) and the runner
    /// (its metadata supervisor stays the runner's binary while its child runs the
    /// command).
    forwarders: Vec<(u64, u64)>,
    /// Their names as the kernel keeps them (`comm`: the file name, at most 15 bytes),
    /// for a helper whose executable its own user cannot read: the runner's supervisor is
    /// not dumpable.
    forwarder_names: Vec<String>,
}

/// Why the range is not proven empty.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unproven {
    NotEmpty,
    /// The cgroup's `cgroup.events` could not be read.
    Unreadable,
}

/// A live process in the range.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Member {
    pub pid: i32,
    pub command: String,
}

impl Range {
    /// `runner`: the runner's path where the argv starts one (its supervisor forwards).
    pub fn new(cgroup: Option<Cgroup>, leader: Pid, runner: Option<&Path>) -> Range {
        let launcher = std::env::current_exe().ok();
        let paths: Vec<&Path> = [Some(Path::new("/proc/self/exe")), runner]
            .into_iter()
            .flatten()
            .collect();
        let forwarders = paths
            .iter()
            .filter_map(|p| exe_identity(&p.to_string_lossy()))
            .collect();
        let forwarder_names = [launcher.as_deref(), runner]
            .into_iter()
            .flatten()
            .filter_map(|p| p.file_name())
            .map(|n| {
                let bytes = &n.as_encoded_bytes()[..n.len().min(15)];
                String::from_utf8_lossy(bytes).into_owned()
            })
            .collect();
        Range {
            cgroup,
            leader,
            forwarders,
            forwarder_names,
        }
    }

    pub fn cgroup(&self) -> Option<&Cgroup> {
        self.cgroup.as_ref()
    }

    pub fn kind(&self) -> Kind {
        if self.cgroup.is_some() {
            Kind::Cgroup
        } else {
            Kind::Subreaper
        }
    }

    /// How the range is known to be empty, or why it is not known: the receipt's
    /// `cleanup`. Unlike [`Range::is_empty`], a cgroup that cannot be read is no proof,
    /// even when the launcher has no child left.
    pub fn proof(&self, children_left: bool) -> Result<CleanupProof, Unproven> {
        match &self.cgroup {
            Some(cg) => match cg.populated() {
                Some(false) => Ok(CleanupProof::Cgroup),
                Some(true) => Err(Unproven::NotEmpty),
                None => Err(Unproven::Unreadable),
            },
            None if children_left => Err(Unproven::NotEmpty),
            None => Ok(CleanupProof::Subreaper),
        }
    }

    /// Whether the range is empty. `children_left`: whether the launcher still has a
    /// child to wait for (the last reap did not end with `ECHILD`); as a subreaper that is
    /// the whole answer, and it needs no `/proc`. A cgroup answers for itself; if its
    /// events cannot be read, the subreaper's answer stands in.
    pub fn is_empty(&self, children_left: bool) -> bool {
        match self.cgroup.as_ref().and_then(Cgroup::populated) {
            Some(populated) => !populated,
            None => !children_left,
        }
    }

    /// The live processes in the range (a zombie whose threads all exited is not live;
    /// one that cannot be examined is counted as live).
    pub fn members(&self) -> Vec<Member> {
        let pids = match self.cgroup.as_ref().and_then(Cgroup::pids) {
            Some(pids) => pids,
            None => descendants(std::process::id() as i32, |_| {}),
        };
        pids.into_iter().filter_map(live_member).collect()
    }

    /// Sends `signal` to the leader's process group and every member outside it, each as
    /// soon as it is found (a process that forks and exits in a loop is caught before its
    /// next fork); SIGKILL to every member. SIGKILL goes through `cgroup.kill` when there is one: the kernel then also
    /// refuses new forks in the group, so nothing slips through. Returns the members the
    /// kernel refused to signal (EPERM: another user's process, for one).
    pub fn signal(&self, signal: Signal) -> Vec<i32> {
        if signal == Signal::SIGKILL
            && let Some(mut kill_file) = self.cgroup.as_ref().and_then(|c| c.kill.as_ref())
            && kill_file.write_all(b"1").is_ok()
        {
            return Vec::new();
        }
        // The namespace stage and the proxy host (this very binary, forked or started
        // again) and the runner's metadata supervisor pass the signals they get on to the
        // command, which this loop reaches itself: signalled too, they would make it a
        // second (or third) SIGTERM, and a command's handler would run that many times. So
        // when the leader is one of them, no signal but SIGKILL goes through the group,
        // and none to them: every other member gets it by pid. (A command that starts
        // this binary or the runner itself gets only the SIGKILL after the grace period.)
        let runs_launcher = |pid: i32| {
            signal != Signal::SIGKILL
                && match exe_identity(&format!("/proc/{pid}/exe")) {
                    Some(id) => self.forwarders.contains(&id),
                    // Undumpable (the runner's supervisor, to its own user): by name.
                    None => read_stat(pid).is_ok_and(|s| self.forwarder_names.contains(&s.comm)),
                }
        };
        let leader_forwards = runs_launcher(self.leader.as_raw());
        // The group is signalled only while a member of the range is still in it: once
        // the leader is reaped and every member has left its group, the number is free,
        // and a process that took it as its pid and then led a group of its own (a
        // stranger's, or as root anyone's) would get the signal.
        let group_ours = || {
            let members = match self.cgroup.as_ref().and_then(Cgroup::pids) {
                Some(pids) => pids,
                None => descendants(std::process::id() as i32, |_| {}),
            };
            members
                .into_iter()
                .any(|pid| nix::unistd::getpgid(Some(Pid::from_raw(pid))) == Ok(self.leader))
        };
        let group_signalled =
            !leader_forwards && group_ours() && killpg(self.leader, signal).is_ok();
        let mut refused = Vec::new();
        let mut send = |pid: i32| {
            if leader_forwards && runs_launcher(pid) {
                return;
            }
            // A member still in the leader's group has just had this signal through the
            // group: a second SIGTERM could run a command's handler twice. SIGKILL goes
            // to every member whatever its group, to learn which ones the kernel refuses.
            let pid = Pid::from_raw(pid);
            if group_signalled
                && signal != Signal::SIGKILL
                && nix::unistd::getpgid(Some(pid)) == Ok(self.leader)
            {
                return;
            }
            if kill(pid, signal) == Err(nix::errno::Errno::EPERM) {
                refused.push(pid.as_raw());
            }
        };
        match self.cgroup.as_ref().and_then(Cgroup::pids) {
            Some(pids) => pids.into_iter().for_each(&mut send),
            None => {
                descendants(std::process::id() as i32, &mut send);
            }
        }
        refused
    }

    /// Removes what the containment created. Processes still in the range (kept with
    /// `--keep-background`) are handed back to the group the range was created under
    /// first, so no group of ours is left behind. `empty`: what `is_empty` just said.
    pub fn release(&self, empty: bool) {
        let Some(cg) = &self.cgroup else {
            return;
        };
        if empty {
            cg.remove();
            return;
        }
        if let Some(parent) = cg.dir.parent() {
            // A member may fork while it is moved: a few rounds catch its children.
            for _ in 0..10 {
                if cg.populated() == Some(false) {
                    break;
                }
                for pid in cg.pids().unwrap_or_default() {
                    let _ = write_file(&parent.join("cgroup.procs"), pid.to_string().as_bytes());
                }
            }
        }
        if cg.populated() == Some(false) {
            cg.remove();
        }
    }
}

/// The device and inode of the program `exe` (a `/proc/PID/exe` link) runs: the same
/// file even once it was replaced or removed on disk.
fn exe_identity(exe: &str) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(exe).ok().map(|m| (m.dev(), m.ino()))
}

/// `pid` as a member, unless it is gone or a zombie with no thread left.
fn live_member(pid: i32) -> Option<Member> {
    match read_stat(pid) {
        Err(Gone) => None,
        Ok(stat) if matches!(stat.state, 'Z' | 'X') && !has_live_threads(pid) => None,
        Ok(_) if is_stage_init(pid) => Some(Member {
            pid,
            command: String::from(STAGE_INIT),
        }),
        Ok(stat) => Some(Member {
            pid,
            command: command_of(pid).unwrap_or_else(|| printable(&stat.comm)),
        }),
        // Cannot be examined (out of descriptors): count it, never assume it gone.
        Err(Unknown) => Some(Member {
            pid,
            command: String::from("?"),
        }),
    }
}

/// How the namespace stage's init is listed among the live processes. It is a fork of
/// the launcher, so its own command line would be `stockade run ...`, as if the
/// launcher itself were left behind; it stays while it reaps what the command left.
pub const STAGE_INIT: &str = "(stockade: the pid namespace's init, reaping what the command left)";

/// Whether `pid` is the init of a pid namespace one level below ours: the stage's,
/// under which the command runs. The kernel numbers it 1 there, and nothing the command
/// does can give another process that number in that namespace (a namespace the
/// command made would be a level further down).
fn is_stage_init(pid: i32) -> bool {
    read_small(format!("/proc/{pid}/status")).is_some_and(|status| is_child_ns_init(&status))
}

/// Whether a `/proc/PID/status` text shows pid 1 of a namespace one level down: an
/// `NSpid:` line of exactly two numbers, the second 1.
fn is_child_ns_init(status: &str) -> bool {
    status
        .lines()
        .find_map(|line| line.strip_prefix("NSpid:"))
        .is_some_and(|ids| {
            let ids: Vec<&str> = ids.split_whitespace().collect();
            ids.len() == 2 && ids[1] == "1"
        })
}

/// Whether a zombie thread-group leader still has a running thread.
fn has_live_threads(pid: i32) -> bool {
    let Some(tids) = list_dir(&format!("/proc/{pid}/task")) else {
        return false;
    };
    tids.into_iter().filter(|&t| t != pid).any(|tid| {
        read_small(format!("/proc/{pid}/task/{tid}/stat"))
            .and_then(|t| t.get(t.rfind(')')? + 1..)?.trim_start().chars().next())
            .is_some_and(|s| !matches!(s, 'Z' | 'X'))
    })
}

fn write_file(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    OpenOptions::new().write(true).open(path)?.write_all(bytes)
}

/// Where the cgroup v2 hierarchy is mounted: `/sys/fs/cgroup` (unified layout) or
/// `/sys/fs/cgroup/unified` (hybrid layout) when the filesystem there is cgroup2, which
/// one `statfs` each tells; otherwise the first cgroup2 mount in `/proc/self/mounts`
/// (formatting that file walks every mount: it is the slow way, kept for odd layouts).
fn cgroup2_mount() -> Option<PathBuf> {
    use nix::sys::statfs::{CGROUP2_SUPER_MAGIC, statfs};
    for known in ["/sys/fs/cgroup", "/sys/fs/cgroup/unified"] {
        if statfs(known).is_ok_and(|fs| fs.filesystem_type() == CGROUP2_SUPER_MAGIC) {
            return Some(PathBuf::from(known));
        }
    }
    let mounts = read_small("/proc/self/mounts")?;
    mounts.lines().find_map(|line| {
        let mut fields = line.split(' ');
        let (_, target, fstype) = (fields.next()?, fields.next()?, fields.next()?);
        (fstype == "cgroup2").then(|| PathBuf::from(unescape_mount(target)))
    })
}

/// Reads a small kernel-generated file (`/proc`, cgroupfs). These report a size of 0, so
/// `fs::read_to_string` would stat the file and then read it in growing probes of 32
/// bytes and up; one read into a page-sized buffer usually takes it all.
fn read_small(path: impl AsRef<Path>) -> Option<String> {
    let file = open_with_room(|| File::open(path.as_ref())).ok()?;
    read_from(&file, false)
}

/// Reads an open control file again from its start (cgroupfs regenerates it).
fn read_again(file: &File) -> Option<String> {
    read_from(file, true)
}

fn read_from(file: &File, positioned: bool) -> Option<String> {
    let mut buf = vec![0u8; 4096];
    let mut len = 0;
    loop {
        if len == buf.len() {
            buf.resize(buf.len() * 2, 0);
        }
        let got = if positioned {
            file.read_at(&mut buf[len..], len as u64)
        } else {
            std::io::Read::read(&mut &*file, &mut buf[len..])
        };
        match got {
            Ok(0) => break,
            Ok(n) => len += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
    buf.truncate(len);
    String::from_utf8(buf).ok()
}

/// A descriptor held back from the start of supervision, given up when the launcher
/// runs out of descriptors (its limit may have been lowered from outside).
static RESERVE: AtomicI32 = AtomicI32::new(-1);

/// Holds one descriptor back for `open_with_room`. Called before the command starts.
pub fn reserve_descriptor() {
    if RESERVE.load(Ordering::Relaxed) < 0
        && let Ok(f) = File::open("/dev/null")
    {
        RESERVE.store(std::os::fd::IntoRawFd::into_raw_fd(f), Ordering::Relaxed);
    }
}

/// Gives the reserved descriptor back (the run is over).
pub fn release_reserve() {
    let fd = RESERVE.swap(-1, Ordering::Relaxed);
    if fd >= 0 {
        // SAFETY: the reserve is a descriptor this module opened and owns.
        drop(unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) });
    }
}

/// Opens with `open`; when the launcher is out of descriptors, makes room (soft limit
/// raised to the hard one, the reserved descriptor closed, and as a last resort the
/// launcher's own stdin closed when it is no terminal: the command has its copy) and
/// tries again. Finding and ending the range must not depend on the open-file limit the
/// command may have lowered.
fn open_with_room<T>(open: impl Fn() -> std::io::Result<T>) -> std::io::Result<T> {
    let mut result = open();
    for step in 0..3 {
        match &result {
            Err(e) if matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE)) => {}
            _ => return result,
        }
        match step {
            0 => {
                use nix::sys::resource::{Resource, getrlimit, setrlimit};
                if let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE)
                    && soft < hard
                {
                    let _ = setrlimit(Resource::RLIMIT_NOFILE, hard, hard);
                }
            }
            1 => release_reserve(),
            _ => {
                if !nix::unistd::isatty(std::io::stdin()).unwrap_or(true) {
                    let _ = nix::unistd::close(0);
                }
            }
        }
        result = open();
    }
    result
}

/// `/proc/self/mounts` writes space, tab, newline and backslash as octal escapes.
fn unescape_mount(field: &str) -> String {
    field
        .replace("\\040", " ")
        .replace("\\011", "\t")
        .replace("\\012", "\n")
        .replace("\\134", "\\")
}

/// This process's cgroup v2 path (the `0::` line of `/proc/self/cgroup`).
fn own_cgroup() -> Option<String> {
    let text = read_small("/proc/self/cgroup")?;
    text.lines()
        .find_map(|l| l.strip_prefix("0::"))
        .map(str::to_string)
}

fn random_suffix() -> String {
    let mut bytes = [0u8; 6];
    // SAFETY: getrandom(2) writes at most `bytes.len()` bytes into the local buffer.
    let got = unsafe { libc::getrandom(bytes.as_mut_ptr().cast(), bytes.len(), 0) };
    if got != bytes.len() as isize {
        // The name only has to be unlikely to collide with another launcher's (the pid
        // is in it too); creating an existing group fails rather than sharing it.
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        bytes[..4].copy_from_slice(&nanos.to_le_bytes());
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn parse_pids(text: &str) -> Vec<i32> {
    text.lines().filter_map(|l| l.trim().parse().ok()).collect()
}

/// The numeric entries of a `/proc` directory, read whole before anything else is
/// opened (so one descriptor at a time suffices).
fn list_dir(path: &str) -> Option<Vec<i32>> {
    let dir = open_with_room(|| std::fs::read_dir(path)).ok()?;
    Some(
        dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
            .collect(),
    )
}

struct Stat {
    comm: String,
    state: char,
    ppid: i32,
}

/// Why a process's state could not be read.
enum Unreadable {
    /// It no longer exists.
    Gone,
    /// Some other failure (out of descriptors): it may well be alive.
    Unknown,
}
use Unreadable::{Gone, Unknown};

/// The fields of `/proc/PID/stat` we need. `comm` may contain spaces and parentheses,
/// so the fields after it are found from the last `)`.
fn read_stat(pid: i32) -> Result<Stat, Unreadable> {
    let file = open_with_room(|| File::open(format!("/proc/{pid}/stat"))).map_err(|e| {
        match e.raw_os_error() {
            Some(libc::ENOENT | libc::ESRCH) => Gone,
            _ => Unknown,
        }
    })?;
    let text = read_from(&file, false).ok_or(Gone)?;
    let parse = || {
        let open = text.find('(')?;
        let close = text.rfind(')')?;
        let comm = text.get(open + 1..close)?.to_string();
        let mut rest = text.get(close + 1..)?.split_whitespace();
        let state = rest.next()?.chars().next()?;
        let ppid = rest.next()?.parse().ok()?;
        Some(Stat { comm, state, ppid })
    };
    parse().ok_or(Gone)
}

/// The most of a process's command line a report keeps. The command chooses its
/// processes' arguments: megabytes of them, shared copy-on-write by every fork, would
/// otherwise cost the launcher megabytes per process it lists (a review made it hold
/// 1.2 GB for 300 processes, and a fork bomb of them ends the launcher, not the command).
const MAX_COMMAND_BYTES: usize = 512;

/// The command line of `pid`, arguments joined by spaces, at most [`MAX_COMMAND_BYTES`]
/// of it (then `...`), made printable ([`printable`]).
fn command_of(pid: i32) -> Option<String> {
    use std::io::Read;
    let file = File::open(format!("/proc/{pid}/cmdline")).ok()?;
    let mut raw = Vec::new();
    file.take(MAX_COMMAND_BYTES as u64 + 1)
        .read_to_end(&mut raw)
        .ok()?;
    let cut = raw.len() > MAX_COMMAND_BYTES;
    raw.truncate(MAX_COMMAND_BYTES);
    let args: Vec<String> = raw
        .split(|b| *b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    let joined = printable(&args.join(" "));
    (!args.is_empty()).then(|| if cut { joined + "..." } else { joined })
}

/// `text` with every control character escaped (`\u{1b}`): a command line goes into
/// the marker lines `stockade run` prints after the command's output, and a terminal
/// escape there (cursor up, erase line, hidden text) could rewrite the markers before it
/// on the caller's terminal.
pub(crate) fn printable(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_control() {
                c.escape_default().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// Every process below `root` in the process tree (not `root` itself), each passed to
/// `found` the moment it is seen. Follows the `children` links of every thread from
/// `root` down, which costs what the range holds and not what the machine runs; where
/// the kernel has no such links, scans every process in `/proc`.
fn descendants(root: i32, mut found: impl FnMut(i32)) -> Vec<i32> {
    let own_links = format!("/proc/{root}/task/{root}/children");
    if !Path::new(&own_links).exists() {
        return scan_descendants(root, found);
    }
    let mut all = vec![root];
    let mut i = 0;
    while i < all.len() {
        let parent = all[i];
        i += 1;
        for tid in list_dir(&format!("/proc/{parent}/task")).unwrap_or_default() {
            let Some(text) = read_small(format!("/proc/{parent}/task/{tid}/children")) else {
                continue;
            };
            for pid in text.split_whitespace().filter_map(|p| p.parse().ok()) {
                if !all.contains(&pid) {
                    found(pid);
                    all.push(pid);
                }
            }
        }
    }
    all.remove(0);
    all
}

fn scan_descendants(root: i32, mut found: impl FnMut(i32)) -> Vec<i32> {
    let parents: Vec<(i32, i32)> = list_dir("/proc")
        .unwrap_or_default()
        .into_iter()
        .filter_map(|pid| Some((pid, read_stat(pid).ok()?.ppid)))
        .collect();
    let mut all = vec![root];
    let mut i = 0;
    while i < all.len() {
        let parent = all[i];
        let children: Vec<i32> = parents
            .iter()
            .filter(|(pid, ppid)| *ppid == parent && !all.contains(pid))
            .map(|(pid, _)| *pid)
            .collect();
        for &c in &children {
            found(c);
        }
        all.extend(children);
        i += 1;
    }
    all.remove(0);
    all
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_lines_are_printable() {
        assert_eq!(
            printable("a\u{1b}[2K\nb\tc\u{9b}d é"),
            "a\\u{1b}[2K\\nb\\tc\\u{9b}d é"
        );
    }

    #[test]
    fn a_child_namespace_s_init_is_told_by_its_pid_there() {
        let status = |nspid: &str| format!("Name:\tstockade\nNSpid:{nspid}\nPid:\t7\n");
        assert!(is_child_ns_init(&status("\t4242\t1")));
        // Our own namespace's processes, other processes of the namespace below, and the
        // init of a namespace further down are not.
        for other in ["\t4242", "\t4242\t2", "\t4242\t7\t1", "\t1"] {
            assert!(!is_child_ns_init(&status(other)), "{other:?}");
        }
        // A command name is on the `Name:` line, never an `NSpid:` line of its own.
        assert!(!is_child_ns_init("Name:\tNSpid:\t1\t1\nNSpid:\t9\n"));
        // This test process is not one.
        assert!(!is_stage_init(std::process::id() as i32));
    }

    #[test]
    fn mount_fields_are_unescaped() {
        assert_eq!(unescape_mount("/a\\040b\\134c"), "/a b\\c");
    }

    #[test]
    fn stat_parsing_finds_our_parent_and_children() {
        let me = std::process::id() as i32;
        let Ok(stat) = read_stat(me) else {
            panic!("cannot read our own stat")
        };
        assert_eq!(stat.ppid, nix::unistd::getppid().as_raw());
        let mut child = std::process::Command::new("sleep")
            .arg("100")
            .spawn()
            .unwrap();
        let found = descendants(me, |_| {});
        let scanned = scan_descendants(me, |_| {});
        let _ = child.kill();
        let _ = child.wait();
        assert!(found.contains(&(child.id() as i32)), "{found:?}");
        assert!(scanned.contains(&(child.id() as i32)), "{scanned:?}");
        assert!(!found.contains(&me));
    }
}
