//! Which of the caller's environment variables reach a command.
//!
//! A variable is a secret when its *name* says so or its *value* shows it:
//!
//! - Names are split into words on `_` (and `-`, `.`), compared without case. A word
//!   that is one of [`SECRET_WORDS`] marks a secret (`DB_PASS`, `GITHUB_PAT`,
//!   `NPM_CONFIG__AUTH`, `CI_JOB_JWT`), and so does a word that *contains* one of the
//!   long, unambiguous [`SECRET_STEMS`] (`MyPassword`, `GITHUBTOKEN`) or ends in `key`
//!   (`apikey`); a last word among [`SECRET_LAST_WORDS`] (`LDAP_PW`) too. Whole words keep harmless names such as `KEYBOARD`, `PATH`, `PWD`,
//!   `OLDPWD`, `XDG_SESSION_ID` or `DBUS_SESSION_BUS_ADDRESS`, which a substring rule
//!   would hit or miss by accident.
//! - Known credential names whose words say nothing: [`SECRET_NAMES`] exactly and
//!   [`SECRET_PREFIXES`] (`OP_SESSION_*`).
//! - Values ([`values`]): a URL with a password in its user-info, a setting naming a
//!   password or token inside a connection or option string (`...;Password=...;`,
//!   `-Dhttp.proxyPassword=...`), a webhook URL, a vendor's token by its prefix (`ghp_`,
//!   `sk-`, `AKIA`, ... under any name), an HTTP `Authorization:` header, or a PEM
//!   private key block.
//! - `GIT_CONFIG_KEY_<n>` names a git setting, not a key: only its value is judged (git
//!   refuses to start when one of a `GIT_CONFIG_COUNT` pair is missing).
//!
//! Secrets are removed unless the caller keeps them by name (`--keep-env`); only their
//! names are reported. With a clear environment, only the names a program needs to behave
//! normally (`PATH`, `HOME`, `LANG`, `LC_*`, `TERM`, `USER`) survive.

mod values;
pub mod withheld;

use std::ffi::{OsStr, OsString};

/// Whole words (lower-case) that mark a name as a secret.
pub const SECRET_WORDS: [&str; 19] = [
    "key",
    "keys",
    "pass",
    "passwd",
    "pat",
    "auth",
    "jwt",
    "dsn",
    "cookie",
    "cookies",
    "credential",
    "credentials",
    "private",
    "password",
    "passwords",
    "secret",
    "secrets",
    "token",
    "tokens",
];

/// Stems (lower-case) long and specific enough to mark a secret anywhere inside a word,
/// for names written without separators (`mypassword`, `githubtoken`).
pub const SECRET_STEMS: [&str; 6] = [
    "password",
    "passwd",
    "secret",
    "token",
    "passphrase",
    "credential",
];

/// Words (lower-case) that mark a secret as the last word of a name: `LDAP_PW`,
/// `DB_PW`, while `PW_DIR` names a directory.
pub const SECRET_LAST_WORDS: [&str; 1] = ["pw"];

/// Names removed by exact match (any case), whatever their words say.
/// `SSHPASS` is the password `sshpass -e` types for ssh.
pub const SECRET_NAMES: [&str; 4] = ["SSH_AUTH_SOCK", "MYSQL_PWD", "BW_SESSION", "SSHPASS"];

/// Name prefixes (any case) that mark a secret: 1Password's session tokens.
pub const SECRET_PREFIXES: [&str; 1] = ["OP_SESSION_"];

/// Names a cleared environment keeps (plus every `LC_*`).
pub const CLEAR_ENV_KEEPS: [&str; 5] = ["PATH", "HOME", "LANG", "TERM", "USER"];

/// Whether `name` looks like it holds a secret.
pub fn is_secret_name(name: &OsStr) -> bool {
    let upper = name.to_string_lossy().to_uppercase();
    if SECRET_NAMES.contains(&upper.as_str())
        || SECRET_PREFIXES.iter().any(|p| upper.starts_with(p))
    {
        return true;
    }
    if is_git_config_key(&upper) {
        return false;
    }
    let lower = upper.to_lowercase();
    let mut words = lower.split(['_', '-', '.']).filter(|w| !w.is_empty());
    let last = lower.rsplit(['_', '-', '.']).find(|w| !w.is_empty());
    words.any(|word| {
        SECRET_WORDS.contains(&word)
            || SECRET_STEMS.iter().any(|s| word.contains(s))
            || (word.len() > 3 && word.ends_with("key"))
    }) || last.is_some_and(|w| SECRET_LAST_WORDS.contains(&w))
}

/// Whether `upper` (a name in upper case) is `GIT_CONFIG_KEY_<n>`: the name of a git
/// setting passed in the environment, whose word `key` says nothing about a secret.
fn is_git_config_key(upper: &str) -> bool {
    upper
        .strip_prefix("GIT_CONFIG_KEY_")
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// Whether the variable `name=value` is a secret the default rules remove.
pub fn is_secret(name: &OsStr, value: &OsStr) -> bool {
    is_secret_name(name) || values::is_secret_value(name, value)
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
            !is_secret(&name, &value)
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

    /// The table of examples: every name the rule is meant to remove or keep, with a
    /// harmless value unless the value is the point.
    const REMOVED: &[(&str, &str)] = &[
        ("AWS_SECRET_ACCESS_KEY", "x"),
        ("AWS_SESSION_TOKEN", "x"),
        ("github_token", "x"),
        ("MyPassword", "x"),
        ("GPG_PASSPHRASE", "x"),
        ("GOOGLE_APPLICATION_CREDENTIALS", "/k.json"),
        ("apikey", "x"),
        ("OPENAI_API_KEY", "x"),
        ("SSH_AUTH_SOCK", "/run/agent.sock"),
        ("MYSQL_PWD", "x"),
        ("mysql_pwd", "x"),
        ("DB_PASS", "x"),
        ("DB_PASSWD", "x"),
        ("PGPASSWORD", "x"),
        ("GITHUB_PAT", "x"),
        ("GH_PAT", "x"),
        // Words are split on `-` and `.` as well as `_` (names set with `env`).
        ("db-pass", "x"),
        ("npm.auth", "x"),
        ("NPM_CONFIG__AUTH", "x"),
        ("DOCKER_AUTH_CONFIG", "{}"),
        ("CI_JOB_JWT", "x"),
        ("SENTRY_DSN", "https://abc@o1.ingest.sentry.io/1"),
        ("BW_SESSION", "x"),
        ("OP_SESSION_my", "x"),
        ("COOKIE", "x"),
        ("AUTH_HEADER", "Bearer x"),
        ("PRIVATE_PEM", "x"),
        ("SIGNING_KEYS", "x"),
        ("GIT_CREDENTIALS", "x"),
        ("DATABASE_URL", "postgres://u:pw@host/db"),
        ("REDIS_URL", "redis://:pw@cache:6379/0"),
        ("HTTPS_PROXY", "http://u:p@proxy:8080"),
        ("https_proxy", "http://u:p@proxy:8080/"),
        ("MIRRORS", "https://a.example, https://u:p@b.example"),
        (
            "TLS_MATERIAL",
            "-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----",
        ),
        ("SIGNER", "-----BEGIN PRIVATE KEY-----\nMIIE"),
        ("GPG_BLOCK", "-----BEGIN PGP PRIVATE KEY BLOCK-----"),
        ("SSHPASS", "x"),
        ("sshpass", "x"),
        ("HTTPS_PROXY", "u:p@proxy:8080"),
        ("ftp_proxy", "u:p@proxy"),
        ("npm_config_proxy", "u:p@proxy:3128/"),
        ("GIT_CONFIG_VALUE_0", "AUTHORIZATION: basic eDp5"),
        (
            "GIT_CONFIG_PARAMETERS",
            "'http.extraheader'='Authorization: Bearer x'",
        ),
        ("CURL_HEADER", "Proxy-Authorization: Basic eDp5"),
        ("GIT_CONFIG_KEY_0", "-----BEGIN PRIVATE KEY-----"),
        ("GIT_CONFIG_KEY_", "x"),
        ("GIT_CONFIG_KEY_X", "x"),
        // Names ending in a password's short form.
        ("LDAP_PW", "x"),
        ("db-pw", "x"),
        // Passwords in connection strings that are not URL user-info.
        ("JDBC", "jdbc:mysql://db:3306/app?user=app&password=s3cr3t"),
        (
            "MSSQL",
            "jdbc:sqlserver://db:1433;databaseName=app;user=sa;password=s3cr3t",
        ),
        ("ORACLE", "jdbc:oracle:thin:scott/tiger@db:1521:orcl"),
        ("ADO", "Server=db;Database=app;User Id=sa;Password=s3cr3t;"),
        (
            "ODBC",
            "Driver={PostgreSQL};Server=db;Uid=app;Pwd={s3cr3t};",
        ),
        ("CONN", "host=db dbname=app user=app password=s3cr3t"),
        // Secrets inside option strings and signed URLs.
        ("JAVA_TOOL_OPTIONS", "-Xmx1g -Dhttp.proxyPassword=s3cr3t"),
        ("MAVEN_OPTS", "-Djavax.net.ssl.keyStorePassword=changeit"),
        ("SONAR_OPTS", "-Dsonar.token=abc"),
        ("NODE_OPTIONS", "--api-key=abc"),
        (
            "ARTIFACT",
            "https://acct.blob.core.windows.net/c/f?sv=2022&sig=abc%3D",
        ),
        (
            "DOWNLOAD",
            "https://b.s3.amazonaws.com/f?X-Amz-Signature=abc",
        ),
        ("CALLBACK", "https://api.example.com/v1?access_token=abc"),
        // Webhook URLs: the path is the credential.
        (
            "NOTIFY",
            "https://hooks.slack.com/services/T000/B000/XXXXXXXX",
        ),
        ("ALERTS", "https://discord.com/api/webhooks/123/abcDEF"),
        (
            "TEAMS",
            "https://acme.webhook.office.com/webhookb2/abc@def/IncomingWebhook/x/y",
        ),
        (
            "CHAT",
            "https://chat.googleapis.com/v1/spaces/AAA/messages?key=k",
        ),
        (
            "BOT",
            "https://api.telegram.org/bot123456:ABC-DEF/sendMessage",
        ),
        // Vendors' tokens by their prefix, under any name.
        ("GH", "ghp_0123456789abcdefghijABCDEFGHIJ012345"),
        (
            "GH_FINE",
            "github_pat_11AAAAAAA0123456789_abcdefghijklmnopqrstuvwxyzABCDEFG",
        ),
        ("GITLAB", "glpat-0123456789abcdefABCD"),
        ("SLACK", "xoxb-1234567890-1234567890123-abcdefABCDEF"),
        ("SLACK_USER", "xoxp-1234567890-1234567890123-abcdef"),
        ("OPENAI", "sk-proj-0123456789abcdefABCDEF0123456789"),
        ("ANTHROPIC", "sk-ant-api03-0123456789abcdefABCDEF"),
        ("STRIPE", "sk_live_0123456789abcdefABCDEFab"),
        ("AWS_ID", "AKIAIOSFODNN7EXAMPLE"),
        ("AWS_TEMP_ID", "ASIAIOSFODNN7EXAMPLE"),
        ("GOOGLE", "AIzaSyA0123456789abcdefghijklmnopqrstuv"),
        ("NPM", "npm_0123456789abcdefghijABCDEFGHIJ012345"),
        ("HF", "hf_abcdefghijklmnopqrstuvwxyzABCDEFGH"),
        (
            "ARGS",
            "--header=x ghp_0123456789abcdefghijABCDEFGHIJ012345",
        ),
    ];

    const KEPT: &[(&str, &str)] = &[
        ("PATH", "/usr/bin:/bin"),
        ("HOME", "/home/u"),
        ("PWD", "/home/u/proj"),
        ("OLDPWD", "/home/u"),
        ("XDG_SESSION_ID", "3"),
        ("XDG_SESSION_TYPE", "tty"),
        ("XDG_SESSION_CLASS", "user"),
        ("DBUS_SESSION_BUS_ADDRESS", "unix:path=/run/user/1000/bus"),
        ("KEYBOARD", "us"),
        ("XKB_DEFAULT_LAYOUT", "us"),
        ("SSH_CONNECTION", "1.2.3.4 5 6.7.8.9 22"),
        ("TERM", "xterm"),
        ("LANG", "C.UTF-8"),
        ("EDITOR", "vi"),
        ("PASSPORT_DIR", "/srv/p"),
        ("COMPASS", "north"),
        ("PATCH_LEVEL", "3"),
        ("AUTHOR", "me"),
        ("DATABASE_URL", "postgres://u@host/db"),
        ("HTTPS_PROXY", "http://proxy:8080"),
        ("NO_PROXY", "localhost,127.0.0.1"),
        ("HOMEPAGE", "https://example.com/a:b@c"),
        ("CA_BUNDLE", "-----BEGIN CERTIFICATE-----\nMIIB"),
        ("GIT_CONFIG_KEY_0", "http.extraheader"),
        ("git_config_key_12", "user.name"),
        ("HTTPS_PROXY", "proxy:8080"),
        ("NO_PROXY", "localhost,.corp"),
        ("SSH_REMOTE", "me:x@host"),
        ("GIT_AUTHOR_EMAIL", "me@example.com"),
        // Harmless look-alikes of the value rules.
        (
            "DATABASE_URL",
            "postgres://app@db/app?sslmode=require&application_name=x",
        ),
        (
            "MSSQL",
            "jdbc:sqlserver://db:1433;databaseName=app;integratedSecurity=true",
        ),
        ("ORACLE", "jdbc:oracle:thin:@db:1521:orcl"),
        ("ADO", "Server=db;Database=app;Trusted_Connection=yes;"),
        ("CONN", "Server=db;Password=;"),
        (
            "JAVA_TOOL_OPTIONS",
            "-Xmx1g -Dfile.encoding=UTF-8 -Dhttp.proxyHost=p",
        ),
        ("MAVEN_OPTS", "-Djavax.net.ssl.keyStore=/etc/ks.jks"),
        ("CPPFLAGS", "-DKEY=1 -DNDEBUG"),
        ("NODE_OPTIONS", "--max-old-space-size=4096"),
        ("MAKEFLAGS", "-j4 --jobserver-auth=3,4"),
        ("GIT_CONFIG_PARAMETERS", "'credential.helper'='cache'"),
        ("LS_COLORS", "rs=0:di=01;34:*.key=01;31:*.pem=01;31"),
        ("SLACK_CHANNEL", "#builds"),
        ("DOCS", "https://api.slack.com/messaging/webhooks"),
        ("INVITE", "https://discord.com/invite/abc"),
        ("BRANCH", "ghp_fix"),
        ("LOCALE", "sk_SK.UTF-8"),
        ("TOOL", "sk-learn-datasets-for-the-benchmarks"),
        ("TASK", "desk-0123456789abcdefghijklmnop"),
        ("NAME", "AKIA"),
        ("PWD", "/home/u"),
        ("PWD_HISTORY", "/home/u"),
        ("PW_DIR", "/srv/pw"),
    ];

    #[test]
    fn the_table_of_removed_and_kept_examples() {
        for (name, value) in REMOVED {
            assert!(
                is_secret(OsStr::new(name), OsStr::new(value)),
                "{name}={value} should be removed"
            );
        }
        for (name, value) in KEPT {
            assert!(
                !is_secret(OsStr::new(name), OsStr::new(value)),
                "{name}={value} should be kept"
            );
        }
    }

    #[test]
    fn a_secret_value_is_removed_and_can_be_kept_by_name() {
        let caller = env(&[("DATABASE_URL", "postgres://u:pw@host/db"), ("PWD", "/w")]);
        let built = build(caller.clone(), &EnvRequest::default());
        assert_eq!(names(&built.vars), ["PWD"]);
        assert_eq!(built.removed, ["DATABASE_URL"]);
        let keep = EnvRequest {
            keep: vec!["DATABASE_URL".into()],
            ..EnvRequest::default()
        };
        assert_eq!(names(&build(caller, &keep).vars), ["DATABASE_URL", "PWD"]);
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
