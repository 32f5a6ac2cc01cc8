//! `stockade confine`: resolve the policy, judge the kernel, write the launch request,
//! and describe the result as ConfinedArgv.

use crate::env;
use crate::error::LauncherError;
use crate::locate;
use crate::probe;
use crate::request_file::PrivateDir;
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::Path;
use stockade_policy::confined::ConfinedArgv;
use stockade_policy::confined::{denial_signatures, runner_failure_rules};
use stockade_policy::guarantees::{self, Asks, Verdict};
use stockade_policy::{LaunchRequest, PolicyRequest};

/// A confined (or, for danger-full-access, raw) command ready to spawn.
#[derive(Debug)]
pub struct Confinement {
    pub confined: ConfinedArgv,
    /// The private directory holding the request; `None` when there is no request.
    pub private_dir: Option<PrivateDir>,
}

fn utf8(s: &std::ffi::OsStr, what: &'static str) -> Result<String, LauncherError> {
    s.to_str()
        .map(str::to_string)
        .ok_or(LauncherError::NotUtf8 { what })
}

/// Prepares `command` to run under `policy` with environment `env`.
pub fn confine(
    policy: &PolicyRequest,
    command: &[OsString],
    env: Vec<(OsString, OsString)>,
) -> Result<Confinement, LauncherError> {
    let mode = policy.mode;
    if !mode.is_confined() {
        // Nothing to enforce, so nothing to write: the executor runs the raw argv.
        let argv = command
            .iter()
            .map(|a| utf8(a, "the command"))
            .collect::<Result<_, _>>()?;
        return Ok(Confinement {
            confined: ConfinedArgv {
                argv,
                enforcement: None,
                denial_signatures: denial_signatures(mode),
                runner_failure_rules: runner_failure_rules(mode),
                mode,
                guarantees: BTreeMap::new(),
            },
            private_dir: None,
        });
    }

    let cwd = std::env::current_dir().map_err(LauncherError::CurrentDir)?;
    let tmpdir = env::get(&env, "TMPDIR").map(Path::new);
    let resolved = policy.resolve(&cwd, tmpdir)?;
    let asks = Asks::of(&resolved);
    let facts = probe::kernel_facts();
    let enforcement = match guarantees::verdict(&asks, &facts) {
        Verdict::Confined(e) => e,
        Verdict::Unavailable { missing } => {
            return Err(LauncherError::Unavailable { mode, missing });
        }
        Verdict::Unconfined => unreachable!("confined modes always get a confined verdict"),
    };
    let runner = locate::runner()?;
    let runner = utf8(runner.as_os_str(), "the runner path")?;

    let request = LaunchRequest {
        argv: command.to_vec(),
        cwd,
        env,
        policy: resolved,
        enforcement,
        guarantees: guarantees::enforced(&asks, &facts),
    };
    request.validate().map_err(LauncherError::Invalid)?;
    let dir = PrivateDir::create()?;
    let written = dir
        .write_request(&request)
        .and_then(|p| utf8(p.as_os_str(), "the request path"));
    let request_path = match written {
        Ok(p) => p,
        Err(e) => {
            dir.remove();
            return Err(e);
        }
    };
    Ok(Confinement {
        confined: ConfinedArgv {
            argv: vec![runner, "--request".to_string(), request_path],
            enforcement: Some(enforcement),
            denial_signatures: denial_signatures(mode),
            runner_failure_rules: runner_failure_rules(mode),
            mode,
            guarantees: guarantees::report(&asks, &facts),
        },
        private_dir: Some(dir),
    })
}
