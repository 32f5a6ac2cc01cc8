//! The control directory and what the launcher checks before handing it to the runner:
//! the private directory the request lives in (`private_dir`), where it may be placed
//! (`placement`), the binaries it names (`locate`, `binding`) and the capabilities the
//! launcher holds (`capabilities`); a private directory made ahead (`spare`); renaming
//! that never replaces (`no_replace`).

pub(crate) mod binding;
pub(crate) mod capabilities;
pub(crate) mod error;
pub(crate) mod locate;
pub(crate) mod no_replace;
pub(crate) mod placement;
pub(crate) mod private_dir;
pub(crate) mod spare;
