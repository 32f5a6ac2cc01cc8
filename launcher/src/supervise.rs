//! Spawning a prepared argv and waiting for it to settle, with stdin and stdout passed
//! straight through and stderr copied through while it is watched.

use crate::error::LauncherError;
use crate::tail::{SignatureScanner, Tail};
use std::io::{Read, Write};
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Stdio};

/// How much of stderr is kept for classification. The runner's failure line is the only
/// thing it prints, so it is always inside this tail.
pub const STDERR_TAIL_BYTES: usize = 64 * 1024;

/// The facts of a settled process.
#[derive(Debug)]
pub struct Settled {
    /// The exit code, `None` when killed by a signal.
    pub exit_code: Option<i32>,
    /// The terminating signal.
    pub signal: Option<i32>,
    /// The last [`STDERR_TAIL_BYTES`] of stderr.
    pub stderr_tail: Vec<u8>,
    /// Whether any denial signature appeared anywhere in stderr.
    pub denial_seen: bool,
}

/// Runs `argv` to completion.
pub fn run(argv: &[String], denial_signatures: &[String]) -> Result<Settled, LauncherError> {
    let program = argv.first().cloned().unwrap_or_default();
    let mut child = Command::new(&program)
        .args(&argv[1..])
        .stdin(Stdio::inherit())
        .stdout(Stdio::inherit())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|source| LauncherError::Spawn {
            program: program.clone(),
            source,
        })?;
    let mut pipe = child.stderr.take();
    let signatures = denial_signatures.to_vec();
    let copier = std::thread::spawn(move || {
        let mut tail = Tail::new(STDERR_TAIL_BYTES);
        let mut scanner = SignatureScanner::new(&signatures);
        let mut out = std::io::stderr();
        let mut buf = vec![0u8; 64 * 1024];
        if let Some(pipe) = pipe.as_mut() {
            loop {
                match pipe.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => {
                        // Keep reading even if our own stderr is gone, so the command
                        // never blocks on a full pipe.
                        let _ = out.write_all(&buf[..n]);
                        tail.push(&buf[..n]);
                        scanner.push(&buf[..n]);
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(_) => break,
                }
            }
        }
        (tail, scanner.found())
    });
    let status = child.wait().map_err(LauncherError::Wait)?;
    let (tail, denial_seen) = copier.join().unwrap_or_else(|_| (Tail::new(0), false));
    Ok(Settled {
        exit_code: status.code(),
        signal: status.signal(),
        stderr_tail: tail.bytes().to_vec(),
        denial_seen,
    })
}
