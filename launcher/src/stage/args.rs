//! The stage's command line: what `confine` writes after `__stage` (the mount plan, what
//! to watch, the network namespace's proxy) and how the stage reads it back, byte for
//! byte (paths that are not UTF-8 travel hex-encoded).

use std::ffi::OsString;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use stockade_policy::capability::{Capability, CapabilitySet};
use stockade_policy::stage::MountPlan;

/// The hidden subcommand that starts the stage. Not a documented user command.
pub const SUBCOMMAND: &str = "__stage";

/// What the stage watches besides mounting (see `stockade_policy::stage_report`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Watch {
    /// Shared writable roots the caller owns: their mode and owner are put back.
    pub shared: Vec<PathBuf>,
    /// Protected names that did not exist when confined: reported if they appear.
    pub missing: Vec<PathBuf>,
    /// The report file `confine` created (empty, 0600) for what the stage finds.
    pub report: Option<PathBuf>,
    /// The capabilities the command keeps: the watcher keeps them too, to put back what
    /// they let the command change.
    pub keep_capabilities: CapabilitySet,
}

impl Watch {
    fn is_empty(&self) -> bool {
        self.shared.is_empty() && self.missing.is_empty()
    }
}

/// The network namespace of the network by name: the descriptor the proxy host passes
/// (one end of a socket pair) and the port to listen on inside.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NetProxy {
    pub channel: libc::c_int,
    pub port: u16,
}

impl NetProxy {
    const FLAG: &str = "--netns-proxy";

    fn parse(value: &str) -> Result<NetProxy, String> {
        let bad = || format!("{} {value:?}: expected FD:PORT", NetProxy::FLAG);
        let (fd, port) = value.split_once(':').ok_or_else(bad)?;
        let channel = fd.parse().ok().filter(|&fd| fd > 2).ok_or_else(bad)?;
        let port = port.parse().ok().filter(|&p| p != 0).ok_or_else(bad)?;
        Ok(NetProxy { channel, port })
    }
}

/// The stage's command line for `plan` and `watch`: `LAUNCHER __stage FLAGS -- RUNNER
/// ARGS...`.
pub fn argv(
    plan: &MountPlan,
    watch: &Watch,
    net: Option<NetProxy>,
    launcher: &str,
    runner_argv: &[String],
) -> Vec<String> {
    let mut argv = vec![launcher.to_string(), SUBCOMMAND.to_string()];
    if let Some(net) = net {
        argv.push(NetProxy::FLAG.into());
        argv.push(format!("{}:{}", net.channel, net.port));
    }
    for (flag, paths) in [
        ("--rw", &plan.rw),
        ("--pin", &plan.pin),
        ("--ro", &plan.ro),
        ("--mask", &plan.mask),
        ("--shared", &watch.shared),
        ("--missing", &watch.missing),
    ] {
        for p in paths {
            argv.push(flag.into());
            argv.push(encode_path(p));
        }
    }
    if let Some(report) = &watch.report {
        argv.push("--report".into());
        argv.push(encode_path(report));
    }
    for cap in watch.keep_capabilities.iter() {
        argv.push(stockade_policy::capability::FLAG.into());
        argv.push(cap.name().into());
    }
    if plan.private_tmp {
        argv.push("--private-tmp".into());
    }
    if plan.pids {
        argv.push("--pids".into());
    }
    if plan.network {
        argv.push("--private-network".into());
    }
    if plan.private_shm {
        argv.push("--private-shm".into());
    }
    if plan.private_pts {
        argv.push("--private-pts".into());
    }
    argv.push("--".into());
    argv.extend(runner_argv.iter().cloned());
    argv
}

/// What marks a path in the stage's argv as hex-encoded bytes (see [`encode_path`]). No
/// path the stage takes starts with it: they are all absolute.
const HEX_PATH: &str = "hex:";

/// A path as it travels in the stage's argv. ConfinedArgv's argv is a list of strings,
/// so a name that is not UTF-8 cannot travel as itself, and a lossy copy names another
/// path: the stage then binds, pins and masks nothing there (the path is reported
/// protected or hidden while a command writes it, or renames it out of hiding for the
/// next command to read) and leaves such a writable root read-only. Such a path travels
/// as its bytes in hex after [`HEX_PATH`]; every other path as itself.
fn encode_path(path: &Path) -> String {
    match path.to_str() {
        Some(s) => s.to_string(),
        None => {
            let hex: String = path
                .as_os_str()
                .as_bytes()
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect();
            format!("{HEX_PATH}{hex}")
        }
    }
}

/// The path [`encode_path`] wrote.
fn decode_path(arg: &std::ffi::OsStr) -> Result<PathBuf, String> {
    let Some(hex) = arg.as_bytes().strip_prefix(HEX_PATH.as_bytes()) else {
        return Ok(PathBuf::from(arg));
    };
    let digit = |b: u8| (b as char).to_digit(16);
    if hex.len() % 2 != 0 {
        return Err(format!("{arg:?}: not hex-encoded bytes"));
    }
    hex.chunks(2)
        .map(|pair| match (digit(pair[0]), digit(pair[1])) {
            (Some(hi), Some(lo)) => Ok((hi * 16 + lo) as u8),
            _ => Err(format!("{arg:?}: not hex-encoded bytes")),
        })
        .collect::<Result<Vec<u8>, String>>()
        .map(|bytes| PathBuf::from(OsString::from_vec(bytes)))
}

/// Parses the stage's own flags (written by [`argv`]); the rest is the runner's argv.
type Parsed = (MountPlan, Watch, Option<NetProxy>, Vec<OsString>);

pub(super) fn parse(args: &[OsString]) -> Result<Parsed, String> {
    let mut plan = MountPlan::default();
    let mut watch = Watch::default();
    let mut keep = Vec::new();
    let mut net = None;
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let mut path = |flag: &str| -> Result<PathBuf, String> {
            let p = decode_path(it.next().ok_or(format!("{flag} needs a PATH"))?)?;
            if !p.is_absolute() {
                return Err(format!("{flag} {}: not an absolute path", p.display()));
            }
            Ok(p)
        };
        match arg.to_str() {
            Some("--rw") => plan.rw.push(path("--rw")?),
            Some("--pin") => plan.pin.push(path("--pin")?),
            Some("--ro") => plan.ro.push(path("--ro")?),
            Some("--mask") => plan.mask.push(path("--mask")?),
            Some("--shared") => watch.shared.push(path("--shared")?),
            Some("--missing") => watch.missing.push(path("--missing")?),
            Some("--report") => watch.report = Some(path("--report")?),
            Some(stockade_policy::capability::FLAG) => {
                let name = it.next().ok_or("--keep-capability needs a NAME")?;
                let cap: Capability = name
                    .to_str()
                    .ok_or_else(|| format!("--keep-capability {name:?}: not a capability"))?
                    .parse()
                    .map_err(|e| format!("--keep-capability: {e}"))?;
                keep.push(cap);
            }
            Some("--private-tmp") => plan.private_tmp = true,
            Some("--pids") => plan.pids = true,
            Some("--private-network") => plan.network = true,
            Some("--private-shm") => plan.private_shm = true,
            Some("--private-pts") => plan.private_pts = true,
            Some(NetProxy::FLAG) => {
                let value = it.next().and_then(|v| v.to_str()).unwrap_or_default();
                net = Some(NetProxy::parse(value)?);
            }
            Some("--") => {
                let rest: Vec<OsString> = it.cloned().collect();
                if rest.is_empty() {
                    return Err("no runner command after --".into());
                }
                if !watch.is_empty() && watch.report.is_none() {
                    return Err("--shared and --missing need a --report file".into());
                }
                watch.keep_capabilities = CapabilitySet::of(&keep);
                return Ok((plan, watch, net, rest));
            }
            _ => return Err(format!("unknown argument {:?}", arg.to_string_lossy())),
        }
    }
    Err("no runner command (missing --)".into())
}

/// The stage's own arguments when `argv` starts this very launcher's namespace stage
/// (`THIS-BINARY __stage ARGS...`, as `confine` writes it): `stockade run`, and the
/// proxy host before it, then run the stage in the child they fork ([`run_in_child`])
/// instead of executing this binary again. `None` for anything else.
pub fn own_args<S: AsRef<std::ffi::OsStr>>(argv: &[S]) -> Option<Vec<OsString>> {
    let (program, rest) = argv.split_first()?;
    let (sub, args) = rest.split_first()?;
    if sub.as_ref() != SUBCOMMAND
        || crate::control::locate::launcher().ok()? != std::path::Path::new(program.as_ref())
    {
        return None;
    }
    Some(args.iter().map(|a| a.as_ref().to_os_string()).collect())
}
