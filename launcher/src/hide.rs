//! Who invokes stockade, as far as the default hidden set cares (see
//! `stockade_policy::hidden`): the home directories, whether root, and the control base
//! directories of this user.

use std::path::{Path, PathBuf};
use stockade_policy::hidden::Invoker;

/// The invoker of this process: its effective user.
pub fn invoker() -> Invoker {
    let uid = nix::unistd::geteuid();
    let mut homes = Vec::new();
    if let Ok(passwd) = std::fs::read_to_string("/etc/passwd")
        && let Some(home) = passwd_home(&passwd, uid.as_raw())
    {
        homes.push(home);
    }
    // `$HOME` may be forged to point elsewhere; its stores are hidden too.
    if let Some(home) = std::env::var_os("HOME").map(PathBuf::from)
        && home.is_absolute()
        && home != Path::new("/")
        && !homes.contains(&home)
    {
        homes.push(home);
    }
    let mut control_bases = crate::request_file::base_candidates();
    // Another command may have been confined with another `$TMPDIR`: the default temp
    // dir's base is hidden too.
    let tmp_base = PathBuf::from(format!("/tmp/stockade-{uid}"));
    if !control_bases.contains(&tmp_base) {
        control_bases.push(tmp_base);
    }
    Invoker {
        homes,
        root: uid.is_root(),
        control_bases,
    }
}

/// The home directory of `uid` in the passwd file `text`. Read directly, not through
/// NSS: the launcher is linked statically, and a user with a home directory only in a
/// network directory still has `$HOME`.
fn passwd_home(text: &str, uid: u32) -> Option<PathBuf> {
    text.lines().find_map(|line| {
        let fields: Vec<&str> = line.split(':').collect();
        let home = fields.get(5)?;
        (fields.get(2)?.parse::<u32>().ok()? == uid && home.starts_with('/') && *home != "/")
            .then(|| PathBuf::from(home))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_home_of_a_uid_comes_from_its_passwd_line() {
        let text = "root:x:0:0:root:/root:/bin/bash\n#c\nnobody:x:65534:65534::/nonexistent:/usr/sbin/nologin\nu:x:1000:1000:U,,,:/home/u:/bin/sh\nsys:x:3:3::/:/bin/false\n";
        assert_eq!(passwd_home(text, 0), Some("/root".into()));
        assert_eq!(passwd_home(text, 1000), Some("/home/u".into()));
        assert_eq!(passwd_home(text, 3), None);
        assert_eq!(passwd_home(text, 42), None);
    }
}
