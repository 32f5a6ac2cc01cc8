//! `stockade classify` takes a ConfinedArgv, an exit code or signal, stderr and a status
//! file from its caller. Input layout: byte 0 the exit code (255: killed by a signal),
//! then three parts separated by NUL bytes: ConfinedArgv JSON, stderr, status file
//! content. Any input must give a verdict, never a panic; a verdict never says both
//! "runner failed" and "denied".
#![no_main]

use libfuzzer_sys::fuzz_target;
use stockade_policy::classify::{ExitFacts, StatusEvidence, classify, is_denied};
use stockade_policy::confined::ConfinedArgv;
use stockade_policy::status::StatusRecord;

fuzz_target!(|data: &[u8]| {
    let Some((&code, rest)) = data.split_first() else {
        return;
    };
    let mut parts = rest.splitn(3, |&b| b == 0);
    let json = parts.next().unwrap_or_default();
    let stderr = String::from_utf8_lossy(parts.next().unwrap_or_default());
    let status = parts.next();
    let Ok(confined) = serde_json::from_slice::<ConfinedArgv>(json) else {
        return;
    };
    let settled = ExitFacts {
        exit_code: (code != 255).then_some(i32::from(code)),
        signal: (code == 255).then_some("SIGKILL"),
        stderr: &stderr,
    };
    let status = match status {
        None => StatusEvidence::Unavailable,
        Some(bytes) => StatusEvidence::OutOfBand(StatusRecord::decode(bytes)),
    };
    let verdict = classify(&confined, &settled, &status);
    let v = serde_json::to_value(&verdict).expect("a verdict serializes");
    assert!(
        !(v["runnerFailed"] == true && v["denied"] == true),
        "runner failure outranks denial: {v}"
    );
    let _ = is_denied(settled.exit_code, &stderr, &confined.denial_signatures);
});
