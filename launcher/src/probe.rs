//! Probing the running kernel for the facts stockade's guarantees depend on.

use stockade_policy::guarantees::KernelFacts;

/// `LANDLOCK_CREATE_RULESET_VERSION`: ask for the ABI version instead of a ruleset.
const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;

pub fn kernel_facts() -> KernelFacts {
    KernelFacts {
        landlock_abi: landlock_abi(),
    }
}

/// The Landlock ABI version, 0 when Landlock is not built in or not enabled.
pub fn landlock_abi() -> u32 {
    // SAFETY: with a null attribute pointer, size 0 and the VERSION flag, the syscall
    // reads no memory and creates no file descriptor; it only returns a number or -1.
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    u32::try_from(v).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    #[test]
    fn this_machine_has_landlock() {
        // Development and CI machines run Landlock ABI 7 (see shared/CONTEXT.md).
        assert!(super::landlock_abi() >= 1);
    }
}
