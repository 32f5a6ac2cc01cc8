//! The command's environment: secrets scrubbed by name, kept when asked, explicit
//! entries, a cleared environment, and the same rules for `confine` as for `run`.

mod support;
use std::process::Command;
use support::*;

const SECRETS: [(&str, &str); 8] = [
    ("E2E_API_TOKEN", "v-token"),
    ("E2E_DB_PASSWORD", "v-password"),
    ("e2e_client_secret", "v-secret"),
    ("E2E_GPG_PASSPHRASE", "v-passphrase"),
    ("E2E_CREDENTIALS_FILE", "v-credential"),
    ("E2E_SIGNING_KEY", "v-key"),
    ("E2E_ApiKey", "v-apikey"),
    ("SSH_AUTH_SOCK", "/run/v-agent.sock"),
];

fn with_env(mut cmd: Command) -> Command {
    for (k, v) in SECRETS {
        cmd.env(k, v);
    }
    cmd.env("E2E_PLAIN", "v-plain").env("LC_E2E", "v-lc");
    cmd
}

/// The command's environment as NAME=VALUE lines.
fn env_of(out: &std::process::Output) -> Vec<String> {
    assert_code(out, 0);
    text(&out.stdout).lines().map(str::to_string).collect()
}

#[test]
fn secrets_are_scrubbed_by_name_in_every_mode_and_plain_names_pass() {
    let fx = Fixture::new();
    for mode in ["read-only", "workspace-write", "danger-full-access"] {
        let out = with_env(fx.stockade(["run", "--mode", mode, "--", "env"]))
            .output()
            .unwrap();
        let env = env_of(&out);
        for (k, v) in SECRETS {
            assert!(
                !env.iter().any(|l| l.starts_with(&format!("{k}="))),
                "{mode}: {k}"
            );
            assert!(!text(&out.stdout).contains(v), "{mode}: {v}");
        }
        // Positive control: the same environment's ordinary names arrive.
        assert!(env.contains(&"E2E_PLAIN=v-plain".to_string()), "{mode}");
        assert!(env.iter().any(|l| l.starts_with("PATH=")), "{mode}");
    }
}

#[test]
fn the_json_result_names_what_was_removed_but_never_the_values() {
    let fx = Fixture::new();
    let (out, json) = run_json(&mut with_env(fx.stockade(["run", "--json", "--", "true"])));
    assert_code(&out, 0);
    let removed: Vec<&str> = json["envRemoved"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    for (k, v) in SECRETS {
        assert!(removed.contains(&k), "{k} not listed: {removed:?}");
        assert!(!text(&out.stdout).contains(v));
    }
    assert!(!removed.contains(&"E2E_PLAIN"));
}

#[test]
fn keep_env_keeps_a_secret_and_env_sets_and_overrides() {
    let fx = Fixture::new();
    let out = with_env(fx.stockade([
        "run",
        "--keep-env",
        "E2E_API_TOKEN",
        "--env",
        "E2E_PLAIN=overridden",
        "--env",
        "E2E_NEW=a=b",
        "--",
        "env",
    ]))
    .output()
    .unwrap();
    let env = env_of(&out);
    assert!(env.contains(&"E2E_API_TOKEN=v-token".to_string()));
    assert!(env.contains(&"E2E_PLAIN=overridden".to_string()));
    assert!(env.contains(&"E2E_NEW=a=b".to_string()));
    assert!(!env.iter().any(|l| l.starts_with("E2E_DB_PASSWORD=")));
    assert_eq!(
        env.iter().filter(|l| l.starts_with("E2E_PLAIN=")).count(),
        1
    );
}

#[test]
fn clear_env_keeps_only_the_basics() {
    let fx = Fixture::new();
    let out = with_env(fx.stockade([
        "run",
        "--clear-env",
        "--env",
        "E2E_SET=1",
        "--keep-env",
        "E2E_SIGNING_KEY",
        "--",
        "env",
    ]))
    .env("HOME", "/e2e-home")
    .env("TERM", "e2e-term")
    .output()
    .unwrap();
    let mut names: Vec<String> = env_of(&out)
        .iter()
        .map(|l| l.split('=').next().unwrap().to_string())
        .collect();
    names.sort();
    for name in &names {
        assert!(
            [
                "PATH",
                "HOME",
                "LANG",
                "TERM",
                "USER",
                "E2E_SET",
                "E2E_SIGNING_KEY"
            ]
            .contains(&name.as_str())
                || name.starts_with("LC_")
                // What stockade sets itself: the package caches' redirection.
                || stockade_policy::package_caches::VARIABLES
                    .iter()
                    .any(|(n, _)| n == name),
            "{name} survived --clear-env: {names:?}"
        );
    }
    for expected in ["HOME", "TERM", "LC_E2E", "E2E_SET", "E2E_SIGNING_KEY"] {
        assert!(
            names.contains(&expected.to_string()),
            "{expected}: {names:?}"
        );
    }
}

#[test]
fn confine_builds_the_same_environment_into_the_request() {
    let fx = Fixture::new();
    let out = with_env(fx.stockade([
        "confine",
        "--env",
        "E2E_SET=from-confine",
        "--keep-env",
        "E2E_DB_PASSWORD",
        "--",
        "env",
    ]))
    .output()
    .unwrap();
    assert_code(&out, 0);
    let confined: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    // The executor's own environment is irrelevant: the request carries the command's.
    let out = spawn_argv(&confined);
    let env = env_of(&out);
    assert!(env.contains(&"E2E_SET=from-confine".to_string()));
    assert!(env.contains(&"E2E_DB_PASSWORD=v-password".to_string()));
    assert!(env.contains(&"E2E_PLAIN=v-plain".to_string()));
    assert!(!env.iter().any(|l| l.starts_with("E2E_API_TOKEN=")));
    assert!(!env.iter().any(|l| l.starts_with("SSH_AUTH_SOCK=")));
}

#[test]
fn malformed_env_entries_are_refused_and_run_nothing() {
    let fx = Fixture::new();
    for bad in ["NOEQUALS", "=value"] {
        let out = fx
            .stockade(["run", "--env", bad, "--", "touch", "ran"])
            .output()
            .unwrap();
        assert_code(&out, 125);
        assert!(
            text(&out.stderr).contains("NAME=VALUE"),
            "{}",
            text(&out.stderr)
        );
        assert!(!fx.ws.join("ran").exists());
    }
}

/// The table, end to end: each name (or value) the rule removes, and the
/// harmless names it keeps, as the command sees them.
/// Runs `env` under `stockade run --json` with `removed` and `kept` set, and checks that
/// each of `removed` (name and value) is gone and reported in `envRemoved`, and each of
/// `kept` reached the command as it was and is not reported.
fn assert_removed_and_kept(fx: &Fixture, removed: &[(&str, &str)], kept: &[(&str, &str)]) {
    let mut cmd = fx.stockade(["run", "--json", "--", "env"]);
    for (k, v) in removed.iter().chain(kept) {
        cmd.env(k, v);
    }
    let (out, json) = run_json(&mut cmd);
    assert_code(&out, 0);
    let env = json["stdout"]["text"].as_str().unwrap();
    let reported: Vec<&str> = json["envRemoved"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    for (k, v) in removed {
        assert!(!env.contains(&format!("{k}=")), "{k} reached the command");
        assert!(!env.contains(v), "{k}: its value reached the command");
        assert!(reported.contains(k), "{k} not in envRemoved {reported:?}");
    }
    for (k, v) in kept {
        assert!(env.contains(&format!("{k}={v}\n")), "{k} was removed");
        assert!(!reported.contains(k), "{k}");
    }
}

#[test]
fn the_table_of_removed_and_kept_variables_reaches_the_command_as_documented() {
    let removed = [
        ("DATABASE_URL", "postgres://u:pw@host/db"),
        ("MYSQL_PWD", "e2e-secret-value-1"),
        ("DB_PASS", "e2e-secret-value-2"),
        ("GITHUB_PAT", "e2e-secret-value-3"),
        ("GH_PAT", "e2e-secret-value-4"),
        ("NPM_CONFIG__AUTH", "e2e-secret-value-5"),
        ("DOCKER_AUTH_CONFIG", "e2e-secret-value-6"),
        ("CI_JOB_JWT", "e2e-secret-value-7"),
        ("SENTRY_DSN", "e2e-secret-value-8"),
        ("BW_SESSION", "e2e-secret-value-9"),
        ("OP_SESSION_acme", "e2e-secret-value-10"),
        ("HTTPS_PROXY", "http://u:p@proxy:8080"),
        ("COOKIE", "e2e-secret-value-11"),
        ("AUTH_HEADER", "e2e-secret-value-12"),
        ("PRIVATE_PEM", "e2e-secret-value-13"),
        ("E2E_TLS", "-----BEGIN EC PRIVATE KEY-----"),
    ];
    let kept = [
        ("XDG_SESSION_ID", "k1"),
        ("DBUS_SESSION_BUS_ADDRESS", "unix:path=/run/k2"),
        ("KEYBOARD", "k3"),
        ("HTTP_PROXY", "http://proxy:8080"),
        ("OLDPWD", "/k4"),
    ];
    let fx = Fixture::new();
    assert_removed_and_kept(&fx, &removed, &kept);
    // The way out: --keep-env passes a removed one by name.
    let (out, json) = run_json(
        fx.stockade(["run", "--json", "--keep-env", "DATABASE_URL", "--", "env"])
            .env("DATABASE_URL", "postgres://u:pw@host/db"),
    );
    assert_code(&out, 0);
    assert!(
        json["stdout"]["text"]
            .as_str()
            .unwrap()
            .contains("DATABASE_URL=postgres://u:pw@host/db\n")
    );
}

/// Values that carry a credential under a name that says nothing: a proxy's password
/// without a scheme (curl reads `u:pw@proxy` as `http://u:pw@proxy`), an `Authorization`
/// header for git, and `sshpass -e`'s password.
#[test]
fn credentials_in_values_and_sshpass_are_removed_and_reported() {
    let removed = [
        ("SSHPASS", "e2e-sshpass-value"),
        ("ftp_proxy", "e2e-user:e2e-proxy-pw@corp:21"),
        (
            "GIT_CONFIG_PARAMETERS",
            "'http.extraheader'='AUTHORIZATION: basic e2e-header-value'",
        ),
    ];
    // Positive controls: the same kinds of names with nothing secret in them.
    let kept = [
        ("HTTPS_PROXY", "corp:8080"),
        ("GIT_CONFIG_NOSYSTEM", "1"),
        ("E2E_SSH_TARGET", "me:x@host"),
    ];
    let fx = Fixture::new();
    assert_removed_and_kept(&fx, &removed, &kept);
}

/// Secrets the name rule cannot see: passwords in connection strings that are not URL
/// user-info, in option strings, webhook URLs whose path is the credential, vendors'
/// tokens by their prefix, and names ending `_PW`. Each is removed and reported by name;
/// ordinary values of the same shapes reach the command.
#[test]
fn secrets_in_connection_strings_webhooks_and_tokens_are_removed_and_reported() {
    let removed = [
        (
            "E2E_JDBC",
            "jdbc:mysql://db/app?user=app&password=e2e-jdbc-pw",
        ),
        ("E2E_ADO", "Server=db;User Id=sa;Password=e2e-ado-pw;"),
        ("E2E_ODBC", "Driver={PostgreSQL};Uid=app;Pwd=e2e-odbc-pw;"),
        (
            "E2E_ORACLE",
            "jdbc:oracle:thin:scott/e2e-oracle-pw@db:1521:orcl",
        ),
        ("JAVA_TOOL_OPTIONS", "-Dhttp.proxyPassword=e2e-java-pw"),
        ("E2E_LDAP_PW", "e2e-ldap-pw"),
        (
            "E2E_NOTIFY",
            "https://hooks.slack.com/services/T0E2E/B0E2E/e2eSlackHook",
        ),
        (
            "E2E_ALERTS",
            "https://discord.com/api/webhooks/1/e2eDiscordHook",
        ),
        ("E2E_GH", "ghp_e2e0123456789abcdefghijABCDEFGHIJ0"),
        ("E2E_GITLAB", "glpat-e2e0123456789abcdefAB"),
        ("E2E_SLACK", "xoxb-e2e0123456-0123456789-abcdef"),
        ("E2E_OPENAI", "sk-e2e0123456789abcdefABCDEF"),
        ("E2E_AWS_ID", "AKIAE2E0123456789ABC"),
    ];
    // Positive controls: values of the same shapes with nothing secret in them.
    let kept = [
        ("DATABASE_URL", "postgres://app@db/app?sslmode=require"),
        (
            "E2E_ADO_TRUSTED",
            "Server=db;Database=app;Trusted_Connection=yes;",
        ),
        ("MAVEN_OPTS", "-Xmx1g -Dfile.encoding=UTF-8"),
        ("E2E_DOCS", "https://api.slack.com/messaging/webhooks"),
        ("E2E_BRANCH", "ghp_fix"),
        ("E2E_TOOL", "sk-learn-datasets-for-the-benchmarks"),
        ("E2E_PW_DIR", "/srv/e2e-pw"),
    ];
    for fx in [Fixture::new(), Fixture::staged()] {
        assert_removed_and_kept(&fx, &removed, &kept);
    }
}

/// `GIT_CONFIG_KEY_<n>` names a git setting: removing it for its word `key` made every git
/// command fail ("missing config key") while the value beside it passed.
#[test]
fn git_settings_passed_in_the_environment_reach_git() {
    let fx = Fixture::new();
    let out = fx
        .stockade(["run", "--", "git", "config", "--get", "e2e.setting"])
        .env("GIT_CONFIG_COUNT", "1")
        .env("GIT_CONFIG_KEY_0", "e2e.setting")
        .env("GIT_CONFIG_VALUE_0", "e2e-value")
        .output()
        .unwrap();
    assert_code(&out, 0);
    assert_eq!(text(&out.stdout), "e2e-value\n");
}

#[test]
fn keep_env_names_no_variable_can_have_are_refused_and_run_nothing() {
    let fx = Fixture::new();
    for bad in ["", "E2E_A=B"] {
        let out = fx
            .stockade(["run", "--keep-env", bad, "--", "touch", "ran"])
            .output()
            .unwrap();
        assert_code(&out, 125);
        assert!(
            text(&out.stderr).contains("not a variable name"),
            "{}",
            text(&out.stderr)
        );
        assert!(!fx.ws.join("ran").exists());
    }
    // Positive control: a name is accepted and the command runs.
    let out = fx
        .stockade([
            "run",
            "--mode",
            "workspace-write",
            "--keep-env",
            "E2E_A",
            "--",
            "touch",
            "ran",
        ])
        .output()
        .unwrap();
    assert_code(&out, 0);
    assert!(fx.ws.join("ran").exists());
}
