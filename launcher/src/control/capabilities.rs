//! The launcher's own capability sets, through `capget`/`capset` (version 3: each set as
//! two 32-bit halves). Used to tell which capabilities `--keep-capability` can keep (the
//! permitted set) and to make the stage's watcher keep exactly what the command keeps.

use std::io;

/// `_LINUX_CAPABILITY_VERSION_3`.
const VERSION_3: u32 = 0x2008_0522;

/// `struct __user_cap_header_struct`.
#[repr(C)]
struct Header {
    version: u32,
    pid: libc::c_int,
}

/// `struct __user_cap_data_struct`: one 32-bit half of each set.
#[repr(C)]
#[derive(Default, Clone, Copy)]
struct Data {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

/// The permitted set of this process (bit N: capability N), empty when it cannot be read.
pub fn permitted() -> u64 {
    sets().map_or(0, |d| {
        u64::from(d[0].permitted) | (u64::from(d[1].permitted) << 32)
    })
}

/// The effective set of this process (bit N: capability N), empty when it cannot be read.
pub fn effective() -> u64 {
    sets().map_or(0, |d| {
        u64::from(d[0].effective) | (u64::from(d[1].effective) << 32)
    })
}

/// This process's sets, as `capget` gives them.
fn sets() -> Option<[Data; 2]> {
    let mut header = Header {
        version: VERSION_3,
        pid: 0,
    };
    let mut data = [Data::default(); 2];
    // SAFETY: capget writes one v3 header and two data structs, which these are.
    let r = unsafe {
        libc::syscall(
            libc::SYS_capget,
            &mut header as *mut Header,
            data.as_mut_ptr(),
        )
    };
    (r == 0).then_some(data)
}

/// Makes the effective and permitted sets exactly `mask` (capabilities below 32 only, the
/// first half) and clears the inheritable set.
pub fn restrict_to(mask: u32) -> io::Result<()> {
    let mut header = Header {
        version: VERSION_3,
        pid: 0,
    };
    let data = [
        Data {
            effective: mask,
            permitted: mask,
            inheritable: 0,
        },
        Data::default(),
    ];
    // SAFETY: capset reads a v3 header and two data structs, all valid for the call.
    let r = unsafe { libc::syscall(libc::SYS_capset, &mut header as *mut Header, data.as_ptr()) };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}
