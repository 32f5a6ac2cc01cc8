//! `stockade-docgen OUTDIR`: writes stockade's man pages and shell completions, generated
//! from the launcher's own clap definitions, so they cannot drift from `--help`:
//!
//!   OUTDIR/man/stockade.1, OUTDIR/man/stockade-SUBCOMMAND.1 (one per subcommand)
//!   OUTDIR/completions/stockade.bash, _stockade (zsh), stockade.fish
//!
//! The packages run it at build time (packaging/build-dist.sh). It is a separate binary
//! so that neither `stockade` nor the runner carries the generators. The launcher's
//! command-line modules are compiled in here by path: they depend on nothing else of the
//! launcher, and a change that made them would fail to build here, not drift.
//! The runner is not clap-based; its page is hand-written (packaging/man/).

// The checks that run after parsing serve the launcher, not the pages.
#[allow(dead_code)]
#[path = "../../../launcher/src/commands/cli.rs"]
mod cli;
#[path = "../../../launcher/src/commands/duration.rs"]
mod duration;
// Only `parse_assignment` is used by the command line; the rest serves the launcher.
#[allow(dead_code)]
#[path = "../../../launcher/src/commands/env.rs"]
mod env;
#[path = "../../../launcher/src/commands/size.rs"]
mod size;

use clap::CommandFactory;
use clap_mangen::Man;
use clap_mangen::roff::{Roff, bold, roman};
use std::io::Write;
use std::path::{Path, PathBuf};

fn main() {
    let mut args = std::env::args_os().skip(1);
    let (Some(out), None) = (args.next(), args.next()) else {
        eprintln!("usage: stockade-docgen OUTDIR");
        std::process::exit(2);
    };
    if let Err(e) = generate(Path::new(&out)) {
        eprintln!("stockade-docgen: {e}");
        std::process::exit(1);
    }
}

fn generate(out: &Path) -> std::io::Result<()> {
    let man_dir = out.join("man");
    let completions = out.join("completions");
    std::fs::create_dir_all(&man_dir)?;
    std::fs::create_dir_all(&completions)?;
    let mut cmd = cli::Cli::command();
    // `stockade help SUBCOMMAND` has no page of its own: the pages are the help.
    let mut pages = cmd.clone().disable_help_subcommand(true);
    pages.build();
    write_page(&man_dir.join("stockade.1"), |w| top_page(&pages, w))?;
    for sub in pages.get_subcommands() {
        // clap names take `&'static str`; this process is short-lived.
        let name: &'static str = format!("stockade-{}", sub.get_name()).leak();
        let sub = sub
            .clone()
            .name(name)
            .display_name(name)
            .version(env!("CARGO_PKG_VERSION"));
        write_page(&man_dir.join(format!("{name}.1")), |w| {
            let man = Man::new(sub.clone());
            man.render(w)?;
            see_also(w, &["stockade"])
        })?;
    }
    use clap_complete::Shell;
    for (shell, file) in [
        (Shell::Bash, "stockade.bash"),
        (Shell::Zsh, "_stockade"),
        (Shell::Fish, "stockade.fish"),
    ] {
        let mut f = std::fs::File::create(completions.join(file))?;
        clap_complete::generate(shell, &mut cmd, "stockade", &mut f);
    }
    Ok(())
}

fn write_page(
    path: &PathBuf,
    render: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let mut buf = Vec::new();
    render(&mut buf)?;
    std::fs::write(path, buf)
}

/// stockade(1): clap's sections, then what a new user needs to get from nothing to a
/// confined, classified, debugged command, and the exit codes.
fn top_page(cmd: &clap::Command, w: &mut dyn Write) -> std::io::Result<()> {
    let man = Man::new(cmd.clone());
    man.render_title(w)?;
    man.render_name_section(w)?;
    man.render_synopsis_section(w)?;
    man.render_description_section(w)?;
    man.render_options_section(w)?;
    man.render_subcommands_section(w)?;
    let mut roff = Roff::new();
    roff.control("SH", ["WALKTHROUGH"]);
    for (text, example) in WALKTHROUGH {
        roff.control("PP", []).text([roman(*text)]);
        roff.control("PP", [])
            .control("RS", ["4"])
            .control("nf", []);
        for line in example.lines() {
            roff.text([roman(line)]);
        }
        roff.control("fi", []).control("RE", []);
    }
    roff.control("SH", ["EXIT STATUS"]);
    for (code, meaning) in EXIT_STATUS {
        roff.control("TP", [])
            .text([bold(*code)])
            .text([roman(*meaning)]);
    }
    roff.control("SH", ["ENVIRONMENT"]);
    for (name, meaning) in environment(cli::AFTER_HELP) {
        roff.control("TP", [])
            .text([bold(name)])
            .text([roman(meaning)]);
    }
    roff.control("SH", ["FILES"]);
    for (path, meaning) in FILES {
        roff.control("TP", [])
            .text([bold(*path)])
            .text([roman(*meaning)]);
    }
    roff.to_writer(w)?;
    see_also(
        w,
        &[
            "stockade-run",
            "stockade-confine",
            "stockade-classify",
            "stockade-probe",
            "stockade-explain",
            "stockade-runner",
        ],
    )?;
    man.render_version_section(w)
}

fn see_also(w: &mut dyn Write, pages: &[&str]) -> std::io::Result<()> {
    let mut roff = Roff::new();
    roff.control("SH", ["SEE ALSO"]);
    let mut line = Vec::new();
    for (i, page) in pages.iter().enumerate() {
        line.push(bold(*page));
        line.push(roman(if i + 1 < pages.len() { "(1), " } else { "(1)" }));
    }
    roff.text(line);
    roff.to_writer(w)
}

const WALKTHROUGH: &[(&str, &str)] = &[
    (
        "Run a command confined to the current directory (workspace-write, the default). The kernel refuses the write outside it (Read-only file system under the namespace stage, which mounts everything outside the writable roots read-only; Permission denied, Landlock's answer, where the stage cannot run); stockade names the refusal (kind, path, the option that would allow it), adds the marker agents know, and exits with the command's code (this as root: an ordinary user, whom Unix permissions refuse /etc anyway, gets the same error and no marker, since stockade calls only its own refusals denials):",
        "stockade run -- bash -c 'echo hello > hello.txt; cat hello.txt; touch /etc/nope'\nhello\ntouch: cannot touch '/etc/nope': Read-only file system\n[sandbox: file write denied: /etc/nope (allow with --writable /etc)]\n[sandbox: file access denied under workspace-write mode]",
    ),
    (
        "Read-only, with a time limit, output captured as one JSON document:",
        "stockade run --mode read-only --timeout 30s --json -- ls /root",
    ),
    (
        "See what this kernel can enforce for each mode:",
        "stockade probe",
    ),
    (
        "As a confine provider: prepare the command, spawn the argv yourself, then ask for a verdict (denied, runner failed, or an ordinary failure):",
        "stockade confine --mode read-only -- bash -c 'echo hi > note.txt' > c.json\nmapfile -t argv < <(jq -r '.argv[]' c.json); \"${argv[@]}\" 2> err; code=$?\nstockade classify --confined c.json --exit-code \"$code\" --stderr err",
    ),
    (
        "Debug a prepared request before running it: its argv, cwd, environment and filesystem grants, and whether the runner would accept it (nothing is consumed):",
        "stockade confine --mode read-only -- ls /root > c.json\nstockade explain \"$(jq -r '.argv[] | select(test(\"/request$\"))' c.json)\"",
    ),
];

/// The `Environment:` block of `stockade --help`: each variable and what it does.
fn environment(help: &str) -> Vec<(&str, &str)> {
    help.split_once("\nEnvironment:\n")
        .map(|(_, block)| block)
        .unwrap_or_default()
        .lines()
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.trim_start().split_once("  "))
        .map(|(name, meaning)| (name, meaning.trim_start()))
        .collect()
}

const FILES: &[(&str, &str)] = &[
    (
        "/usr/libexec/stockade/stockade-runner",
        "The runner the packages install (see STOCKADE_RUNNER).",
    ),
    (
        "/usr/share/doc/stockade/provider-contract.md.gz",
        "Every field of the ConfinedArgv and the classify verdict, the status record and exit codes, for executors (provider-contract.md, uncompressed, where the RPM installs it).",
    ),
];

const EXIT_STATUS: &[(&str, &str)] = &[
    ("the command's own", "The command ran and exited."),
    ("124", "stockade run --timeout expired."),
    (
        "125",
        "stockade or its runner failed and the command did not run; one stderr line starting \"stockade: \" or \"stockade-runner: \" says why. SANDBOX_UNAVAILABLE in it: this kernel cannot confine the mode.",
    ),
    ("126", "The program was found but could not be executed."),
    ("127", "The program was not found."),
    ("128+N", "The command was killed by signal N."),
];
