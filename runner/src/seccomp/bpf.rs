//! A small assembler for classic BPF seccomp programs: instructions with symbolic jumps,
//! a decision tree over system call numbers, and the resolution of jumps into the 8-bit
//! offsets classic BPF encodes. It knows nothing about which call gets which answer.

use seccompiler::sock_filter;

// Opcodes as linux/filter.h composes them; libc carries the parts as u32.
const fn op(parts: u32) -> u16 {
    parts as u16
}
/// `ld [k]`: load the 32-bit word at offset `k` of `seccomp_data`.
pub const LD_W_ABS: u16 = op(libc::BPF_LD | libc::BPF_W | libc::BPF_ABS);
/// `and #k` on the accumulator.
pub const AND_K: u16 = op(libc::BPF_ALU | libc::BPF_AND | libc::BPF_K);
pub const JEQ_K: u16 = op(libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K);
pub const JGE_K: u16 = op(libc::BPF_JMP | libc::BPF_JGE | libc::BPF_K);
pub const JGT_K: u16 = op(libc::BPF_JMP | libc::BPF_JGT | libc::BPF_K);
pub const JSET_K: u16 = op(libc::BPF_JMP | libc::BPF_JSET | libc::BPF_K);
pub const RET_K: u16 = op(libc::BPF_RET | libc::BPF_K);

pub const RET_KILL_PROCESS: u32 = libc::SECCOMP_RET_KILL_PROCESS;
pub const RET_ALLOW: u32 = libc::SECCOMP_RET_ALLOW;
/// The return value that fails the call with `errno`.
pub const fn ret_errno(errno: i32) -> u32 {
    libc::SECCOMP_RET_ERRNO | errno as u32
}

/// Offsets in `struct seccomp_data { int nr; __u32 arch; __u64 ip; __u64 args[6]; }`.
pub const OFFSET_NR: u32 = 0;
pub const OFFSET_ARCH: u32 = 4;

/// Offset of the low 32 bits of argument `i`: the first half, on the little-endian
/// architectures this filter is built for. The kernel reads an `int`, `unsigned int` or
/// narrower argument from these bits only, so the high half is ignored for them.
pub const fn arg_low(i: u32) -> u32 {
    16 + 8 * i
}
#[cfg(not(target_endian = "little"))]
compile_error!("the seccomp filter reads argument halves as laid out on little-endian");

/// Where a jump goes; resolved once the program is laid out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum To<L> {
    Next,
    /// Over the next `n` instructions.
    Skip(usize),
    At(usize),
    Label(L),
}

/// One instruction with symbolic jumps: (code, k, jump if true, jump if false).
pub type Insn<L> = (u16, u32, To<L>, To<L>);
pub type Code<L> = Vec<Insn<L>>;

/// `ld` of the low half of argument `i`.
pub fn load_arg<L>(i: u32) -> Insn<L> {
    (LD_W_ABS, arg_low(i), To::Next, To::Next)
}

pub fn ret<L>(k: u32) -> Insn<L> {
    (RET_K, k, To::Next, To::Next)
}

/// Resolves the jumps of `code`, given where each label was laid out. `None` when a
/// label is missing or a jump does not fit classic BPF's 8-bit offsets (or goes back).
pub fn assemble<L: PartialEq + Copy>(
    code: &Code<L>,
    labels: &[(L, usize)],
) -> Option<Vec<sock_filter>> {
    let offset = |from: usize, to: To<L>| -> Option<u8> {
        let target = match to {
            To::Next => from + 1,
            To::Skip(n) => from + 1 + n,
            To::At(i) => i,
            To::Label(l) => labels.iter().find(|&&(m, _)| m == l)?.1,
        };
        u8::try_from(target.checked_sub(from + 1)?).ok()
    };
    code.iter()
        .enumerate()
        .map(|(i, &(code, k, jt, jf))| {
            Some(sock_filter {
                code,
                jt: offset(i, jt)?,
                jf: offset(i, jf)?,
                k,
            })
        })
        .collect()
}

/// A run of consecutive system call numbers, `first..=last`, that go to one target.
pub type Range<L> = (u32, u32, To<L>);

/// Merges `keys` (sorted by number, distinct) into runs of consecutive numbers with the
/// same target: a run costs the decision tree two compares instead of one per number.
pub fn ranges<L: Copy + PartialEq>(keys: &[(u32, To<L>)]) -> Vec<Range<L>> {
    let mut out: Vec<Range<L>> = Vec::new();
    for &(nr, to) in keys {
        match out.last_mut() {
            Some((_, last, t)) if *t == to && last.checked_add(1) == Some(nr) => *last = nr,
            _ => out.push((nr, nr, to)),
        }
    }
    out
}

/// Emits a decision tree on the accumulator (the system call number): to the target of
/// the range it falls in when it is in one of `keys` (sorted, disjoint), else to `miss`.
pub fn search<L: Copy>(keys: &[Range<L>], miss: To<L>, code: &mut Code<L>) {
    if keys.len() <= 4 {
        // In ascending order: a number below a range's first is in none of the rest.
        for (i, &(first, last, hit)) in keys.iter().enumerate() {
            let next = if i + 1 == keys.len() { miss } else { To::Next };
            if first == last {
                code.push((JEQ_K, first, hit, next));
            } else {
                code.push((JGE_K, first, To::Next, miss));
                code.push((JGT_K, last, next, hit));
            }
        }
        return;
    }
    let mid = keys.len() / 2;
    let split = code.len();
    // A >= keys[mid]: the upper half, whose start is known once the lower is laid out.
    code.push((JGE_K, keys[mid].0, To::Next, To::Next));
    search(&keys[..mid], miss, code);
    code[split].2 = To::At(code.len());
    search(&keys[mid..], miss, code);
}
