//! The managed process range: everything a command starts, however it detaches.
//!
//! Two kinds of containment, best first:
//! - **cgroup**: a fresh cgroup v2 child group under the launcher's own group (on the
//!   `cgroup2` mount: see `cgroup2_mount`). The command is created inside it
//!   (spawn.rs), so every descendant is a member whatever it does with sessions and
//!   process groups; kill is `cgroup.kill`, emptiness is `populated 0` in
//!   `cgroup.events`. Needs write access to the launcher's group (root, or a delegated
//!   subtree).
//! - **subreaper**: the launcher is a child subreaper and the command leads its own
//!   process group, so orphans (double forks, `setsid` daemons) re-parent to the launcher
//!   instead of init; the range is every live descendant of the launcher, found in
//!   `/proc`.
//!
//! The launcher is a subreaper in both cases, so it reaps whatever is orphaned.

use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};

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

/// A cgroup created for one command, and its directory open: the child is created
/// straight into it (spawn.rs).
#[derive(Debug)]
pub struct Cgroup {
    dir: PathBuf,
    fd: OwnedFd,
}

impl Cgroup {
    /// Creates a fresh child group of the launcher's own group, or says why it cannot.
    pub fn create() -> Result<Cgroup, String> {
        let mount = cgroup2_mount().ok_or("no cgroup2 filesystem is mounted")?;
        let own = own_cgroup().ok_or("this process has no cgroup v2 membership")?;
        let parent = mount.join(own.trim_start_matches('/'));
        let dir = parent.join(format!(
            "stockade-{}-{}",
            std::process::id(),
            random_suffix()
        ));
        std::fs::create_dir(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        let fd = File::open(&dir).map(OwnedFd::from).map_err(|e| {
            let _ = std::fs::remove_dir(&dir);
            format!("cannot open {}: {e}", dir.display())
        })?;
        Ok(Cgroup { dir, fd })
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

/// A command's range once it is running.
#[derive(Debug)]
pub struct Range {
    cgroup: Option<Cgroup>,
    /// The direct child, which leads its own process group.
    leader: Pid,
}

/// A live process in the range.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Member {
    pub pid: i32,
    pub command: String,
}

impl Range {
    pub fn new(cgroup: Option<Cgroup>, leader: Pid) -> Range {
        Range { cgroup, leader }
    }

    pub fn kind(&self) -> Kind {
        if self.cgroup.is_some() {
            Kind::Cgroup
        } else {
            Kind::Subreaper
        }
    }

    /// The live processes in the range (zombies are not live).
    pub fn members(&self) -> Vec<Member> {
        let pids = match &self.cgroup {
            Some(cg) => read_pids(&cg.dir.join("cgroup.procs")),
            None => descendants(std::process::id() as i32),
        };
        pids.into_iter()
            .filter_map(|pid| {
                let stat = read_stat(pid)?;
                (!matches!(stat.state, 'Z' | 'X')).then(|| Member {
                    pid,
                    command: command_of(pid).unwrap_or(stat.comm),
                })
            })
            .collect()
    }

    pub fn is_empty(&self) -> bool {
        match &self.cgroup {
            Some(cg) => match read_small(cg.dir.join("cgroup.events")) {
                Some(events) => events.lines().any(|l| l == "populated 0"),
                // Unreadable: judge by the member list instead.
                None => self.members().is_empty(),
            },
            None => self.members().is_empty(),
        }
    }

    /// Sends `signal` to every member, and to the leader's process group.
    pub fn signal(&self, signal: Signal) {
        if signal == Signal::SIGKILL
            && let Some(cg) = &self.cgroup
            && write_file(&cg.dir.join("cgroup.kill"), b"1").is_ok()
        {
            return;
        }
        let _ = killpg(self.leader, signal);
        for m in self.members() {
            let _ = kill(Pid::from_raw(m.pid), signal);
        }
    }

    /// Removes what the containment created. Processes still in the range (kept with
    /// `--keep-background`) are handed back to the launcher's own group first, so no
    /// group of ours is left behind. `empty`: what `is_empty` just said, so that the
    /// common case reads `cgroup.events` no more.
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
                if self.is_empty() {
                    break;
                }
                for pid in read_pids(&cg.dir.join("cgroup.procs")) {
                    let _ = write_file(&parent.join("cgroup.procs"), pid.to_string().as_bytes());
                }
            }
        }
        if self.is_empty() {
            cg.remove();
        }
    }
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
    let mut file = File::open(path).ok()?;
    let mut buf = vec![0u8; 4096];
    let mut len = 0;
    loop {
        if len == buf.len() {
            buf.resize(buf.len() * 2, 0);
        }
        match std::io::Read::read(&mut file, &mut buf[len..]) {
            Ok(0) => break,
            Ok(n) => len += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
    buf.truncate(len);
    String::from_utf8(buf).ok()
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

fn read_pids(path: &Path) -> Vec<i32> {
    read_small(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

struct Stat {
    comm: String,
    state: char,
    ppid: i32,
}

/// The fields of `/proc/PID/stat` we need. `comm` may contain spaces and parentheses,
/// so the fields after it are found from the last `)`.
fn read_stat(pid: i32) -> Option<Stat> {
    let text = read_small(format!("/proc/{pid}/stat"))?;
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    let comm = text.get(open + 1..close)?.to_string();
    let mut rest = text.get(close + 1..)?.split_whitespace();
    let state = rest.next()?.chars().next()?;
    let ppid = rest.next()?.parse().ok()?;
    Some(Stat { comm, state, ppid })
}

/// The command line of `pid`, arguments joined by spaces.
fn command_of(pid: i32) -> Option<String> {
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    let args: Vec<String> = raw
        .split(|b| *b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    (!args.is_empty()).then(|| args.join(" "))
}

/// Every process below `root` in the process tree (not `root` itself).
fn descendants(root: i32) -> Vec<i32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let parents: Vec<(i32, i32)> = dir
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(|pid| Some((pid, read_stat(pid)?.ppid)))
        .collect();
    let mut found = vec![root];
    let mut i = 0;
    while i < found.len() {
        let parent = found[i];
        found.extend(
            parents
                .iter()
                .filter(|(pid, ppid)| *ppid == parent && !found.contains(pid))
                .map(|(pid, _)| *pid)
                .collect::<Vec<_>>(),
        );
        i += 1;
    }
    found.remove(0);
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mount_fields_are_unescaped() {
        assert_eq!(unescape_mount("/a\\040b\\134c"), "/a b\\c");
    }

    #[test]
    fn stat_parsing_finds_our_parent_and_children() {
        let me = std::process::id() as i32;
        let stat = read_stat(me).unwrap();
        assert_eq!(stat.ppid, nix::unistd::getppid().as_raw());
        let mut child = std::process::Command::new("sleep")
            .arg("100")
            .spawn()
            .unwrap();
        let found = descendants(me);
        let _ = child.kill();
        let _ = child.wait();
        assert!(found.contains(&(child.id() as i32)), "{found:?}");
        assert!(!found.contains(&me));
    }
}
