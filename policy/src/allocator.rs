//! The memory allocator of the musl builds of both binaries.
//!
//! musl's own allocator returns freed memory to the kernel at once: a runner run mapped
//! 36 and unmapped 22 regions against glibc's 8 and 1, and a served `confine` request
//! some 80, each new page faulted in again. dlmalloc keeps what was freed for the next
//! allocation, as glibc's malloc does. glibc builds keep glibc's allocator.
//!
//! The dlmalloc crate's own global allocator guards its heap with a `pthread_mutex`;
//! under musl every lock and unlock is a call doing an atomic exchange each way, and a
//! served request allocates some thousands of times: the two calls took 12% of a served
//! `confine`'s CPU time (`perf record`, 2026-12-06). Here the heap is guarded by one
//! flag instead: taken with one atomic exchange, released with a plain store. Both
//! binaries are single-threaded on almost every path (the launcher's proxy and the
//! runner's write worker are the threads there are), so the lock is almost never
//! contended; a waiter spins briefly, then yields its CPU to whoever holds it.
//!
//! No fork-time handling is needed beyond what the processes already guarantee: each
//! `fork` they make is made while single-threaded (no thread can hold the flag then).

use core::alloc::{GlobalAlloc, Layout};
use core::cell::UnsafeCell;
use core::sync::atomic::{AtomicBool, Ordering};

/// dlmalloc's heap behind a one-flag lock; `static ALLOCATOR: Allocator =
/// Allocator::new()` with `#[global_allocator]` in a binary's `main.rs`.
pub struct Allocator {
    locked: AtomicBool,
    heap: UnsafeCell<dlmalloc::Dlmalloc>,
}

// SAFETY: the heap is only reached through `Allocator::locked`, which admits one thread
// at a time (`Held`).
unsafe impl Sync for Allocator {}

impl Allocator {
    pub const fn new() -> Allocator {
        Allocator {
            locked: AtomicBool::new(false),
            heap: UnsafeCell::new(dlmalloc::Dlmalloc::new()),
        }
    }

    /// The heap, for as long as the returned guard lives.
    fn lock(&self) -> Held<'_> {
        let mut spins = 0u32;
        while self.locked.swap(true, Ordering::Acquire) {
            // Wait on a plain read (no bus lock while it is held), and give the CPU
            // away when the holder was preempted rather than spin a time slice long.
            while self.locked.load(Ordering::Relaxed) {
                spins += 1;
                if spins < 64 {
                    core::hint::spin_loop();
                } else {
                    std::thread::yield_now();
                }
            }
        }
        Held(self)
    }
}

impl Default for Allocator {
    fn default() -> Allocator {
        Allocator::new()
    }
}

/// The lock held; released when dropped.
struct Held<'a>(&'a Allocator);

impl Held<'_> {
    fn heap(&mut self) -> &mut dlmalloc::Dlmalloc {
        // SAFETY: the flag admits one `Held` at a time, and this borrow lives no longer
        // than `self`.
        unsafe { &mut *self.0.heap.get() }
    }
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        self.0.locked.store(false, Ordering::Release);
    }
}

// SAFETY: each method forwards to dlmalloc's method of the same contract, under the lock.
unsafe impl GlobalAlloc for Allocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller upholds `GlobalAlloc::alloc`'s contract, dlmalloc's too.
        unsafe { self.lock().heap().malloc(layout.size(), layout.align()) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from this allocator with `layout` (the caller's contract).
        unsafe { self.lock().heap().free(ptr, layout.size(), layout.align()) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as `alloc`.
        unsafe { self.lock().heap().calloc(layout.size(), layout.align()) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: as `dealloc`, and `new_size` is non-zero and fits (the caller's contract).
        unsafe {
            self.lock()
                .heap()
                .realloc(ptr, layout.size(), layout.align(), new_size)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// Blocks of every size class are given, filled, grown and freed; no two live blocks
    /// overlap and every byte written is read back (dlmalloc's own invariants are its
    /// crate's tests; this proves the wrapper hands each caller its own block).
    #[test]
    fn blocks_are_distinct_and_keep_their_bytes() {
        let heap = Allocator::new();
        let mut live: Vec<(*mut u8, Layout, u8)> = Vec::new();
        for (i, size) in (1..2000usize)
            .step_by(37)
            .chain([1 << 16, 1 << 20])
            .enumerate()
        {
            let align = [1, 8, 16, 64, 4096][i % 5];
            let layout = Layout::from_size_align(size, align).unwrap();
            // SAFETY: a non-zero size; the block is written within its size only.
            let p = unsafe { heap.alloc(layout) };
            assert!(!p.is_null() && p as usize % align == 0);
            let fill = i as u8;
            // SAFETY: `p` holds `size` bytes.
            unsafe { p.write_bytes(fill, size) };
            live.push((p, layout, fill));
        }
        let mut spans: Vec<(usize, usize)> = live
            .iter()
            .map(|&(p, l, _)| (p as usize, p as usize + l.size()))
            .collect();
        spans.sort();
        assert!(spans.windows(2).all(|w| w[0].1 <= w[1].0), "blocks overlap");
        for (p, layout, fill) in live {
            // SAFETY: `p` holds `layout.size()` bytes written above.
            let bytes = unsafe { std::slice::from_raw_parts(p, layout.size()) };
            assert!(bytes.iter().all(|&b| b == fill));
            // SAFETY: grown to twice its size, then freed with the layout it then has.
            unsafe {
                let q = heap.realloc(p, layout, layout.size() * 2);
                assert!(!q.is_null());
                assert!(
                    std::slice::from_raw_parts(q, layout.size())
                        .iter()
                        .all(|&b| b == fill)
                );
                let grown = Layout::from_size_align(layout.size() * 2, layout.align()).unwrap();
                heap.dealloc(q, grown);
            }
        }
        let layout = Layout::from_size_align(4096, 16).unwrap();
        // SAFETY: a non-zero size, freed at once.
        unsafe {
            let z = heap.alloc_zeroed(layout);
            assert!(std::slice::from_raw_parts(z, 4096).iter().all(|&b| b == 0));
            heap.dealloc(z, layout);
        }
    }

    /// Four threads allocate, write their own mark and check it, many times over: a
    /// lock that let two in at once would hand out one block twice (and a mark would be
    /// overwritten) or corrupt the heap.
    #[test]
    fn threads_never_share_a_block() {
        let heap = Arc::new(Allocator::new());
        let threads: Vec<_> = (0..4u8)
            .map(|mark| {
                let heap = Arc::clone(&heap);
                std::thread::spawn(move || {
                    for round in 0..20_000usize {
                        let layout = Layout::from_size_align(16 + round % 200, 8).unwrap();
                        // SAFETY: a non-zero size, written within it, freed with it.
                        unsafe {
                            let p = heap.alloc(layout);
                            assert!(!p.is_null());
                            p.write_bytes(mark, layout.size());
                            std::hint::black_box(p);
                            let bytes = std::slice::from_raw_parts(p, layout.size());
                            assert!(bytes.iter().all(|&b| b == mark), "a block was shared");
                            heap.dealloc(p, layout);
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
    }
}
