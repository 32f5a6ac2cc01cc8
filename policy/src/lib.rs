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
//! - [`roots`]: which writable roots are acceptable (broad roots, `$TMPDIR`) and how
//!   each is pinned down by device and inode.
//! - [`capability`]: the capabilities a command started as root may keep
//!   (`--keep-capability`), and why only those.
//! - [`hidden`]: the paths no confined command may read, carved out of the grants.
//! - [`guarantees`]: which guarantees a policy asks for and what kernel feature each
//!   needs, hence whether enforcement is `full` or `partial` (or impossible).
//! - [`request`]: the launch request the launcher writes and the runner consumes, its
//!   binary file format and its validation. Its body is the serde form of
//!   [`LaunchRequest`] and [`Policy`] themselves; [`raw`] carries OS byte strings.
//! - [`stage`]: what the launcher's namespace stage mounts for a policy (read-only
//!   system, writable roots bound back, protected paths, private `/tmp`, pid namespace).
//! - [`stage_report`]: what the stage saw while the command ran (shared writable roots
//!   whose mode or owner changed, protected names that appeared) and its report file.
//! - [`confined`]: the ConfinedArgv contract handed to executors.
//! - [`status`]: the runner's out-of-band status record.
//! - [`descriptors`]: inherited descriptors through which metadata outside the writable
//!   roots can change, as the status record names them.
//! - [`devices`]: the standard device files a confined command may read; every other
//!   entry of `/dev` is hidden with the default set.
//! - [`classify`]: how a settled process is classified (runner failure, denial, ...).
//! - [`denial`]: the streaming denial-signature scanner `classify` and `stockade run` use.
//! - [`environment`]: which of the caller's environment variables reach a command.
//! - [`exit`]: reserved exit codes and the runner failure prefix.
//! - [`digest`]: SHA-256, which ties a request file to the ConfinedArgv naming it.
//! - [`trust`]: the one rule for control files and directories only this user can reach.
//! - [`failure_tag`]: the per-command tag that makes the runner's failure line unforgeable.
//! - [`inherit`]: what the runner takes from the process that spawns it (cwd, env).
//! - [`session`]: whether the runner starts a new session (decided by its spawner).
//! - [`domains`]: the host rules of `--allow-domain`/`--deny-domain` and the filtering
//!   proxy's decision; [`addresses`]: which resolved addresses are not public;
//!   [`network_denials`]: the record of refused connections and its markers;
//!   [`proxy_env`]: the variables that point a command's clients at the proxy.
//! - [`binding`]: the executable and working directory bound at confine time, the one
//!   rule that resolves `argv[0]`, and how a change is named.
//! - [`allocator`]: the musl builds' memory allocator (dlmalloc behind a one-flag lock);
//!   [`memory_copy`]: their `memcpy` and `memmove`; [`directory`]: directory listings
//!   read with `getdents64` rather than the C library's `opendir`.
//! - [`model`]: a reference model of what a resolved policy allows, per path and
//!   operation (what the differential test checks the kernel against).
//! - [`receipt`]: the record of a run (`stockade run --json`, `stockade classify`).
//! - [`attribution`]: which refusals a command met were stockade's, named from its error
//!   lines; [`landlock_audit`]: which of Landlock's audit records are its;
//!   [`audit_attribution`]: the refusals those records name, merged with the lines'.

pub mod addresses;
pub mod allocator;
pub mod attribution;
pub mod audit_attribution;
pub mod binding;
pub mod c_main;
pub mod capability;
pub mod classify;
pub mod confined;
pub mod credentials;
pub mod denial;
pub mod denial_record;
pub mod descriptors;
pub mod devices;
pub mod digest;
pub mod directory;
pub mod domains;
pub mod environment;
pub mod exit;
pub mod failure_tag;
pub mod grants;
pub mod guarantees;
pub mod hidden;
pub mod inherit;
pub mod journal;
pub mod landlock_audit;
pub mod limits;
pub mod memory_copy;
pub mod mode;
pub mod model;
pub mod network_denials;
pub mod package_caches;
pub mod policy;
pub mod privileged_ops;
pub mod proxy_env;
pub mod raw;
pub mod receipt;
pub mod request;
pub mod roots;
pub mod script_directories;
pub mod session;
pub mod stage;
pub mod stage_report;
pub mod status;
pub mod statx;
pub mod supervision;
pub mod trust;

pub use mode::Mode;
pub use policy::{Network, Policy, PolicyRequest};
pub use request::LaunchRequest;
