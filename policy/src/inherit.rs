//! What the runner takes from the process that *spawns* it rather than from the request.
//!
//! An executor that separates "wrap this argv" from "spawn it" (the harness's subprocess
//! layer) decides the working directory and the environment only when it spawns. The
//! request can therefore say that the runner should use its own working directory and
//! its own environment, as inherited at spawn time. The *policy* never comes from there:
//! grants, network and everything else stay exactly as the request says.
//!
//! An inherited environment still goes through the environment rule
//! ([`crate::environment::build`]) unless the request says [`EnvFilter::Unfiltered`]:
//! the spawner's environment is the caller's environment, and the rule exists for it.

use crate::environment::{self, EnvRequest};
use serde::{Deserialize, Serialize};
use std::ffi::OsString;

/// Which parts of the spawn-time context the runner uses instead of the request's.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Inherit {
    /// Start the target in the runner's own working directory (the spawner's), not in
    /// the request's `cwd`. The runner still checks it can be named (see the runner).
    pub cwd: bool,
    /// Build the target's environment from the runner's own (the spawner's); `None`:
    /// the request's `env` is the complete environment.
    pub env: Option<InheritEnv>,
}

/// Whether the environment rule applies to an inherited environment.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum EnvFilter {
    /// The rule applies: secret-looking names are removed unless kept by name.
    Rule,
    /// Passed through unchanged (the caller filtered it already, deliberately).
    Unfiltered,
}

impl EnvFilter {
    pub fn as_str(self) -> &'static str {
        match self {
            EnvFilter::Rule => "filtered",
            EnvFilter::Unfiltered => "unfiltered",
        }
    }
}

/// How to build the target's environment from the one the runner was spawned with.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct InheritEnv {
    pub filter: EnvFilter,
    /// With [`EnvFilter::Rule`]: start from nothing but the basics (`--clear-env`).
    pub clear: bool,
    /// With [`EnvFilter::Rule`]: names passed through although the rule removes them.
    #[serde(with = "crate::raw")]
    pub keep: Vec<OsString>,
    /// Entries set last, over whatever was inherited (`--env` at confine time).
    #[serde(with = "crate::raw")]
    pub set: Vec<(OsString, OsString)>,
}

impl InheritEnv {
    /// The target's environment, from the spawn-time environment `spawned`.
    pub fn build(&self, spawned: Vec<(OsString, OsString)>) -> Vec<(OsString, OsString)> {
        self.build_reporting(spawned).vars
    }

    /// [`InheritEnv::build`], with the names the rule withheld (the runner records them,
    /// so the executor can tell the agent which of the variables it passed never
    /// arrived).
    pub fn build_reporting(&self, spawned: Vec<(OsString, OsString)>) -> environment::BuiltEnv {
        match self.filter {
            EnvFilter::Rule => {
                let request = EnvRequest {
                    clear: self.clear,
                    keep: self.keep.clone(),
                    set: self.set.clone(),
                };
                environment::build(spawned, &request)
            }
            EnvFilter::Unfiltered => {
                let mut vars = spawned;
                for (name, value) in &self.set {
                    vars.retain(|(n, _)| n != name);
                    vars.push((name.clone(), value.clone()));
                }
                environment::BuiltEnv {
                    vars,
                    removed: Vec::new(),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Vec<(OsString, OsString)> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).into(), (*v).into()))
            .collect()
    }

    #[test]
    fn the_rule_applies_to_an_inherited_environment_unless_unfiltered() {
        let spawned = env(&[("PATH", "/bin"), ("GITHUB_TOKEN", "t"), ("TERM", "dumb")]);
        let mut inherit = InheritEnv {
            filter: EnvFilter::Rule,
            clear: false,
            keep: Vec::new(),
            set: env(&[("TERM", "xterm")]),
        };
        assert_eq!(
            inherit.build(spawned.clone()),
            env(&[("PATH", "/bin"), ("TERM", "xterm")])
        );
        inherit.keep.push("GITHUB_TOKEN".into());
        assert_eq!(
            inherit.build(spawned.clone()),
            env(&[("PATH", "/bin"), ("GITHUB_TOKEN", "t"), ("TERM", "xterm")])
        );
        inherit.filter = EnvFilter::Unfiltered;
        inherit.keep.clear();
        assert_eq!(
            inherit.build(spawned),
            env(&[("PATH", "/bin"), ("GITHUB_TOKEN", "t"), ("TERM", "xterm")])
        );
    }
}
