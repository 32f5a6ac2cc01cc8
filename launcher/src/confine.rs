//! `stockade confine`: resolve the policy, judge the kernel, write the launch request,
//! and describe the result as ConfinedArgv. [`confine`] is also the first step of
//! `stockade run`.

use crate::cli::ConfineArgs;
use crate::env;
use crate::error::LauncherError;
use crate::locate;
use crate::probe;
use crate::request_file::PrivateDir;
use crate::stdout;
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::Path;
use stockade_policy::confined::StatusChannel;
use stockade_policy::confined::{CONTRACT_VERSION, ConfinedArgv};
use stockade_policy::confined::{denial_signatures, runner_failure_rules};
use stockade_policy::grants;
use stockade_policy::guarantees::{self, Asks, Guarantee, KernelFacts, Verdict};
use stockade_policy::stage::{self, PidMode};
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

/// The channel actually offered. Below Landlock ABI 3 truncation is not confined, so a
/// command could empty the status file by path and pass a failed exit off as a runner
/// that never started: the file is then not trustworthy, and the channel is in-band.
fn status_channel(placed: StatusChannel, asks: &Asks, facts: &KernelFacts) -> StatusChannel {
    if Guarantee::Truncate.needs(asks).available(facts) {
        placed
    } else {
        StatusChannel::InBand
    }
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
                contract: CONTRACT_VERSION,
                argv,
                enforcement: None,
                denial_signatures: denial_signatures(mode, false),
                runner_failure_rules: runner_failure_rules(mode),
                mode,
                guarantees: BTreeMap::new(),
                status_path: None,
                status_channel: None,
            },
            private_dir: None,
        });
    }

    let cwd = std::env::current_dir().map_err(LauncherError::CurrentDir)?;
    let tmpdir = stockade_policy::environment::lookup(&env, "TMPDIR").map(Path::new);
    let resolved = policy.resolve(&cwd, tmpdir)?;
    let asks = Asks::of(&resolved);
    let facts = probe::kernel_facts(&asks);
    let enforcement = match guarantees::verdict(&asks, &facts) {
        Verdict::Confined(e) => e,
        Verdict::Unavailable { missing } => {
            return Err(LauncherError::Unavailable { mode, missing });
        }
        Verdict::Unconfined => unreachable!("confined modes always get a confined verdict"),
    };
    let runner = locate::runner()?;
    let runner = utf8(runner.as_os_str(), "the runner path")?;

    let dir = PrivateDir::create(&grants::writable_roots(&resolved))?;
    let status_path = dir.status_path();
    let request = LaunchRequest {
        argv: command.to_vec(),
        cwd,
        env,
        policy: resolved,
        promised: facts,
        status_path: Some(status_path.clone()),
    };
    let write = || -> Result<(String, String), LauncherError> {
        request.validate().map_err(LauncherError::Invalid)?;
        let request_path = dir.write_request(&request)?;
        Ok((
            utf8(request_path.as_os_str(), "the request path")?,
            utf8(status_path.as_os_str(), "the status path")?,
        ))
    };
    let (request_path, status_path) = match write() {
        Ok(p) => p,
        Err(e) => {
            dir.remove();
            return Err(e);
        }
    };
    let runner_argv = vec![runner, "--request".to_string(), request_path];
    let staged = asks.wants_stage() && facts.namespaces;
    let argv = if staged {
        // The stage runs first where it has work and the machine allows it; the control
        // directory stays writable in it, for the runner's status record.
        let control = Path::new(&status_path).parent();
        let writable = grants::writable_roots(&request.policy);
        let pids = request.policy.pids != PidMode::Share;
        let plan = stage::plan(&request.policy, &writable, control, pids);
        let launcher = std::env::current_exe()
            .and_then(|p| p.canonicalize())
            .map_err(LauncherError::LauncherPath)?;
        let launcher = utf8(launcher.as_os_str(), "the launcher path")?;
        crate::stage::argv(&plan, &launcher, &runner_argv)
    } else {
        runner_argv
    };
    Ok(Confinement {
        confined: ConfinedArgv {
            contract: CONTRACT_VERSION,
            argv,
            enforcement: Some(enforcement),
            denial_signatures: denial_signatures(mode, staged),
            runner_failure_rules: runner_failure_rules(mode),
            mode,
            guarantees: guarantees::report(&asks, &facts),
            status_path: Some(status_path),
            status_channel: Some(status_channel(dir.channel(), &asks, &facts)),
        },
        private_dir: Some(dir),
    })
}

/// `stockade confine`: prints the ConfinedArgv as one JSON line.
pub fn run(args: &ConfineArgs) -> Result<i32, LauncherError> {
    let confinement = confine(
        &args.policy.to_request(),
        &args.command.command,
        env::target_env(&args.env).vars,
    )?;
    // Serialising a plain struct of strings cannot fail.
    let json = serde_json::to_string(&confinement.confined).unwrap_or_default();
    if let Err(e) = stdout::write(&format!("{json}\n")) {
        // Nobody will ever spawn a request we could not hand over.
        if let Some(dir) = confinement.private_dir {
            dir.remove();
        }
        return Err(e);
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_channel_is_in_band_where_truncation_is_not_confined() {
        let abi = |n| KernelFacts {
            landlock_abi: n,
            seccomp: true,
            namespaces: true,
        };
        let asks = Asks::defaults(stockade_policy::Mode::WorkspaceWrite);
        for n in [1, 2] {
            assert_eq!(
                status_channel(StatusChannel::OutOfBand, &asks, &abi(n)),
                StatusChannel::InBand
            );
        }
        for n in [3, 5, 7] {
            assert_eq!(
                status_channel(StatusChannel::OutOfBand, &asks, &abi(n)),
                StatusChannel::OutOfBand
            );
            assert_eq!(
                status_channel(StatusChannel::InBand, &asks, &abi(n)),
                StatusChannel::InBand
            );
        }
    }
}
