//! Whether the runner starts a new session before it confines itself.
//!
//! A command whose controlling terminal is the caller's can steer that terminal; in a new
//! session it is no longer its controlling one (the command can still read and write
//! it). Whoever spawns the runner knows whether that is wanted and possible, and the
//! request says what was decided: the runner does not guess it from the process group it
//! finds itself in.

use serde::{Deserialize, Serialize};

/// What the runner does about its session (the request's `session`).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum RunnerSession {
    /// Left to the spawn: a new session when stdin, stdout or stderr is a terminal and
    /// the runner does not already lead a process group (a spawner that made it a leader
    /// did so on purpose, and a leader cannot start a session). `stockade confine` says
    /// this: the executor spawns the runner, and only it knows its standard descriptors
    /// and process group.
    #[default]
    WhenTerminal,
    /// A new session: `stockade run` started the runner in the launcher's process group
    /// for this, because stdin, stdout or stderr is a terminal.
    New,
    /// The session it was started in: `stockade run` gave the runner a process group of
    /// its own (none of stdin, stdout and stderr is a terminal).
    Keep,
}
