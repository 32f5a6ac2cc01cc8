//! Findings of the attack review of the release: each test makes the attack a hostile
//! command would make, with a positive control showing the same action works where the
//! policy allows it.

mod support;
use std::path::{Path, PathBuf};
use support::*;

/// Removes a link the test planted in the shared `/tmp`, whatever the test's outcome.
struct PlantedLink(PathBuf);

impl Drop for PlantedLink {
    fn drop(&mut self) {
        if self
            .0
            .symlink_metadata()
            .is_ok_and(|m| m.file_type().is_symlink())
        {
            let _ = std::fs::remove_file(&self.0);
        }
    }
}

fn cat_script(path: &Path) -> String {
    format!("cat {p} && echo READ || echo DENIED", p = path.display())
}

/// A link a workspace-write command plants in the shared `/tmp` at a name stockade once
/// used for its control directory (`/tmp/stockade-UID`) must not decide what later
/// commands may read: following it hid its target (here a directory outside every root;
/// `/usr` would make every later command of the user fail with 126).
#[test]
fn a_link_planted_in_tmp_cannot_hide_paths_from_later_commands() {
    // SAFETY: getuid cannot fail.
    let uid = unsafe { libc::getuid() };
    let name = PathBuf::from(format!("/tmp/stockade-{uid}"));
    for fx in [Fixture::new(), Fixture::staged()] {
        let _planted = PlantedLink(name.clone());
        let secret = fx.outside.join("notes.txt");
        std::fs::write(&secret, "visible\n").unwrap();
        // Control: before anything is planted, a later command reads it.
        let before = fx.run_sh("read-only", &cat_script(&secret));
        assert!(text(&before.stdout).contains("visible\nREAD"), "{before:?}");
        // The attack: an ordinary workspace-write command may write /tmp.
        let plant = fx.run_sh(
            "workspace-write",
            &format!(
                "ln -s {} {} && echo PLANTED",
                fx.outside.display(),
                name.display()
            ),
        );
        assert!(
            text(&plant.stdout).contains("PLANTED"),
            "the command could not plant {} (left over from another run?): {plant:?}",
            name.display()
        );
        for mode in ["read-only", "workspace-write"] {
            let after = fx.run_sh(mode, &cat_script(&secret));
            assert!(
                text(&after.stdout).contains("visible\nREAD"),
                "{mode}, stage {}: a planted {} hid its target from a later command: {after:?}",
                fx.stage,
                name.display()
            );
        }
    }
}

/// A command that changes its own status record (its mode: the command owns the file,
/// and the private directory is writable on the stage's mounts so the runner can record)
/// is a command that attacked its sandbox. `stockade classify` says `tampered`; `stockade
/// run --json` must say so too instead of a clean `runnerFailed: false`.
#[test]
fn run_reports_a_status_record_the_command_tampered_with() {
    for fx in [Fixture::new(), Fixture::staged()] {
        let base = fx.runtime.join("stockade");
        let script = |chmod: &str| {
            format!(
                "for d in {}/req-*; do chmod {chmod} \"$d/status\" && echo CHANGED; done",
                base.display()
            )
        };
        // Without the stage the runner's supervisor refuses the chmod (the record is
        // outside the writable roots): the detection is shown where it cannot run.
        let mask = (!fx.stage).then_some("no-notify");
        for (chmod, tampered) in [("600", false), ("644", true)] {
            let (out, v) = run_json(
                &mut fx.stockade_masked(mask, ["run", "--json", "--", "sh", "-c", &script(chmod)]),
            );
            assert_code(&out, 0);
            assert_eq!(v["stdout"]["text"], "CHANGED\n", "{v}");
            assert_eq!(v["sandbox"]["runnerFailed"], false, "{v}");
            assert_eq!(
                v["sandbox"]["tampered"], tampered,
                "stage {}, chmod {chmod}: {v}",
                fx.stage
            );
        }
    }
}
