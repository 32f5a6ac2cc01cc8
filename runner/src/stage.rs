//! Whether the launcher's namespace stage really ran before this runner.
//!
//! When `confine` reported the stage's guarantees, its argv starts the stage, which execs
//! this runner. An argv edited to start the runner directly would run the command
//! without them while the report says otherwise, so the runner checks the two traces the
//! stage always leaves and counts the stage as achieved only when both are there:
//! - the root of the filesystem is mounted read-only (the stage remounts the whole tree
//!   read-only and binds only the writable roots back);
//! - with a pid namespace, this process is pid 2: the namespace's init (pid 1) starts
//!   exactly one child, the runner. On the host, pid 2 is a kernel thread.

use stockade_policy::Policy;
use stockade_policy::stage::PidMode;

pub fn achieved(policy: &Policy) -> bool {
    let mut fs = std::mem::MaybeUninit::<libc::statvfs>::uninit();
    // SAFETY: statvfs writes into the buffer and reads a NUL-terminated path literal.
    let ok = unsafe { libc::statvfs(c"/".as_ptr(), fs.as_mut_ptr()) } == 0;
    // SAFETY: initialised by the successful call above.
    let root_read_only = ok && unsafe { fs.assume_init() }.f_flag & libc::ST_RDONLY != 0;
    let pids_ok = policy.pids() == PidMode::Share || std::process::id() == 2;
    root_read_only && pids_ok
}
