//! Credential stores, by kind: where each tool keeps its secrets by default (beneath the
//! home directory) and the environment variables that move them. The default hidden set
//! is this table resolved against the invoking user's homes and environment (see
//! [`locations`]); the README's table is this table, word for word (a unit test keeps
//! them equal).
//!
//! Resolved when the policy is made (`confine`, `run`), against the environment of the
//! process that makes it. A variable that is empty or not an absolute path moves nothing
//! (tools read a relative one from their own working directory, which is not known
//! then). Paths that do not exist cost one `lstat` each and hide nothing.

use std::ffi::OsString;
use std::path::PathBuf;

/// How an environment variable moves a store.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Moved {
    /// The variable names the store itself, a file or a directory.
    To(&'static str),
    /// The variable names a `:`-separated list of store files (`KUBECONFIG`).
    List(&'static str),
    /// The variable names a directory; the store is these entries beneath it.
    Beneath(&'static str, &'static [&'static str]),
}

impl Moved {
    /// The variable's name.
    pub fn variable(self) -> &'static str {
        match self {
            Moved::To(v) | Moved::List(v) | Moved::Beneath(v, _) => v,
        }
    }
}

/// One kind of credential store.
#[derive(Clone, Copy, Debug)]
pub struct Store {
    /// What it is, for people: the tool and what it keeps.
    pub kind: &'static str,
    /// Its default locations, relative to the home directory.
    pub home: &'static [&'static str],
    /// The variables that move it.
    pub moved_by: &'static [Moved],
}

use Moved::{Beneath, List, To};

const fn store(
    kind: &'static str,
    home: &'static [&'static str],
    moved_by: &'static [Moved],
) -> Store {
    Store {
        kind,
        home,
        moved_by,
    }
}

/// Every credential store hidden by default.
pub const STORES: &[Store] = &[
    store("SSH keys", &[".ssh"], &[]),
    store(
        "AWS credentials and config",
        &[".aws"],
        &[To("AWS_SHARED_CREDENTIALS_FILE"), To("AWS_CONFIG_FILE")],
    ),
    store("netrc passwords", &[".netrc"], &[To("NETRC")]),
    store(
        "git credential store",
        &[".git-credentials", ".config/git/credentials"],
        &[Beneath("XDG_CONFIG_HOME", &["git/credentials"])],
    ),
    store(
        "GitHub CLI",
        &[".config/gh"],
        &[To("GH_CONFIG_DIR"), Beneath("XDG_CONFIG_HOME", &["gh"])],
    ),
    store(
        "GitLab CLI",
        &[".config/glab-cli"],
        &[
            To("GLAB_CONFIG_DIR"),
            Beneath("XDG_CONFIG_HOME", &["glab-cli"]),
        ],
    ),
    store(
        "hub",
        &[".config/hub"],
        &[To("HUB_CONFIG"), Beneath("XDG_CONFIG_HOME", &["hub"])],
    ),
    store("Kubernetes config", &[".kube"], &[List("KUBECONFIG")]),
    store(
        "Docker registry logins",
        &[".docker/config.json"],
        &[Beneath("DOCKER_CONFIG", &["config.json"])],
    ),
    store("GnuPG keys", &[".gnupg"], &[To("GNUPGHOME")]),
    store("pass", &[".password-store"], &[To("PASSWORD_STORE_DIR")]),
    store(
        "desktop keyrings",
        &[".local/share/keyrings"],
        &[Beneath("XDG_DATA_HOME", &["keyrings"])],
    ),
    store(
        "Google Cloud SDK",
        &[".config/gcloud"],
        &[
            To("CLOUDSDK_CONFIG"),
            To("GOOGLE_APPLICATION_CREDENTIALS"),
            Beneath("XDG_CONFIG_HOME", &["gcloud"]),
        ],
    ),
    store("Azure CLI", &[".azure"], &[To("AZURE_CONFIG_DIR")]),
    store("Oracle Cloud CLI", &[".oci"], &[To("OCI_CLI_CONFIG_FILE")]),
    store(
        "DigitalOcean CLI",
        &[".config/doctl"],
        &[Beneath("XDG_CONFIG_HOME", &["doctl"])],
    ),
    store(
        "rclone remotes",
        &[".config/rclone"],
        &[To("RCLONE_CONFIG"), Beneath("XDG_CONFIG_HOME", &["rclone"])],
    ),
    store("s3cmd", &[".s3cfg"], &[]),
    store("boto", &[".boto"], &[To("BOTO_CONFIG")]),
    store(
        "npm tokens",
        &[".npmrc"],
        &[To("NPM_CONFIG_USERCONFIG"), To("npm_config_userconfig")],
    ),
    store("PyPI uploads", &[".pypirc"], &[]),
    store(
        "pip index passwords",
        &[".config/pip/pip.conf", ".pip/pip.conf"],
        &[
            To("PIP_CONFIG_FILE"),
            Beneath("XDG_CONFIG_HOME", &["pip/pip.conf"]),
        ],
    ),
    store(
        "Cargo registry tokens",
        &[".cargo/credentials.toml", ".cargo/credentials"],
        &[Beneath("CARGO_HOME", &["credentials.toml", "credentials"])],
    ),
    store(
        "RubyGems API keys",
        &[".gem/credentials", ".local/share/gem/credentials"],
        &[],
    ),
    store(
        "Maven server passwords",
        &[".m2/settings.xml", ".m2/settings-security.xml"],
        &[],
    ),
    store(
        "Gradle properties",
        &[".gradle/gradle.properties"],
        &[Beneath("GRADLE_USER_HOME", &["gradle.properties"])],
    ),
    store(
        "Terraform tokens",
        &[".terraform.d", ".terraformrc"],
        &[To("TF_CLI_CONFIG_FILE")],
    ),
    store("Vault token", &[".vault-token"], &[]),
    store(
        "PostgreSQL passwords and history",
        &[".pgpass", ".psql_history"],
        &[To("PGPASSFILE"), To("PSQL_HISTORY")],
    ),
    store(
        "MySQL passwords and history",
        &[".my.cnf", ".mylogin.cnf", ".mysql_history"],
        &[To("MYSQL_HISTFILE")],
    ),
    store(
        "shell histories",
        &[
            ".bash_history",
            ".zsh_history",
            ".history",
            ".sh_history",
            ".local/share/fish/fish_history",
        ],
        &[
            To("HISTFILE"),
            Beneath("XDG_DATA_HOME", &["fish/fish_history"]),
        ],
    ),
    store(
        "REPL histories",
        &[
            ".python_history",
            ".node_repl_history",
            ".sqlite_history",
            ".rediscli_history",
            ".irb_history",
        ],
        &[
            To("PYTHON_HISTORY"),
            To("NODE_REPL_HISTORY"),
            To("SQLITE_HISTORY"),
            To("REDISCLI_HISTFILE"),
        ],
    ),
    store(
        "browser profiles (cookies, saved passwords)",
        &[
            ".mozilla",
            ".thunderbird",
            ".config/google-chrome",
            ".config/google-chrome-beta",
            ".config/google-chrome-unstable",
            ".config/chromium",
            ".config/BraveSoftware",
            ".config/microsoft-edge",
            ".config/microsoft-edge-beta",
            ".config/vivaldi",
            ".config/opera",
        ],
        &[Beneath(
            "XDG_CONFIG_HOME",
            &[
                "google-chrome",
                "google-chrome-beta",
                "google-chrome-unstable",
                "chromium",
                "BraveSoftware",
                "microsoft-edge",
                "microsoft-edge-beta",
                "vivaldi",
                "opera",
            ],
        )],
    ),
];

/// Every variable that moves a store, once each, in table order: what the launcher
/// reads from its environment.
pub fn variables() -> Vec<&'static str> {
    let mut out: Vec<&'static str> = Vec::new();
    for moved in STORES.iter().flat_map(|s| s.moved_by) {
        if !out.contains(&moved.variable()) {
            out.push(moved.variable());
        }
    }
    out
}

/// Every default location of every store beneath each of `homes`.
pub fn in_homes(homes: &[PathBuf]) -> Vec<PathBuf> {
    homes
        .iter()
        .flat_map(|home| {
            STORES
                .iter()
                .flat_map(|s| s.home)
                .map(move |rel| home.join(rel))
        })
        .collect()
}

/// Where the variables of `environment` (name, value) put stores: each path with the
/// variable that named it. Every entry counts (an environment made of two, the caller's
/// and the command's, hides the stores of both). Empty and relative values move nothing.
pub fn moved(environment: &[(OsString, OsString)]) -> Vec<(PathBuf, &'static str)> {
    let absolute = |p: PathBuf| p.is_absolute().then_some(p);
    let mut out = Vec::new();
    let entries = STORES.iter().flat_map(|s| s.moved_by).flat_map(|moved| {
        environment
            .iter()
            .filter(move |(n, _)| n.as_os_str() == moved.variable())
            .map(move |(_, v)| (moved, v.clone()))
    });
    for (moved, v) in entries {
        let paths: Vec<PathBuf> = match *moved {
            To(_) => absolute(PathBuf::from(v)).into_iter().collect(),
            List(_) => std::env::split_paths(&v).filter_map(absolute).collect(),
            Beneath(_, entries) => absolute(PathBuf::from(v))
                .map(|dir| entries.iter().map(|e| dir.join(e)).collect())
                .unwrap_or_default(),
        };
        out.extend(paths.into_iter().map(|p| (p, moved.variable())));
    }
    out
}

/// The README's table of stores: kind, default locations, the variables that move them.
pub fn readme_table() -> String {
    let mut out = String::from(
        "| store | default locations (beneath the home) | moved by |\n|---|---|---|\n",
    );
    let code = |s: &str| format!("`{s}`");
    for s in STORES {
        let home: Vec<String> = s.home.iter().map(|h| code(&format!("~/{h}"))).collect();
        let moved: Vec<String> = s
            .moved_by
            .iter()
            .map(|m| match *m {
                To(v) => code(&format!("${v}")),
                List(v) => format!("{} (a list)", code(&format!("${v}"))),
                Beneath(v, entries) => entries
                    .iter()
                    .map(|e| code(&format!("${v}/{e}")))
                    .collect::<Vec<_>>()
                    .join(", "),
            })
            .collect();
        out.push_str(&format!(
            "| {} | {} | {} |\n",
            s.kind,
            home.join(", "),
            if moved.is_empty() {
                "".to_string()
            } else {
                moved.join(", ")
            }
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn env(pairs: &[(&str, &str)]) -> Vec<(OsString, OsString)> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).into(), (*v).into()))
            .collect()
    }

    #[test]
    fn the_readme_table_is_this_table() {
        let readme = include_str!("../../README.md");
        assert!(
            readme.contains(&readme_table()),
            "README.md's credential store table differs from policy/src/credentials.rs; \
             it should read:\n{}",
            readme_table()
        );
    }

    #[test]
    fn variables_move_stores_to_where_they_name() {
        let moved = moved(&env(&[
            ("AWS_SHARED_CREDENTIALS_FILE", "/srv/aws/creds"),
            ("KUBECONFIG", "/k/a:/k/b::relative"),
            ("DOCKER_CONFIG", "/d"),
            ("CARGO_HOME", "/c"),
            ("GNUPGHOME", "relative/gnupg"),
            ("GH_CONFIG_DIR", ""),
            ("XDG_CONFIG_HOME", "/x"),
            ("GNUPGHOME", "/g1"),
            ("GNUPGHOME", "/g2"),
        ]));
        let paths: Vec<&Path> = moved.iter().map(|(p, _)| p.as_path()).collect();
        for want in [
            "/srv/aws/creds",
            "/k/a",
            "/k/b",
            "/d/config.json",
            "/c/credentials.toml",
            "/c/credentials",
            "/x/gh",
            "/x/git/credentials",
            "/x/gcloud",
            "/g1",
            "/g2",
        ] {
            assert!(paths.contains(&Path::new(want)), "{want} in {paths:?}");
        }
        // Relative and empty values move nothing.
        assert!(!paths.iter().any(|p| p.is_relative() || p == &Path::new("")));
        assert!(!paths.iter().any(|p| p.ends_with("relative/gnupg")));
        let named = moved.iter().find(|(p, _)| p == Path::new("/d/config.json"));
        assert_eq!(named.map(|(_, v)| *v), Some("DOCKER_CONFIG"));
    }

    #[test]
    fn the_issue_s_stores_are_all_in_the_table() {
        let homes = [PathBuf::from("/h")];
        let defaults = in_homes(&homes);
        for rel in [
            ".config/git/credentials",
            ".pgpass",
            ".my.cnf",
            ".gem/credentials",
            ".m2/settings.xml",
            ".gradle/gradle.properties",
            ".s3cfg",
            ".boto",
            ".oci",
            ".config/rclone",
            ".config/doctl",
            ".config/glab-cli",
            ".config/hub",
            ".bash_history",
            ".zsh_history",
            ".python_history",
            ".psql_history",
            ".mysql_history",
            ".node_repl_history",
        ] {
            assert!(defaults.contains(&Path::new("/h").join(rel)), "{rel}");
        }
        let vars = variables();
        for v in [
            "CARGO_HOME",
            "XDG_CONFIG_HOME",
            "XDG_DATA_HOME",
            "GNUPGHOME",
            "AWS_SHARED_CREDENTIALS_FILE",
            "AWS_CONFIG_FILE",
            "KUBECONFIG",
            "DOCKER_CONFIG",
            "GH_CONFIG_DIR",
            "NPM_CONFIG_USERCONFIG",
            "PIP_CONFIG_FILE",
            "PGPASSFILE",
            "CLOUDSDK_CONFIG",
            "AZURE_CONFIG_DIR",
        ] {
            assert!(vars.contains(&v), "{v}");
        }
    }
}
