//! The shared vocabulary of stockade.
//!
//! This crate holds data and pure logic only: no process control and no confinement
//! syscalls. Both binaries depend on it and never on each other:
//!
//! ```text
//!   stockade-policy  <-  stockade-runner   (confines itself, execs the target)
//!   stockade-policy  <-  stockade          (the launcher: confine, run, classify)
//! ```
//!
//! Where each decision lives:
//! - [`mode`]: the three sandbox modes and their spellings.
//! - [`policy`]: a caller's policy request, and [`policy::PolicyRequest::resolve`], the
//!   one step that fills in defaults and canonicalises paths.
//! - [`grants`]: which filesystem access each resolved policy grants, and where.
//! - [`guarantees`]: which guarantees a policy asks for and what kernel feature each
//!   needs, hence whether enforcement is `full` or `partial` (or impossible).
//! - [`request`]: the launch request the launcher writes and the runner consumes, its
//!   binary file format and its validation. Its body is the serde form of
//!   [`LaunchRequest`] and [`Policy`] themselves; [`raw`] carries OS byte strings.
//! - [`stage`]: what the launcher's namespace stage mounts for a policy (read-only
//!   system, writable roots bound back, protected paths, private `/tmp`, pid namespace).
//! - [`confined`]: the ConfinedArgv contract handed to executors.
//! - [`status`]: the runner's out-of-band status record.
//! - [`classify`]: how a settled process is classified (runner failure, denial, ...).
//! - [`environment`]: which of the caller's environment variables reach a command.
//! - [`exit`]: reserved exit codes and the runner failure prefix.

pub mod classify;
pub mod confined;
pub mod environment;
pub mod exit;
pub mod grants;
pub mod guarantees;
pub mod mode;
pub mod policy;
pub mod raw;
pub mod request;
pub mod stage;
pub mod status;

pub use mode::Mode;
pub use policy::{Network, Policy, PolicyRequest};
pub use request::LaunchRequest;
