//! Capturing a command's output with bounded memory.
//!
//! Each stream keeps its last `max_output` bytes in memory (errors live at the end).
//! Once a stream grows past that, its complete content also goes to a spill file (0600,
//! in a private 0700 directory) so nothing is lost, until it grows past `max_spill`:
//! then the file is deleted and only the tail remains. Whatever the command prints, the
//! launcher holds at most the tail (in a buffer with some slack, see `Tail`) and one read
//! buffer per stream.
//!
//! Every byte of a stream also goes through a SHA-256 as it passes (the receipt's digest
//! of the complete stream, whatever was kept of it), which costs one block of state.

use crate::control::private_dir;
use crate::error::LauncherError;
use crate::supervise::tail::Tail;
use std::fs::File;
use std::io::Write;
use std::path::PathBuf;
use stockade_policy::digest::Sha256;

/// How long the launcher waits for its own stderr to take what is left (a terminal whose
/// output was stopped may never take it).
pub const FINAL_WRITE_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// The private directory holding one run's spill files, created on first need.
#[derive(Debug, Default)]
pub struct SpillDir {
    path: Option<PathBuf>,
}

impl SpillDir {
    fn get(&mut self) -> Result<PathBuf, LauncherError> {
        if let Some(p) = &self.path {
            return Ok(p.clone());
        }
        // The first usable base directory of the request files (a private area the
        // caller already trusts). Confined commands cannot write there in practice, and
        // the random 0700 directory keeps everyone else out.
        let base = private_dir::base()?;
        let dir = private_dir::create_private_dir(&base, private_dir::SPILL_PREFIX)?;
        self.path = Some(dir.clone());
        Ok(dir)
    }

    /// Removes the directory unless a spill file survived in it (the caller reads those).
    pub fn finish(self) {
        if let Some(p) = self.path {
            // Fails, harmlessly, when a spill file is still there.
            let _ = std::fs::remove_dir(p);
        }
    }
}

#[derive(Debug)]
enum Spill {
    /// Everything so far fits in the tail.
    None,
    Writing {
        path: PathBuf,
        file: File,
    },
    /// Past the cap: deleted, only the tail remains.
    Dropped,
    /// The file could not be created or written (a full disk, a file-size limit): only
    /// the tail remains, and why is reported (`Captured::spill_error`).
    Failed(String),
}

/// What one stream produced.
#[derive(Debug)]
pub struct Captured {
    /// The last bytes of the stream.
    pub tail: Vec<u8>,
    /// Whether bytes before the tail were dropped from memory.
    pub truncated: bool,
    /// The spill file holding the complete stream, when it was kept.
    pub spill_path: Option<PathBuf>,
    /// Why the spill file could not be kept, when it could not be written (not when it
    /// grew past its cap, which is the caller's choice).
    pub spill_error: Option<String>,
    /// The SHA-256 of every byte that passed, and how many there were.
    pub sha256: [u8; 32],
    pub bytes: u64,
}

impl Captured {
    /// The tail as UTF-8: cut on a character boundary (a character the cut split is
    /// dropped whole), other invalid bytes replaced.
    pub fn text(&self) -> String {
        let mut bytes = self.tail.as_slice();
        if self.truncated {
            // At most three continuation bytes can belong to a character cut in half.
            let skip = bytes
                .iter()
                .take(3)
                .take_while(|b| (**b & 0xC0) == 0x80)
                .count();
            bytes = &bytes[skip..];
        }
        String::from_utf8_lossy(bytes).into_owned()
    }
}

/// One stream being watched.
#[derive(Debug)]
pub struct Capture {
    name: &'static str,
    tail: Tail,
    total: u64,
    max_output: u64,
    /// `None`: never spill (pass-through streams keep only a tail).
    max_spill: Option<u64>,
    spill: Spill,
    /// Copy everything here as it arrives (live pass-through).
    echo: Option<Echo>,
    /// Everything that passed, for the receipt.
    digest: Sha256,
}

impl Capture {
    /// A stream captured for a result: tail in memory, complete copy spilled.
    pub fn spilling(name: &'static str, max_output: usize, max_spill: u64) -> Capture {
        Capture {
            name,
            tail: Tail::new(max_output),
            total: 0,
            max_output: max_output as u64,
            max_spill: Some(max_spill),
            spill: Spill::None,
            echo: None,
            digest: Sha256::new(),
        }
    }

    /// A stream copied through live to our own stderr, keeping only a tail.
    pub fn echoing(name: &'static str, max_output: usize) -> Capture {
        Capture {
            echo: Some(Echo::stderr()),
            max_spill: None,
            ..Capture::spilling(name, max_output, 0)
        }
    }

    pub fn push(&mut self, chunk: &[u8], dir: &mut SpillDir) {
        self.digest.update(chunk);
        if let Some(out) = &mut self.echo {
            out.push(chunk);
        }
        let before = self.total;
        self.total += chunk.len() as u64;
        if let Some(max_spill) = self.max_spill {
            self.spill_chunk(before, chunk, max_spill, dir);
        }
        self.tail.push(chunk);
    }

    fn spill_chunk(&mut self, before: u64, chunk: &[u8], max_spill: u64, dir: &mut SpillDir) {
        if self.total > max_spill {
            // A spill that already failed stays reported as failed.
            if !matches!(self.spill, Spill::Failed(_)) {
                self.drop_spill();
            }
            return;
        }
        if matches!(self.spill, Spill::None) && self.total > self.max_output {
            // Everything before this chunk is still in the tail: start the file with it.
            debug_assert_eq!(before, self.tail.bytes().len() as u64);
            self.spill = match self.open_spill(dir) {
                Ok((path, mut file)) => match file.write_all(self.tail.bytes()) {
                    Ok(()) => Spill::Writing { path, file },
                    Err(e) => {
                        let _ = std::fs::remove_file(&path);
                        Spill::Failed(format!("cannot write {}: {e}", path.display()))
                    }
                },
                Err(why) => Spill::Failed(why),
            };
        }
        if let Spill::Writing { file, path } = &mut self.spill
            && let Err(e) = file.write_all(chunk)
        {
            let why = format!("cannot write {}: {e}", path.display());
            self.drop_spill_as(Spill::Failed(why));
        }
    }

    /// Creates this stream's spill file, or says why it cannot be.
    fn open_spill(&self, dir: &mut SpillDir) -> Result<(PathBuf, File), String> {
        let path = dir
            .get()
            .map_err(|e| format!("cannot create the spill directory: {e}"))?
            .join(self.name);
        let file = private_dir::create_private_file(&path)
            .map_err(|e| format!("cannot create {}: {e}", path.display()))?;
        Ok((path, file))
    }

    /// Deletes the spill file, if one is being written, and leaves the spill as `then`.
    fn drop_spill_as(&mut self, then: Spill) {
        if let Spill::Writing { path, .. } = &self.spill {
            let _ = std::fs::remove_file(path);
        }
        self.spill = then;
    }

    fn drop_spill(&mut self) {
        self.drop_spill_as(Spill::Dropped);
    }

    /// The live copy, when the stream is passed through.
    pub fn echo(&mut self) -> Option<&mut Echo> {
        self.echo.as_mut()
    }

    pub fn finish(self) -> Captured {
        let (spill_path, spill_error) = match self.spill {
            Spill::Writing { path, file } => {
                drop(file);
                (Some(path), None)
            }
            Spill::Failed(why) => (None, Some(why)),
            Spill::None | Spill::Dropped => (None, None),
        };
        Captured {
            tail: self.tail.bytes().to_vec(),
            truncated: self.total > self.max_output,
            spill_path,
            spill_error,
            sha256: self.digest.finish(),
            bytes: self.total,
        }
    }
}

/// How many bytes of a passed-through stream may wait for our own stderr. Past this the
/// launcher stops reading the command's stream (the command then waits on its own write)
/// until our stderr takes more.
const ECHO_PENDING_MAX: usize = 256 * 1024;

/// Writes to our own stderr that never block: a command sharing our terminal can stop
/// its output (`TCOOFF`, Ctrl-S), and a launcher blocked in that write would ignore its
/// timeout and Ctrl-C. Bytes that cannot go yet wait in a bounded buffer; the supervisor
/// polls for room.
#[derive(Debug)]
pub struct Echo {
    /// The launcher's own descriptor written to: stderr, or stdout for `--json`.
    fd: std::os::fd::RawFd,
    target: EchoTarget,
    pending: Vec<u8>,
    /// Whether `finish` has restarted the terminal's output (once at most).
    resumed: bool,
}

#[derive(Debug)]
enum EchoTarget {
    /// A private non-blocking open of what the descriptor refers to (a terminal, pipe or
    /// FIFO): setting `O_NONBLOCK` on it would change the open file the caller and the
    /// command share.
    Private(File),
    /// A socket: written with `MSG_DONTWAIT`.
    Socket,
    /// A regular file or something that cannot be reopened: plain writes.
    Plain,
}

impl Echo {
    pub fn stderr() -> Echo {
        Echo::to(libc::STDERR_FILENO)
    }

    /// Writes to the launcher's own descriptor `fd` (1 or 2) that never block.
    pub fn to(fd: std::os::fd::RawFd) -> Echo {
        use nix::sys::stat::{SFlag, fstat};
        // SAFETY: fd 1 and 2 stay open for the launcher's whole life (see
        // `open_standard_descriptors` in main.rs); the borrow ends with this statement.
        let borrowed = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) };
        let kind = fstat(borrowed)
            .map(|st| SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT)
            .unwrap_or(SFlag::S_IFREG);
        let target = if kind == SFlag::S_IFSOCK {
            EchoTarget::Socket
        } else if kind == SFlag::S_IFCHR || kind == SFlag::S_IFIFO {
            use std::os::unix::fs::OpenOptionsExt;
            std::fs::OpenOptions::new()
                .write(true)
                .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
                .open(format!("/proc/self/fd/{fd}"))
                .map(EchoTarget::Private)
                .unwrap_or(EchoTarget::Plain)
        } else {
            EchoTarget::Plain
        };
        Echo {
            fd,
            target,
            pending: Vec::new(),
            resumed: false,
        }
    }

    /// Queues `bytes` and writes what the target takes now. A target that is gone takes
    /// everything (the command must never block on a full pipe because we cannot write).
    pub fn push(&mut self, bytes: &[u8]) {
        self.pending.extend_from_slice(bytes);
        self.flush();
    }

    /// Writes what the target takes without waiting.
    pub fn flush(&mut self) {
        while !self.pending.is_empty() {
            let written = match &mut self.target {
                EchoTarget::Private(f) => f.write(&self.pending),
                EchoTarget::Socket => nix::sys::socket::send(
                    self.fd,
                    &self.pending,
                    nix::sys::socket::MsgFlags::MSG_DONTWAIT
                        | nix::sys::socket::MsgFlags::MSG_NOSIGNAL,
                )
                .map_err(std::io::Error::from),
                EchoTarget::Plain => nix::unistd::write(
                    // SAFETY: as in `Echo::to`: fd 1 and 2 stay open; the borrow ends
                    // with this call.
                    unsafe { std::os::fd::BorrowedFd::borrow_raw(self.fd) },
                    &self.pending,
                )
                .map_err(std::io::Error::from),
            };
            match written {
                Ok(0) => self.pending.clear(),
                Ok(n) => {
                    self.pending.drain(..n);
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return,
                Err(_) => self.pending.clear(),
            }
        }
    }

    /// Whether bytes wait for room.
    pub fn waiting(&self) -> bool {
        !self.pending.is_empty()
    }

    /// Whether the buffer is full: stop reading the command's stream for now.
    pub fn full(&self) -> bool {
        self.pending.len() >= ECHO_PENDING_MAX
    }

    /// The descriptor to poll for room while bytes wait.
    pub fn poll_fd(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        use std::os::fd::AsFd;
        match &self.target {
            EchoTarget::Private(f) if self.waiting() => Some(f.as_fd()),
            _ => None,
        }
    }

    /// Restarts output on our terminal when the command stopped it (`TCOOFF`), once,
    /// and only on a terminal whose foreground is the launcher's group (the command's
    /// group has given it back). A command could otherwise stop the terminal's output
    /// just before it ends, and the launcher's last writes (the `[exit code: 125]` that
    /// tells a command's own 125 from a runner failure) would wait for room until they
    /// are dropped. A user's own Ctrl-S is undone too, but only once the command is over.
    fn resume_terminal(&mut self) {
        use nix::sys::termios::{FlowArg, tcflow};
        if self.resumed {
            return;
        }
        self.resumed = true;
        let EchoTarget::Private(f) = &self.target else {
            return;
        };
        let ours = nix::unistd::isatty(f).unwrap_or(false)
            && nix::unistd::tcgetpgrp(f).is_ok_and(|pg| pg == nix::unistd::getpgrp());
        if ours {
            let _ = tcflow(f, FlowArg::TCOON);
        }
    }

    /// Writes what waits, giving up (and dropping it) at `until`. Whether everything
    /// was written (or the target is gone, which takes everything).
    pub fn finish(&mut self, until: std::time::Instant) -> bool {
        use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
        loop {
            self.flush();
            let now = std::time::Instant::now();
            if !self.waiting() || now >= until {
                break;
            }
            if !self.resumed {
                self.resume_terminal();
                continue;
            }
            let wait = until
                .saturating_duration_since(now)
                .as_millis()
                .clamp(1, 100) as u16;
            match self.poll_fd() {
                Some(fd) => {
                    let _ = poll(
                        &mut [PollFd::new(fd, PollFlags::POLLOUT)],
                        PollTimeout::from(wait),
                    );
                }
                None => std::thread::sleep(std::time::Duration::from_millis(u64::from(wait))),
            }
        }
        let complete = !self.waiting();
        self.pending.clear();
        complete
    }
}

/// Writes `text` to our own stderr without ever blocking past `until` (the launcher's
/// markers, after the command's output, to a terminal the command may have stopped).
pub fn write_stderr_until(text: &str, until: std::time::Instant) {
    let mut echo = Echo::stderr();
    echo.push(text.as_bytes());
    echo.finish(until);
}

/// Writes `text` to our own stdout without ever blocking past `until`; whether all of it
/// was written.
pub fn write_stdout_until(text: &str, until: std::time::Instant) -> bool {
    let mut echo = Echo::to(libc::STDOUT_FILENO);
    echo.push(text.as_bytes());
    echo.finish(until)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_cut_on_a_character_boundary() {
        let c = Captured {
            tail: "é€x".as_bytes()[1..].to_vec(),
            truncated: true,
            spill_path: None,
            spill_error: None,
            sha256: [0; 32],
            bytes: 0,
        };
        assert_eq!(c.text(), "€x");
        let c = Captured {
            tail: b"a\xffb".to_vec(),
            truncated: false,
            spill_path: None,
            spill_error: None,
            sha256: [0; 32],
            bytes: 0,
        };
        assert_eq!(c.text(), "a\u{fffd}b");
    }
}
