//! `stockade __proxy`: the process that hosts the filtering proxy for exactly as long as
//! the command runs.
//!
//! A ConfinedArgv with a domain allow-list starts
//! `stockade __proxy PROXY FLAGS -- NEXT...`, where `NEXT` is the namespace stage or the
//! runner. This process, outside the sandbox and with the caller's privileges:
//! 1. gets its listening socket: either it binds `127.0.0.1:PORT` itself (`--listen`,
//!    no network namespace: the command reaches it on the host's loopback), or it hands
//!    the stage one end of a socket pair on descriptor `FD` (`--netns-channel`), and the
//!    stage, once inside its new network namespace, sends back a socket listening on
//!    that namespace's loopback: connections from inside arrive here, connections out
//!    leave from the host's network;
//! 2. starts `NEXT` as its child (which dies with this process: `PR_SET_PDEATHSIG`),
//!    serves the proxy in threads, passes on the signals a supervisor sends, and when
//!    the child ends, ends the same way (its exit code, or the same signal). Its
//!    threads, and with them every tunnel and the listening socket, end with it.
//!
//! Failures print one runner failure line (tagged like the runner's, since to the
//! executor this process is part of the runner) and exit 125.

use super::{Config, Limits, Record, serve};
use crate::stage;
use std::ffi::OsString;
use std::io::{self, Write};
use std::net::{Ipv4Addr, SocketAddrV4, TcpListener};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::sync::Arc;
use stockade_policy::domains::{DomainRules, HostRule, Pin, RuleKind};
use stockade_policy::exit;
use stockade_policy::failure_tag;

/// The hidden subcommand. Not a documented user command.
pub const SUBCOMMAND: &str = "__proxy";

/// Where the listening socket comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Listen {
    /// Bind `127.0.0.1:PORT` here, on the host's loopback.
    Port(u16),
    /// Receive it from the child through a socket pair whose other end the child gets
    /// as this descriptor number.
    NetnsChannel(RawFd),
}

/// Everything `__proxy` is started with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Spec {
    pub rules: DomainRules,
    pub record: PathBuf,
    pub listen: Listen,
}

/// The proxy host's command line: `LAUNCHER __proxy FLAGS -- NEXT...`.
pub fn argv(spec: &Spec, launcher: &str, next: &[String]) -> Vec<String> {
    let mut argv = vec![launcher.to_string(), SUBCOMMAND.to_string()];
    for rule in &spec.rules.allow {
        argv.extend(["--allow".to_string(), rule.to_string()]);
    }
    for rule in &spec.rules.deny {
        argv.extend(["--deny".to_string(), rule.to_string()]);
    }
    for pin in &spec.rules.pins {
        argv.extend(["--pin".to_string(), format!("{}={}", pin.name, pin.addr)]);
    }
    argv.extend([
        "--record".to_string(),
        spec.record.to_string_lossy().into_owned(),
    ]);
    match spec.listen {
        Listen::Port(p) => argv.extend(["--listen".to_string(), p.to_string()]),
        Listen::NetnsChannel(fd) => argv.extend(["--netns-channel".to_string(), fd.to_string()]),
    }
    argv.push("--".into());
    argv.extend(next.iter().cloned());
    argv
}

/// Parses the flags [`argv`] writes; the rest is the child's argv.
fn parse(args: &[OsString]) -> Result<(Spec, Vec<OsString>), String> {
    let mut rules = DomainRules::default();
    let mut record = None;
    let mut listen = None;
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let flag = arg.to_str().unwrap_or("");
        if flag == "--" {
            let rest: Vec<OsString> = it.cloned().collect();
            if rest.is_empty() {
                return Err("no command after --".into());
            }
            let record = record.ok_or("--record is missing")?;
            let listen = listen.ok_or("--listen or --netns-channel is missing")?;
            return Ok((
                Spec {
                    rules,
                    record,
                    listen,
                },
                rest,
            ));
        }
        let value = it
            .next()
            .and_then(|v| v.to_str())
            .ok_or_else(|| format!("{flag} needs a value"))?;
        match flag {
            "--allow" => rules.allow.push(HostRule::parse(value, RuleKind::Allow)?),
            "--deny" => rules.deny.push(HostRule::parse(value, RuleKind::Deny)?),
            "--pin" => rules.pins.push(Pin::parse(value)?),
            "--record" => record = Some(PathBuf::from(value)),
            "--listen" => {
                let port = value.parse().map_err(|_| format!("--listen {value}"))?;
                listen = Some(Listen::Port(port));
            }
            "--netns-channel" => {
                let fd = value
                    .parse::<RawFd>()
                    .ok()
                    .filter(|&fd| fd > 2)
                    .ok_or_else(|| format!("--netns-channel {value}"))?;
                listen = Some(Listen::NetnsChannel(fd));
            }
            _ => return Err(format!("unknown argument {flag:?}")),
        }
    }
    Err("no command (missing --)".into())
}

/// `stockade __proxy ...`: returns the child's exit code (or ends by its signal).
pub fn main(args: &[OsString]) -> i32 {
    let (spec, next) = match parse(args) {
        Ok(parsed) => parsed,
        Err(e) => return fail(None, &format!("network proxy: {e}")),
    };
    let tag = next
        .iter()
        .position(|a| a == failure_tag::FLAG)
        .and_then(|i| next.get(i + 1))
        .and_then(|t| t.to_str())
        .filter(|t| failure_tag::is_valid(t))
        .map(str::to_string);
    match host(&spec, &next) {
        Ok(code) => code,
        Err(e) => fail(tag.as_deref(), &format!("network proxy: {e}")),
    }
}

/// Prints the one runner failure line and returns its exit code.
fn fail(tag: Option<&str>, what: &str) -> i32 {
    let line = format!(
        "{}{}\n",
        failure_tag::line_prefix(tag),
        exit::one_line(what)
    );
    let _ = io::stderr().write_all(line.as_bytes());
    exit::RUNNER_FAILURE
}

fn host(spec: &Spec, next: &[OsString]) -> Result<i32, String> {
    let record = Record::create(&spec.record)
        .map_err(|e| format!("cannot create {}: {e}", spec.record.display()))?;
    let mut channel = None;
    let listener = match spec.listen {
        Listen::Port(port) => Some(
            TcpListener::bind(SocketAddrV4::new(Ipv4Addr::LOCALHOST, port)).map_err(|e| {
                format!(
                    "cannot listen on 127.0.0.1:{port} (taken since the command was confined? confine it again): {e}"
                )
            })?,
        ),
        Listen::NetnsChannel(fd) => {
            channel = Some((socket_pair()?, fd));
            None
        }
    };
    // Raised before the child starts, which gets the limit this process was given back
    // in its own start: raised after, the child could start (and look) before it was.
    let given = room_for_tunnels();
    let child = spawn(
        next,
        channel.as_ref().map(|((_, theirs), fd)| (theirs, *fd)),
        given,
    )?;
    let listener = match (listener, channel) {
        (Some(l), _) => Some(l),
        (None, Some(((ours, theirs), _))) => {
            drop(theirs);
            receive_listener(&ours)
        }
        (None, None) => None,
    };
    // No listener from the stage: it failed before its namespace was ready and said why;
    // its status is what the caller must see.
    if let Some(listener) = listener {
        let config = Config {
            rules: spec.rules.clone(),
            record: Arc::new(record),
            limits: Limits::default(),
        };
        if let Err(e) = serve(listener, config) {
            // SAFETY: kill with a pid this process started and has not reaped.
            unsafe { libc::kill(child, libc::SIGKILL) };
            let _ = stage::wait_for(child);
            return Err(format!("cannot start the proxy: {e}"));
        }
    }
    stage::forward_signals_to(child);
    let status = stage::wait_for(child).map_err(|e| e.to_string())?;
    Ok(stage::replay(status))
}

/// Raises this process's soft limit on open descriptors to its hard limit, and returns
/// the limit it was given, which the child gets back (a raised soft limit would break
/// programs that `select` on descriptors past 1024). Each tunnel takes six descriptors
/// (two sockets, two pipes): under the usual soft limit of 1024 an ordinary user's proxy
/// would run out near 170 tunnels, short of its connection limit.
fn room_for_tunnels() -> Option<libc::rlimit> {
    let mut given = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the limits into a local.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut given) } != 0 {
        return None;
    }
    if given.rlim_cur < given.rlim_max {
        let raised = libc::rlimit {
            rlim_cur: given.rlim_max,
            rlim_max: given.rlim_max,
        };
        // SAFETY: setrlimit reads the limits from a local.
        unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) };
    }
    Some(given)
}

/// A connected pair of unix sockets, both close-on-exec.
fn socket_pair() -> Result<(OwnedFd, OwnedFd), String> {
    let mut fds = [0; 2];
    // SAFETY: socketpair writes two descriptors into the array.
    let r = unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    };
    if r != 0 {
        return Err(format!(
            "cannot create a socket pair: {}",
            io::Error::last_os_error()
        ));
    }
    // SAFETY: both descriptors were just created and belong to nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Starts the child, which dies with this process, with the open-file limit `given`
/// (the one this process was started with); with a channel, the child gets `theirs` as
/// descriptor `at`.
fn spawn(
    next: &[OsString],
    channel: Option<(&OwnedFd, RawFd)>,
    given: Option<libc::rlimit>,
) -> Result<libc::pid_t, String> {
    let mut cmd = std::process::Command::new(&next[0]);
    cmd.args(&next[1..]);
    let parent = std::process::id() as libc::pid_t;
    let channel = channel.map(|(fd, at)| (fd.as_raw_fd(), at));
    // SAFETY: the hook runs in the child between fork and exec and makes only
    // async-signal-safe calls (setrlimit, prctl, getppid, dup2, fcntl, _exit) on locals.
    unsafe {
        cmd.pre_exec(move || {
            if let Some(given) = given
                && libc::setrlimit(libc::RLIMIT_NOFILE, &given) != 0
            {
                return Err(io::Error::last_os_error());
            }
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            // This process may have died before the line above: then nobody would
            // end the child.
            if libc::getppid() != parent {
                libc::_exit(exit::RUNNER_FAILURE);
            }
            if let Some((fd, at)) = channel {
                // dup2 leaves the new descriptor open across exec (the original stays
                // close-on-exec); the same number needs its flag cleared by hand.
                if fd == at {
                    let flags = libc::fcntl(fd, libc::F_GETFD);
                    libc::fcntl(fd, libc::F_SETFD, flags & !libc::FD_CLOEXEC);
                } else if libc::dup2(fd, at) < 0 {
                    return Err(io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
    if let Some(stage_args) = stage::own_args(next) {
        let env: Vec<(OsString, OsString)> = std::env::vars_os().collect();
        // SAFETY: runs in the child forked from this process while it is still single
        // threaded (the proxy's threads start after the spawn), after the hook above, in
        // place of the `execve` of `stockade __stage` (see `stage::run_in_child`): one
        // start of this binary fewer on the path of every command with an allow-list.
        unsafe {
            cmd.pre_exec(move || stage::run_in_child(&stage_args, env.clone()));
        }
    }
    let child = cmd.spawn().map_err(|e| {
        format!(
            "cannot start {}: {e}",
            std::path::Path::new(&next[0]).display()
        )
    })?;
    Ok(child.id() as libc::pid_t)
}

/// Receives the listening socket the stage sends (one byte with the descriptor
/// attached). `None` when the stage closed its end without sending one.
fn receive_listener(ours: &OwnedFd) -> Option<TcpListener> {
    let mut byte = [0u8; 1];
    // SAFETY: CMSG_SPACE is a pure size computation.
    let space = unsafe { libc::CMSG_SPACE(std::mem::size_of::<RawFd>() as u32) } as usize;
    let mut control = vec![0u8; space];
    let mut iov = libc::iovec {
        iov_base: byte.as_mut_ptr().cast(),
        iov_len: 1,
    };
    // SAFETY: zeroed msghdr is a valid empty header; the pointers set below live across
    // the call.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = space as _;
    let n = loop {
        // SAFETY: recvmsg writes into the buffers `msg` points at, sized as declared.
        let n = unsafe { libc::recvmsg(ours.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC) };
        if n >= 0 || io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
            break n;
        }
    };
    if n <= 0 {
        return None;
    }
    // SAFETY: the kernel filled `msg`; CMSG_FIRSTHDR reads within msg_control.
    let cmsg = unsafe { libc::CMSG_FIRSTHDR(&msg) };
    if cmsg.is_null() {
        return None;
    }
    // SAFETY: `cmsg` points into `control`, which the kernel filled.
    let (level, kind) = unsafe { ((*cmsg).cmsg_level, (*cmsg).cmsg_type) };
    if level != libc::SOL_SOCKET || kind != libc::SCM_RIGHTS {
        return None;
    }
    // SAFETY: an SCM_RIGHTS message carries at least one descriptor after its header;
    // read unaligned, since the control buffer has byte alignment.
    let fd: RawFd = unsafe { std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast()) };
    // SAFETY: the kernel installed this descriptor for us alone.
    Some(unsafe { TcpListener::from_raw_fd(fd) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_line_round_trips() {
        let spec = Spec {
            rules: DomainRules {
                allow: vec![
                    HostRule::parse("*.example.org", RuleKind::Allow).unwrap(),
                    HostRule::parse("[fd00::/8]:22", RuleKind::Allow).unwrap(),
                    HostRule::parse("git.example.org:22", RuleKind::Allow).unwrap(),
                ],
                deny: vec![HostRule::parse("x.example.org", RuleKind::Deny).unwrap()],
                pins: vec![Pin::parse("a.example.org=[::1]").unwrap()],
            },
            record: "/run/stockade/x/network-denied".into(),
            listen: Listen::NetnsChannel(3),
        };
        let line = argv(&spec, "/usr/bin/stockade", &["runner".into(), "--x".into()]);
        assert_eq!(line[1], SUBCOMMAND);
        let args: Vec<OsString> = line[2..].iter().map(OsString::from).collect();
        let (parsed, rest) = parse(&args).unwrap();
        assert_eq!(parsed, spec);
        assert_eq!(rest, vec![OsString::from("runner"), OsString::from("--x")]);
        let listen = Spec {
            listen: Listen::Port(8080),
            ..spec
        };
        let line = argv(&listen, "l", &["r".into()]);
        let args: Vec<OsString> = line[2..].iter().map(OsString::from).collect();
        assert_eq!(parse(&args).unwrap().0, listen);
        for bad in [
            &["--record", "/r", "--listen", "1"][..],
            &["--record", "/r", "--", "x"],
            &["--listen", "1", "--", "x"],
            &["--record", "/r", "--listen", "x", "--", "x"],
            &["--record", "/r", "--netns-channel", "2", "--", "x"],
            &[
                "--allow", "*.", "--record", "/r", "--listen", "1", "--", "x",
            ],
            &["--what", "1", "--", "x"],
        ] {
            let args: Vec<OsString> = bad.iter().map(OsString::from).collect();
            assert!(parse(&args).is_err(), "{bad:?}");
        }
    }
}
