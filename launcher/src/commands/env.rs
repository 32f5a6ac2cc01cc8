//! The target's environment, built once, explicitly, by the launcher, from the caller's
//! environment and the `--env`/`--keep-env`/`--clear-env` flags. The runner passes
//! exactly this environment to `execve`; the rule itself lives in
//! `stockade_policy::environment`.

use super::cli::EnvArgs;
use std::ffi::OsString;
use stockade_policy::environment::{self, BuiltEnv, EnvRequest};

/// The environment a command receives under `args`, and what was removed.
pub fn target_env(args: &EnvArgs) -> BuiltEnv {
    let request = EnvRequest {
        clear: args.clear_env,
        keep: args.keep_env.clone(),
        set: args.env.clone(),
    };
    environment::build(std::env::vars_os().collect(), &request)
}

/// Parses one `--env NAME=VALUE`.
pub fn parse_assignment(text: &str) -> Result<(OsString, OsString), String> {
    match text.split_once('=') {
        Some((name, value)) if !name.is_empty() => Ok((name.into(), value.into())),
        _ => Err(format!("{text:?} is not NAME=VALUE")),
    }
}

/// Checks one `--keep-env NAME`: a name that no variable can have (empty, or holding `=`,
/// which ends a name in the environment) would keep nothing, silently.
pub fn parse_keep_name(name: OsString) -> Result<OsString, String> {
    use std::os::unix::ffi::OsStrExt;
    if name.is_empty() || name.as_bytes().contains(&b'=') {
        return Err(format!(
            "{name:?} is not a variable name (a name is not empty and holds no '=')"
        ));
    }
    Ok(name)
}
