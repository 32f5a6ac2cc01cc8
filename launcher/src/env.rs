//! The target's environment, built once, explicitly, by the launcher. The runner passes
//! exactly this environment to `execve`.

use std::ffi::OsString;

/// The environment a confined command receives: currently the caller's own.
pub fn target_env() -> Vec<(OsString, OsString)> {
    std::env::vars_os().collect()
}

/// The value of `name` in `env`.
pub fn get<'a>(env: &'a [(OsString, OsString)], name: &str) -> Option<&'a OsString> {
    env.iter().rev().find(|(k, _)| k == name).map(|(_, v)| v)
}
