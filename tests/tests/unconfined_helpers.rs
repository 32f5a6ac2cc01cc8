//! stockade's own processes that run outside the sandbox (the proxy host, the stage, the
//! runner before it confines, `stockade run` itself) load no code a confined command
//! could have planted.
//!
//! The test plants one shared library, whose constructor leaves a mark outside every
//! writable root naming the program that loaded it, under every name and path those
//! processes might search: the name-service modules that common `hosts:` lines name, in
//! the workspace and its `lib/`, reached through an empty `LD_LIBRARY_PATH` entry (the
//! current directory, the workspace); `LD_PRELOAD`; `GCONV_PATH`, `LOCPATH`, `TZDIR`,
//! `HOSTALIASES`. As root, a mount namespace (made with `unshare`) gives
//! `/etc/nsswitch.conf` the Ubuntu and Fedora `hosts:` modules and `/etc/resolv.conf` a
//! nameserver on loopback where nothing listens: nothing leaves the machine. As an
//! ordinary user the files stay the machine's, and the name asked for is not the one
//! allowed (refused by the rules: nothing is resolved or connected to); the proxy host
//! still starts, and the loader variables are tested all the same.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use support::*;

/// Every name-service module a `hosts:` line commonly names (glibc builds in only
/// `files` and `dns`, but a module found first on the search path is loaded first).
const MODULES: [&str; 9] = [
    "libnss_mdns4_minimal.so.2",
    "libnss_mdns_minimal.so.2",
    "libnss_mdns4.so.2",
    "libnss_mdns.so.2",
    "libnss_myhostname.so.2",
    "libnss_resolve.so.2",
    "libnss_systemd.so.2",
    "libnss_files.so.2",
    "libnss_dns.so.2",
];

/// The planted library: its constructor writes `MARKS/loaded.PID` holding the path of
/// the program that loaded it.
const PLANTED: &str = r#"
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
__attribute__((constructor)) static void planted(void) {
    char exe[512], path[1024];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[n < 0 ? 0 : n] = 0;
    snprintf(path, sizeof path, "%s/loaded.%d", MARKS, (int)getpid());
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) { write(fd, exe, strlen(exe)); close(fd); }
}
"#;

/// Where the plants are and what marks they left.
struct Plant {
    marks: PathBuf,
    nsswitch: PathBuf,
    resolv: PathBuf,
    preload: PathBuf,
}

impl Plant {
    /// Builds the library and puts it under every name, in the workspace and its `lib/`.
    fn new(fx: &Fixture) -> Plant {
        let marks = fx.outside.join("marks");
        std::fs::create_dir(&marks).unwrap();
        let source = fx.outside.join("planted.c");
        std::fs::write(&source, PLANTED).unwrap();
        let built = fx.outside.join("planted.so");
        let out = Command::new("cc")
            .args(["-shared", "-fPIC", "-o"])
            .arg(&built)
            .arg(format!("-DMARKS=\"{}\"", marks.display()))
            .arg(&source)
            .output()
            .unwrap();
        assert!(out.status.success(), "cc: {}", text(&out.stderr));
        let lib = fx.ws.join("lib");
        std::fs::create_dir(&lib).unwrap();
        for dir in [&fx.ws, &lib] {
            for name in MODULES {
                std::fs::copy(&built, dir.join(name)).unwrap();
            }
        }
        let preload = fx.ws.join("preload.so");
        std::fs::copy(&built, &preload).unwrap();
        // A gconv module list naming the library, and a hosts-alias file.
        std::fs::write(
            fx.ws.join("gconv-modules"),
            "module INTERNAL PLANTED// preload 1\nmodule PLANTED// INTERNAL preload 1\n",
        )
        .unwrap();
        std::fs::write(fx.ws.join("aliases"), "planted.test other.test\n").unwrap();
        let nsswitch = fx.outside.join("nsswitch.conf");
        std::fs::write(
            &nsswitch,
            "passwd: files\ngroup: files\nhosts: files mdns4_minimal [NOTFOUND=return] \
             myhostname resolve [!UNAVAIL=return] mdns4 mdns systemd dns\n",
        )
        .unwrap();
        let resolv = fx.outside.join("resolv.conf");
        std::fs::write(&resolv, "nameserver 127.0.0.1\n").unwrap();
        Plant {
            marks,
            nsswitch,
            resolv,
            preload,
        }
    }

    /// The variables that would make a process load the plants.
    fn hostile_env(&self, ws: &Path) -> Vec<(String, String)> {
        let ws = ws.display();
        vec![
            ("LD_LIBRARY_PATH".into(), format!(":{ws}:{ws}/lib")),
            ("GCONV_PATH".into(), ws.to_string()),
            ("LOCPATH".into(), ws.to_string()),
            ("TZDIR".into(), ws.to_string()),
            ("HOSTALIASES".into(), format!("{ws}/aliases")),
            ("LOCALDOMAIN".into(), "planted.test".into()),
            ("RES_OPTIONS".into(), "ndots:15".into()),
        ]
    }

    /// The programs that loaded the library since the last call, and clears the marks.
    fn loaded_by(&self) -> Vec<String> {
        let mut who = Vec::new();
        for entry in std::fs::read_dir(&self.marks).unwrap() {
            let path = entry.unwrap().path();
            who.push(std::fs::read_to_string(&path).unwrap());
            std::fs::remove_file(&path).unwrap();
        }
        who.sort();
        who.dedup();
        who
    }

    /// `cmd` inside a mount namespace with the planted name-service and resolver files
    /// (as root; as an ordinary user, `cmd` as it is).
    fn in_namespace(&self, fx: &Fixture, cmd: &Command) -> Output {
        if !stockade_tests::is_root() {
            let mut plain = Command::new(cmd.get_program());
            plain
                .args(cmd.get_args())
                .current_dir(&fx.ws)
                .stdin(Stdio::null());
            for (k, v) in cmd.get_envs() {
                match v {
                    Some(v) => plain.env(k, v),
                    None => plain.env_remove(k),
                };
            }
            return plain.output().unwrap();
        }
        let mut outer = Command::new("unshare");
        outer
            .args(["--mount", "--propagation", "private", "--", "sh", "-c"])
            .arg(
                "mount --bind \"$0\" /etc/nsswitch.conf && mount --bind \"$1\" /etc/resolv.conf \
                 && shift && exec \"$@\"",
            )
            .arg(&self.nsswitch)
            .arg(&self.resolv)
            .arg(cmd.get_program())
            .args(cmd.get_args())
            .current_dir(&fx.ws)
            .stdin(Stdio::null());
        for (k, v) in cmd.get_envs() {
            match v {
                Some(v) => outer.env(k, v),
                None => outer.env_remove(k),
            };
        }
        outer.output().unwrap()
    }
}

/// The attack: a confined command planted the library in its workspace (done here
/// beforehand), its environment names the workspace for the loader, and it asks the
/// proxy for a name, which the proxy host resolves. With `run` (stage and `--no-stage`)
/// and with `confine` (the executor spawning the argv with those variables), no
/// process of stockade's loads it; the command still gets its environment (workload).
/// Control: an ordinary dynamically linked program (`getent`) in the same namespace and
/// environment does load it, through the name-service search and through `LD_PRELOAD`.
#[test]
fn no_helper_outside_the_sandbox_loads_code_planted_in_the_workspace() {
    const NAME: &str = "no_helper_outside_the_sandbox_loads_code_planted_in_the_workspace";
    let root = stockade_tests::is_root();
    if !root {
        eprintln!("SKIPPED (needs root): {NAME} through the name-service modules");
    }
    // As root the proxy resolves the name (and finds nothing: 502); else another name is
    // allowed, and the rules refuse this one (403).
    let (allowed, answer) = if root {
        ("planted.test", "502")
    } else {
        ("other.test", "403")
    };
    let netclient = bin("netclient");
    for (fx, netns) in domain_fixtures(NAME) {
        let plant = Plant::new(&fx);
        let env = plant.hostile_env(&fx.ws);
        // Control: the plants work.
        let mut getent = Command::new("getent");
        getent.args(["hosts", "planted.test"]).envs(env.clone());
        let out = plant.in_namespace(&fx, &getent);
        let loaded = plant.loaded_by();
        assert!(
            !root || loaded.iter().any(|exe| exe.ends_with("/getent")),
            "the planted name-service module was not loaded by getent: {loaded:?} {}",
            text(&out.stderr)
        );
        getent.env("LD_PRELOAD", &plant.preload);
        plant.in_namespace(&fx, &getent);
        assert!(!plant.loaded_by().is_empty(), "LD_PRELOAD did not load");

        // `run`: the hostile variables in the caller's environment (as an export with a
        // trailing `:` leaves them) and LD_PRELOAD given to the command.
        let script = format!(
            "{nc} connect planted.test 443 x; printf '%s\\n' \"$LD_PRELOAD\" \"$GCONV_PATH\"",
            nc = netclient.display()
        );
        let preload = format!("LD_PRELOAD={}", plant.preload.display());
        let args = [
            "run",
            "--allow-domain",
            allowed,
            "--env",
            &preload,
            "--",
            "sh",
            "-c",
            &script,
        ];
        let mut run = fx.stockade(args);
        run.envs(env.clone());
        let out = plant.in_namespace(&fx, &run);
        let loaded = plant.loaded_by();
        assert!(
            loaded.is_empty(),
            "netns {netns}: loaded outside the sandbox by {loaded:?}"
        );
        let lines: Vec<String> = text(&out.stdout).lines().map(str::to_string).collect();
        assert_eq!(lines.len(), 3, "{lines:?} {}", text(&out.stderr));
        // The proxy did resolve (and found nothing): it answered, not refused.
        assert!(lines[0].starts_with(answer), "{lines:?}");
        assert_eq!(lines[1], plant.preload.display().to_string());
        assert_eq!(lines[2], fx.ws.display().to_string());

        // `confine`: what the executor's environment holds reaches the proxy host; the
        // check at confine time sees only the confine call's own, clean here.
        let c = fx.confine(&[
            "--allow-domain",
            allowed,
            "--",
            netclient.to_str().unwrap(),
            "connect",
            "planted.test",
            "443",
            "x",
        ]);
        let argv = confined_argv(&c);
        let mut spawned = Command::new(&argv[0]);
        spawned.args(&argv[1..]).envs(env.clone());
        let out = plant.in_namespace(&fx, &spawned);
        let loaded = plant.loaded_by();
        assert!(
            loaded.is_empty(),
            "netns {netns}: loaded outside the sandbox by {loaded:?}"
        );
        assert!(
            text(&out.stdout).starts_with(answer),
            "{}{}",
            text(&out.stdout),
            text(&out.stderr)
        );
    }
}
