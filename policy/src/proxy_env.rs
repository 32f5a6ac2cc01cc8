//! The environment that points a command's network clients at the filtering proxy.
//!
//! The proxy answers HTTP `CONNECT`, plain HTTP requests in absolute form and SOCKS5 on
//! one port of `127.0.0.1`. These variables replace whatever the caller had (a proxy of
//! the caller's own is unreachable from the sandbox anyway):
//!
//! - `HTTP_PROXY`, `HTTPS_PROXY` and their lower-case forms: curl (which reads only the
//!   lower-case `http_proxy`), pip, cargo, git over https, Go, Python, Ruby, npm;
//! - `ALL_PROXY` / `all_proxy` as `socks5h://` (the proxy resolves the name): curl for
//!   other protocols and tools that speak SOCKS;
//! - `NO_PROXY` / `no_proxy`: a caller's exclusions would make a client try to go
//!   direct, which the sandbox refuses, so they are replaced: by nothing, or, where the
//!   command has a network namespace of its own (the namespace stage), by its own
//!   loopback (`localhost,127.0.0.1,::1`), which it reaches directly (a test suite's
//!   server; the proxy would refuse loopback as a destination), unless an allow rule
//!   names loopback (`--allow-domain 127.0.0.1:PORT`: the host's, through the proxy);
//! - tool-specific ones for tools that prefer their own: `npm_config_proxy` and
//!   `npm_config_https_proxy` (npm), `YARN_HTTP_PROXY` and `YARN_HTTPS_PROXY` (Yarn 2+),
//!   `CARGO_HTTP_PROXY` (cargo's own setting, which outranks a config file), and
//!   `NODE_USE_ENV_PROXY=1` (Node's built-in `fetch` honours the variables only then,
//!   Node 24+).
//!
//! Not covered by a variable: `git` over ssh and plain `ssh` (use
//! `-o ProxyCommand='nc -X 5 -x 127.0.0.1:PORT %h %p'` with a rule for port 22), and
//! the JVM (`-Dhttps.proxyHost=127.0.0.1 -Dhttps.proxyPort=PORT`), whose options
//! variable belongs to the caller.

/// The address the proxy listens on, as clients name it.
pub const PROXY_HOST: &str = "127.0.0.1";

/// What `NO_PROXY` holds where the command's loopback is its own.
pub const OWN_LOOPBACK: &str = "localhost,127.0.0.1,::1";

/// The variables and values for a proxy on `port` (names in a stable order);
/// `own_loopback`: the command runs in a network namespace of its own.
pub fn proxy_env(port: u16, own_loopback: bool) -> Vec<(String, String)> {
    let http = format!("http://{PROXY_HOST}:{port}");
    let socks = format!("socks5h://{PROXY_HOST}:{port}");
    let mut vars = Vec::new();
    for name in ["HTTP_PROXY", "HTTPS_PROXY"] {
        vars.push((name.to_string(), http.clone()));
        vars.push((name.to_ascii_lowercase(), http.clone()));
    }
    vars.push(("ALL_PROXY".into(), socks.clone()));
    vars.push(("all_proxy".into(), socks));
    let direct = if own_loopback { OWN_LOOPBACK } else { "" };
    vars.push(("NO_PROXY".into(), direct.into()));
    vars.push(("no_proxy".into(), direct.into()));
    for name in [
        "npm_config_proxy",
        "npm_config_https_proxy",
        "YARN_HTTP_PROXY",
        "YARN_HTTPS_PROXY",
        "CARGO_HTTP_PROXY",
    ] {
        vars.push((name.to_string(), http.clone()));
    }
    vars.push(("NODE_USE_ENV_PROXY".into(), "1".into()));
    vars
}

/// Whether `name` is one of the variables [`proxy_env`] sets (case as given).
pub fn is_proxy_var(name: &str) -> bool {
    proxy_env(1, false).iter().any(|(n, _)| n == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_client_variable_points_at_the_proxy_and_nothing_is_excluded() {
        let vars = proxy_env(3128, false);
        let get = |n: &str| vars.iter().find(|(k, _)| k == n).map(|(_, v)| v.as_str());
        for name in ["HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy"] {
            assert_eq!(get(name), Some("http://127.0.0.1:3128"), "{name}");
        }
        assert_eq!(get("ALL_PROXY"), Some("socks5h://127.0.0.1:3128"));
        assert_eq!(get("all_proxy"), Some("socks5h://127.0.0.1:3128"));
        assert_eq!(get("NO_PROXY"), Some(""));
        assert_eq!(get("no_proxy"), Some(""));
        assert_eq!(get("CARGO_HTTP_PROXY"), Some("http://127.0.0.1:3128"));
        assert!(is_proxy_var("https_proxy") && !is_proxy_var("PATH"));
        let mut names: Vec<&str> = vars.iter().map(|(k, _)| k.as_str()).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), vars.len(), "no variable twice");
    }

    #[test]
    fn only_a_loopback_of_the_command_s_own_is_reached_directly() {
        let vars = proxy_env(3128, true);
        let get = |n: &str| vars.iter().find(|(k, _)| k == n).map(|(_, v)| v.as_str());
        assert_eq!(get("NO_PROXY"), Some(OWN_LOOPBACK));
        assert_eq!(get("no_proxy"), Some(OWN_LOOPBACK));
        assert_eq!(get("HTTPS_PROXY"), Some("http://127.0.0.1:3128"));
    }
}
