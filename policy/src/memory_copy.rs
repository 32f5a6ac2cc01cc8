//! `memcpy` and `memmove` for the musl builds of both binaries (x86-64).
//!
//! Rust calls `memcpy` for every copy whose length is only known at run time (a string
//! pushed, a path joined, a vector grown): a served `confine` request makes some 3000
//! calls, two thirds of them for 16 bytes or fewer. musl's `memcpy` starts every copy
//! with `rep movsq`, whose start-up costs tens of cycles even for 8 bytes, and moves
//! unaligned heads and tails one `movsb` at a time: it took 15% of a served request's
//! CPU time (`perf record`, 2026-12-06), glibc's (chosen by CPU at start-up) a few.
//!
//! Here, copies of up to 64 bytes are two to four loads of 1, 4, 8 or 16 bytes from both
//! ends of the source, then the same stores (overlapping in the middle when the length
//! is not a power of two): no loop, no branch on alignment; longer copies are one
//! `rep movsb`, which CPUs with fast string moves (every x86-64 of the last decade)
//! run at full width. Every short path loads everything before it stores anything, so
//! it is a correct `memmove` too; `memmove` adds only the long copy whose destination
//! starts inside its source, done backwards.
//!
//! The code is exported as `stockade_memcpy` and `stockade_memmove` on every x86-64
//! build (so that its tests run under glibc too), and as `memcpy` and `memmove` in the
//! musl builds, where the linker then takes no copy routine from musl's `libc.a` (its
//! `memmove` is the only user of the internal entry point of its `memcpy`, and both
//! names are defined here). glibc builds keep glibc's.

#[cfg(target_arch = "x86_64")]
std::arch::global_asm!(
    ".pushsection .text.stockade_memory_copy,\"ax\",@progbits",
    ".globl stockade_memcpy",
    ".type stockade_memcpy,@function",
    ".p2align 4",
    "stockade_memcpy:",
    "    mov rax, rdi",
    "    cmp rdx, 16",
    "    ja 3f",
    "    cmp rdx, 8",
    "    jb 1f",
    // 8 to 16 bytes: the first 8 and the last 8.
    "    mov rcx, [rsi]",
    "    mov r8, [rsi + rdx - 8]",
    "    mov [rdi], rcx",
    "    mov [rdi + rdx - 8], r8",
    "    ret",
    "1:  cmp rdx, 4",
    "    jb 2f",
    // 4 to 7 bytes: the first 4 and the last 4.
    "    mov ecx, [rsi]",
    "    mov r8d, [rsi + rdx - 4]",
    "    mov [rdi], ecx",
    "    mov [rdi + rdx - 4], r8d",
    "    ret",
    // 0 to 3 bytes: the first, the second and the last (some of them the same).
    "2:  test rdx, rdx",
    "    je 9f",
    "    movzx ecx, byte ptr [rsi]",
    "    movzx r8d, byte ptr [rsi + rdx - 1]",
    "    mov r10, rdx",
    "    shr r10, 1",
    "    movzx r9d, byte ptr [rsi + r10]",
    "    mov [rdi], cl",
    "    mov [rdi + r10], r9b",
    "    mov [rdi + rdx - 1], r8b",
    "9:  ret",
    "3:  cmp rdx, 32",
    "    ja 4f",
    // 17 to 32 bytes: the first 16 and the last 16.
    "    movups xmm0, [rsi]",
    "    movups xmm1, [rsi + rdx - 16]",
    "    movups [rdi], xmm0",
    "    movups [rdi + rdx - 16], xmm1",
    "    ret",
    "4:  cmp rdx, 64",
    "    ja 5f",
    // 33 to 64 bytes: the first 32 and the last 32.
    "    movups xmm0, [rsi]",
    "    movups xmm1, [rsi + 16]",
    "    movups xmm2, [rsi + rdx - 32]",
    "    movups xmm3, [rsi + rdx - 16]",
    "    movups [rdi], xmm0",
    "    movups [rdi + 16], xmm1",
    "    movups [rdi + rdx - 32], xmm2",
    "    movups [rdi + rdx - 16], xmm3",
    "    ret",
    // Longer: one forward string move (the direction flag is clear at every call).
    "5:  mov rcx, rdx",
    "    rep movsb",
    "    ret",
    ".size stockade_memcpy, . - stockade_memcpy",
    "",
    ".globl stockade_memmove",
    ".type stockade_memmove,@function",
    ".p2align 4",
    "stockade_memmove:",
    // Forward is right unless the destination starts inside the source: dst - src,
    // unsigned, is below the length only then. Up to 64 bytes any overlap is right.
    "    mov rcx, rdi",
    "    sub rcx, rsi",
    "    cmp rcx, rdx",
    "    jae stockade_memcpy",
    "    cmp rdx, 64",
    "    jbe stockade_memcpy",
    "    mov rax, rdi",
    "    lea rsi, [rsi + rdx - 1]",
    "    lea rdi, [rdi + rdx - 1]",
    "    mov rcx, rdx",
    "    std",
    "    rep movsb",
    "    cld",
    "    ret",
    ".size stockade_memmove, . - stockade_memmove",
    ".popsection",
);

#[cfg(all(target_arch = "x86_64", target_env = "musl"))]
std::arch::global_asm!(
    ".globl memcpy",
    ".type memcpy,@function",
    ".set memcpy, stockade_memcpy",
    ".globl memmove",
    ".type memmove,@function",
    ".set memmove, stockade_memmove",
);

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    unsafe extern "C" {
        fn stockade_memcpy(dst: *mut u8, src: *const u8, n: usize) -> *mut u8;
        fn stockade_memmove(dst: *mut u8, src: *const u8, n: usize) -> *mut u8;
    }

    /// Distinct bytes, so that a byte copied from the wrong place shows.
    fn pattern(len: usize, seed: u8) -> Vec<u8> {
        (0..len)
            .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
            .collect()
    }

    /// Every length from 0 to 300 and a few long ones, from and to every offset within
    /// 16 bytes: exactly the bytes asked are copied, the destination is returned, and
    /// nothing around the destination changes.
    #[test]
    fn memcpy_copies_exactly_the_bytes_asked() {
        let lengths = (0..=300).chain([1000, 4095, 4096, 65_537]);
        for n in lengths {
            for (s_off, d_off) in [(0, 0), (1, 0), (0, 3), (7, 9), (15, 1), (8, 8)] {
                let src = pattern(n + 32, 1);
                let mut dst = vec![0xEEu8; n + 64];
                // SAFETY: both ranges lie within their vectors, which do not overlap.
                let r = unsafe {
                    stockade_memcpy(dst.as_mut_ptr().add(d_off), src.as_ptr().add(s_off), n)
                };
                assert_eq!(r, dst.as_mut_ptr().wrapping_add(d_off));
                assert_eq!(&dst[d_off..d_off + n], &src[s_off..s_off + n], "n={n}");
                assert!(dst[..d_off].iter().all(|&b| b == 0xEE), "before, n={n}");
                assert!(dst[d_off + n..].iter().all(|&b| b == 0xEE), "after, n={n}");
            }
        }
    }

    /// Overlapping moves in both directions, for every length up to 200 and every shift
    /// up to 70, against a byte-by-byte move (not `copy_within`: in a musl build that
    /// would be the code under test).
    #[test]
    fn memmove_is_right_for_every_overlap() {
        for n in (0..=200usize).chain([1000, 4097]) {
            for shift in (0..=70).chain([n / 2, n.saturating_sub(1)]) {
                for forward in [true, false] {
                    let mut ours = pattern(n + shift + 16, 7);
                    let mut oracle = ours.clone();
                    let (from, to) = if forward { (0, shift) } else { (shift, 0) };
                    let moved: Vec<u8> = (0..n)
                        .map(|i| std::hint::black_box(oracle[from + i]))
                        .collect();
                    for (i, b) in moved.into_iter().enumerate() {
                        oracle[to + i] = b;
                    }
                    let base = ours.as_mut_ptr();
                    // SAFETY: both ranges lie within `ours`; memmove allows the overlap.
                    let r = unsafe { stockade_memmove(base.add(to), base.add(from), n) };
                    assert_eq!(r, base.wrapping_add(to));
                    assert_eq!(ours, oracle, "n={n} shift={shift} forward={forward}");
                }
            }
        }
    }

    /// In the musl builds the two are what every copy in the process calls.
    #[cfg(target_env = "musl")]
    #[test]
    fn the_musl_builds_copy_with_these() {
        unsafe extern "C" {
            fn memcpy(dst: *mut u8, src: *const u8, n: usize) -> *mut u8;
            fn memmove(dst: *mut u8, src: *const u8, n: usize) -> *mut u8;
        }
        assert_eq!(memcpy as *const (), stockade_memcpy as *const ());
        assert_eq!(memmove as *const (), stockade_memmove as *const ());
    }
}
