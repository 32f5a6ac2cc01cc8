//! The file tree the model answers about, described in memory: what each path is, no
//! system call. The differential test builds one beside the real files it makes;
//! `stockade explain` builds one from the few paths a question names.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// What one path is (never followed: a link is a link).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Node {
    /// A regular file.
    File,
    Dir,
    /// A symbolic link and its target (absolute, or relative to the link's directory).
    Symlink(PathBuf),
    /// A character device node.
    CharDevice,
}

impl Node {
    pub fn name(&self) -> &'static str {
        match self {
            Node::File => "file",
            Node::Dir => "directory",
            Node::Symlink(_) => "link",
            Node::CharDevice => "device",
        }
    }
}

/// Absolute paths and what each is. A path the tree does not hold is taken to be a
/// directory when some path of the tree lies beneath it (the directories the tree
/// hangs from: `/`, the scratch directory), and missing otherwise.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tree {
    nodes: BTreeMap<PathBuf, Node>,
}

/// The most links one resolution follows, as the kernel's path walk allows.
const MAX_LINKS: usize = 40;

impl Tree {
    pub fn new() -> Tree {
        Tree::default()
    }

    /// Adds (or replaces) `path`, which must be absolute.
    pub fn insert(&mut self, path: impl Into<PathBuf>, node: Node) {
        let path = path.into();
        debug_assert!(path.is_absolute(), "{}", path.display());
        self.nodes.insert(path, node);
    }

    /// Drops `path` and everything beneath it.
    pub fn remove(&mut self, path: &Path) {
        self.nodes.retain(|p, _| !p.starts_with(path));
    }

    /// What `path` is, without following it.
    pub fn node(&self, path: &Path) -> Option<Node> {
        if let Some(n) = self.nodes.get(path) {
            return Some(n.clone());
        }
        let holds_something = self
            .nodes
            .range(path.to_path_buf()..)
            .next()
            .is_some_and(|(p, _)| p.starts_with(path));
        (holds_something || path == Path::new("/")).then_some(Node::Dir)
    }

    /// Every path the tree holds, in order.
    pub fn paths(&self) -> impl Iterator<Item = (&Path, &Node)> {
        self.nodes.iter().map(|(p, n)| (p.as_path(), n))
    }

    /// What `path` leads to once its last component's links are followed (the paths the
    /// tree holds never pass through a link above their last component): the path
    /// reached and what it is. `None` for a dangling link or a loop.
    pub fn follow(&self, path: &Path) -> Option<(PathBuf, Node)> {
        let mut at = path.to_path_buf();
        for _ in 0..=MAX_LINKS {
            match self.node(&at)? {
                Node::Symlink(target) => {
                    let base = at.parent().unwrap_or(Path::new("/"));
                    at = normalize(&base.join(target));
                }
                other => return Some((at, other)),
            }
        }
        None
    }
}

/// `path` with `.` and `..` taken out lexically (the tree's links name paths whose
/// directories are real directories, so this is what the kernel would reach).
pub fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::from("/");
    for c in path.components() {
        match c {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::Normal(n) => out.push(n),
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_are_followed_to_what_they_name_and_dangling_ones_lead_nowhere() {
        let mut t = Tree::new();
        t.insert("/s/d/f", Node::File);
        t.insert("/s/l", Node::Symlink("d/f".into()));
        t.insert("/s/ll", Node::Symlink("/s/l".into()));
        t.insert("/s/gone", Node::Symlink("/s/nothing".into()));
        t.insert("/s/loop", Node::Symlink("/s/loop".into()));
        assert_eq!(t.node(Path::new("/s/d")), Some(Node::Dir));
        assert_eq!(t.node(Path::new("/s/x")), None);
        assert_eq!(
            t.follow(Path::new("/s/ll")),
            Some((PathBuf::from("/s/d/f"), Node::File))
        );
        assert_eq!(t.follow(Path::new("/s/gone")), None);
        assert_eq!(t.follow(Path::new("/s/loop")), None);
        t.remove(Path::new("/s/d"));
        assert_eq!(t.node(Path::new("/s/d/f")), None);
    }
}
