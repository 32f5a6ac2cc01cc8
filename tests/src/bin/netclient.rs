//! `netclient ACTION [ARGS...]`: a network client for the network-by-name tests, run
//! inside the sandbox. It finds the proxy the way real clients do, from `HTTPS_PROXY`,
//! `HTTP_PROXY` and `ALL_PROXY`, and prints one line per result:
//!
//! - `connect HOST PORT MSG`: `CONNECT HOST:PORT` through `$HTTPS_PROXY`, then sends MSG
//!   and prints the status code and what came back (`200 echo MSG`, or `403`; `502`
//!   with the first line of the proxy's explanation);
//! - `why HOST PORT`: `CONNECT HOST:PORT`, printing the status and the first line of the
//!   proxy's explanation (for a refusal);
//! - `socks HOST PORT MSG`: the same through `$ALL_PROXY` (SOCKS5 with the name): prints
//!   the reply code and what came back (`0 echo MSG`, or `2`);
//! - `get URL [follow]`: a plain HTTP GET through `$HTTP_PROXY`; with `follow`, a
//!   redirect's `Location` is requested next, through the proxy too; prints each status;
//! - `direct PORT`: a TCP connect to 127.0.0.1:PORT without the proxy: `ok` or the errno;
//! - `around ADDR`: a TCP connect to ADDR at the proxy's own port number (from
//!   `$HTTP_PROXY`), without the proxy: `ok` or the errno;
//! - `parallel N HOST PORT`: N tunnels at once, each echoing its own bytes: `ok N`;
//! - `abuse HOST PORT`: a slow client (half a head, then nothing), garbage, and an
//!   oversized head, then a good tunnel while the slow one is still open: each result.
//!
//! Usage errors exit 2; anything unexpected panics (exit 101).

use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::time::Duration;

fn proxy_addr(var: &str) -> String {
    let url = std::env::var(var).unwrap_or_else(|_| {
        eprintln!("netclient: ${var} is not set");
        std::process::exit(2)
    });
    let rest = url.split("://").nth(1).unwrap_or(&url);
    rest.trim_end_matches('/').to_string()
}

fn open(var: &str) -> TcpStream {
    let s = TcpStream::connect(proxy_addr(var)).expect("connect to the proxy");
    // Only a guard against hanging the suite, not a timing assertion.
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    s
}

/// Reads a response head byte by byte (nothing after it is consumed).
fn read_head(s: &mut TcpStream) -> String {
    let mut head = Vec::new();
    let mut b = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match s.read(&mut b) {
            Ok(1) => head.push(b[0]),
            _ => break,
        }
    }
    String::from_utf8_lossy(&head).into_owned()
}

fn status(head: &str) -> String {
    head.split(' ').nth(1).unwrap_or("none").to_string()
}

fn echo(s: &mut TcpStream, msg: &[u8]) -> String {
    s.write_all(msg).unwrap();
    s.shutdown(Shutdown::Write).unwrap();
    let mut back = Vec::new();
    s.read_to_end(&mut back).unwrap();
    String::from_utf8_lossy(&back).into_owned()
}

fn connect(host: &str, port: &str, msg: &str) -> String {
    let mut s = open("HTTPS_PROXY");
    write!(
        s,
        "CONNECT {host}:{port} HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n"
    )
    .unwrap();
    let code = status(&read_head(&mut s));
    match code.as_str() {
        "200" => format!("200 echo {}", echo(&mut s, msg.as_bytes())),
        // The proxy says why it could not reach the host: the first line of its body.
        "502" => format!("502 {}", first_body_line(&mut s)),
        _ => code,
    }
}

/// The first line of what follows a response head.
fn first_body_line(s: &mut TcpStream) -> String {
    let mut body = String::new();
    let _ = s.read_to_string(&mut body);
    body.lines().next().unwrap_or("").to_string()
}

/// `CONNECT` answered with anything but 200: the status and the first line of the body.
fn why(host: &str, port: &str) -> String {
    let mut s = open("HTTPS_PROXY");
    write!(
        s,
        "CONNECT {host}:{port} HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n"
    )
    .unwrap();
    let code = status(&read_head(&mut s));
    format!("{code} {}", first_body_line(&mut s))
}

fn socks(host: &str, port: u16, msg: &str) -> String {
    let mut s = open("ALL_PROXY");
    s.write_all(&[5, 1, 0]).unwrap();
    let mut choice = [0u8; 2];
    s.read_exact(&mut choice).unwrap();
    let mut req = vec![5, 1, 0, 3, host.len() as u8];
    req.extend_from_slice(host.as_bytes());
    req.extend_from_slice(&port.to_be_bytes());
    s.write_all(&req).unwrap();
    let mut reply = [0u8; 10];
    s.read_exact(&mut reply).unwrap();
    if reply[1] == 0 {
        format!("0 echo {}", echo(&mut s, msg.as_bytes()))
    } else {
        reply[1].to_string()
    }
}

fn get(url: &str, follow: bool) -> Vec<String> {
    let mut out = Vec::new();
    let mut next = Some(url.to_string());
    while let Some(url) = next.take() {
        let mut s = open("HTTP_PROXY");
        write!(s, "GET {url} HTTP/1.1\r\nAccept: */*\r\n\r\n").unwrap();
        let head = read_head(&mut s);
        out.push(status(&head));
        if follow {
            next = head
                .lines()
                .find_map(|l| l.strip_prefix("Location: "))
                .map(str::to_string);
        }
    }
    out
}

fn direct(port: u16) -> String {
    direct_to("127.0.0.1", port)
}

fn direct_to(addr: &str, port: u16) -> String {
    match TcpStream::connect((addr, port)) {
        Ok(_) => "ok".into(),
        Err(e) => match e.raw_os_error() {
            Some(libc::EACCES) => "errno EACCES".into(),
            Some(libc::ECONNREFUSED) => "errno ECONNREFUSED".into(),
            Some(libc::ENETUNREACH) => "errno ENETUNREACH".into(),
            Some(n) => format!("errno {n}"),
            None => format!("error {e}"),
        },
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize| -> &str {
        args.get(i).map(String::as_str).unwrap_or_else(|| {
            eprintln!("netclient: missing argument {i}");
            std::process::exit(2)
        })
    };
    let port = |i: usize| -> u16 { arg(i).parse().expect("a port") };
    match arg(0) {
        "connect" => println!("{}", connect(arg(1), arg(2), arg(3))),
        "why" => println!("{}", why(arg(1), arg(2))),
        "socks" => println!("{}", socks(arg(1), port(2), arg(3))),
        "get" => {
            for code in get(arg(1), args.get(2).is_some_and(|a| a == "follow")) {
                println!("{code}");
            }
        }
        "direct" => println!("{}", direct(port(1))),
        "around" => {
            let proxy = proxy_addr("HTTP_PROXY");
            let port = proxy.rsplit(':').next().and_then(|p| p.parse().ok());
            println!(
                "{}",
                direct_to(arg(1), port.expect("a port in $HTTP_PROXY"))
            );
        }
        "parallel" => {
            let n: usize = arg(1).parse().expect("a count");
            let (host, p) = (arg(2).to_string(), arg(3).to_string());
            let threads: Vec<_> = (0..n)
                .map(|i| {
                    let (host, p) = (host.clone(), p.clone());
                    std::thread::spawn(move || {
                        let msg = format!("client {i};").repeat(500);
                        connect(&host, &p, &msg) == format!("200 echo {msg}")
                    })
                })
                .collect();
            let good = threads
                .into_iter()
                .map(|t| t.join().unwrap())
                .filter(|ok| *ok)
                .count();
            println!("ok {good}");
        }
        "abuse" => {
            let mut slow = open("HTTPS_PROXY");
            slow.write_all(b"CONNECT ").unwrap();
            let mut garbage = open("HTTPS_PROXY");
            garbage.write_all(b"\x16\x03\x01 not http\r\n\r\n").unwrap();
            println!("garbage {}", status(&read_head(&mut garbage)));
            let mut big = open("HTTPS_PROXY");
            let mut head = format!("CONNECT {}:{} HTTP/1.1\r\n", arg(1), arg(2)).into_bytes();
            while head.len() < 256 * 1024 {
                head.extend_from_slice(b"X-Filler: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n");
            }
            let _ = big.write_all(&head);
            println!("oversized {}", status(&read_head(&mut big)));
            println!("good {}", connect(arg(1), arg(2), "still served"));
            drop(slow);
        }
        other => {
            eprintln!("netclient: unknown action {other:?}");
            std::process::exit(2)
        }
    }
}
