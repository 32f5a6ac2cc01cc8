//! The journal: what an executor asks after it crashed and restarted, "did request K
//! run?", answered from records stockade wrote where no confined command can write.
//!
//! # Records
//!
//! The executor names each request with a key of its choosing (`--journal KEY`,
//! [`check_key`]), saved on its side before it asks stockade to run anything. In the
//! journal directory of the control base (`BASE/journal`, hidden from every confined
//! command like the rest of the base):
//!
//! - `KEY`: written by `confine` (or `run`) before anything can start: who asked, the
//!   request's private directory, the command and the mode ([`Requested`]). A key is used
//!   once: a second request under it is refused.
//! - the request's private directory, as the runner leaves it: the request file is
//!   consumed (unlinked) by the runner before anything else, and the status file gets
//!   `confined` just before `execve` or `failed` when the runner refuses.
//! - `KEY.started`: written by `run` just before it starts an unconfined command (no
//!   runner there to leave a status record).
//! - `KEY.finished`: written by `run` once the command settled, before it removes the
//!   private directory and exits: the exit facts and the receipt. For a ConfinedArgv
//!   (which carries the key), written by `stockade classify` before it consumes the
//!   private directory: its verdict, with the receipt, on the exit facts the executor
//!   passed; only when the record under the key names that very private directory. The
//!   first result written stays: none is ever replaced.
//!
//! Each record is written whole to a new file, `fsync`ed, then renamed into place (the
//! directory `fsync`ed after): a crash leaves either the complete record or none.
//!
//! # Answers ([`judge`])
//!
//! - `finished`: the `KEY.finished` record, with the receipt (`run`'s result, or the
//!   verdict `classify` gave the executor).
//! - `not-started`: provably nothing ran: the request file is still there unconsumed (and
//!   `stockade outcome` withdraws it then, so no runner can take it afterwards and the
//!   answer stays true), it was withdrawn earlier, or the runner recorded that it refused
//!   before starting the command; for an unconfined `run`, no `KEY.started`.
//! - `unknown`: anything else (for a ConfinedArgv: spawned, and `classify` not called or
//!   not yet). The command may have run and had effects; stockade does
//!   not guess (a consumed request with no status record, a command that started with no
//!   result, a private directory already gone, an unreadable record).

use serde::{Deserialize, Serialize};

/// The journal's directory inside the control base.
pub const JOURNAL_DIR: &str = "journal";
/// The longest key.
pub const MAX_KEY_LEN: usize = 64;
/// The largest journal record written or read.
pub const MAX_RECORD_BYTES: usize = 256 * 1024;
/// The suffix of the record `run` writes before starting an unconfined command.
pub const STARTED_SUFFIX: &str = ".started";
/// The suffix of the record `run` writes once the command settled.
pub const FINISHED_SUFFIX: &str = ".finished";
/// The name an unconsumed request file is renamed to when `outcome` withdraws it.
pub const WITHDRAWN_FILE: &str = "withdrawn";
/// The record format version.
pub const VERSION: u32 = 1;

/// Refuses a key that is not 1 to [`MAX_KEY_LEN`] ASCII letters, digits, `-` and `_`:
/// it becomes a file name, so nothing else (no `/`, no `.`, no `..`) is taken.
pub fn check_key(key: &str) -> Result<(), String> {
    if key.is_empty() || key.len() > MAX_KEY_LEN {
        return Err(format!(
            "journal key {key:?}: it must be 1 to {MAX_KEY_LEN} characters long"
        ));
    }
    match key
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || *c == '-' || *c == '_'))
    {
        Some(c) => Err(format!(
            "journal key {key:?}: {c:?} is not allowed (ASCII letters, digits, - and _ only)"
        )),
        None => Ok(()),
    }
}

/// Who wrote the request record.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Requester {
    /// `stockade run`: stockade starts the command and records its result.
    Run,
    /// `stockade confine`: an executor spawns the ConfinedArgv and learns the result
    /// itself.
    Confine,
}

/// The record `confine` and `run` write under the key before anything can start.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Requested {
    pub version: u32,
    pub key: String,
    pub by: Requester,
    /// Seconds since the epoch.
    pub created: u64,
    /// The mode's name.
    pub mode: String,
    /// The command, lossily as text (for a person reading the answer).
    pub argv: Vec<String>,
    pub cwd: String,
    /// The name of the request's private directory inside the control base; `None`
    /// when nothing is confined (no request, no runner).
    pub request_dir: Option<String>,
}

/// What the request's private directory shows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DirFacts {
    /// The directory is gone (removed once classified, or swept).
    Gone,
    /// The request file is still there: no runner consumed it.
    Unconsumed,
    /// `outcome` withdrew the request before any runner took it.
    Withdrawn,
    /// The request was consumed; the status file says this.
    Consumed(StatusFacts),
}

/// The status record, as far as the journal cares.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StatusFacts {
    /// Empty: the runner wrote nothing (yet).
    Empty,
    /// `confined`: the command was about to be executed.
    Confined,
    /// `failed KIND`: the runner refused before starting the command.
    Failed(String),
    /// Missing, unreadable or corrupt.
    Unreadable(String),
}

/// Everything [`judge`] needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Facts {
    pub requested: Requested,
    /// `KEY.finished` is there.
    pub finished: bool,
    /// `KEY.started` is there.
    pub started: bool,
    /// The private directory; `None` when nothing is confined.
    pub dir: Option<DirFacts>,
}

/// The answer's state.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum State {
    NotStarted,
    Finished,
    Unknown,
}

impl State {
    pub fn as_str(self) -> &'static str {
        match self {
            State::NotStarted => "not-started",
            State::Finished => "finished",
            State::Unknown => "unknown",
        }
    }
}

/// The state and why, in words.
pub fn judge(facts: &Facts) -> (State, String) {
    use State::*;
    if facts.finished {
        let by = match facts.requested.by {
            Requester::Run => "stockade run recorded the result",
            Requester::Confine => {
                "stockade classify recorded the verdict on the executor's exit facts"
            }
        };
        return (Finished, by.into());
    }
    let by_run = facts.requested.by == Requester::Run;
    let Some(dir) = &facts.dir else {
        return match (by_run, facts.started) {
            (true, false) => (
                NotStarted,
                "stockade run never reached the start of the (unconfined) command".into(),
            ),
            (true, true) => (
                Unknown,
                "the unconfined command was started and no result was recorded".into(),
            ),
            (false, _) => (
                Unknown,
                "nothing is confined: the executor starts the command itself, which stockade cannot see".into(),
            ),
        };
    };
    match dir {
        DirFacts::Unconsumed => (
            NotStarted,
            "the request was never consumed by a runner (it is now withdrawn: no runner can take it)".into(),
        ),
        DirFacts::Withdrawn => (
            NotStarted,
            "the request was withdrawn before any runner consumed it".into(),
        ),
        DirFacts::Consumed(StatusFacts::Failed(kind)) => (
            NotStarted,
            format!("the runner refused before starting the command ({kind})"),
        ),
        DirFacts::Consumed(StatusFacts::Confined) => (
            Unknown,
            "the command was started and no result was recorded".into(),
        ),
        DirFacts::Consumed(StatusFacts::Empty) => (
            Unknown,
            "a runner consumed the request and left no status record (it may have died before the command, or still be starting it)".into(),
        ),
        DirFacts::Consumed(StatusFacts::Unreadable(why)) => {
            (Unknown, format!("the status record cannot be read: {why}"))
        }
        DirFacts::Gone => (
            Unknown,
            "the request's private directory is gone (classified or swept) and no result was recorded".into(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(by: Requester, dir: Option<DirFacts>) -> Facts {
        Facts {
            requested: Requested {
                version: VERSION,
                key: "k".into(),
                by,
                created: 0,
                mode: "workspace-write".into(),
                argv: vec!["true".into()],
                cwd: "/".into(),
                request_dir: None,
            },
            finished: false,
            started: false,
            dir,
        }
    }

    #[test]
    fn keys_are_plain_names() {
        for ok in ["a", "build-42", "A_b-9", &"x".repeat(MAX_KEY_LEN)] {
            assert_eq!(check_key(ok), Ok(()), "{ok}");
        }
        for bad in [
            "",
            ".",
            "..",
            "a/b",
            "a.finished",
            "é",
            " a",
            &"x".repeat(65),
        ] {
            assert!(check_key(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn only_what_proves_nothing_ran_is_not_started() {
        use DirFacts::*;
        use StatusFacts::*;
        let state = |by, dir| judge(&facts(by, dir)).0;
        let run = Requester::Run;
        assert_eq!(state(run, Some(Unconsumed)), State::NotStarted);
        assert_eq!(state(run, Some(Withdrawn)), State::NotStarted);
        assert_eq!(
            state(run, Some(Consumed(Failed("binding-changed".into())))),
            State::NotStarted
        );
        for dir in [
            Consumed(Confined),
            Consumed(Empty),
            Consumed(Unreadable("x".into())),
            Gone,
        ] {
            assert_eq!(state(run, Some(dir.clone())), State::Unknown, "{dir:?}");
            assert_eq!(state(Requester::Confine, Some(dir.clone())), State::Unknown);
        }
        // Unconfined: only `run` knows whether it started the command.
        assert_eq!(state(run, None), State::NotStarted);
        let mut started = facts(run, None);
        started.started = true;
        assert_eq!(judge(&started).0, State::Unknown);
        assert_eq!(state(Requester::Confine, None), State::Unknown);
        // A recorded result wins over everything else.
        let mut done = facts(run, Some(Consumed(Confined)));
        done.finished = true;
        assert_eq!(judge(&done).0, State::Finished);
    }
}
