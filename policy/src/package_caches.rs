//! Where package managers keep their caches inside the sandbox.
//!
//! npm, pip and cargo keep caches and state in the home directory (`~/.npm`,
//! `~/.cache/pip`, `~/.cargo`), which no confined mode grants: installs fail even with
//! the registry's names allowed. Granting those directories would be a way out: a cache
//! shared with the user's unconfined builds can be poisoned (a planted `build.rs` in
//! `~/.cargo/registry/src`, a tarball with a `postinstall` in `~/.npm`), and the next
//! unconfined build runs it. So the caches are redirected into the workspace, in
//! [`DIR`], through the variables each tool reads: a command can only poison what it can
//! already write (the workspace), and only confined commands given these variables use
//! it. The price: each workspace downloads once, and cargo's `CARGO_HOME` there holds no
//! user `config.toml` (a project's own `.cargo/config.toml` still applies).

use std::path::{Path, PathBuf};

/// The directory in the workspace holding the redirected caches.
pub const DIR: &str = ".stockade-cache";

/// The variables and the directory (below [`DIR`]) each names.
pub const VARIABLES: [(&str, &str); 4] = [
    ("npm_config_cache", "npm"),
    ("PIP_CACHE_DIR", "pip"),
    ("CARGO_HOME", "cargo"),
    ("YARN_CACHE_FOLDER", "yarn"),
];

/// The variables for a command whose writable workspace is `workspace`.
pub fn cache_env(workspace: &Path) -> Vec<(&'static str, PathBuf)> {
    VARIABLES
        .iter()
        .map(|&(name, sub)| (name, workspace.join(DIR).join(sub)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_cache_lands_in_the_workspace() {
        let vars = cache_env(Path::new("/w"));
        let get = |n: &str| vars.iter().find(|(k, _)| *k == n).map(|(_, v)| v.clone());
        assert_eq!(
            get("npm_config_cache"),
            Some("/w/.stockade-cache/npm".into())
        );
        assert_eq!(get("PIP_CACHE_DIR"), Some("/w/.stockade-cache/pip".into()));
        assert_eq!(get("CARGO_HOME"), Some("/w/.stockade-cache/cargo".into()));
        assert!(
            vars.iter()
                .all(|(_, v)| v.starts_with("/w/.stockade-cache"))
        );
    }
}
