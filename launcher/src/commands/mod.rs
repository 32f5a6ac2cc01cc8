//! The `stockade` commands: each command's entry point (`confine`, `run`, `classify`,
//! `probe`, `explain`, `serve`) and the resolution of its arguments (`cli` and the value parsers
//! `env`, `duration`, `size`), and the line a usage error prints (`usage`). These run
//! in the launcher process the caller started.

pub(crate) mod audit_reader;
pub(crate) mod classify;
pub(crate) mod cli;
pub(crate) mod confine;
pub(crate) mod duration;
pub(crate) mod env;
pub(crate) mod evidence;
pub(crate) mod explain;
pub(crate) mod explain_path;
pub(crate) mod outcome;
pub(crate) mod probe;
pub(crate) mod protected_changes;
pub(crate) mod run;
pub(crate) mod serve;
pub(crate) mod size;
pub(crate) mod usage;
