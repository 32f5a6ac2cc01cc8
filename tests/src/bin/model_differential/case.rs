//! One case of the model differential test: a random tree and policy from a seed, built
//! on disk, confined, probed, compared; and shrunk when the kernel and the model disagree.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use stockade_policy::Policy;
use stockade_policy::guarantees::KernelFacts;
use stockade_policy::model::{Answer, Model, Node, Op, Setup, Tree};

/// A deterministic generator (splitmix64): the same seed makes the same case anywhere.
pub struct Rng(u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
    pub fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// What one entry of the tree is, by its path relative to the tree's base.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Entry {
    Dir,
    File,
    /// A link to another entry (relative to the base), or to a name that does not exist.
    Link(String),
    Device,
}

/// A tree and a policy over it.
#[derive(Clone, Debug)]
pub struct Case {
    pub seed: u64,
    /// Relative paths (the base is ""), parents before children.
    pub entries: Vec<(String, Entry)>,
    pub mode: &'static str,
    pub workspace: String,
    pub writable: Vec<String>,
    pub hide: Vec<String>,
    pub protect: Vec<String>,
    pub tmp_private: bool,
    pub stage: bool,
    /// `--keep-capability CAP_DAC_OVERRIDE` (as root only: it must be held).
    pub keep_dac: bool,
    /// `--allow-unix-sockets`.
    pub unix_sockets: bool,
    /// For each entry, the directory it is renamed and linked into.
    pub dests: BTreeMap<String, String>,
}

/// Names that exercise the default protected set and ordinary ones.
const NAMES: &[&str] = &["a", "b", "c", "src", "lib", "d1", "d2", "x"];
const FILE_NAMES: &[&str] = &["f", "g", "h", "notes.txt", "run.sh", ".envrc", ".profile"];

/// What the tests' files hold: a script exiting 7, so `exec` is seen to run.
const SCRIPT: &[u8] = b"#!/bin/sh\nexit 7\n";

#[derive(Debug, Default, Clone, Copy)]
pub struct Totals {
    pub compared: u64,
    pub allowed: u64,
    pub denied: u64,
}

impl Totals {
    pub fn add(&mut self, o: &Totals) {
        self.compared += o.compared;
        self.allowed += o.allowed;
        self.denied += o.denied;
    }
}

/// One (operation, path) on which the kernel and the model disagree.
#[derive(Clone, Debug)]
pub struct Disagreement {
    pub op: String,
    /// Relative to the base.
    pub path: String,
    pub into: Option<String>,
    pub kernel: String,
    pub model: String,
}

pub struct Report {
    pub totals: Totals,
    pub disagreements: Vec<Disagreement>,
}

pub enum Outcome {
    /// confine refused the policy; `predicted` when the model's rules say it must.
    Refused {
        predicted: bool,
        why: String,
    },
    Ran(Report),
}

impl Case {
    pub fn generate(seed: u64, devices: bool) -> Case {
        let mut r = Rng(seed);
        let mut entries: Vec<(String, Entry)> = vec![(String::new(), Entry::Dir)];
        let dirs = |e: &[(String, Entry)]| -> Vec<String> {
            e.iter()
                .filter(|(p, k)| *k == Entry::Dir && p.matches('/').count() < 3)
                .map(|(p, _)| p.clone())
                .collect()
        };
        let join = |d: &str, n: &str| {
            if d.is_empty() {
                n.to_string()
            } else {
                format!("{d}/{n}")
            }
        };
        let add = |entries: &mut Vec<(String, Entry)>, p: String, k: Entry| {
            if !entries.iter().any(|(q, _)| *q == p) {
                entries.push((p, k));
            }
        };
        for _ in 0..3 + r.below(6) {
            let d = r.pick(&dirs(&entries)).clone();
            let name = r.pick(NAMES).to_string();
            add(&mut entries, join(&d, &name), Entry::Dir);
        }
        for _ in 0..1 + r.below(2) {
            // A repository: the default protected names, for the stage to bind.
            let d = r.pick(&dirs(&entries)).clone();
            add(&mut entries, join(&d, ".git"), Entry::Dir);
            add(&mut entries, join(&d, ".git/hooks"), Entry::Dir);
            add(&mut entries, join(&d, ".git/hooks/pre-commit"), Entry::File);
            add(&mut entries, join(&d, ".git/config"), Entry::File);
        }
        for _ in 0..4 + r.below(8) {
            let d = r.pick(&dirs(&entries)).clone();
            let name = *r.pick(FILE_NAMES);
            add(&mut entries, join(&d, name), Entry::File);
        }
        let targets: Vec<String> = entries.iter().skip(1).map(|(p, _)| p.clone()).collect();
        for i in 0..r.below(4) {
            let d = r.pick(&dirs(&entries)).clone();
            let to = if r.chance(15) {
                "missing".to_string()
            } else {
                r.pick(&targets).clone()
            };
            add(&mut entries, join(&d, &format!("l{i}")), Entry::Link(to));
        }
        if devices {
            for i in 0..r.below(3) {
                let d = r.pick(&dirs(&entries)).clone();
                add(&mut entries, join(&d, &format!("null{i}")), Entry::Device);
            }
        }
        let mut case = Case::policy_over(seed, entries, &mut r);
        let confined = case.mode != "danger-full-access";
        // Drawn last, so the cases above stay what their seeds made before.
        case.keep_dac = confined && devices && r.chance(15);
        case.unix_sockets = confined && r.chance(15);
        case
    }

    /// The random policy over `entries`, and each entry's destination directory.
    fn policy_over(seed: u64, entries: Vec<(String, Entry)>, r: &mut Rng) -> Case {
        let all_dirs: Vec<String> = entries
            .iter()
            .filter(|(_, k)| *k == Entry::Dir)
            .map(|(p, _)| p.clone())
            .collect();
        let others: Vec<String> = entries.iter().skip(1).map(|(p, _)| p.clone()).collect();
        let mode = match r.below(10) {
            0..=2 => "read-only",
            3..=8 => "workspace-write",
            _ => "danger-full-access",
        };
        let confined = mode != "danger-full-access";
        let workspace = r.pick(&all_dirs).clone();
        let mut writable = Vec::new();
        if mode == "workspace-write" {
            for _ in 0..r.below(3) {
                let d = r.pick(&all_dirs).clone();
                if !d.contains(".git") && !writable.contains(&d) {
                    writable.push(d);
                }
            }
        }
        let stage = r.chance(50);
        let mut hide = Vec::new();
        let mut protect = Vec::new();
        if confined {
            for _ in 0..r.below(4) {
                hide.push(r.pick(&others).clone());
            }
            for _ in 0..r.below(3) {
                if mode == "workspace-write" && stage {
                    protect.push(r.pick(&others).clone());
                }
            }
        }
        let tmp_private = confined && stage && r.chance(25);
        let mut dests = BTreeMap::new();
        for (p, _) in entries.iter().skip(1) {
            let fit: Vec<&String> = all_dirs
                .iter()
                .filter(|d| !is_within(d, p) && Some(d.as_str()) != parent(p))
                .collect();
            if !fit.is_empty() {
                dests.insert(p.clone(), (*r.pick(&fit)).clone());
            }
        }
        Case {
            seed,
            entries,
            mode,
            workspace,
            writable,
            hide,
            protect,
            tmp_private,
            stage,
            keep_dac: false,
            unix_sockets: false,
            dests,
        }
    }
}

/// Whether the relative path `p` is `of` or lies beneath it.
pub fn is_within(p: &str, of: &str) -> bool {
    of.is_empty() || p == of || p.starts_with(&format!("{of}/"))
}

pub fn parent(p: &str) -> Option<&str> {
    if p.is_empty() {
        None
    } else {
        Some(p.rsplit_once('/').map_or("", |(d, _)| d))
    }
}

#[path = "run.rs"]
mod run;
#[path = "shrink.rs"]
mod shrink;

pub use run::abs;

impl Case {
    /// The tree as the model sees it, with absolute paths beneath `base`.
    pub fn tree(&self, base: &Path) -> Tree {
        let mut t = Tree::new();
        for (p, e) in &self.entries {
            let node = match e {
                Entry::Dir => Node::Dir,
                Entry::File => Node::File,
                Entry::Device => Node::CharDevice,
                Entry::Link(to) => Node::Symlink(abs(base, to)),
            };
            t.insert(abs(base, p), node);
        }
        t
    }

    /// Makes the tree on disk (every file the script, mode 0755).
    pub fn build(&self, base: &Path) {
        use std::os::unix::fs::PermissionsExt;
        if base.exists() {
            let _ = std::process::Command::new("chmod")
                .args(["-R", "u+rwx"])
                .arg(base)
                .status();
            std::fs::remove_dir_all(base).unwrap();
        }
        for (p, e) in &self.entries {
            let path = abs(base, p);
            match e {
                Entry::Dir => std::fs::create_dir(&path).unwrap(),
                Entry::File => {
                    std::fs::write(&path, SCRIPT).unwrap();
                    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))
                        .unwrap();
                }
                Entry::Link(to) => std::os::unix::fs::symlink(abs(base, to), &path).unwrap(),
                Entry::Device => {
                    let c = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
                    // SAFETY: a NUL-terminated path; the null device's numbers (1, 3).
                    let r = unsafe {
                        libc::mknod(c.as_ptr(), libc::S_IFCHR | 0o666, libc::makedev(1, 3))
                    };
                    assert_eq!(r, 0, "mknod {}", path.display());
                }
            }
        }
    }

    /// The answer the model gives for each operation of the plan.
    pub fn answers(
        &self,
        base: &Path,
        (policy, promised): &(Policy, KernelFacts),
        staged: bool,
        (masks, xattrs): (bool, bool),
    ) -> Vec<(Op, PathBuf, Answer)> {
        let tree = self.tree(base);
        let setup = Setup {
            landlock_abi: promised.landlock_abi,
            staged,
            supervised: promised.supervisor,
            supervised_writes: promised.supervisor_writes,
        };
        let model = Model::with_masks(policy, &tree, setup, masks);
        let mut out = Vec::new();
        let paths: Vec<PathBuf> = tree.paths().map(|(p, _)| p.to_path_buf()).collect();
        let mut push = |op: Op, p: &Path| {
            let a = model.answer(p, &op);
            if a != Answer::NotApplicable {
                out.push((op, p.to_path_buf(), a));
            }
        };
        let compared = |o: &&Op| **o != Op::Remove && (xattrs || **o != Op::Xattr);
        for op in Op::IN_PLACE.iter().filter(compared) {
            for p in &paths {
                push(op.clone(), p);
            }
        }
        for (rel, into) in &self.dests {
            push(Op::Link(abs(base, into)), &abs(base, rel));
        }
        for (rel, into) in &self.dests {
            push(Op::Rename(abs(base, into)), &abs(base, rel));
        }
        // A device removed could not be made again inside (no CAP_MKNOD there).
        for p in paths
            .iter()
            .rev()
            .filter(|p| tree.node(p) != Some(Node::CharDevice))
        {
            push(Op::Remove, p);
        }
        out
    }
}
