//! `--timeout` and `--grace` values come from the caller: any string must parse to a
//! bounded duration or an error, never a panic; a parsed duration prints back (in ms) to
//! the same duration.
#![no_main]

use libfuzzer_sys::fuzz_target;

// The parser lives in the launcher binary crate and uses only std: compiled in here as is.
#[path = "../../launcher/src/commands/duration.rs"]
#[allow(dead_code)]
mod duration;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(d) = duration::parse(text) {
        assert!(d.as_secs() <= 100 * 366 * 86_400, "{text:?} -> {d:?}");
        assert_eq!(duration::parse(&format!("{}ms", d.as_millis())), Ok(d));
    }
});
