//! Probing the running kernel for the facts stockade's guarantees depend on, and
//! `stockade probe`, which shows them and what each mode would get here.

use crate::error::LauncherError;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use stockade_policy::Mode;
use stockade_policy::guarantees::{
    self, Asks, Enforcement, Guarantee, GuaranteeReport, KernelFacts, ModeVerdict,
    TESTED_LANDLOCK_ABI,
};

/// `LANDLOCK_CREATE_RULESET_VERSION`: ask for the ABI version instead of a ruleset.
const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
/// `SECCOMP_GET_ACTION_AVAIL` and `SECCOMP_RET_ERRNO` (linux/seccomp.h).
const SECCOMP_GET_ACTION_AVAIL: libc::c_uint = 2;
const SECCOMP_RET_ERRNO: u32 = 0x0005_0000;

/// The kernel facts that need no trial: Landlock and seccomp (the namespace stage is
/// left out, as `false`). Enough for what depends on Landlock alone, such as the status
/// channel.
pub fn basic_kernel_facts() -> KernelFacts {
    KernelFacts {
        landlock_abi: landlock_abi(),
        seccomp: seccomp_filters(),
        namespaces: false,
        supervisor: false,
        supervisor_writes: false,
    }
}

/// The kernel facts a policy asking `asks` is judged on. The namespace stage is tried
/// (a short-lived child calls `unshare`) only when the policy has a use for it, and a
/// success is remembered for a minute in the control base `base`
/// (`stage::available_remembered`).
pub fn kernel_facts(asks: &Asks, base: &std::path::Path) -> KernelFacts {
    let namespaces = asks.wants_stage()
        && crate::stage::available_remembered(true, asks.own_network(), base).is_ok();
    // Only where the stage does not run: it holds the same and more.
    let notify = match !namespaces && asks.wants_supervisor() {
        true => seccomp_notify(),
        false => Notify::default(),
    };
    KernelFacts {
        landlock_abi: landlock_abi(),
        seccomp: seccomp_filters(),
        namespaces,
        supervisor: notify.listener,
        supervisor_writes: notify.listener && notify.hands_descriptors,
    }
}

/// Whether the runner's metadata supervisor can run here: a short-lived child installs
/// an allow-all seccomp filter with a user-notification listener, where Yama lets an
/// ancestor read its descendants' memory. Tried for real: the
/// kernel refuses a second listener below one (`EBUSY`, as under another supervisor),
/// and a container's profile may refuse `seccomp` itself.
pub fn seccomp_notify() -> Notify {
    // The supervisor reads its command's memory as an ancestor without capabilities:
    // Yama's scope 2 and 3 (admin-only attach, or none) refuse that, and every change
    // would be refused.
    if read_sysctl("/proc/sys/kernel/yama/ptrace_scope").is_some_and(|scope| scope >= 2) {
        return Notify::default();
    }
    // SAFETY: the child only makes raw system calls and `_exit`s; the launcher is
    // single-threaded where facts are gathered, and the child touches no lock.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        let allow = libc::sock_filter {
            code: (libc::BPF_RET | libc::BPF_K) as u16,
            jt: 0,
            jf: 0,
            k: libc::SECCOMP_RET_ALLOW,
        };
        let prog = libc::sock_fprog {
            len: 1,
            filter: &allow as *const libc::sock_filter as *mut libc::sock_filter,
        };
        // SAFETY: prctl takes plain numbers; `prog` and `allow` live across seccomp,
        // which copies them; `_exit` ends the child without running anything of ours.
        unsafe {
            let listener = match libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) {
                0 => libc::syscall(
                    libc::SYS_seccomp,
                    libc::SECCOMP_SET_MODE_FILTER,
                    libc::SECCOMP_FILTER_FLAG_NEW_LISTENER,
                    &prog as *const libc::sock_fprog,
                ),
                _ => -1,
            };
            if listener < 0 {
                libc::_exit(1);
            }
            // Handing a descriptor over as the answer (Linux 5.14): a kernel that knows
            // the flag looks for the notification and finds none (ENOENT); an older
            // one refuses the flag (EINVAL).
            let addfd = libc::seccomp_notif_addfd {
                id: 0,
                flags: libc::SECCOMP_ADDFD_FLAG_SEND as u32,
                srcfd: listener as u32,
                newfd: 0,
                newfd_flags: 0,
            };
            let r = libc::ioctl(
                listener as i32,
                libc::SECCOMP_IOCTL_NOTIF_ADDFD,
                &addfd as *const libc::seccomp_notif_addfd,
            );
            let enoent = r < 0 && *libc::__errno_location() == libc::ENOENT;
            libc::_exit(if enoent { 0 } else { 2 })
        }
    }
    if pid < 0 {
        return Notify::default();
    }
    let mut status = 0;
    // SAFETY: waits for the child just forked, writing its status into `status`.
    while unsafe { libc::waitpid(pid, &mut status, 0) } < 0 {
        if std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            return Notify::default();
        }
    }
    let code = libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status));
    Notify {
        listener: matches!(code, Some(0 | 2)),
        hands_descriptors: code == Some(0),
    }
}

/// What the supervisor's trial found.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Notify {
    /// A filter with a user-notification listener can be installed.
    pub listener: bool,
    /// The listener can answer a call with a descriptor (Linux 5.14).
    pub hands_descriptors: bool,
}

/// The Landlock ABI version, 0 when Landlock is not built in or not enabled.
pub fn landlock_abi() -> u32 {
    // SAFETY: with a null attribute pointer, size 0 and the VERSION flag, the syscall
    // reads no memory and creates no file descriptor; it only returns a number or -1.
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    u32::try_from(v).unwrap_or(0)
}

/// Whether seccomp filters can answer with an errno (what the runner's filter does).
pub fn seccomp_filters() -> bool {
    let action: u32 = SECCOMP_RET_ERRNO;
    // SAFETY: the kernel reads one u32 from `action`, which lives across the call.
    let r = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            SECCOMP_GET_ACTION_AVAIL,
            0,
            &action as *const u32,
        )
    };
    r == 0
}

fn read_sysctl(path: &str) -> Option<i64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// Whether unprivileged user namespaces can be created (stockade does not need them;
/// bubblewrap-style sandboxes do, and their absence is why those fail to start).
fn user_namespaces() -> bool {
    read_sysctl("/proc/sys/user/max_user_namespaces").is_some_and(|n| n > 0)
        && read_sysctl("/proc/sys/kernel/unprivileged_userns_clone") != Some(0)
        && read_sysctl("/proc/sys/kernel/apparmor_restrict_unprivileged_userns") != Some(1)
}

/// The kernel facts `stockade probe` shows. Field names are stable.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Kernel {
    release: String,
    architecture: &'static str,
    landlock_abi: u32,
    seccomp: bool,
    /// Whether the namespace stage can run here, and if not, why.
    namespaces: Namespaces,
    /// Whether the runner's metadata supervisor can run (seccomp user notification),
    /// tried only where the namespace stage cannot run (`false` otherwise).
    seccomp_notify: bool,
    /// Whether that supervisor can also hold the protected paths (it hands the command
    /// the descriptors it opens: Linux 5.14).
    seccomp_notify_addfd: bool,
    user_namespaces: bool,
    /// `dev.tty.legacy_tiocsti`; `null` on kernels without the switch (TIOCSTI always on).
    legacy_tiocsti: Option<bool>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Namespaces {
    available: bool,
    /// Why not, when not available (for example AppArmor's restriction on
    /// unprivileged user namespaces, or a container's seccomp profile).
    cause: Option<String>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ModeReport {
    /// `full`, `partial`, `unavailable` or `unconfined`.
    verdict: &'static str,
    guarantees: BTreeMap<String, GuaranteeReport>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Probe {
    kernel: Kernel,
    tested_landlock_abi: u32,
    /// Each mode with its default flags (network denied, no unix sockets).
    modes: BTreeMap<&'static str, ModeReport>,
    /// The paths no confined command of this user may read by default (those that
    /// exist), `--hide` paths aside.
    hidden: Vec<String>,
}

/// The default hidden set of this user, as the confined modes resolve it.
fn default_hidden() -> Vec<String> {
    let request = stockade_policy::PolicyRequest::new(Mode::ReadOnly);
    // From `/`, a workspace no hidden path can contain.
    request
        .resolve(
            std::path::Path::new("/"),
            None,
            &crate::control::placement::invoker(false),
        )
        .map(|p| {
            p.hidden()
                .iter()
                .map(|h| h.to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

fn verdict_name(v: &ModeVerdict) -> &'static str {
    match v {
        ModeVerdict::Unconfined => "unconfined",
        ModeVerdict::Confined(Enforcement::Full) => "full",
        ModeVerdict::Confined(Enforcement::Partial) => "partial",
        ModeVerdict::Unavailable { .. } => "unavailable",
    }
}

fn gather() -> Probe {
    let stage = crate::stage::available(true, false);
    let notify = match stage.is_err() {
        true => seccomp_notify(),
        false => Notify::default(),
    };
    let facts = KernelFacts {
        landlock_abi: landlock_abi(),
        seccomp: seccomp_filters(),
        namespaces: stage.is_ok(),
        supervisor: notify.listener,
        supervisor_writes: notify.listener && notify.hands_descriptors,
    };
    let release = nix::sys::utsname::uname()
        .map(|u| u.release().to_string_lossy().into_owned())
        .unwrap_or_default();
    let modes = Mode::ALL
        .into_iter()
        .map(|mode| {
            let asks = Asks::defaults(mode);
            let report = if mode.is_confined() {
                guarantees::report(&asks, &facts)
            } else {
                BTreeMap::new()
            };
            (
                mode.as_str(),
                ModeReport {
                    verdict: verdict_name(&guarantees::verdict(&asks, &facts)),
                    guarantees: report,
                },
            )
        })
        .collect();
    Probe {
        kernel: Kernel {
            release,
            architecture: std::env::consts::ARCH,
            landlock_abi: facts.landlock_abi,
            seccomp: facts.seccomp,
            namespaces: Namespaces {
                available: stage.is_ok(),
                cause: stage.err(),
            },
            seccomp_notify: facts.supervisor,
            seccomp_notify_addfd: facts.supervisor_writes,
            user_namespaces: user_namespaces(),
            legacy_tiocsti: read_sysctl("/proc/sys/dev/tty/legacy_tiocsti").map(|v| v != 0),
        },
        tested_landlock_abi: TESTED_LANDLOCK_ABI,
        modes,
        hidden: default_hidden(),
    }
}

fn yes_no(b: bool) -> &'static str {
    if b { "yes" } else { "no" }
}

fn table(p: &Probe) -> String {
    let mut o = String::new();
    let k = &p.kernel;
    let _ = writeln!(o, "kernel           {} ({})", k.release, k.architecture);
    let _ = writeln!(
        o,
        "landlock ABI     {} (stockade tested up to {})",
        k.landlock_abi, p.tested_landlock_abi
    );
    let _ = writeln!(o, "seccomp filters  {}", yes_no(k.seccomp));
    let _ = writeln!(
        o,
        "namespaces       {}",
        match &k.namespaces.cause {
            None => "yes (the namespace stage runs)".to_string(),
            Some(cause) => format!(
                "no: {cause} (the stage's guarantees are unavailable; see README, Namespace stage)"
            ),
        }
    );
    if k.namespaces.cause.is_some() {
        let _ = writeln!(
            o,
            "seccomp notify   {}",
            match (k.seccomp_notify, k.seccomp_notify_addfd) {
                (true, true) => {
                    "yes (the runner's supervisor holds metadata and protected paths without the stage)"
                }
                (true, false) => {
                    "yes (the runner's supervisor holds metadata without the stage; protected paths need Linux 5.14)"
                }
                (false, _) => "no",
            }
        );
    }
    let _ = writeln!(
        o,
        "user namespaces  {} (sysctls; root with CAP_SYS_ADMIN needs none)",
        yes_no(k.user_namespaces)
    );
    let tiocsti = match k.legacy_tiocsti {
        Some(true) => "on (stockade filters TIOCSTI)",
        Some(false) => "off",
        None => "no switch: always on (stockade filters TIOCSTI)",
    };
    let _ = writeln!(o, "legacy TIOCSTI   {tiocsti}");
    let _ = writeln!(o);
    let confined = [Mode::ReadOnly, Mode::WorkspaceWrite];
    let _ = write!(o, "{:<18} {:<16}", "guarantee", "needs");
    for m in confined {
        let _ = write!(o, " {:<16}", m.as_str());
    }
    let _ = writeln!(o);
    for g in Guarantee::ALL {
        let first = &p.modes[confined[0].as_str()].guarantees[g.name()];
        let _ = write!(o, "{:<18} {:<16}", g.name(), first.needs);
        for m in confined {
            let r = &p.modes[m.as_str()].guarantees[g.name()];
            // A mode that needs another feature for it (metadata) names it.
            let cell = if r.needs == first.needs {
                r.status.as_str().to_string()
            } else {
                format!("{} ({})", r.status.as_str(), r.needs)
            };
            let _ = write!(o, " {cell:<16}");
        }
        let _ = writeln!(o);
    }
    let _ = write!(o, "{:<18} {:<16}", "enforcement", "");
    for m in confined {
        let _ = write!(o, " {:<16}", p.modes[m.as_str()].verdict);
    }
    let _ = writeln!(o);
    let _ = writeln!(
        o,
        "(defaults: network denied, no unix sockets; danger-full-access is unconfined)"
    );
    let _ = writeln!(o);
    let _ = writeln!(
        o,
        "hidden paths (unreadable in the confined modes; --hide adds, --no-default-hide drops all but stockade's own):"
    );
    for h in &p.hidden {
        let _ = writeln!(o, "  {h}");
    }
    o
}

/// `stockade probe [--json]`.
pub fn probe_command(json: bool) -> Result<i32, LauncherError> {
    let p = gather();
    let text = if json {
        serde_json::to_string(&p).map_err(LauncherError::Json)? + "\n"
    } else {
        table(&p)
    };
    crate::supervise::stdout::write(&text)?;
    Ok(0)
}

#[cfg(test)]
mod tests {
    #[test]
    fn this_machine_has_landlock_and_seccomp() {
        // Development and CI machines run Landlock ABI 7.
        assert!(super::landlock_abi() >= 1);
        assert!(super::seccomp_filters());
    }
}
