//! `stockade-runner --explain FILE`: shows what a request would do, for debugging by
//! hand. The file is neither consumed nor run.

use crate::error::RunnerError;
use crate::request_file;
use std::fmt::Write as _;
use std::path::Path;
use stockade_policy::grants::{self, Access};
use stockade_policy::guarantees::{self, Asks, Verdict};
use stockade_policy::request::FORMAT_VERSION;
use stockade_policy::{LaunchRequest, Network};

pub fn explain(path: &Path) -> Result<String, RunnerError> {
    let (file, meta) = request_file::open(path)?;
    // An untrusted file is still shown, with the reason the runner would refuse it.
    let trust = match request_file::check_trust(path, &meta) {
        Err(e @ RunnerError::RequestNotRegular { .. }) => return Err(e),
        trust => trust,
    };
    let bytes = request_file::read_capped(path, file, meta.len())?;
    let request = LaunchRequest::decode(&bytes).map_err(RunnerError::Decode)?;

    let mut out = String::new();
    let w = &mut out;
    let _ = writeln!(
        w,
        "request:     {} (format version {FORMAT_VERSION}, {} bytes)",
        path.display(),
        bytes.len()
    );
    match (&trust, request.validate()) {
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
    let _ = writeln!(w, "mode:        {}", request.policy.mode);
    let asks = Asks::of(&request.policy);
    match guarantees::verdict(&asks, &request.promised) {
        Verdict::Confined(e) => {
            let _ = writeln!(
                w,
                "enforcement: {} (as reported to the executor)",
                e.as_str()
            );
        }
        Verdict::Unavailable { .. } | Verdict::Unconfined => {
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
    let _ = writeln!(w, "grants:");
    for g in grants::grants(&request.policy) {
        let access = match g.access {
            Access::ReadExecute => "read+execute beneath",
            Access::ReadWriteFile => "read+write file    ",
            Access::Full => "full access beneath ",
        };
        let _ = writeln!(
            w,
            "  {access} {}  ({})",
            g.path.display(),
            g.reason.describe()
        );
    }
    let _ = writeln!(w, "everything else: denied");
    let p = &request.policy;
    let network = match (p.network, p.allow_tcp_connect.is_empty()) {
        (Network::Allow, _) => "allowed".to_string(),
        (Network::Deny, true) => "denied (no socket but AF_UNIX)".to_string(),
        (Network::Deny, false) => {
            let ports: Vec<String> = p.allow_tcp_connect.iter().map(u16::to_string).collect();
            format!("denied, except outgoing TCP to port {}", ports.join(", "))
        }
    };
    let _ = writeln!(w, "network:     {network}");
    let _ = writeln!(
        w,
        "unix:        {}",
        if p.allow_unix_sockets {
            "sockets allowed"
        } else {
            "sockets denied (socketpair allowed)"
        }
    );
    let kept: Vec<String> = p.keep_fds.iter().map(i32::to_string).collect();
    let _ = writeln!(
        w,
        "fds:         0, 1, 2{}{}; every other descriptor is closed on exec",
        if kept.is_empty() { "" } else { ", " },
        kept.join(", ")
    );
    let reported: Vec<&str> = guarantees::enforced(&asks, &request.promised)
        .into_iter()
        .map(|g| g.name())
        .collect();
    let _ = writeln!(w, "guarantees reported enforced: {}", reported.join(", "));
    Ok(out)
}
