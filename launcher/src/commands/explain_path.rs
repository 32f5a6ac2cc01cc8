//! `stockade explain FILE --path PATH...`: what the request's policy lets a command do
//! to each path ("would this command be let write X?"), answered by the policy model
//! (`stockade_policy::model`), which the differential test checks against the kernel.
//! An executor can ask before it runs a command.

use crate::error::LauncherError;
use std::fmt::Write as _;
use std::io::Read;
use std::path::{Path, PathBuf};
use stockade_policy::LaunchRequest;
use stockade_policy::model::tree::normalize;
use stockade_policy::model::{Model, Node, Op, Setup, Tree};
use stockade_policy::request::MAX_REQUEST_BYTES;

/// The operations asked about, in the order shown.
const OPS: [Op; 10] = Op::IN_PLACE;

/// Prints the answers for each of `paths` under the request at `file`.
pub fn run(file: &Path, paths: &[PathBuf]) -> Result<i32, LauncherError> {
    let request = read_request(file)?;
    let cwd = std::env::current_dir().map_err(LauncherError::CurrentDir)?;
    let policy = &request.policy;
    let setup = Setup {
        landlock_abi: request.promised.landlock_abi,
        staged: policy.stage() && request.promised.namespaces,
        supervised: request.promised.supervisor,
        supervised_writes: request.promised.supervisor_writes,
    };
    let mut out = format!(
        "mode {}, Landlock ABI {}, {} (answers of the policy model)\n",
        policy.mode(),
        setup.landlock_abi,
        if setup.staged {
            "with the namespace stage"
        } else {
            "without the namespace stage"
        }
    );
    for path in paths {
        let path = canonical_parent(&normalize(&cwd.join(path)));
        let tree = tree_of(&path);
        let model = Model::new(policy, &tree, setup);
        match tree.node(&path) {
            Some(node) => {
                let _ = writeln!(out, "{} ({}):", path.display(), node.name());
                for op in &OPS {
                    let answer = model.answer(&path, op);
                    if answer != stockade_policy::model::Answer::NotApplicable {
                        let _ = writeln!(out, "  {:<9} {answer}", op.name());
                    }
                }
            }
            None => {
                let parent = path.parent().unwrap_or(Path::new("/"));
                let _ = writeln!(
                    out,
                    "{} (does not exist): create it: {}",
                    path.display(),
                    model.answer(parent, &Op::Create)
                );
            }
        }
    }
    print!("{out}");
    Ok(0)
}

/// The request, read as the runner would (a regular file, at most the size a request
/// may have), and decoded; it is not validated: explain shows, it runs nothing.
fn read_request(file: &Path) -> Result<LaunchRequest, LauncherError> {
    let fail = |source: std::io::Error| LauncherError::ReadInput {
        what: "request",
        path: file.to_path_buf(),
        source,
    };
    let f = std::fs::File::open(file).map_err(fail)?;
    if !f.metadata().map_err(fail)?.is_file() {
        return Err(fail(std::io::Error::other("not a regular file")));
    }
    let mut bytes = Vec::new();
    f.take(MAX_REQUEST_BYTES as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(fail)?;
    LaunchRequest::decode(&bytes).map_err(|e| fail(std::io::Error::other(e.to_string())))
}

/// `path` with its directory resolved (the policy's paths are canonical); the last
/// component is kept as it is, link or not.
fn canonical_parent(path: &Path) -> PathBuf {
    match (path.parent(), path.file_name()) {
        (Some(dir), Some(name)) => dir
            .canonicalize()
            .map(|d| d.join(name))
            .unwrap_or_else(|_| path.to_path_buf()),
        _ => path.to_path_buf(),
    }
}

/// The tree the question needs: `path` as it is (not followed), and each link on the
/// way from it to what it leads to.
fn tree_of(path: &Path) -> Tree {
    use std::os::unix::fs::FileTypeExt;
    let mut tree = Tree::new();
    // The directory a missing path would be created in.
    if let Some(dir) = path.parent()
        && dir.is_dir()
    {
        tree.insert(dir.to_path_buf(), Node::Dir);
    }
    let mut at = path.to_path_buf();
    for _ in 0..40 {
        let Ok(meta) = std::fs::symlink_metadata(&at) else {
            break;
        };
        let kind = meta.file_type();
        let node = if kind.is_symlink() {
            let Ok(target) = std::fs::read_link(&at) else {
                break;
            };
            Node::Symlink(target)
        } else if kind.is_dir() {
            Node::Dir
        } else if kind.is_char_device() || kind.is_block_device() {
            Node::CharDevice
        } else {
            Node::File
        };
        tree.insert(at.clone(), node.clone());
        let Node::Symlink(target) = node else {
            break;
        };
        // The directories above a link are taken as they are (canonical), so the next
        // step is the path the kernel would reach.
        let dir = at.parent().and_then(|d| d.canonicalize().ok());
        at = normalize(&dir.unwrap_or_default().join(target));
    }
    tree
}
