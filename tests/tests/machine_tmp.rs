//! Root changing the machine's own `/tmp` under the stage gets it put back. Alone in its
//! test binary: every staged run watches `/tmp` as a shared root, so a test running
//! beside this one in the same process would see the change and report it as its own
//! command's (cargo runs test binaries one after another, the tests inside one at once).

mod support;

use support::*;

fn staged_here(fx: &Fixture) -> bool {
    let out = fx.stockade(["probe", "--json"]).output().unwrap();
    let p: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    p["kernel"]["namespaces"]["available"] == true
}

fn mode_of(p: &std::path::Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).unwrap().permissions().mode() & 0o7777
}

/// Puts the machine's /tmp back as it is everywhere (1777 root:root), however the test
/// ends.
struct RestoreTmp;

impl Drop for RestoreTmp {
    fn drop(&mut self) {
        use std::os::unix::fs::PermissionsExt;
        let _ = std::os::unix::fs::chown("/tmp", Some(0), Some(0));
        let _ = std::fs::set_permissions("/tmp", std::fs::Permissions::from_mode(0o1777));
    }
}

#[test]
fn root_changing_the_machines_tmp_gets_it_put_back() {
    if !stockade_tests::is_root() {
        eprintln!("SKIPPED (needs root): root_changing_the_machines_tmp_gets_it_put_back");
        return;
    }
    let fx = Fixture::staged();
    if !staged_here(&fx) {
        eprintln!("SKIPPED (needs namespaces): root_changing_the_machines_tmp");
        return;
    }
    let _restore = RestoreTmp;
    assert_eq!(
        mode_of(std::path::Path::new("/tmp")),
        0o1777,
        "/tmp is not 1777 to start with"
    );
    // Only the sticky bit goes, and only for as long as the stage takes to see it: the
    // least harm to whatever else uses this machine's /tmp meanwhile.
    let out = fx
        .stockade(["run", "--", "chmod", "0777", "/tmp"])
        .output()
        .unwrap();
    assert_code(&out, 0);
    assert!(
        text(&out.stderr).contains(
            "[sandbox: shared directory /tmp changed from mode 1777 owner 0:0 to mode 0777 owner 0:0; put back]"
        ),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(mode_of(std::path::Path::new("/tmp")), 0o1777);
    // Control: with a private /tmp the command changes its own tmpfs, which is no one
    // else's: nothing to put back, nothing reported.
    let out = fx
        .stockade([
            "run",
            "--tmp",
            "private",
            "--",
            "sh",
            "-c",
            "chmod 0700 /tmp && stat -c %a /tmp",
        ])
        .output()
        .unwrap();
    assert_code(&out, 0);
    assert_eq!(text(&out.stdout), "700\n");
    assert!(
        !text(&out.stderr).contains("[sandbox:"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(mode_of(std::path::Path::new("/tmp")), 0o1777);
}
