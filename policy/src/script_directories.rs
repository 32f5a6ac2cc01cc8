//! The directories a command's shell script changes into, for naming what a relative
//! path in one of its error lines meant.
//!
//! `bash -c 'cd /srv/out && touch rel'` fails with `touch: cannot touch 'rel': ...`: the
//! line names `rel`, which from the command's starting directory is a path the policy
//! may well allow, while the refusal was of `/srv/out/rel`. The script itself says where
//! the shell went. It is read as words only, never run or expanded: `cd DIR`, `pushd DIR`
//! and `popd` with literal words, in the order written, each from the directory before.
//! A word the shell would expand (`$X`, `` `x` ``, a glob) makes the directory unknown
//! until a later absolute `cd`; nothing is guessed for it.
//!
//! What this gives is candidates, not facts (a `cd` inside `if false` is listed too):
//! attribution still asks the policy and Unix permissions of each, as for any path a
//! line names, and keeps the policy-check evidence.

use crate::attribution::absolute;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// The most directories listed for one script.
pub const MAX_DIRECTORIES: usize = 16;

/// The most bytes of a script read (a script longer than this is read up to here).
const MAX_SCRIPT_BYTES: usize = 64 * 1024;

/// Shells whose `-c` script is read.
const SHELLS: [&str; 7] = ["sh", "bash", "dash", "zsh", "ksh", "mksh", "ash"];

/// The directories, beside `cwd`, that `argv`'s shell script changes into, in the order
/// the script names them; `home` is where a bare `cd` and `~` lead. Empty when `argv` is
/// not a shell given a script with `-c`.
pub fn of(argv: &[OsString], cwd: &Path, home: Option<&Path>) -> Vec<PathBuf> {
    let Some(script) = shell_script(argv) else {
        return Vec::new();
    };
    let mut walk = Walk {
        at: Some(cwd.to_path_buf()),
        previous: None,
        stack: Vec::new(),
        home: home.map(Path::to_path_buf),
        seen: Vec::new(),
        start: cwd.to_path_buf(),
    };
    for command in commands(script) {
        walk.step(&command);
        if walk.seen.len() == MAX_DIRECTORIES {
            break;
        }
    }
    walk.seen
}

/// The script of `sh -c SCRIPT` (options before `-c` allowed: `bash -lc`, `bash --norc
/// -c`); `None` for anything else.
fn shell_script(argv: &[OsString]) -> Option<&str> {
    let program = Path::new(argv.first()?).file_name()?.to_str()?;
    if !SHELLS.contains(&program) {
        return None;
    }
    let mut rest = argv[1..].iter();
    while let Some(arg) = rest.next() {
        let arg = arg.to_str()?;
        if arg == "-o" || arg == "+o" {
            rest.next();
            continue;
        }
        if !arg.starts_with(['-', '+']) || arg == "-" || arg == "--" {
            return None;
        }
        if !arg.starts_with("--") && arg.contains('c') {
            let script = rest.next()?.to_str()?;
            let mut end = script.len().min(MAX_SCRIPT_BYTES);
            while !script.is_char_boundary(end) {
                end -= 1;
            }
            return Some(&script[..end]);
        }
    }
    None
}

/// One word of a script: its text with quotes taken off, and whether the shell would
/// expand it (then its text is not what the shell used).
#[derive(Debug, PartialEq)]
struct Word {
    text: String,
    expanded: bool,
}

/// The simple commands of `script`, each as its words: split at `;`, `&`, `|`, `(`,
/// `)` and line ends, outside quotes; comments left out.
fn commands(script: &str) -> Vec<Vec<Word>> {
    let mut out = Vec::new();
    let mut command: Vec<Word> = Vec::new();
    let mut word: Option<Word> = None;
    let mut chars = script.chars().peekable();
    let end_word = |word: &mut Option<Word>, command: &mut Vec<Word>| {
        if let Some(w) = word.take() {
            command.push(w);
        }
    };
    while let Some(c) = chars.next() {
        match c {
            ' ' | '\t' => end_word(&mut word, &mut command),
            ';' | '&' | '|' | '(' | ')' | '\n' => {
                end_word(&mut word, &mut command);
                if !command.is_empty() {
                    out.push(std::mem::take(&mut command));
                }
            }
            '#' if word.is_none() => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        break;
                    }
                }
                if !command.is_empty() {
                    out.push(std::mem::take(&mut command));
                }
            }
            _ => {
                let w = word.get_or_insert_with(|| Word {
                    text: String::new(),
                    expanded: false,
                });
                quoted_part(c, &mut chars, w);
            }
        }
    }
    end_word(&mut word, &mut command);
    if !command.is_empty() {
        out.push(command);
    }
    out
}

/// Adds the part of a word that starts with `c` to `w`: a quoted string whole, an
/// escaped character, or `c` itself.
fn quoted_part(c: char, chars: &mut std::iter::Peekable<std::str::Chars>, w: &mut Word) {
    match c {
        '\'' => {
            for c in chars.by_ref() {
                if c == '\'' {
                    break;
                }
                w.text.push(c);
            }
        }
        '"' => {
            while let Some(c) = chars.next() {
                match c {
                    '"' => break,
                    '\\' => w.text.extend(chars.next()),
                    '$' | '`' => {
                        w.expanded = true;
                        w.text.push(c);
                    }
                    _ => w.text.push(c),
                }
            }
        }
        '\\' => w.text.extend(chars.next()),
        '$' | '`' | '*' | '?' | '[' | '{' => {
            w.expanded = true;
            w.text.push(c);
        }
        _ => w.text.push(c),
    }
}

/// Where the shell is, as far as the script's words say.
struct Walk {
    /// The directory the shell is in; `None` once a word made it unknown.
    at: Option<PathBuf>,
    /// `OLDPWD`, for `cd -`.
    previous: Option<PathBuf>,
    /// `pushd`'s stack, for `popd`.
    stack: Vec<Option<PathBuf>>,
    home: Option<PathBuf>,
    /// The directories named so far, without the start and each once.
    seen: Vec<PathBuf>,
    start: PathBuf,
}

/// Words that may come before a command without being it.
const PREFIXES: [&str; 11] = [
    "{", "}", "!", "if", "then", "else", "elif", "do", "while", "until", "time",
];

impl Walk {
    /// Follows one simple command: a change of directory moves `at`.
    fn step(&mut self, command: &[Word]) {
        let mut words = command
            .iter()
            .skip_while(|w| !w.expanded && PREFIXES.contains(&w.text.as_str()));
        let Some(name) = words.next() else {
            return;
        };
        let to = match (name.expanded, name.text.as_str()) {
            (false, "cd") | (false, "pushd") => {
                let target =
                    words.find(|w| w.expanded || w.text == "-" || !w.text.starts_with('-'));
                let to = self.target(target);
                if name.text == "pushd" {
                    self.stack.push(self.at.clone());
                }
                to
            }
            (false, "popd") => self.stack.pop().unwrap_or(None),
            _ => return,
        };
        self.previous = std::mem::replace(&mut self.at, to.clone());
        if let Some(dir) = to
            && dir != self.start
            && !self.seen.contains(&dir)
        {
            self.seen.push(dir);
        }
    }

    /// Where `cd WORD` leads from `at`; `None` when that cannot be known.
    fn target(&self, word: Option<&Word>) -> Option<PathBuf> {
        let Some(word) = word else {
            return self.home.clone();
        };
        if word.expanded {
            return None;
        }
        let text = word.text.as_str();
        if text == "-" {
            return self.previous.clone();
        }
        let path = if text == "~" {
            self.home.clone()?
        } else if let Some(rest) = text.strip_prefix("~/") {
            self.home.as_ref()?.join(rest)
        } else if text.starts_with('~') {
            // Another user's home: not known from here.
            return None;
        } else {
            PathBuf::from(text)
        };
        if path.is_absolute() {
            return Some(absolute(Path::new("/"), &path));
        }
        Some(absolute(self.at.as_ref()?, &path))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dirs(argv: &[&str]) -> Vec<String> {
        let argv: Vec<OsString> = argv.iter().map(OsString::from).collect();
        of(&argv, Path::new("/ws"), Some(Path::new("/home/u")))
            .iter()
            .map(|p| p.display().to_string())
            .collect()
    }

    fn script(s: &str) -> Vec<String> {
        dirs(&["bash", "-c", s])
    }

    #[test]
    fn the_directories_a_script_changes_into_in_order() {
        assert_eq!(script("cd /srv/out && touch rel"), ["/srv/out"]);
        assert_eq!(script("cd out; cd sub && make"), ["/ws/out", "/ws/out/sub"]);
        assert_eq!(script("cd ../x || exit 1"), ["/x"]);
        assert_eq!(script("(cd '/a b' && ls) | wc"), ["/a b"]);
        assert_eq!(script("cd \"/q\"/r"), ["/q/r"]);
        assert_eq!(script("cd -P /p"), ["/p"]);
        assert_eq!(script("cd; touch x"), ["/home/u"]);
        assert_eq!(script("cd ~/src"), ["/home/u/src"]);
        assert_eq!(
            script("pushd /a; pushd b; popd; cd c"),
            ["/a", "/a/b", "/a/c"]
        );
        assert_eq!(
            script("cd /a && cd /b && cd - && cd c"),
            ["/a", "/b", "/a/c"]
        );
        assert_eq!(script("if true; then cd /t; fi"), ["/t"]);
        assert_eq!(script("cd /ws && cd /ws/."), Vec::<String>::new());
        assert_eq!(dirs(&["/bin/sh", "-ec", "cd /e"]), ["/e"]);
        assert_eq!(dirs(&["bash", "--norc", "-c", "cd /n"]), ["/n"]);
        assert_eq!(dirs(&["bash", "-o", "pipefail", "-c", "cd /o"]), ["/o"]);
    }

    #[test]
    fn what_the_shell_would_expand_is_not_guessed() {
        // Unknown after `cd $X`: a later relative `cd` is unknown too, an absolute one not.
        assert_eq!(script("cd $D && cd sub && cd /k && cd l"), ["/k", "/k/l"]);
        assert_eq!(script("cd \"$(mktemp -d)\"; cd x"), Vec::<String>::new());
        assert_eq!(script("cd /s*; cd `pwd`; cd ~other"), Vec::<String>::new());
        assert_eq!(script("echo cd /not # cd /comment"), Vec::<String>::new());
        assert_eq!(script("cd '$literal'"), ["/ws/$literal"]);
    }

    #[test]
    fn only_a_shell_s_script_is_read() {
        assert!(dirs(&["make", "-C", "/x"]).is_empty());
        assert!(dirs(&["bash", "script.sh", "-c", "cd /x"]).is_empty());
        assert!(dirs(&["bash", "-c"]).is_empty());
        assert!(dirs(&[]).is_empty());
        let many: String = (0..40).map(|i| format!("cd /d{i}; ")).collect();
        assert_eq!(script(&many).len(), MAX_DIRECTORIES);
    }
}
