//! `classify` reads a status file that a failing runner may have left half-written: any
//! bytes must decode to a record or an error, never a panic, and a decoded record must
//! re-encode to a record that decodes again.
#![no_main]

use libfuzzer_sys::fuzz_target;
use stockade_policy::status::StatusRecord;

fuzz_target!(|data: &[u8]| {
    if let Ok(Some(record)) = StatusRecord::decode(data) {
        let bytes = record.encode();
        assert!(
            matches!(StatusRecord::decode(&bytes), Ok(Some(_))),
            "{record:?} re-encoded to a record that does not decode"
        );
    }
});
