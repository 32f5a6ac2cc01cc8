//! Real clients through the filtering proxy, beside the test's own `netclient`: tools
//! that find the proxy through their own settings (`CARGO_HTTP_PROXY` for cargo) are
//! checked here, end to end, with and without the namespace stage.
//!
//! Nothing leaves the machine: the registry is served by this test on 127.0.0.1, its
//! name pinned there with `--resolve` (loopback allowed explicitly on its port).

mod support;

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use support::*;

/// The cargo that runs these tests, when this user can run it (an ordinary user's test
/// run may not reach root's toolchain): `None` says why not.
fn cargo() -> Result<PathBuf, String> {
    let cargo = std::env::var_os("CARGO")
        .map(PathBuf::from)
        .ok_or("$CARGO is not set")?;
    match Command::new(&cargo).arg("--version").output() {
        Ok(out) if out.status.success() => Ok(cargo),
        Ok(out) => Err(format!(
            "{} --version failed: {}",
            cargo.display(),
            text(&out.stderr)
        )),
        Err(e) => Err(format!("{} cannot be run here: {e}", cargo.display())),
    }
}

/// A crate `stkdemo` 0.1.0 packaged by `cargo package` in `dir`: the `.crate` file.
fn packaged_crate(cargo: &Path, dir: &Path) -> PathBuf {
    let src = dir.join("stkdemo");
    std::fs::create_dir_all(src.join("src")).unwrap();
    std::fs::write(
        src.join("Cargo.toml"),
        "[package]\nname = \"stkdemo\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\
         description = \"demo\"\nlicense = \"MIT\"\n[workspace]\n",
    )
    .unwrap();
    std::fs::write(src.join("src/lib.rs"), "pub fn hi() {}\n").unwrap();
    // A target directory of its own: CI exports CARGO_TARGET_DIR for the whole build.
    let target = dir.join("stkdemo-target");
    let out = Command::new(cargo)
        .args(["package", "--offline", "--no-verify", "--allow-dirty", "-q"])
        .current_dir(&src)
        .env("CARGO_HOME", dir.join("cargo-home"))
        .env("CARGO_TARGET_DIR", &target)
        .output()
        .unwrap();
    assert!(out.status.success(), "cargo package: {}", text(&out.stderr));
    target.join("package/stkdemo-0.1.0.crate")
}

/// A sparse cargo registry on loopback holding `krate` as `stkdemo` 0.1.0, whose
/// downloads are named `registry.test:PORT`; returns the port.
fn registry(krate: &Path) -> u16 {
    let bytes = std::fs::read(krate).unwrap();
    let cksum = stockade_policy::digest::sha256_hex(&bytes);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let config =
        format!(r#"{{"dl":"http://registry.test:{port}/dl/{{crate}}-{{version}}.crate"}}"#);
    let index = format!(
        r#"{{"name":"stkdemo","vers":"0.1.0","deps":[],"cksum":"{cksum}","features":{{}},"yanked":false}}"#
    );
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let (config, index, bytes) = (config.clone(), index.clone(), bytes.clone());
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut line = String::new();
                let _ = reader.read_line(&mut line);
                let mut rest = String::new();
                while reader.read_line(&mut rest).unwrap_or(0) > 2 {
                    rest.clear();
                }
                let path = line.split_whitespace().nth(1).unwrap_or("");
                let body: Option<Vec<u8>> = match path {
                    "/config.json" => Some(config.into_bytes()),
                    "/st/kd/stkdemo" => Some(index.into_bytes()),
                    "/dl/stkdemo-0.1.0.crate" => Some(bytes),
                    _ => None,
                };
                let mut s = stream;
                let _ = match body {
                    Some(b) => s
                        .write_all(
                            format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", b.len())
                                .as_bytes(),
                        )
                        .and_then(|_| s.write_all(&b)),
                    None => s.write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n"),
                };
            });
        }
    });
    port
}

/// A project in `ws` that depends on `stkdemo` from the registry on `port` (in place
/// of crates.io), with its own `CARGO_HOME`; returns (project, cargo home).
fn project(ws: &Path, port: u16) -> (PathBuf, PathBuf) {
    let proj = ws.join("proj");
    std::fs::create_dir_all(proj.join("src")).unwrap();
    std::fs::create_dir_all(proj.join(".cargo")).unwrap();
    std::fs::write(
        proj.join("Cargo.toml"),
        "[package]\nname = \"proj\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\
         [dependencies]\nstkdemo = \"0.1\"\n[workspace]\n",
    )
    .unwrap();
    std::fs::write(proj.join("src/main.rs"), "fn main() {}\n").unwrap();
    std::fs::write(
        proj.join(".cargo/config.toml"),
        format!(
            "[source.crates-io]\nreplace-with = \"local\"\n\
             [source.local]\nregistry = \"sparse+http://registry.test:{port}/\"\n"
        ),
    )
    .unwrap();
    let home = ws.join("cargo-home");
    std::fs::create_dir_all(&home).unwrap();
    (proj, home)
}

#[test]
fn cargo_fetches_from_an_allowed_registry_and_is_refused_one_not_allowed() {
    let cargo = match cargo() {
        Ok(c) => c,
        Err(why) => {
            eprintln!(
                "SKIPPED (no cargo for this user): cargo_fetches_from_an_allowed_registry ({why})"
            );
            return;
        }
    };
    for (fx, netns) in domain_fixtures("cargo_fetch") {
        let krate = packaged_crate(&cargo, &fx.outside);
        let port = registry(&krate);
        let (proj, home) = project(&fx.ws, port);
        // The name is pinned to the registry either way, so a proxy that let everything
        // through would fetch in the refused case too; there a deny rule refuses it.
        let fetch = |rules: &[String]| {
            let mut args = vec![
                "run".to_string(),
                "--mode".into(),
                "workspace-write".into(),
                "--workspace".into(),
                fx.ws.to_string_lossy().into_owned(),
                "--allow-domain".into(),
                format!("127.0.0.1:{port}"),
                "--resolve".into(),
                "registry.test=127.0.0.1".into(),
            ];
            args.extend(rules.iter().cloned());
            args.extend([
                "--".into(),
                cargo.to_string_lossy().into_owned(),
                "fetch".into(),
            ]);
            let mut cmd = fx.stockade(args);
            cmd.current_dir(&proj).env("CARGO_HOME", &home);
            cmd.output().unwrap()
        };
        let cached = || {
            std::fs::read_dir(home.join("registry/cache"))
                .into_iter()
                .flatten()
                .flatten()
                .any(|d| d.path().join("stkdemo-0.1.0.crate").is_file())
        };

        // Denied (every other .test name allowed): cargo fails, and the refusal is named.
        let out = fetch(&[
            "--allow-domain".into(),
            format!("*.test:{port}"),
            "--deny-domain".into(),
            "registry.test".into(),
        ]);
        assert!(
            !out.status.success(),
            "netns {netns}: {}",
            text(&out.stderr)
        );
        let err = text(&out.stderr);
        assert!(
            err.contains(&format!(
                "[sandbox: network access to registry.test:{port} denied]"
            )),
            "netns {netns}: {err}"
        );
        assert!(!cached(), "netns {netns}: fetched although refused");

        // Allowed: the same command fetches the crate through the proxy.
        let out = fetch(&["--allow-domain".into(), format!("registry.test:{port}")]);
        assert_code(&out, 0);
        assert!(
            cached(),
            "netns {netns}: nothing fetched: {}",
            text(&out.stderr)
        );
    }
}

#[test]
fn cargo_builds_a_dependency_from_an_allowed_registry_with_its_home_in_the_workspace() {
    // No CARGO_HOME given: stockade points it into the workspace, where the registry's
    // cache lands, and the user's own (shared with unconfined builds) stays untouched.
    let cargo = match cargo() {
        Ok(c) => c,
        Err(why) => {
            eprintln!(
                "SKIPPED (no cargo for this user): cargo_builds_a_dependency_from_an_allowed_registry ({why})"
            );
            return;
        }
    };
    for (fx, netns) in domain_fixtures("cargo_builds") {
        let krate = packaged_crate(&cargo, &fx.outside);
        let port = registry(&krate);
        let (proj, _) = project(&fx.ws, port);
        let out = fx
            .stockade([
                "run",
                "--mode",
                "workspace-write",
                "--workspace",
                &fx.ws.to_string_lossy(),
                "--allow-domain",
                &format!("127.0.0.1:{port}"),
                "--allow-domain",
                &format!("registry.test:{port}"),
                "--resolve",
                "registry.test=127.0.0.1",
                "--",
                &cargo.to_string_lossy(),
                "build",
                "-q",
            ])
            .current_dir(&proj)
            .env_remove("CARGO_HOME")
            .env_remove("CARGO_TARGET_DIR")
            .output()
            .unwrap();
        assert_code(&out, 0);
        let home = fx
            .ws
            .join(stockade_policy::package_caches::DIR)
            .join("cargo");
        let cached = std::fs::read_dir(home.join("registry/cache"))
            .into_iter()
            .flatten()
            .flatten()
            .any(|d| d.path().join("stkdemo-0.1.0.crate").is_file());
        assert!(cached, "netns {netns}: not cached in {}", home.display());
        assert!(
            proj.join("target/debug/proj").is_file(),
            "netns {netns}: not built"
        );
    }
}
