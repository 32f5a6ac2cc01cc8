//! Which of the caller's environment variables reach a command, decided by name only.
//!
//! The rule (the harness's, widened): a name is a secret when it contains `KEY`,
//! `PASSWORD`, `SECRET`, `TOKEN`, `PASSPHRASE` or `CREDENTIAL` in any case, or is
//! `SSH_AUTH_SOCK` (an agent socket is a credential too). Secrets are removed unless the
//! caller keeps them by name. With a clear environment, only the names a program needs to
//! behave normally (`PATH`, `HOME`, `LANG`, `LC_*`, `TERM`, `USER`) survive.

use std::ffi::{OsStr, OsString};

/// Substrings that mark a name as a secret, upper-case; matched case-insensitively.
pub const SECRET_WORDS: [&str; 6] = [
    "KEY",
    "PASSWORD",
    "SECRET",
    "TOKEN",
    "PASSPHRASE",
    "CREDENTIAL",
];

/// Names removed by exact match, whatever their spelling says.
pub const SECRET_NAMES: [&str; 1] = ["SSH_AUTH_SOCK"];

/// Names a cleared environment keeps (plus every `LC_*`).
pub const CLEAR_ENV_KEEPS: [&str; 5] = ["PATH", "HOME", "LANG", "TERM", "USER"];

/// Whether `name` looks like it holds a secret.
pub fn is_secret_name(name: &OsStr) -> bool {
    let upper = name.to_string_lossy().to_uppercase();
    SECRET_WORDS.iter().any(|w| upper.contains(w)) || SECRET_NAMES.iter().any(|n| upper == *n)
}

/// Whether `name` survives `--clear-env`.
pub fn survives_clear_env(name: &OsStr) -> bool {
    let Some(name) = name.to_str() else {
        return false;
    };
    CLEAR_ENV_KEEPS.contains(&name) || name.starts_with("LC_")
}

/// How the caller asked the environment to be built.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EnvRequest {
    /// Start from nothing but [`CLEAR_ENV_KEEPS`] and `LC_*`.
    pub clear: bool,
    /// Names passed through from the caller even though the rules would remove them.
    pub keep: Vec<OsString>,
    /// Entries set last, overriding whatever came before.
    pub set: Vec<(OsString, OsString)>,
}

/// The environment a command receives, and the names that were taken away.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BuiltEnv {
    pub vars: Vec<(OsString, OsString)>,
    /// Names of the caller's variables that were removed (never their values), in the
    /// caller's order.
    pub removed: Vec<OsString>,
}

/// Builds the target environment from the caller's `caller` environment: filter, then
/// apply the explicit entries. The one place where the environment is decided.
pub fn build(caller: Vec<(OsString, OsString)>, request: &EnvRequest) -> BuiltEnv {
    let mut built = BuiltEnv::default();
    for (name, value) in caller {
        let kept = request.keep.contains(&name);
        let allowed = if request.clear {
            survives_clear_env(&name)
        } else {
            !is_secret_name(&name)
        };
        if kept || allowed {
            built.vars.push((name, value));
        } else {
            built.removed.push(name);
        }
    }
    for (name, value) in &request.set {
        built.vars.retain(|(n, _)| n != name);
        built.vars.push((name.clone(), value.clone()));
    }
    built
}

/// The value of `name` in `env`: the last entry wins, as for `execve`'s consumers
/// (`getenv` implementations disagree on duplicates; the last one is what a shell sees).
pub fn lookup<'a>(env: &'a [(OsString, OsString)], name: &str) -> Option<&'a OsString> {
    env.iter()
        .rev()
        .find(|(k, _)| k.as_os_str() == OsStr::new(name))
        .map(|(_, v)| v)
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

    fn names(vars: &[(OsString, OsString)]) -> Vec<&str> {
        vars.iter().map(|(k, _)| k.to_str().unwrap()).collect()
    }

    #[test]
    fn secret_words_match_anywhere_in_any_case() {
        for name in [
            "AWS_SECRET_ACCESS_KEY",
            "github_token",
            "MyPassword",
            "GPG_PASSPHRASE",
            "GOOGLE_APPLICATION_CREDENTIALS",
            "apikey",
            "SSH_AUTH_SOCK",
        ] {
            assert!(is_secret_name(OsStr::new(name)), "{name}");
        }
        for name in ["PATH", "HOME", "SSH_CONNECTION", "TERM", "LANG"] {
            assert!(!is_secret_name(OsStr::new(name)), "{name}");
        }
    }

    #[test]
    fn secrets_are_removed_by_name_and_kept_when_asked() {
        let caller = env(&[("PATH", "/bin"), ("API_TOKEN", "t"), ("DB_PASSWORD", "p")]);
        let built = build(caller.clone(), &EnvRequest::default());
        assert_eq!(names(&built.vars), ["PATH"]);
        assert_eq!(built.removed, ["API_TOKEN", "DB_PASSWORD"]);

        let keep = EnvRequest {
            keep: vec!["API_TOKEN".into()],
            ..EnvRequest::default()
        };
        let built = build(caller, &keep);
        assert_eq!(names(&built.vars), ["PATH", "API_TOKEN"]);
        assert_eq!(built.removed, ["DB_PASSWORD"]);
    }

    #[test]
    fn clear_env_keeps_only_the_basics_and_explicit_entries_come_last() {
        let caller = env(&[
            ("PATH", "/bin"),
            ("HOME", "/root"),
            ("LC_ALL", "C"),
            ("EDITOR", "vi"),
            ("FOO", "old"),
            ("API_KEY", "k"),
        ]);
        let request = EnvRequest {
            clear: true,
            keep: vec!["API_KEY".into()],
            set: env(&[("FOO", "new"), ("PATH", "/usr/bin")]),
        };
        let built = build(caller, &request);
        assert_eq!(
            built.vars,
            env(&[
                ("HOME", "/root"),
                ("LC_ALL", "C"),
                ("API_KEY", "k"),
                ("FOO", "new"),
                ("PATH", "/usr/bin"),
            ])
        );
        assert_eq!(built.removed, ["EDITOR", "FOO"]);
    }
}
