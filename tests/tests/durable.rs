//! Outcomes that survive the supervisor: `stockade run` killed (SIGKILL, no chance to
//! clean up) leaves nothing of its command running, wherever its range could be held
//! whole (a pid namespace, a cgroup), and at least not the command itself elsewhere.

mod support;
use std::path::Path;
use std::process::{Child, Stdio};
use support::*;

/// Descendants of every kind, each ignoring SIGTERM and each writing a marker after a
/// while if it is still alive: a background job, a `setsid` daemon, a double-forked
/// orphan; the command itself blocks every signal it can.
const SCATTER: &str = "trap '' TERM INT HUP; \
    (trap '' TERM INT HUP; sleep 3; touch job) & \
    setsid sh -c 'trap \"\" TERM; sleep 3; touch daemon' & \
    ( (trap '' TERM; sleep 3; touch orphan) & ) ; \
    touch ready; \
    while :; do sleep 1; done";

/// Starts `stockade run ARGS -- bash -c script` tagged with `tag`, waits until the
/// command wrote `ready`, then kills the launcher with SIGKILL and collects it.
fn run_then_kill_launcher(fx: &Fixture, tag: &str, args: &[&str], script: &str) {
    let mut cmd = fx.stockade(["run"]);
    cmd.args(args)
        .args(["--", "bash", "-c", script])
        .env("E2E_TAG", tag)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let mut launcher: Child = cmd.spawn().unwrap();
    wait_for_file(&fx.ws.join("ready"));
    launcher.kill().unwrap();
    launcher.wait().unwrap();
}

/// Waits (bounded, not timed: SIGKILL is delivered asynchronously) until no process
/// carries `tag`, and returns what is still there at the end.
fn survivors(tag: &str) -> Vec<(i32, String)> {
    for _ in 0..500 {
        if tagged_processes(tag).is_empty() {
            return Vec::new();
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    tagged_processes(tag)
}

/// Whether this machine gives the command a pid namespace (the stage's default).
fn pid_namespace_available(fx: &Fixture) -> bool {
    fx.stockade(["run", "--isolate-pids", "--", "true"])
        .output()
        .unwrap()
        .status
        .success()
}

fn markers(ws: &Path) -> Vec<&'static str> {
    ["job", "daemon", "orphan"]
        .into_iter()
        .filter(|m| ws.join(m).exists())
        .collect()
}

#[test]
fn a_killed_launcher_takes_the_whole_range_with_it_through_the_pid_namespace() {
    let fx = Fixture::staged();
    if !pid_namespace_available(&fx) {
        eprintln!(
            "SKIPPED (no pid namespace here): a_killed_launcher_takes_the_whole_range_with_it_through_the_pid_namespace"
        );
        return;
    }
    // Subreaper containment: only the namespace holds the range together.
    let tag = unique_tag("pidns-death");
    run_then_kill_launcher(
        &fx,
        &tag,
        &["--isolate-pids", "--containment", "subreaper"],
        SCATTER,
    );
    assert_eq!(survivors(&tag), vec![], "survivors of a killed launcher");
    // Past the markers' time: none was written (a process that ran on would have).
    std::thread::sleep(std::time::Duration::from_millis(3500));
    assert_eq!(markers(&fx.ws), Vec::<&str>::new());
}

#[test]
fn a_killed_launcher_takes_the_whole_range_with_it_through_the_cgroup() {
    if !stockade_tests::is_root() {
        eprintln!(
            "SKIPPED (needs root): a_killed_launcher_takes_the_whole_range_with_it_through_the_cgroup (cgroup containment)"
        );
        return;
    }
    // Without the stage, and with nothing confined: the guardian alone ends the range.
    for args in [
        &["--containment", "cgroup"][..],
        &["--containment", "cgroup", "--mode", "danger-full-access"][..],
    ] {
        let fx = Fixture::new();
        let tag = unique_tag("cgroup-death");
        run_then_kill_launcher(&fx, &tag, args, SCATTER);
        assert_eq!(survivors(&tag), vec![], "{args:?}: survivors");
        std::thread::sleep(std::time::Duration::from_millis(3500));
        assert_eq!(markers(&fx.ws), Vec::<&str>::new(), "{args:?}");
    }
}

#[test]
fn without_a_pid_namespace_or_cgroup_a_killed_launcher_still_takes_the_command() {
    // The parent-death signal: the direct child, the runner and the command it became,
    // and without the pid namespace the stage's runner too.
    for (stage, args) in [
        (false, &["--containment", "subreaper"][..]),
        (
            false,
            &["--containment", "subreaper", "--mode", "danger-full-access"][..],
        ),
        (true, &["--containment", "subreaper", "--share-pids"][..]),
    ] {
        let fx = if stage {
            Fixture::staged()
        } else {
            Fixture::new()
        };
        let tag = unique_tag("pdeath");
        run_then_kill_launcher(
            &fx,
            &tag,
            args,
            "trap '' TERM INT HUP; touch ready; while :; do sleep 1; done",
        );
        assert_eq!(survivors(&tag), vec![], "{args:?}: the command survived");
    }
}

#[test]
fn keep_background_leaves_the_range_running_when_the_launcher_dies() {
    // The positive control of the tests above: what they look for is there to be seen
    // when nothing ends it.
    let fx = Fixture::new();
    let tag = unique_tag("kept");
    run_then_kill_launcher(
        &fx,
        &tag,
        &["--keep-background", "--containment", "subreaper"],
        "touch ready; while :; do sleep 1; done",
    );
    let left = tagged_processes(&tag);
    kill_tagged(&tag);
    assert!(
        !left.is_empty(),
        "the command should have been kept running"
    );
}

/// Spawns `confined`'s argv from a shell standing in for an executor, waits until the
/// command wrote `ready`, then kills the executor (SIGKILL).
fn spawn_then_kill_executor(fx: &Fixture, confined: &serde_json::Value) {
    let argv = confined_argv(confined);
    let mut executor = std::process::Command::new("sh")
        .args(["-c", "\"$@\" & wait", "executor"])
        .args(&argv)
        .current_dir(&fx.ws)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for_file(&fx.ws.join("ready"));
    executor.kill().unwrap();
    executor.wait().unwrap();
}

#[test]
fn die_with_executor_ends_a_confined_argv_when_its_executor_dies() {
    let script = "trap '' TERM INT HUP; touch ready; while :; do sleep 1; done";
    for staged in [false, true] {
        let fx = if staged {
            Fixture::staged()
        } else {
            Fixture::new()
        };
        let tag = unique_tag("executor-death");
        let env = format!("E2E_TAG={tag}");
        let confined = fx.confine(&[
            "--die-with-executor",
            "--env",
            &env,
            "--",
            "sh",
            "-c",
            script,
        ]);
        assert_eq!(confined["argv"][1], "__die-with-parent");
        spawn_then_kill_executor(&fx, &confined);
        assert_eq!(survivors(&tag), vec![], "staged {staged}: survivors");
    }
    // The default, and the control: without the flag the command outlives its executor.
    let fx = Fixture::new();
    let tag = unique_tag("executor-default");
    let env = format!("E2E_TAG={tag}");
    let confined = fx.confine(&["--env", &env, "--", "sh", "-c", script]);
    spawn_then_kill_executor(&fx, &confined);
    let left = tagged_processes(&tag);
    kill_tagged(&tag);
    assert!(
        !left.is_empty(),
        "the command should have outlived its executor"
    );
}

#[test]
fn groups_of_launchers_that_died_are_swept_and_live_ones_kept() {
    if !stockade_tests::is_root() {
        eprintln!(
            "SKIPPED (needs root): groups_of_launchers_that_died_are_swept_and_live_ones_kept (cgroup containment)"
        );
        return;
    }
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap();
    let mount = mounts
        .lines()
        .find_map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            (f[2] == "cgroup2").then(|| f[1].to_string())
        })
        .unwrap();
    let own = std::fs::read_to_string("/proc/self/cgroup").unwrap();
    let own = own
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .unwrap()
        .to_string();
    let parent = std::path::Path::new(&mount).join(own.trim_start_matches('/'));
    // A pid no process has (above the kernel's maximum), and this test's own (live).
    let dead = parent.join(format!("stockade-{}-leftover", 1 << 23));
    let live = parent.join(format!("stockade-{}-leftover", std::process::id()));
    std::fs::create_dir(&dead).unwrap();
    std::fs::create_dir(&live).unwrap();
    let fx = Fixture::new();
    let out = fx
        .stockade(["run", "--containment", "cgroup", "--", "true"])
        .output()
        .unwrap();
    let live_left = live.exists();
    let _ = std::fs::remove_dir(&live);
    let dead_left = dead.exists();
    let _ = std::fs::remove_dir(&dead);
    assert_code(&out, 0);
    assert!(!dead_left, "the dead launcher's group was not swept");
    assert!(live_left, "a live launcher's group was swept");
}
