//! What the packages ship is generated from, or checked against, the binaries' own help:
//! man pages and completions cannot drift from `--help`.

mod support;
use std::path::Path;
use support::*;

/// The long options (`--name`) a help text lists at the start of a line.
fn long_options(help: &str) -> Vec<String> {
    let mut found: Vec<String> = help
        .lines()
        .map(str::trim_start)
        .filter(|l| l.starts_with("--") || l.starts_with("-h, --"))
        .filter_map(|l| {
            let l = l.trim_start_matches("-h, ").trim_start_matches("-V, ");
            l.split(|c: char| c.is_whitespace() || c == '=' || c == ',' || c == '[')
                .next()
                .map(str::to_string)
        })
        .filter(|o| o.len() > 2)
        .collect();
    found.sort();
    found.dedup();
    found
}

#[test]
fn the_runner_man_page_names_every_option_of_its_help() {
    let out = std::process::Command::new(runner_bin())
        .arg("--help")
        .output()
        .unwrap();
    assert_code(&out, 0);
    let options = long_options(&text(&out.stdout));
    assert!(options.contains(&"--request".to_string()), "{options:?}");
    let page = Path::new(env!("CARGO_MANIFEST_DIR")).join("../packaging/man/stockade-runner.1");
    let page = std::fs::read_to_string(page).unwrap();
    for option in options {
        let roff = option.replace('-', "\\-");
        assert!(
            page.contains(&roff),
            "stockade-runner.1 does not mention {option}"
        );
    }
}

#[test]
fn generated_man_pages_and_completions_cover_every_subcommand_and_option() {
    let fx = Fixture::new();
    let out = fx.outside.join("generated");
    let status = std::process::Command::new(bin("stockade-docgen"))
        .arg(&out)
        .status()
        .unwrap();
    assert!(status.success());
    let bash = std::fs::read_to_string(out.join("completions/stockade.bash")).unwrap();
    let fish = std::fs::read_to_string(out.join("completions/stockade.fish")).unwrap();
    let zsh = std::fs::read_to_string(out.join("completions/_stockade")).unwrap();
    let top = std::fs::read_to_string(out.join("man/stockade.1")).unwrap();
    for sub in ["run", "confine", "classify", "probe", "explain"] {
        let help = fx.stockade([sub, "--help"]).output().unwrap();
        assert_code(&help, 0);
        let page = std::fs::read_to_string(out.join(format!("man/stockade-{sub}.1")))
            .unwrap_or_else(|e| panic!("stockade-{sub}.1: {e}"));
        assert!(
            top.contains(&format!("stockade\\-{sub}")),
            "stockade.1 lacks {sub}"
        );
        for option in long_options(&text(&help.stdout)) {
            let roff = option.replace('-', "\\-");
            assert!(page.contains(&roff), "stockade-{sub}.1 lacks {option}");
            assert!(
                bash.contains(&option),
                "bash completion lacks {sub} {option}"
            );
            let bare = option.trim_start_matches('-');
            assert!(zsh.contains(&option), "zsh completion lacks {sub} {option}");
            assert!(fish.contains(bare), "fish completion lacks {sub} {option}");
        }
    }
    // A flag the launcher does not have is not in the pages (the check can fail).
    assert!(!top.contains("\\-\\-no\\-such\\-flag"));
}

/// `build-deb.sh` checks the Build-Depends of packaging/debian/control before it builds
/// anything, and names exactly the packages this machine lacks (each asked of dpkg
/// here), with the one command that installs them; with none missing it says nothing.
#[test]
fn build_deb_names_the_missing_build_dependencies_first_in_one_line() {
    const NAME: &str = "build_deb_names_the_missing_build_dependencies_first_in_one_line";
    let have = |tool: &str| {
        std::process::Command::new("sh")
            .args(["-c", &format!("command -v {tool}")])
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if !have("dpkg-checkbuilddeps") || !have("dpkg-query") {
        eprintln!("SKIPPED (no dpkg-checkbuilddeps: not a Debian system): {NAME}");
        return;
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let installed = |pkg: &str| {
        std::process::Command::new("dpkg-query")
            .args(["-W", "-f", "${Status}", pkg])
            .output()
            .is_ok_and(|o| text(&o.stdout).contains("install ok installed"))
    };
    // The packages behind Build-Depends, but cargo and rustc (rustup's count).
    let control = std::fs::read_to_string(root.join("packaging/debian/control")).unwrap();
    let wanted: Vec<String> = control
        .lines()
        .find_map(|l| l.strip_prefix("Build-Depends: "))
        .unwrap()
        .split(',')
        .map(|d| d.split_whitespace().next().unwrap().to_string())
        .filter(|d| d != "cargo" && d != "rustc")
        .map(|d| {
            if d == "debhelper-compat" {
                "debhelper".into()
            } else {
                d
            }
        })
        .collect();
    assert!(wanted.iter().any(|d| d == "dh-apparmor"), "{wanted:?}");
    let mut missing: Vec<&str> = wanted
        .iter()
        .map(String::as_str)
        .filter(|d| !installed(d))
        .collect();
    missing.sort();
    // Where this user has no cargo (the unprivileged run's login PATH), it is named too.
    let no_cargo = !std::process::Command::new("cargo")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    let rust = if no_cargo {
        missing.extend(["cargo", "rustc"]);
        " (cargo and rustc 1.85 or newer: the distribution's, or rustup's)"
    } else {
        ""
    };
    let out = std::process::Command::new(root.join("packaging/build-deb.sh"))
        .arg("--check-deps")
        .output()
        .unwrap();
    let err = text(&out.stderr);
    if missing.is_empty() {
        assert_code(&out, 0);
        assert_eq!(err, "");
    } else {
        assert_code(&out, 1);
        let list = missing.join(" ");
        assert_eq!(
            err,
            format!(
                "build-deb.sh: missing build dependencies: {list}; install them with: sudo apt-get install {list}{rust}\n"
            )
        );
    }
}

/// The generated bash completion offers the values of `--mode`, `--network`, `--tmp` and
/// `--timeout` (examples of durations), not the file names around it, for `run` and
/// `confine` alike; a flag that takes a path still gets file names (the control).
#[test]
fn bash_completes_the_values_of_mode_network_tmp_and_timeout_not_file_names() {
    let fx = Fixture::new();
    let generated = fx.outside.join("generated");
    let status = std::process::Command::new(bin("stockade-docgen"))
        .arg(&generated)
        .status()
        .unwrap();
    assert!(status.success());
    std::fs::write(fx.ws.join("a-file-here"), "").unwrap();
    let complete = |sub: &str, flag: &str| {
        let script = format!(
            "source \"$0\"; COMP_WORDS=(stockade {sub} {flag} ''); COMP_CWORD=3; \
             COMP_LINE='stockade {sub} {flag} '; COMP_POINT=${{#COMP_LINE}}; \
             _stockade stockade '' {flag}; printf '%s\\n' \"${{COMPREPLY[@]}}\""
        );
        let out = std::process::Command::new("bash")
            .args(["-c", &script])
            .arg(generated.join("completions/stockade.bash"))
            .current_dir(&fx.ws)
            .output()
            .unwrap();
        assert_code(&out, 0);
        let mut words: Vec<String> = text(&out.stdout).lines().map(str::to_string).collect();
        words.sort();
        words
    };
    for sub in ["run", "confine"] {
        assert_eq!(
            complete(sub, "--mode"),
            ["danger-full-access", "read-only", "workspace-write"],
            "{sub}"
        );
        assert_eq!(complete(sub, "--network"), ["allow", "deny"], "{sub}");
        assert_eq!(complete(sub, "--tmp"), ["private", "shared"], "{sub}");
        assert_eq!(complete(sub, "--workspace"), ["a-file-here"], "{sub}");
    }
    let durations = complete("run", "--timeout");
    assert!(durations.contains(&"30s".to_string()), "{durations:?}");
    assert!(
        !durations.iter().any(|w| w == "a-file-here"),
        "{durations:?}"
    );
    // Every suggested duration is one the launcher takes.
    for d in &durations {
        let out = fx
            .stockade(["run", "--timeout", d, "--", "true"])
            .output()
            .unwrap();
        assert_code(&out, 0);
    }
}

/// `NAME  meaning` lines of the `Environment:` block of `stockade --help`.
fn help_environment(help: &str) -> Vec<(String, String)> {
    help.split_once("\nEnvironment:\n")
        .expect("an Environment: block in stockade --help")
        .1
        .lines()
        .take_while(|l| l.starts_with("  "))
        .map(|l| {
            let (name, meaning) = l.trim_start().split_once("  ").unwrap();
            (name.to_string(), meaning.trim_start().to_string())
        })
        .collect()
}

/// The `.TP` entries of a man page's ENVIRONMENT section, roff escapes undone.
fn man_environment(page: &str) -> Vec<(String, String)> {
    let section = page
        .split_once(".SH ENVIRONMENT\n")
        .expect("an ENVIRONMENT section")
        .1
        .split("\n.SH ")
        .next()
        .unwrap();
    let plain = |l: &str| l.replace("\\-", "-").replace("\\*(Aq", "'");
    section
        .split(".TP\n")
        .filter(|e| !e.trim().is_empty())
        .map(|e| {
            let (name, meaning) = e.split_once('\n').unwrap();
            let name = name.trim_start_matches("\\fB").trim_end_matches("\\fR");
            (plain(name), plain(meaning.trim()))
        })
        .collect()
}

/// The rows of the README's table under `### Environment`.
fn readme_environment(readme: &str) -> Vec<(String, String)> {
    readme
        .split_once("\n### Environment\n")
        .expect("a ### Environment section in the README")
        .1
        .lines()
        .skip_while(|l| !l.starts_with("| variable"))
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .map(|l| {
            let cells: Vec<&str> = l.trim_matches('|').split(" | ").collect();
            (cells[0].trim().to_string(), cells[1].trim().to_string())
        })
        .collect()
}

/// The environment variables the launcher's sources read (`var_os("X")`, `var("X")`,
/// `absolute("X")`, `X_ENV: &str = "X"`), cargo's own aside (unit tests read them).
fn variables_the_launcher_reads() -> Vec<String> {
    fn walk(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    let mut files = Vec::new();
    walk(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("../launcher/src"),
        &mut files,
    );
    let mut names = Vec::new();
    for f in files {
        let src = std::fs::read_to_string(&f).unwrap();
        for opener in ["var_os(\"", "var(\"", "absolute(\"", "_ENV: &str = \""] {
            for (i, _) in src.match_indices(opener) {
                let name: String = src[i + opener.len()..]
                    .chars()
                    .take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == '_')
                    .collect();
                if !name.is_empty() && !name.starts_with("CARGO_") {
                    names.push(name);
                }
            }
        }
    }
    names.sort();
    names.dedup();
    names
}

/// `stockade --help`, `man stockade` (generated from it) and the README say the same
/// about every environment variable the launcher reads, word for word, and the control
/// directory is looked for in the same order everywhere, the README's own paragraph on
/// it included; none of them sends requests to the system temporary directory.
#[test]
fn the_man_page_help_and_readme_agree_on_every_environment_variable() {
    let fx = Fixture::new();
    let out = fx.stockade(["--help"]).output().unwrap();
    assert_code(&out, 0);
    let help = help_environment(&text(&out.stdout));
    let generated = fx.outside.join("generated");
    let status = std::process::Command::new(bin("stockade-docgen"))
        .arg(&generated)
        .status()
        .unwrap();
    assert!(status.success());
    let page = std::fs::read_to_string(generated.join("man/stockade.1")).unwrap();
    let readme_text =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../README.md"))
            .unwrap();
    assert_eq!(man_environment(&page), help, "man stockade vs --help");
    assert_eq!(readme_environment(&readme_text), help, "README vs --help");

    let mut documented: Vec<String> = help.iter().map(|(n, _)| n.clone()).collect();
    documented.sort();
    assert_eq!(variables_the_launcher_reads(), documented);

    // The control directory's candidates, in order, in each text.
    let order = [
        "STOCKADE_CONTROL_DIR",
        "XDG_RUNTIME_DIR/stockade",
        "/run/user/UID/stockade",
        "/run/stockade-0",
        ".local/state/stockade",
    ];
    let control = help
        .iter()
        .find(|(n, _)| n == "STOCKADE_CONTROL_DIR")
        .map(|(n, m)| format!("{n} {m}"))
        .unwrap();
    let paragraph = readme_text
        .split_once("**The control directory**")
        .unwrap()
        .1
        .split("\n\n")
        .next()
        .unwrap()
        .replace('\n', " ");
    for (what, t) in [("--help", control.as_str()), ("README", paragraph.as_str())] {
        let at: Vec<usize> = order
            .iter()
            .map(|c| t.find(c).unwrap_or_else(|| panic!("{what} lacks {c}: {t}")))
            .collect();
        assert!(at.is_sorted(), "{what}: {order:?} out of order: {t}");
    }
    for t in [&page, &readme_text, &text(&out.stdout)] {
        assert!(!t.contains("system temporary directory"));
    }
}

/// The function the packages' removal scripts run on root's control directories.
fn purge_function(script: &str) -> String {
    let start = script
        .find("purge_control_dirs() {")
        .expect("the purge function");
    let end = start + script[start..].find("\n}\n").unwrap() + 3;
    script[start..end].to_string()
}

/// The .deb's purge (and the RPM's erase) removes a control directory beneath /run only
/// where it is provably stockade's: named for its owner, mode 0700, holding only
/// stockade's entries. Anything else is left and said. Run here on a directory standing
/// in for /run, with the function exactly as the scripts carry it.
#[test]
fn the_purge_removes_only_control_directories_that_are_provably_stockades() {
    use std::os::unix::fs::PermissionsExt;
    let packaging = Path::new(env!("CARGO_MANIFEST_DIR")).join("../packaging");
    let postrm = std::fs::read_to_string(packaging.join("debian/stockade.postrm")).unwrap();
    let spec = std::fs::read_to_string(packaging.join("stockade.spec")).unwrap();
    let function = purge_function(&postrm);
    assert_eq!(
        purge_function(&spec).replace("%%", "%"),
        function,
        "the RPM's %postun and the .deb's postrm differ"
    );
    assert!(postrm.contains("purge_control_dirs /run\n"));
    assert!(spec.contains("purge_control_dirs /run\n"));

    let fx = Fixture::new();
    let run = fx.outside.join("run");
    // SAFETY: getuid takes no arguments and cannot fail.
    let me = unsafe { libc::getuid() };
    // A second stand-in for /run, for a directory of this very uid with a stranger in it.
    let run2 = fx.outside.join("run2");
    let make = |name: &str, entries: &[&str], mode: u32| {
        let dir = fx.outside.join(name);
        std::fs::create_dir_all(&dir).unwrap();
        for e in entries {
            if e.starts_with("req-") || e.starts_with("out-") {
                std::fs::create_dir(dir.join(e)).unwrap();
                std::fs::write(dir.join(e).join("request"), "x").unwrap();
            } else {
                std::fs::write(dir.join(e), "x").unwrap();
            }
        }
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(mode)).unwrap();
        dir
    };
    let ours = make(
        &format!("run/stockade-{me}"),
        &[
            ".swept",
            ".namespaces",
            "req-1796280339-abcdefghijkl-42",
            "out-1796280339-abcdefghijkl",
        ],
        0o700,
    );
    let foreign_file = make(
        &format!("run2/stockade-{me}"),
        &["req-1796280339-abcdefghijkl-42", "notes.txt"],
        0o700,
    );
    let open_mode = make(&format!("run/stockade-{}", me + 2), &[".swept"], 0o755);
    let not_a_uid = make("run/stockade-cache", &[], 0o700);
    let linked = run.join(format!("stockade-{}", me + 3));
    std::os::unix::fs::symlink(&ours, &linked).unwrap();
    // Owned by another uid than its name says (where this test may chown).
    let wrong_owner = stockade_tests::is_root().then(|| {
        let d = make("run/stockade-4242", &[".swept"], 0o700);
        std::os::unix::fs::chown(&d, Some(4343), Some(4343)).unwrap();
        d
    });
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "{function}purge_control_dirs \"$1\" && purge_control_dirs \"$2\""
        ))
        .arg("sh")
        .arg(&run)
        .arg(&run2)
        .output()
        .unwrap();
    assert_code(&out, 0);
    let err = text(&out.stderr);
    assert!(!ours.exists(), "{err}");
    for kept in [&foreign_file, &open_mode, &not_a_uid]
        .into_iter()
        .chain(wrong_owner.as_ref())
    {
        assert!(kept.exists(), "{} was removed: {err}", kept.display());
    }
    assert!(linked.symlink_metadata().is_ok(), "the link was removed");
    assert!(err.contains(&format!(
        "leaving {}: it holds files stockade does not make",
        foreign_file.display()
    )));
    assert!(err.contains(&format!("leaving {}: not a directory", open_mode.display())));
    assert!(err.contains(&format!("leaving {}: not a directory", linked.display())));
    assert!(!err.contains("stockade-cache"), "{err}");
}

/// Runs packaging/target-triple with STOCKADE_LIBC set to `choice`.
fn target_triple(choice: &str) -> std::process::Output {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../packaging/target-triple");
    std::process::Command::new(script)
        .env("STOCKADE_LIBC", choice)
        .output()
        .unwrap()
}

#[test]
fn the_packages_c_library_is_chosen_explicitly_and_a_wrong_choice_is_named() {
    // The script asks rustc, which an ordinary user CI switches to may not have.
    let rustc = match std::process::Command::new("rustc").arg("-vV").output() {
        Ok(out) if out.status.success() => out,
        other => {
            eprintln!(
                "SKIPPED (no rustc for this user): the_packages_c_library_is_chosen_explicitly ({other:?})"
            );
            return;
        }
    };
    let host = text(&rustc.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("host: ").map(str::to_string))
        .unwrap();
    let glibc = target_triple("glibc");
    assert_code(&glibc, 0);
    assert_eq!(text(&glibc.stdout).trim(), host);
    // A misspelt choice builds nothing: it is named, with the ones there are.
    let wrong = target_triple("gnu");
    assert_code(&wrong, 2);
    assert!(wrong.stdout.is_empty());
    assert!(
        text(&wrong.stderr).contains("must be auto, glibc or musl, not 'gnu'"),
        "{}",
        text(&wrong.stderr)
    );
    // musl is either the musl target, or a refusal naming how to install it: never the
    // glibc target in its place.
    let musl = target_triple("musl");
    let musl_target = host.replace("-gnu", "-musl");
    match musl.status.code() {
        Some(0) => assert_eq!(text(&musl.stdout).trim(), musl_target),
        _ => assert!(
            text(&musl.stderr).contains(&format!("rustup target add {musl_target}")),
            "{}",
            text(&musl.stderr)
        ),
    }
    let auto = target_triple("auto");
    assert_code(&auto, 0);
    let expected = if musl.status.success() {
        &musl_target
    } else {
        &host
    };
    assert_eq!(text(&auto.stdout).trim(), expected);
}
