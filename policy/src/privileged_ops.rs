//! Refusals of operations only a capability allows (raising a priority, a new namespace,
//! `chroot`, the kernel log, tracing), named from the command's error line, which names
//! no path: `nice: cannot set niceness: Permission denied`.
//!
//! The runner takes every capability (but what `--keep-capability` keeps, none of these)
//! and the filter refuses namespaces and tracing besides, so such a line under stockade
//! is its refusal exactly when the invoking user holds the capability outside: root's
//! `nice -n -5` is stockade's refusal; an ordinary user's is Unix's (the same `EACCES`
//! with or without stockade), which is no denial. The capability is asked of the
//! launcher's own effective set ([`crate::attribution::UnixCheck::holds`]).
//!
//! Left out on purpose, where the capability is not the whole of Unix's answer: raising a
//! hard limit (past `fs.nr_open` root is refused too), real-time scheduling (a cgroup's
//! real-time budget can refuse root).
//!
//! Tracing is the one of them Unix allows without a capability: any user may trace its
//! own child (`strace CMD`, gdb's `run`) unless Yama's `ptrace_scope` is 2 or more, so a
//! line saying the trace was of one is stockade's refusal for an ordinary user too.
//!
//! A line saying set-uid programs cannot gain privileges (sudo's `"no new privileges"
//! flag is set`) is stockade's whoever runs it: the runner sets that flag.

use crate::attribution::{Scope, UnixCheck};
use crate::denial_record::{DenialRecord, Kind, Source};

/// An operation a capability decides, as error lines name it.
struct Privileged {
    /// Words of the line (lower case) that name the operation.
    phrases: &'static [&'static str],
    /// The capability's number (linux/capability.h) and name.
    capability: u32,
    name: &'static str,
    /// The operation in words, for the rule.
    what: &'static str,
}

const OPERATIONS: [Privileged; 5] = [
    Privileged {
        phrases: &[
            "cannot set niceness",
            "failed to set priority",
            "setpriority",
        ],
        capability: 23,
        name: "CAP_SYS_NICE",
        what: "raising a priority",
    },
    Privileged {
        phrases: &[
            "unshare failed",
            "unshare(",
            "cannot create new namespace",
            "creating new namespace",
        ],
        capability: 21,
        name: "CAP_SYS_ADMIN",
        what: "a new namespace",
    },
    Privileged {
        phrases: &["cannot change root directory", "chroot("],
        capability: 18,
        name: "CAP_SYS_CHROOT",
        what: "changing the root directory",
    },
    Privileged {
        phrases: &["read kernel buffer failed", "klogctl"],
        capability: 34,
        name: "CAP_SYSLOG",
        what: "reading the kernel log",
    },
    Privileged {
        phrases: &["ptrace(", "ptrace_", "ptrace:"],
        capability: 19,
        name: "CAP_SYS_PTRACE",
        what: "tracing a process",
    },
];

/// The words of the refusals these operations get: `EACCES` or `EPERM`.
const REFUSALS: [&str; 2] = ["permission denied", "operation not permitted"];

/// Words that say the refused trace was of the command's own child (`strace CMD`, gdb's
/// `run`), which Unix lets any user make unless Yama says otherwise
/// ([`UnixCheck::may_trace_children`]).
const OWN_CHILD: [&str; 2] = ["ptrace_traceme", "could not trace the inferior"];

/// The capability tracing needs of whoever traces another's process.
const SYS_PTRACE: u32 = 19;

/// The words of sudo's refusal under `no_new_privs`.
const NO_NEW_PRIVILEGES: &str = "\"no new privileges\" flag is set";

/// How `line` is judged when it is about such an operation: `Some(Some(record))` when
/// the refusal was stockade's, `Some(None)` when Unix would have refused it anyway (no
/// record, and no other reading of the line), `None` when the line is about none.
/// `before`: the lines just before, for what a trace was of.
pub fn judge(
    scope: &Scope,
    before: &[&str],
    line: &str,
    unix: &dyn UnixCheck,
) -> Option<Option<DenialRecord>> {
    let lower = line.to_lowercase();
    if lower.contains(NO_NEW_PRIVILEGES) {
        return Some(Some(record(
            scope,
            line,
            "set-uid and set-gid programs gain no privileges (no_new_privs)".into(),
        )));
    }
    if !REFUSALS.iter().any(|w| lower.contains(w)) {
        return None;
    }
    let op = OPERATIONS
        .iter()
        .find(|op| op.phrases.iter().any(|p| lower.contains(p)))?;
    let own_child = || {
        std::iter::once(line)
            .chain(before.iter().copied())
            .any(|l| OWN_CHILD.iter().any(|w| l.to_lowercase().contains(w)))
    };
    let unix_allows = unix.holds(op.capability)
        || (op.capability == SYS_PTRACE && own_child() && unix.may_trace_children());
    if !unix_allows {
        return Some(None);
    }
    Some(Some(record(
        scope,
        line,
        format!(
            "{} needs {}, which no confined command holds",
            op.what, op.name
        ),
    )))
}

fn record(scope: &Scope, line: &str, rule: String) -> DenialRecord {
    DenialRecord {
        kind: Kind::Process,
        path: None,
        host: None,
        port: None,
        rule: format!("{} mode: {rule}", scope.mode),
        grant: None,
        alternative: None,
        line: Some(line.trim().to_string()),
        evidence: Source::PolicyCheck,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attribution::from_stderr;
    use crate::mode::Mode;
    use std::path::Path;

    /// The invoking user: root holds every capability, an ordinary user none.
    struct Invoker {
        root: bool,
    }
    /// An ordinary user Yama lets trace its own children.
    struct Tracer;
    impl UnixCheck for Tracer {
        fn allows(&self, _: &Path, _: crate::attribution::Access) -> bool {
            true
        }
        fn may_trace_children(&self) -> bool {
            true
        }
    }
    impl UnixCheck for Invoker {
        fn allows(&self, _: &Path, _: crate::attribution::Access) -> bool {
            true
        }
        fn holds(&self, _: u32) -> bool {
            self.root
        }
    }

    fn scope() -> Scope {
        let policy = crate::policy::Policy::for_tests(Mode::WorkspaceWrite, "/ws");
        Scope::of(&policy, Path::new("/ws"), true, false)
    }

    #[test]
    fn an_operation_a_capability_decides_is_a_refusal_only_for_who_holds_it() {
        let root = Invoker { root: true };
        let user = Invoker { root: false };
        for line in [
            "nice: cannot set niceness: Permission denied",
            "unshare: unshare failed: Operation not permitted",
            "chroot: cannot change root directory to '/': Operation not permitted",
            "dmesg: read kernel buffer failed: Operation not permitted",
            "ptrace: Operation not permitted.",
        ] {
            let r = judge(&scope(), &[], line, &root).unwrap().unwrap();
            assert_eq!(
                (r.kind, r.grant.as_deref()),
                (Kind::Process, None),
                "{line}"
            );
            assert_eq!(r.line.as_deref(), Some(line));
            // An ordinary user is refused by Unix: no record, and no other reading (the
            // `Permission denied` of nice would else be an unattributed refusal).
            assert_eq!(judge(&scope(), &[], line, &user), Some(None), "{line}");
            assert!(from_stderr(&scope(), line, &user).is_empty(), "{line}");
        }
        // Not about one of them, or not refused: not judged here.
        assert_eq!(
            judge(
                &scope(),
                &[],
                "bash: ulimit: cannot modify limit: Operation not permitted",
                &root
            ),
            None
        );
        assert_eq!(
            judge(&scope(), &[], "unshare failed: Invalid argument", &root),
            None
        );
        // sudo under no_new_privs: stockade's whoever runs it.
        let sudo = "sudo: The \"no new privileges\" flag is set, which prevents sudo from running as root.";
        assert!(judge(&scope(), &[], sudo, &user).unwrap().is_some());
    }

    #[test]
    fn tracing_its_own_child_is_refused_by_stockade_for_an_ordinary_user_too() {
        let strace = "strace: test_ptrace_get_syscall_info: PTRACE_TRACEME: Operation not permitted\nstrace: PTRACE_SETOPTIONS: Operation not permitted\n";
        let gdb = "warning: Could not trace the inferior process.\nwarning: ptrace: Operation not permitted\n";
        for stderr in [strace, gdb] {
            let v = from_stderr(&scope(), stderr, &Tracer);
            assert_eq!(v.len(), 1, "{stderr}");
            assert!(v[0].rule.contains("CAP_SYS_PTRACE"));
            // Where Yama forbids it (or for another's process), Unix refuses it anyway.
            assert!(from_stderr(&scope(), stderr, &Invoker { root: false }).is_empty());
        }
        let attach = "strace: attach: ptrace(PTRACE_SEIZE, 1): Operation not permitted";
        assert!(from_stderr(&scope(), attach, &Tracer).is_empty());
    }

    #[test]
    fn strace_s_lines_about_one_refused_ptrace_are_one_record() {
        let root = Invoker { root: true };
        let stderr = "strace: test_ptrace_get_syscall_info: PTRACE_TRACEME: Operation not permitted\nstrace: PTRACE_SETOPTIONS: Operation not permitted\n";
        assert_eq!(from_stderr(&scope(), stderr, &root).len(), 1);
    }
}
