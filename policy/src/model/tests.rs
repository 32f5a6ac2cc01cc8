//! The model's answers for the README's own examples, per mode, set-up and ABI. The
//! kernel's answers for random trees are checked by `tests/src/bin/model_differential/`
//! (on the host, and on the kernel matrix's ABI 2 and ABI 6 guests).

use super::*;
use crate::mode::Mode;
use crate::stage::Protected;

/// /s/ws (workspace) holding a hidden `.env`, a protected `.git/hooks` and a nested
/// root `cache`; /s/out outside every root, with a hidden `key`; a device in each.
fn tree() -> Tree {
    let mut t = Tree::new();
    for d in ["/s/ws/.git/hooks", "/s/ws/src", "/s/ws/cache", "/s/out/d"] {
        t.insert(d, Node::Dir);
    }
    for f in [
        "/s/ws/.env",
        "/s/ws/src/a",
        "/s/ws/.git/hooks/pre-commit",
        "/s/out/key",
        "/s/out/d/f",
    ] {
        t.insert(f, Node::File);
    }
    t.insert("/s/ws/link", Node::Symlink("/s/out/key".into()));
    t.insert("/s/out/null", Node::CharDevice);
    t.insert("/s/ws/null", Node::CharDevice);
    t
}

fn policy(mode: Mode) -> Policy {
    let mut p = Policy::for_tests(mode, "/s/ws").with_writable_roots(vec!["/s/ws/cache".into()]);
    p.hidden = vec!["/s/out/key".into(), "/s/ws/.env".into()];
    p.protected = vec![Protected {
        path: "/s/ws/.git/hooks".into(),
        root: "/s/ws".into(),
    }];
    p.stage = true;
    p
}

fn ask(mode: Mode, staged: bool, abi: u32, path: &str, op: Op) -> Answer {
    let t = tree();
    let setup = Setup {
        landlock_abi: abi,
        staged,
        supervised: false,
        supervised_writes: false,
    };
    Model::new(&policy(mode), &t, setup).answer(Path::new(path), &op)
}

#[test]
fn read_only_reads_all_but_hidden_paths_and_writes_nothing_but_dev_null() {
    for staged in [false, true] {
        let a = |path, op| ask(Mode::ReadOnly, staged, 7, path, op);
        assert_eq!(a("/s/ws/src/a", Op::Read), Answer::Allowed);
        assert!(!a("/s/out/key", Op::Read).allowed());
        assert!(!a("/s/ws/link", Op::Read).allowed(), "read through a link");
        assert!(!a("/s/ws/src/a", Op::Write).allowed());
        assert!(!a("/s/ws/src", Op::Create).allowed());
        assert_eq!(
            a("/s/ws/src/a", Op::Metadata),
            Answer::Denied(Refusal::Seccomp)
        );
        assert_eq!(
            a("/s/ws/src/a", Op::Xattr),
            Answer::Denied(Refusal::SeccompXattr)
        );
    }
    assert_eq!(
        ask(Mode::ReadOnly, true, 7, "/s/ws/src/a", Op::Write),
        Answer::Denied(Refusal::ReadOnlyMount)
    );
    assert_eq!(
        ask(Mode::ReadOnly, false, 7, "/s/ws/src/a", Op::Write),
        Answer::Denied(Refusal::Landlock)
    );
}

#[test]
fn workspace_write_writes_beneath_its_roots_only() {
    for staged in [false, true] {
        let a = |path, op| ask(Mode::WorkspaceWrite, staged, 7, path, op);
        assert_eq!(a("/s/ws/src/a", Op::Write), Answer::Allowed);
        assert_eq!(a("/s/ws/cache", Op::Create), Answer::Allowed);
        assert!(!a("/s/out/d/f", Op::Write).allowed());
        assert!(!a("/s/out/d", Op::Create).allowed());
        // Writing a device is refused outside the roots even on a read-only mount.
        assert_eq!(
            a("/s/out/null", Op::Write),
            Answer::Denied(Refusal::Landlock)
        );
        assert_eq!(a("/s/ws/null", Op::Ioctl), Answer::Allowed);
        assert_eq!(
            a("/s/out/null", Op::Ioctl),
            Answer::Denied(Refusal::Landlock)
        );
    }
    // Metadata outside the roots: held by the stage only.
    assert_eq!(
        ask(Mode::WorkspaceWrite, true, 7, "/s/out/d/f", Op::Metadata),
        Answer::Denied(Refusal::ReadOnlyMount)
    );
    assert_eq!(
        ask(Mode::WorkspaceWrite, false, 7, "/s/out/d/f", Op::Metadata),
        Answer::Unenforced(Guarantee::Metadata)
    );
    // The directories the stage pins are mounts of their own; a root nested in another
    // is none, but cannot move.
    let a = |staged, path, op| ask(Mode::WorkspaceWrite, staged, 7, path, op);
    let into = |d: &str| Op::Rename(PathBuf::from(d));
    assert_eq!(
        a(true, "/s/ws/src/a", into("/s/ws/.git")),
        Answer::Denied(Refusal::CrossMount)
    );
    assert_eq!(a(false, "/s/ws/src/a", into("/s/ws/.git")), Answer::Allowed);
    assert_eq!(a(true, "/s/ws/src/a", into("/s/ws/cache")), Answer::Allowed);
    assert_eq!(
        a(true, "/s/ws/cache", into("/s/ws/src")),
        Answer::Denied(Refusal::MountPoint)
    );
    assert_eq!(a(false, "/s/ws/cache", into("/s/ws/src")), Answer::Allowed);
    // A link may give no more than the old name: not a file from outside into a root.
    assert_eq!(
        a(false, "/s/out/d/f", Op::Link("/s/ws/src".into())),
        Answer::Denied(Refusal::Refer)
    );
}

#[test]
fn a_hidden_path_in_a_root_is_written_but_never_read_nor_moved_into_sight() {
    let a = |staged, op| ask(Mode::WorkspaceWrite, staged, 7, "/s/ws/.env", op);
    assert_eq!(a(false, Op::Read), Answer::Denied(Refusal::Landlock));
    assert!(matches!(a(false, Op::Write), Answer::Limit(_)));
    assert_eq!(
        a(false, Op::Rename("/s/ws/src".into())),
        Answer::Denied(Refusal::Refer)
    );
    assert_eq!(
        a(false, Op::Link("/s/ws/src".into())),
        Answer::Denied(Refusal::Refer)
    );
    // Under the stage: covered by a mask, bound read-only, a mount point.
    assert_eq!(a(true, Op::Read), Answer::Denied(Refusal::Mask));
    assert_eq!(a(true, Op::Remove), Answer::Denied(Refusal::MountPoint));
    // A hidden file outside the roots cannot be linked into one.
    assert_eq!(
        ask(
            Mode::WorkspaceWrite,
            false,
            7,
            "/s/out/key",
            Op::Link("/s/ws/src".into())
        ),
        Answer::Denied(Refusal::Refer)
    );
}

#[test]
fn protected_paths_hold_under_the_stage_and_are_reported_missing_without_it() {
    let a = |staged, path, op| ask(Mode::WorkspaceWrite, staged, 7, path, op);
    assert_eq!(
        a(true, "/s/ws/.git/hooks/pre-commit", Op::Write),
        Answer::Denied(Refusal::ReadOnlyMount)
    );
    assert_eq!(
        a(true, "/s/ws/.git/hooks", Op::Create),
        Answer::Denied(Refusal::ReadOnlyMount)
    );
    assert_eq!(
        a(true, "/s/ws/.git", Op::Remove),
        Answer::Denied(Refusal::MountPoint)
    );
    assert_eq!(
        a(false, "/s/ws/.git/hooks/pre-commit", Op::Write),
        Answer::Unenforced(Guarantee::ProtectedPaths)
    );
    assert_eq!(
        a(false, "/s/ws/.git", Op::Rename("/s/ws/src".into())),
        Answer::Unenforced(Guarantee::ProtectedPaths)
    );
}

#[test]
fn what_an_older_landlock_cannot_govern_is_unenforced_or_refused_more_strictly() {
    let a = |abi, staged, path, op| ask(Mode::WorkspaceWrite, staged, abi, path, op);
    assert_eq!(
        a(2, false, "/s/out/d/f", Op::Truncate),
        Answer::Unenforced(Guarantee::Truncate)
    );
    assert_eq!(
        a(3, false, "/s/out/d/f", Op::Truncate),
        Answer::Denied(Refusal::Landlock)
    );
    // The stage's read-only mount holds what the ABI cannot.
    assert_eq!(
        a(2, true, "/s/out/d/f", Op::Truncate),
        Answer::Denied(Refusal::ReadOnlyMount)
    );
    assert_eq!(
        a(4, false, "/s/out/null", Op::Ioctl),
        Answer::Unenforced(Guarantee::DeviceIoctl)
    );
    assert_eq!(
        a(1, false, "/s/ws/src/a", Op::Rename("/s/ws".into())),
        Answer::DeniedPartial(Refusal::NoRefer, Guarantee::Refer)
    );
    assert_eq!(
        a(2, false, "/s/ws/src/a", Op::Rename("/s/ws".into())),
        Answer::Allowed
    );
}

#[test]
fn danger_full_access_allows_everything_and_missing_paths_are_not_ours() {
    assert_eq!(
        ask(Mode::DangerFullAccess, false, 7, "/s/out/key", Op::Read),
        Answer::Allowed
    );
    assert_eq!(
        ask(Mode::WorkspaceWrite, false, 7, "/s/none", Op::Read),
        Answer::NotApplicable
    );
    assert_eq!(
        ask(Mode::WorkspaceWrite, false, 7, "/s/ws/src", Op::Read),
        Answer::NotApplicable
    );
}

/// Found by the kernel matrix (6.1, ABI 2): a kernel that refuses the stage its masks
/// (it clones a detached mount, which older kernels do not allow) leaves every hidden
/// path to the carve-out under the stage too: a hidden file inside a writable root is
/// then refused writes by the stage's read-only bind and reads by Landlock, where the
/// mask refuses both.
#[test]
fn under_the_stage_without_masks_hidden_paths_are_carved_out() {
    let t = tree();
    let setup = Setup {
        landlock_abi: 2,
        staged: true,
        supervised: false,
        supervised_writes: false,
    };
    let p = policy(Mode::WorkspaceWrite);
    let masked = Model::new(&p, &t, setup);
    let carved = Model::with_masks(&p, &t, setup, false);
    let env = Path::new("/s/ws/.env");
    assert_eq!(
        masked.answer(env, &Op::Write),
        Answer::Denied(Refusal::Mask)
    );
    assert_eq!(masked.answer(env, &Op::Read), Answer::Denied(Refusal::Mask));
    assert_eq!(
        carved.answer(env, &Op::Write),
        Answer::Denied(Refusal::ReadOnlyMount)
    );
    assert_eq!(
        carved.answer(env, &Op::Read),
        Answer::Denied(Refusal::Landlock)
    );
    // Outside the roots the hidden file is refused either way.
    let key = Path::new("/s/out/key");
    assert!(!carved.answer(key, &Op::Read).allowed());
    assert!(!masked.answer(key, &Op::Read).allowed());
}

#[test]
fn an_allowed_device_is_read_written_and_ioctled_and_no_other_beside_it() {
    let mut t = tree();
    for d in ["/dev/kvm", "/dev/ttyS0", "/dev/null"] {
        t.insert(d, Node::CharDevice);
    }
    for (mode, staged) in [
        (Mode::ReadOnly, false),
        (Mode::ReadOnly, true),
        (Mode::WorkspaceWrite, false),
        (Mode::WorkspaceWrite, true),
    ] {
        let setup = Setup {
            landlock_abi: 7,
            staged,
            supervised: false,
            supervised_writes: false,
        };
        let mut p = policy(mode);
        p.default_hide = true;
        let without = Model::new(&p, &t, setup);
        p.devices = vec!["/dev/kvm".into()];
        let with = Model::new(&p, &t, setup);
        let kvm = Path::new("/dev/kvm");
        for op in [Op::Read, Op::Write, Op::Ioctl] {
            assert!(
                !without.answer(kvm, &op).allowed(),
                "{mode} {staged} {op:?}"
            );
            assert_eq!(
                with.answer(kvm, &op),
                Answer::Allowed,
                "{mode} {staged} {op:?}"
            );
            let other = with.answer(Path::new("/dev/ttyS0"), &op);
            assert!(!other.allowed(), "{mode} {staged} {op:?}");
        }
        assert_eq!(
            with.answer(Path::new("/dev/null"), &Op::Write),
            Answer::Allowed
        );
    }
}
