//! `stockade-runner --explain FILE`: shows what a request would do, for debugging by
//! hand. The file is neither consumed nor run.

use crate::carve::Tree;
use crate::error::RunnerError;
use crate::request_file;
use crate::ruleset;
use std::fmt::Write as _;
use std::path::Path;
use stockade_policy::grants::{Access, Opened};
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
    let _ = writeln!(
        w,
        "enforcement: {} (as reported to the executor)",
        request.enforcement.as_str()
    );
    let _ = writeln!(w, "cwd:         {}", request.cwd.display());
    let _ = match &request.status_path {
        Some(p) => writeln!(w, "status:      {}", p.display()),
        None => writeln!(w, "status:      none (no status channel)"),
    };
    let _ = writeln!(w, "argv:");
    for (i, a) in request.argv.iter().enumerate() {
        let _ = writeln!(w, "  [{i}] {a:?}");
    }
    let _ = writeln!(w, "env ({} entries):", request.env.len());
    for (k, v) in &request.env {
        let _ = writeln!(w, "  {}={:?}", k.to_string_lossy(), v);
    }
    let _ = writeln!(w, "hidden (never readable):");
    if request.policy.hidden.is_empty() {
        let _ = writeln!(w, "  none");
    }
    for h in &request.policy.hidden {
        let _ = writeln!(w, "  {}", h.display());
    }
    let _ = writeln!(w, "grants:");
    let carved = ruleset::carved_grants(&request.policy, &mut Tree::default());
    let mut beside = 0;
    for g in &carved {
        // The entries beside the hidden paths are many (a home directory's): counted.
        if g.opened == Opened::Beside {
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
        let _ = writeln!(
            w,
            "  {access} {}  ({})",
            g.path.display(),
            g.reason.describe()
        );
    }
    if beside > 0 {
        let _ = writeln!(
            w,
            "  + {beside} entries beside the hidden paths keep the grant above them (links get none)"
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
    let reported: Vec<&str> = request.guarantees.iter().map(|g| g.name()).collect();
    let _ = writeln!(w, "guarantees reported enforced: {}", reported.join(", "));
    Ok(out)
}
