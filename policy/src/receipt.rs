//! Receipts: a closed, machine-checkable record of one run.
//!
//! `stockade confine` reports what it bound ([`BindingReport`], the ConfinedArgv's
//! `binding`); `stockade run --json` adds a [`Receipt`] to its result; `stockade classify`
//! returns the fields it can know for an argv an executor spawned. Field by field, what
//! each proves and what it does not, is written down in `docs/provider-contract.md`.
//!
//! A receipt proves what ran and how it ended. It does not prove that the command did
//! what the user wanted, nor anything about programs the bound executable starts in turn
//! (`bash -c` binds `bash`, not what the script runs).

use crate::binding::{Binding, CwdBinding, ExecBinding, Timestamp};
use crate::digest;
use crate::mode::Mode;
use crate::policy::Policy;
use serde::{Deserialize, Serialize};
use std::ffi::{OsStr, OsString};
use std::path::PathBuf;

/// The SHA-256 (hex) of the resolved policy: of its encoding in the launch request.
/// Two runs under the same policy, resolved against the same directories, have the same
/// digest.
pub fn policy_digest(policy: &Policy) -> String {
    let bytes = bincode::serde::encode_to_vec(policy, crate::request::config())
        .unwrap_or_else(|e| e.to_string().into_bytes());
    digest::sha256_hex(&bytes)
}

/// What `danger-full-access` would have put in a launch request, had it one: argv,
/// working directory, environment and binding. Its digest stands in for the request
/// digest there (nothing is written: the command runs without the runner).
#[derive(Serialize)]
struct UnconfinedRequest {
    #[serde(with = "crate::raw")]
    argv: Vec<OsString>,
    #[serde(with = "crate::raw")]
    cwd: PathBuf,
    #[serde(with = "crate::raw")]
    env: Vec<(OsString, OsString)>,
    binding: Binding,
}

/// The request digest of a `danger-full-access` command (see [`UnconfinedRequest`]):
/// the SHA-256 of the bincode encoding (the launch request's configuration) of argv,
/// working directory, environment and binding, in that order.
pub fn unconfined_request_digest(
    argv: &[OsString],
    cwd: &std::path::Path,
    env: &[(OsString, OsString)],
    binding: &Binding,
) -> String {
    let request = UnconfinedRequest {
        argv: argv.to_vec(),
        cwd: cwd.to_path_buf(),
        env: env.to_vec(),
        binding: binding.clone(),
    };
    let bytes = bincode::serde::encode_to_vec(&request, crate::request::config())
        .unwrap_or_else(|e| e.to_string().into_bytes());
    digest::sha256_hex(&bytes)
}

/// The executable as bound, in JSON.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "kebab-case")]
pub enum ExecutableReport {
    /// `argv[0]` resolved to this file.
    Found {
        program: String,
        path: String,
        device: u64,
        inode: u64,
        size: u64,
        modified: Timestamp,
        changed: Timestamp,
        /// With `--bind-executable-hash`; `null` without.
        sha256: Option<String>,
    },
    /// Nothing by that name: the command fails with 127.
    NotFound { program: String },
    /// Only files that cannot be executed: the command fails with 126.
    NotExecutable { program: String },
}

impl ExecutableReport {
    pub fn new(program: &OsStr, bound: &ExecBinding) -> ExecutableReport {
        let program = program.to_string_lossy().into_owned();
        match bound {
            ExecBinding::Found(e) => ExecutableReport::Found {
                program,
                path: e.path.to_string_lossy().into_owned(),
                device: e.id.dev,
                inode: e.id.ino,
                size: e.id.size,
                modified: e.id.modified,
                changed: e.id.changed,
                sha256: e.sha256.as_ref().map(digest::hex),
            },
            ExecBinding::NotFound => ExecutableReport::NotFound { program },
            ExecBinding::NotExecutable => ExecutableReport::NotExecutable { program },
        }
    }
}

/// The working directory as bound, in JSON.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "kebab-case")]
pub enum CwdReport {
    Bound {
        path: String,
        device: u64,
        inode: u64,
        /// Birth time, where the filesystem records one.
        born: Option<Timestamp>,
    },
    /// Chosen by the executor when it spawns (`--inherit-cwd`): not bound.
    Inherited,
}

impl CwdReport {
    pub fn new(bound: &CwdBinding) -> CwdReport {
        match bound {
            CwdBinding::Bound { path, id } => CwdReport::Bound {
                path: path.to_string_lossy().into_owned(),
                device: id.dev,
                inode: id.ino,
                born: id.birth.map(|(sec, nsec)| Timestamp { sec, nsec }),
            },
            CwdBinding::Inherited => CwdReport::Inherited,
        }
    }
}

/// What `confine` bound: the ConfinedArgv's `binding`, and the first fields of a receipt.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BindingReport {
    /// SHA-256 of the launch request (the runner's `--sha256`); for `danger-full-access`,
    /// of argv, cwd, environment and binding ([`unconfined_request_digest`]).
    pub request_digest: String,
    /// SHA-256 of the resolved policy ([`policy_digest`]); `null` for
    /// `danger-full-access`, which resolves and enforces none.
    pub policy_digest: Option<String>,
    pub executable: ExecutableReport,
    pub cwd: CwdReport,
}

impl BindingReport {
    pub fn new(
        request_digest: String,
        policy_digest: Option<String>,
        program: &OsStr,
        binding: &Binding,
    ) -> BindingReport {
        BindingReport {
            request_digest,
            policy_digest,
            executable: ExecutableReport::new(program, &binding.executable),
            cwd: CwdReport::new(&binding.cwd),
        }
    }
}

/// One output stream as it passed through `stockade run`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StreamDigest {
    /// SHA-256 of every byte read from the stream, not only the kept tail.
    pub sha256: String,
    pub bytes: u64,
    /// Whether the stream was read to its end. `false`: a process outside the range (or
    /// kept running) still held it open when the run was reported, and the digest covers
    /// what came before.
    pub complete: bool,
}

/// Why the range could not be proven empty.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum UnknownCleanup {
    /// Processes were left running on purpose (`--keep-background`).
    Kept,
    /// A process of the range could not be ended: the kernel refused the signal, or it
    /// outlived every kill round.
    CouldNotEnd,
    /// The range's cgroup could not be read when it was last looked at.
    Unreadable,
    /// stockade did not supervise the process (`classify`: the executor did).
    NotSupervised,
}

impl UnknownCleanup {
    pub fn as_str(self) -> &'static str {
        match self {
            UnknownCleanup::Kept => "kept",
            UnknownCleanup::CouldNotEnd => "could-not-end",
            UnknownCleanup::Unreadable => "unreadable",
            UnknownCleanup::NotSupervised => "not-supervised",
        }
    }

    /// Whether this unknown changes `stockade run`'s exit code (to
    /// [`crate::exit::RUNNER_FAILURE`]). Everything but [`UnknownCleanup::Kept`]: processes
    /// kept with `--keep-background` are what the caller asked for, and the marker says
    /// they run.
    pub fn changes_exit_code(self) -> bool {
        !matches!(self, UnknownCleanup::Kept)
    }
}

/// How the range was seen empty.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CleanupProof {
    /// The cgroup reported `populated 0`.
    Cgroup,
    /// The launcher, a child subreaper, had no child left (`ECHILD`): every descendant
    /// re-parents to it, so none was left.
    Subreaper,
}

/// Whether every process of the range is known to be gone.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "kebab-case")]
pub enum Cleanup {
    Proven {
        by: CleanupProof,
    },
    Unknown {
        reason: UnknownCleanup,
        /// What was found (processes, the error), for a person.
        detail: String,
    },
}

impl Cleanup {
    /// The marker `stockade run` prints for an unknown cleanup (after the command's
    /// output, before the exit), `None` when proven.
    pub fn marker(&self) -> Option<String> {
        match self {
            Cleanup::Proven { .. } => None,
            Cleanup::Unknown { reason, detail } => Some(format!(
                "[sandbox: cleanup unknown ({}): {}]",
                reason.as_str(),
                crate::exit::one_line(detail)
            )),
        }
    }

    /// Whether `stockade run`'s exit code says so (see [`UnknownCleanup::changes_exit_code`]).
    pub fn changes_exit_code(&self) -> bool {
        matches!(self, Cleanup::Unknown { reason, .. } if reason.changes_exit_code())
    }
}

/// Why the binding cannot be said to have held although the runner checked it.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum UnverifiableBinding {
    /// The target is a `#!` script (or a file only `/bin/sh` runs): after `execve` its
    /// interpreter opens it again by path, so what it reads is whatever the path leads
    /// to then, not the file that was checked.
    ByName,
}

/// The receipt's `bindingUnverifiable`: why `bindingVerified` is `null` for a run whose
/// binding was checked.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BindingUnverifiable {
    pub status: UnverifiableBinding,
    /// What was found, for a person.
    pub detail: String,
}

impl BindingUnverifiable {
    /// A target its interpreter opens by name (see [`UnverifiableBinding::ByName`]).
    pub fn by_name() -> BindingUnverifiable {
        BindingUnverifiable {
            status: UnverifiableBinding::ByName,
            detail: "the executable is a script: it was checked, but its interpreter opens it again by name after execve, and a file swapped in at that path in between is not caught".into(),
        }
    }
}

/// The receipt of one run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Receipt {
    /// [`crate::confined::CONTRACT_VERSION`].
    pub contract: u32,
    pub mode: Mode,
    pub request_digest: Option<String>,
    pub policy_digest: Option<String>,
    pub executable: Option<ExecutableReport>,
    pub cwd: Option<CwdReport>,
    /// Whether the binding was checked just before the command started, and held: `true`
    /// when the runner recorded `confined` (it checks before it records) or, in
    /// `danger-full-access` under `stockade run`, the launcher checked; `false` when the
    /// runner failed, so the command never started (a change of the binding among the
    /// reasons); `null` when there is no evidence either way, or when the target was
    /// checked but is a script its interpreter opens again by name
    /// (`bindingUnverifiable` says so): what the interpreter read is not proven to be
    /// the file checked.
    pub binding_verified: Option<bool>,
    /// Why `bindingVerified` is `null` for a run whose binding was checked (`by-name`);
    /// `null` otherwise.
    #[serde(default)]
    pub binding_unverifiable: Option<BindingUnverifiable>,
    /// `null` where stockade did not see the stream (`classify`).
    pub stdout: Option<StreamDigest>,
    pub stderr: Option<StreamDigest>,
    pub exit_code: Option<i32>,
    pub signal: Option<String>,
    /// `null` where stockade did not supervise (`classify`).
    pub timed_out: Option<bool>,
    pub cleanup: Cleanup,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::binding::{ExecId, Executable};
    use crate::roots::FileId;

    #[test]
    fn json_shapes_are_tagged_and_camel_case() {
        let binding = Binding {
            executable: ExecBinding::Found(Executable {
                path: "/usr/bin/bash".into(),
                id: ExecId {
                    dev: 1,
                    ino: 2,
                    size: 3,
                    modified: Timestamp { sec: 4, nsec: 5 },
                    changed: Timestamp { sec: 6, nsec: 7 },
                },
                sha256: None,
            }),
            cwd: CwdBinding::Bound {
                path: "/ws".into(),
                id: FileId {
                    dev: 1,
                    ino: 9,
                    birth: Some((10, 11)),
                },
            },
        };
        let report = BindingReport::new("ab".into(), None, OsStr::new("bash"), &binding);
        let v = serde_json::to_value(&report).unwrap();
        assert_eq!(v["requestDigest"], "ab");
        assert!(v["policyDigest"].is_null());
        assert_eq!(v["executable"]["state"], "found");
        assert_eq!(v["executable"]["program"], "bash");
        assert_eq!(v["executable"]["inode"], 2);
        assert_eq!(v["executable"]["changed"]["nsec"], 7);
        assert!(v["executable"]["sha256"].is_null());
        assert_eq!(v["cwd"]["state"], "bound");
        assert_eq!(v["cwd"]["born"]["sec"], 10);
        let back: BindingReport = serde_json::from_value(v).unwrap();
        assert_eq!(back, report);
        let v = serde_json::to_value(CwdReport::new(&CwdBinding::Inherited)).unwrap();
        assert_eq!(v, serde_json::json!({"state": "inherited"}));
        let v = serde_json::to_value(ExecutableReport::new(
            OsStr::new("nope"),
            &ExecBinding::NotFound,
        ))
        .unwrap();
        assert_eq!(
            v,
            serde_json::json!({"state": "not-found", "program": "nope"})
        );
        let unknown = Cleanup::Unknown {
            reason: UnknownCleanup::CouldNotEnd,
            detail: "pid 5 (sleep)\nrefused".into(),
        };
        let v = serde_json::to_value(&unknown).unwrap();
        assert_eq!(v["state"], "unknown");
        assert_eq!(v["reason"], "could-not-end");
        assert_eq!(
            unknown.marker().unwrap(),
            "[sandbox: cleanup unknown (could-not-end): pid 5 (sleep)\\nrefused]"
        );
        assert!(unknown.changes_exit_code());
        let kept = Cleanup::Unknown {
            reason: UnknownCleanup::Kept,
            detail: String::new(),
        };
        assert!(!kept.changes_exit_code() && kept.marker().is_some());
        let proven = Cleanup::Proven {
            by: CleanupProof::Cgroup,
        };
        assert_eq!(
            serde_json::to_value(&proven).unwrap(),
            serde_json::json!({"state": "proven", "by": "cgroup"})
        );
        assert_eq!(proven.marker(), None);
    }

    #[test]
    fn digests_change_with_what_they_cover() {
        let binding = Binding {
            executable: ExecBinding::NotFound,
            cwd: CwdBinding::Inherited,
        };
        let argv = vec![OsString::from("x")];
        let env = vec![(OsString::from("A"), OsString::from("1"))];
        let a = unconfined_request_digest(&argv, "/w".as_ref(), &env, &binding);
        assert_eq!(a.len(), 64);
        assert_eq!(
            a,
            unconfined_request_digest(&argv, "/w".as_ref(), &env, &binding)
        );
        assert_ne!(
            a,
            unconfined_request_digest(&argv, "/v".as_ref(), &env, &binding)
        );
        assert_ne!(
            a,
            unconfined_request_digest(&argv, "/w".as_ref(), &[], &binding)
        );
    }
}
