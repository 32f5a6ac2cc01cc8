//! `stockade-runner --explain FILE`: shows what a request would do, for debugging by
//! hand. The file is neither consumed nor run.

use crate::carve::Tree;
use crate::error::RunnerError;
use crate::request_file;
use crate::ruleset;
use std::fmt::Write as _;
use std::path::Path;
use stockade_policy::binding::{CwdBinding, ExecBinding};
use stockade_policy::grants::{self, Access, Opened};
use stockade_policy::guarantees::{self, Asks, ModeVerdict};
use stockade_policy::request::FORMAT_VERSION;
use stockade_policy::stage::{self, PidMode};
use stockade_policy::stage_report::{self, DirMeta};
use stockade_policy::{LaunchRequest, Network};

pub fn explain(path: &Path) -> Result<String, RunnerError> {
    let (file, meta) = request_file::open(path)?;
    // An untrusted file is still shown, with the reason the runner would refuse it.
    let trust = match request_file::check_trust(path, &meta) {
        // Not a file to read at all (a FIFO, a device): refused before a read.
        Err(e @ RunnerError::RequestNotRegular { .. }) => return Err(e),
        trust => trust,
    };
    let bytes = request_file::read_capped(path, file, meta.len())?;
    let request = request_file::decode(path, &bytes)?;

    let mut out = String::new();
    let w = &mut out;
    let asks = Asks::of(&request.policy);
    explain_verdict(w, path, bytes.len(), &trust, &request, &asks);
    explain_command(w, &request);
    explain_binding(w, &request);
    explain_env(w, &request);
    explain_hidden(w, &request, &asks);
    explain_grants(w, &request);
    let _ = writeln!(w, "everything else: denied");
    let p = &request.policy;
    let network = network(&request);
    let _ = writeln!(w, "network:     {network}");
    let _ = writeln!(
        w,
        "unix:        {}",
        if p.allow_unix_sockets() {
            "sockets allowed"
        } else {
            "sockets denied (socketpair allowed)"
        }
    );
    let kept: Vec<String> = p.keep_fds().iter().map(i32::to_string).collect();
    let _ = writeln!(
        w,
        "fds:         0, 1, 2{}{}; every other descriptor is closed on exec",
        if kept.is_empty() { "" } else { ", " },
        kept.join(", ")
    );
    let enforced = guarantees::enforced(&asks, &request.promised);
    let metadata_held = enforced.contains(&guarantees::Guarantee::Metadata);
    let _ = match guarantees::kept_capabilities_note(p.kept_capabilities(), metadata_held) {
        None => writeln!(
            w,
            "capabilities: none: every set is cleared, even for a command started as root"
        ),
        Some(note) => writeln!(w, "capabilities: {note}"),
    };
    explain_stage(w, &request, &asks);
    let reported: Vec<&str> = enforced.into_iter().map(|g| g.name()).collect();
    let _ = writeln!(w, "guarantees reported enforced: {}", reported.join(", "));
    Ok(out)
}

/// The request file, whether the runner would accept it, the mode and how completely it
/// would be enforced on the kernel facts promised.
fn explain_verdict(
    w: &mut String,
    path: &Path,
    len: usize,
    trust: &Result<(), RunnerError>,
    request: &LaunchRequest,
    asks: &Asks,
) {
    let _ = writeln!(
        w,
        "request:     {} (format version {FORMAT_VERSION}, {} bytes)",
        path.display(),
        len
    );
    match (trust, request.validate()) {
        (Ok(()), Ok(())) => {
            let _ = writeln!(w, "verdict:     the runner would accept this request");
        }
        (Err(e), _) => {
            let _ = writeln!(w, "verdict:     the runner would refuse this file: {e}");
        }
        (_, Err(e)) => {
            let _ = writeln!(w, "verdict:     the runner would refuse this request: {e}");
        }
    }
    let _ = writeln!(w, "mode:        {}", request.policy.mode());
    match guarantees::verdict(asks, &request.promised) {
        ModeVerdict::Confined(e) => {
            let _ = writeln!(
                w,
                "enforcement: {} (as reported to the executor)",
                e.as_str()
            );
        }
        ModeVerdict::Unavailable { .. } | ModeVerdict::Unconfined => {
            let _ = writeln!(
                w,
                "enforcement: none (the runner would refuse this request)"
            );
        }
    }
    let _ = writeln!(
        w,
        "promised:    Landlock ABI {}, seccomp {} (the kernel facts the report rests on)",
        request.promised.landlock_abi,
        if request.promised.seccomp {
            "on"
        } else {
            "off"
        }
    );
}

/// Where and what the command runs: its working directory, status file and argv.
fn explain_command(w: &mut String, request: &LaunchRequest) {
    if request.inherit.cwd {
        // Shown where --explain runs, which is where one would spawn the runner by hand.
        let here = std::env::current_dir()
            .map(|d| {
                let writable = grants::writable_roots(&request.policy)
                    .iter()
                    .any(|root| d.starts_with(root));
                format!(
                    "here {}: {}",
                    d.display(),
                    if writable {
                        "beneath a writable root"
                    } else {
                        "outside every writable root (the command can read there, not write)"
                    }
                )
            })
            .unwrap_or_else(|e| format!("here it cannot be named ({e}): the runner would refuse"));
        let _ = writeln!(
            w,
            "cwd:         inherited from the process that spawns the runner ({here})"
        );
    } else {
        let _ = writeln!(w, "cwd:         {}", request.cwd.display());
    }
    let _ = match &request.status_path {
        Some(p) => writeln!(w, "status:      {}", p.display()),
        None => writeln!(w, "status:      none (no status channel)"),
    };
    let _ = writeln!(w, "argv:");
    for (i, a) in request.argv.iter().enumerate() {
        let _ = writeln!(w, "  [{i}] {a:?}");
    }
}

/// What argv[0] and the working directory are bound to.
fn explain_binding(w: &mut String, request: &LaunchRequest) {
    let bound = match &request.binding.executable {
        ExecBinding::Found(e) => format!(
            "{} ({}{})",
            e.path.display(),
            e.id,
            match &e.sha256 {
                Some(d) => format!(", SHA-256 {}", stockade_policy::digest::hex(d)),
                None => String::new(),
            }
        ),
        ExecBinding::NotFound => "nothing: not found (the command fails with 127)".into(),
        ExecBinding::NotExecutable => {
            "no file that can be executed (the command fails with 126)".into()
        }
    };
    let _ = writeln!(
        w,
        "bound:       argv[0] resolves to {bound}; anything else is refused"
    );
    if let CwdBinding::Bound { path, id } = &request.binding.cwd {
        let _ = writeln!(
            w,
            "bound:       cwd {} is device {} inode {}; another directory there is refused",
            path.display(),
            id.dev,
            id.ino
        );
    }
}

/// The command's environment: inherited at spawn time, or carried in the request.
fn explain_env(w: &mut String, request: &LaunchRequest) {
    if let Some(inherit) = &request.inherit.env {
        let keep: Vec<_> = inherit.keep.iter().map(|k| k.to_string_lossy()).collect();
        let _ = writeln!(
            w,
            "env:         inherited from the process that spawns the runner, {}{}{}; then {} entries set:",
            inherit.filter.as_str(),
            if inherit.clear {
                ", cleared to the basics"
            } else {
                ""
            },
            if keep.is_empty() {
                String::new()
            } else {
                format!(", keeping {}", keep.join(", "))
            },
            inherit.set.len()
        );
        for (k, v) in &inherit.set {
            let _ = writeln!(w, "  {}={:?}", k.to_string_lossy(), v);
        }
    } else {
        let _ = writeln!(w, "env ({} entries):", request.env.len());
    }
    for (k, v) in &request.env {
        let _ = writeln!(w, "  {}={:?}", k.to_string_lossy(), v);
    }
}

/// The hidden paths and how each is hidden.
fn explain_hidden(w: &mut String, request: &LaunchRequest, asks: &Asks) {
    let _ = writeln!(w, "hidden (never readable):");
    if request.policy.hidden().is_empty() && !request.policy.hides_devices() {
        let _ = writeln!(w, "  none");
    }
    if request.policy.hides_devices() {
        let _ = writeln!(
            w,
            "  {}/* but {}  (by Landlock carve-out: only the standard devices may be read)",
            stockade_policy::devices::DEVICE_TREE,
            stockade_policy::devices::STANDARD.join(", ")
        );
    }
    // A command keeping a read capability gets the carve-out everywhere (mask.rs).
    let staged = request.policy.stage()
        && asks.wants_stage()
        && request.promised.namespaces
        && !crate::mask::reads_past_modes(&request.policy);
    let control = request.status_path.as_deref().and_then(Path::parent);
    let runner = std::env::current_exe().ok();
    let keep: Vec<&Path> = control
        .into_iter()
        .chain(Some(request.cwd.as_path()))
        .chain(runner.as_deref())
        .collect();
    for h in request.policy.hidden() {
        let how = if !staged {
            "Landlock carve-out"
        } else if stage::maskable(h, &keep) {
            "the stage's empty read-only mount, checked by the runner at start (the Landlock carve-out where it finds none)"
        } else {
            "Landlock carve-out (it holds the control directory, working directory or runner)"
        };
        let _ = writeln!(w, "  {}  (by {how})", h.display());
    }
    for why in request.policy.hidden_not_followed() {
        let _ = writeln!(w, "  not hidden: {why}");
    }
}

/// The Landlock grants, the refused `$TMPDIR`, and aliases beneath full-access roots.
fn explain_grants(w: &mut String, request: &LaunchRequest) {
    let _ = writeln!(w, "grants:");
    let carved = ruleset::carved_grants(&request.policy, &mut Tree::default(), &[]);
    let mut beside = 0;
    for g in &carved {
        // The entries beside the hidden paths are many (a home directory's): counted.
        if matches!(g.opened, Opened::Beside { .. }) {
            beside += 1;
            continue;
        }
        let access = match g.access {
            Access::ReadExecute => "read+execute beneath",
            Access::ReadWriteFile => "read+write file    ",
            Access::Full => "full access beneath ",
            Access::ListOnly => "list dirs beneath   ",
            Access::FullExceptRead => "all but read beneath",
        };
        let identity = match g.identity {
            Some(id) => format!(", only while it is device {} inode {}", id.dev, id.ino),
            None => String::new(),
        };
        let _ = writeln!(
            w,
            "  {access} {}  ({}{identity})",
            g.path.display(),
            g.reason.describe()
        );
    }
    if let Some(why) = request.policy.tmpdir_refused() {
        let _ = writeln!(w, "  not granted: {why}");
    }
    for g in grants::grants(&request.policy) {
        if g.access == Access::Full {
            if let Some(warning) = aliases_beneath(&g.path) {
                let _ = writeln!(w, "  warning: {warning}");
            }
        }
    }
    if beside > 0 {
        let _ = writeln!(
            w,
            "  + {beside} entries beside the hidden paths keep the grant above them (links get none)"
        );
    }
}

/// The network line: allowed, by name through the proxy, or denied with what is left.
fn network(request: &LaunchRequest) -> String {
    let p = &request.policy;
    match (p.network(), p.allow_tcp_connect().is_empty(), p.domains()) {
        (Network::Allow, _, _) => "allowed".to_string(),
        (Network::Deny, _, Some(d)) => {
            let rules = d.rules();
            let list = |r: &[stockade_policy::domains::HostRule]| {
                r.iter()
                    .map(|r| r.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            let mut text = format!(
                "by name through the proxy on 127.0.0.1:{} ({}): allowed {}",
                d.proxy_port(),
                if request.promised.namespaces {
                    "the network namespace has only loopback"
                } else {
                    "only the proxy's port may be connected to, on any host"
                },
                list(&rules.allow)
            );
            if !rules.deny.is_empty() {
                text.push_str(&format!("; denied {}", list(&rules.deny)));
            }
            for pin in &rules.pins {
                text.push_str(&format!("; {} resolves to {}", pin.name, pin.addr));
            }
            text
        }
        (Network::Deny, true, None) if !p.allow_dns() && request.promised.namespaces => {
            "denied: a network namespace of the command's own, with nothing but its loopback (TCP and UDP servers and clients on 127.0.0.1 work there)".to_string()
        }
        (Network::Deny, true, None) if !p.allow_dns() => {
            "denied (no socket but AF_UNIX: without the stage, no loopback either)".to_string()
        }
        (Network::Deny, _, None) => {
            let ports: Vec<String> = p
                .landlock_connect_ports(false)
                .unwrap_or_default()
                .iter()
                .map(u16::to_string)
                .collect();
            let mut text = format!("denied, except outgoing TCP to port {}", ports.join(", "));
            if p.allow_dns() {
                text.push_str(" (53: name resolution over TCP, RES_OPTIONS=use-vc)");
            }
            text
        }
    }
}

/// The namespace stage's part: whether it runs before this runner, and what it mounts
/// and watches (the plan `confine` gave it, computed again from the same policy).
fn explain_stage(w: &mut String, request: &LaunchRequest, asks: &Asks) {
    let policy = &request.policy;
    let why_not = if !policy.stage() {
        Some("none (--no-stage)".to_string())
    } else if !asks.wants_stage() {
        Some("none (this policy asks nothing of it)".to_string())
    } else if !request.promised.namespaces {
        Some(
            "none: namespaces were unavailable when confined, so its guarantees are reported unavailable"
                .to_string(),
        )
    } else {
        None
    };
    if let Some(why) = why_not {
        let _ = writeln!(w, "stage:       {why}");
        return;
    }
    let writable = grants::writable_roots(policy);
    let control = request.status_path.as_deref().and_then(Path::parent);
    let pids = policy.pids() != PidMode::Share;
    let plan = stage::plan(policy, &writable, control, pids);
    // SAFETY: getuid cannot fail.
    let uid = unsafe { libc::getuid() };
    let _ = writeln!(
        w,
        "stage:       the namespace stage runs before this runner"
    );
    let _ = writeln!(
        w,
        "  namespaces:          mount, IPC{}; {}",
        if plan.pids {
            ", pid with its own /proc (no other process in sight)"
        } else {
            " (the machine's processes stay in sight: --share-pids)"
        },
        if uid == 0 {
            "no user namespace (run as root)"
        } else {
            "user (this uid and gid mapped to themselves)"
        }
    );
    let _ = writeln!(
        w,
        "  read-only:           everything not listed below (mode, owner and time changes there fail: Read-only file system)"
    );
    for p in &plan.rw {
        let _ = writeln!(w, "  read-write again:    {}", p.display());
    }
    for p in &plan.pin {
        let _ = writeln!(
            w,
            "  pinned:              {} (a mount point: cannot be renamed or removed)",
            p.display()
        );
    }
    for p in &plan.ro {
        let _ = writeln!(w, "  read-only again:     {} (protected)", p.display());
    }
    let _ = writeln!(
        w,
        "  /tmp:                {}",
        if plan.private_tmp {
            "private: a fresh tmpfs, empty, gone with the command"
        } else {
            "shared: the machine's"
        }
    );
    if plan.private_shm {
        let _ = writeln!(
            w,
            "  /dev/shm:            private: a fresh tmpfs, empty, gone with the command"
        );
    }
    if std::path::Path::new(stockade_policy::stage::MQUEUE)
        .symlink_metadata()
        .is_ok_and(|m| m.is_dir())
    {
        let _ = writeln!(
            w,
            "  /dev/mqueue:         private: its IPC namespace's POSIX message queues, none of the host's"
        );
    }
    if plan.private_pts {
        let _ = writeln!(
            w,
            "  /dev/pts:            private: a devpts instance of its own (its ptmx on /dev/ptmx): terminals it makes, none of the host's"
        );
    }
    let shared = stage_report::shared_roots(policy, uid, &|root| {
        use std::os::unix::fs::MetadataExt;
        let m = root.symlink_metadata().ok().filter(|m| m.is_dir())?;
        Some(DirMeta::new(m.mode(), m.uid(), m.gid()))
    });
    for (p, meta) in &shared {
        let _ = writeln!(
            w,
            "  watched:             {} ({meta} now: a shared directory this user owns; looked at every 20 ms: its mode and owner are put back when changed, and the change is reported)",
            p.display()
        );
    }
    let missing = stage::unprotected_names(policy, &|p| p.symlink_metadata().is_ok());
    for p in &missing {
        let _ = writeln!(
            w,
            "  reported if created: {} (missing now: nothing to bind read-only)",
            p.display()
        );
    }
}

/// The most entries [`aliases_beneath`] looks at under one root.
const ALIAS_SCAN_LIMIT: usize = 100_000;

/// What Landlock will follow out of `root` because it was there before the command
/// runs: files with other hard links (the other names may lie anywhere, `~/.bashrc`
/// included) and mount points. A warning, not a refusal: both can be legitimate.
fn aliases_beneath(root: &Path) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let dev = std::fs::symlink_metadata(root).ok()?.dev();
    let (mut linked, mut mounts, mut seen) = (Vec::new(), Vec::new(), 0usize);
    let mut todo = vec![root.to_path_buf()];
    while let Some(dir) = todo.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            seen += 1;
            if seen > ALIAS_SCAN_LIMIT {
                todo.clear();
                break;
            }
            let Ok(meta) = entry.path().symlink_metadata() else {
                continue;
            };
            if meta.dev() != dev {
                mounts.push(entry.path());
            } else if meta.is_dir() {
                todo.push(entry.path());
            } else if meta.is_file() && meta.nlink() > 1 {
                linked.push(entry.path());
            }
        }
    }
    if linked.is_empty() && mounts.is_empty() {
        return None;
    }
    let show = |v: &[std::path::PathBuf]| {
        let mut names: Vec<String> = v.iter().take(3).map(|p| p.display().to_string()).collect();
        if v.len() > 3 {
            names.push(format!("... ({} in all)", v.len()));
        }
        names.join(", ")
    };
    let mut out = format!(
        "beneath {} Landlock follows what was there before the command runs:",
        root.display()
    );
    if !linked.is_empty() {
        out.push_str(&format!(
            " files with other hard links, writable under every name: {} (find {} -type f -links +1);",
            show(&linked),
            root.display()
        ));
    }
    if !mounts.is_empty() {
        out.push_str(&format!(" mount points: {};", show(&mounts)));
    }
    Some(out)
}
