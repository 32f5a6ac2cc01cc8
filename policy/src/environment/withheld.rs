//! The names the runner's environment rule withheld from an inherited environment, as
//! the status record carries them (`env-removed LIST`, see [`crate::status`]).
//!
//! With `--inherit-env` the environment is the executor's, known only when the runner
//! starts: a variable the executor passed on purpose (a forwarded `GH_TOKEN`) and the
//! rule removed would otherwise vanish without a word. The runner records the names
//! (never values), `classify` reports them (`envRemoved`), and the harness's provider
//! tells the agent.
//!
//! The list is comma-separated; each name is its bytes with every byte outside
//! `A-Z a-z 0-9 _ . -` written `%XX` (a name may hold anything but `=` and NUL). Names
//! that do not fit the record are counted instead, in a last item `+N`.

/// The status record's word before the list.
pub const RECORD_WORD: &str = "env-removed";

/// Names withheld, and how many more did not fit the record.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Withheld {
    /// As text (a name that is not UTF-8 shows replacement characters).
    pub names: Vec<String>,
    /// Withheld names the record had no room for.
    pub more: usize,
}

impl Withheld {
    pub fn is_empty(&self) -> bool {
        self.names.is_empty() && self.more == 0
    }

    /// From the rule's removed names (`BuiltEnv::removed`).
    pub fn of(removed: &[std::ffi::OsString]) -> Withheld {
        Withheld {
            names: removed
                .iter()
                .map(|n| n.to_string_lossy().into_owned())
                .collect(),
            more: 0,
        }
    }
}

fn plain(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-')
}

fn escape(name: &str) -> String {
    let mut out = String::new();
    for &b in name.as_bytes() {
        if plain(b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The list in at most `room` bytes: the names that fit, in order, then `+N` for the
/// rest. Empty when there is nothing to say (or no room even for the count).
pub fn encode(withheld: &Withheld, room: usize) -> String {
    let total = withheld.names.len() + withheld.more;
    let mut out = String::new();
    for (i, name) in withheld.names.iter().enumerate() {
        let item = escape(name);
        let left = total - i - 1;
        // Room for this item, and for the count of those after it should they not fit.
        let reserve = if left > 0 {
            format!(",+{left}").len()
        } else {
            0
        };
        let sep = usize::from(!out.is_empty());
        if out.len() + sep + item.len() + reserve > room {
            let count = format!("+{}", total - i);
            if out.len() + sep + count.len() <= room {
                if sep == 1 {
                    out.push(',');
                }
                out.push_str(&count);
            }
            return out;
        }
        if sep == 1 {
            out.push(',');
        }
        out.push_str(&item);
    }
    if withheld.more > 0 {
        let count = format!("+{}", withheld.more);
        if out.len() + usize::from(!out.is_empty()) + count.len() <= room {
            if !out.is_empty() {
                out.push(',');
            }
            out.push_str(&count);
        }
    }
    out
}

/// The list from its record form; `None` when an item is empty or malformed, or a count
/// is not last.
pub fn decode(text: &str) -> Option<Withheld> {
    let mut out = Withheld::default();
    let items: Vec<&str> = text.split(',').collect();
    for (i, item) in items.iter().enumerate() {
        if let Some(count) = item.strip_prefix('+') {
            let ok = i + 1 == items.len() && !count.is_empty();
            if !ok || !count.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            out.more = count.parse().ok().filter(|&n| n > 0)?;
            continue;
        }
        out.names.push(unescape(item)?);
    }
    (!out.is_empty()).then_some(out)
}

fn unescape(item: &str) -> Option<String> {
    if item.is_empty() {
        return None;
    }
    let bytes = item.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let hex = item.get(i + 1..i + 3)?;
                if !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
                    return None;
                }
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 3;
            }
            b if plain(b) => {
                out.push(b);
                i += 1;
            }
            _ => return None,
        }
    }
    Some(String::from_utf8_lossy(&out).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Withheld {
        Withheld {
            names: list.iter().map(|s| s.to_string()).collect(),
            more: 0,
        }
    }

    #[test]
    fn lists_round_trip_and_odd_names_are_escaped() {
        let w = names(&["GH_TOKEN", "a b,c%=", "é"]);
        let text = encode(&w, 4096);
        assert_eq!(text, "GH_TOKEN,a%20b%2Cc%25%3D,%C3%A9");
        assert_eq!(decode(&text), Some(w));
        for bad in [
            "", ",", "A,", "A,,B", "+", "+0", "+3,A", "A b", "%4", "%GG", "A,+x",
        ] {
            assert_eq!(decode(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn names_past_the_room_are_counted() {
        let w = names(&["AAAA", "BBBB", "CCCC"]);
        assert_eq!(encode(&w, 14), "AAAA,BBBB,CCCC");
        assert_eq!(encode(&w, 13), "AAAA,BBBB,+1");
        assert_eq!(encode(&w, 11), "AAAA,+2");
        assert_eq!(
            decode("AAAA,+2"),
            Some(Withheld {
                names: vec!["AAAA".into()],
                more: 2
            })
        );
        assert_eq!(encode(&w, 2), "+3");
        assert_eq!(encode(&w, 1), "");
        assert_eq!(encode(&Withheld::default(), 100), "");
    }
}
