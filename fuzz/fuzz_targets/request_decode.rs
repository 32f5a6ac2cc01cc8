//! The runner decodes a request file the launcher wrote, but the file sits on disk
//! between the two: any bytes must give a decode error, never a panic, and a request that
//! decodes must survive validation and re-encode to bytes that decode to the same request.
#![no_main]

use libfuzzer_sys::fuzz_target;
use stockade_policy::LaunchRequest;

fuzz_target!(|data: &[u8]| {
    if let Ok(request) = LaunchRequest::decode(data) {
        let _ = request.validate();
        if let Ok(bytes) = request.encode() {
            let again = LaunchRequest::decode(&bytes).expect("re-encoded request decodes");
            assert_eq!(again, request);
        }
    }
});
