//! Memory: what the machine has free and what the process has held so far, so that a run that
//! cannot fit is refused before it allocates; and the allocator the `kernbench` binary runs on. What a call will hold at its peak is the library's
//! estimate, [`kernbench::estimate::peak_memory`], where its measurements are.

use std::alloc::{GlobalAlloc, Layout};
use std::ffi::c_void;

/// The memory the system can still give this process without swapping, in bytes: `MemAvailable` of
/// `/proc/meminfo` on Linux; `None` where it is not known (other systems, or an unreadable file), which
/// means no limit.
pub fn available() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = meminfo.lines().find_map(|l| l.strip_prefix("MemAvailable:"))?;
    let kib: u64 = line.trim().strip_suffix("kB")?.trim().parse().ok()?;
    kib.checked_mul(1024)
}

/// The most memory this process has held at once so far (its peak resident set), in bytes; `None`
/// where the system does not say.
pub fn peak_resident() -> Option<u64> {
    #[cfg(unix)]
    {
        let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
        // SAFETY: getrusage writes a whole rusage into the pointer it is given, which is valid for it.
        let usage = unsafe {
            if libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr()) != 0 {
                return None;
            }
            usage.assume_init()
        };
        // Linux counts ru_maxrss in KiB, macOS in bytes.
        let scale = if cfg!(target_os = "macos") { 1 } else { 1024 };
        u64::try_from(usage.ru_maxrss).ok()?.checked_mul(scale)
    }
    #[cfg(not(unix))]
    {
        None
    }
}

/// The allocator the `kernbench` binary and its benchmark run on: mimalloc, which serves the runtime's
/// many small, short-lived allocations (a message's tile, a reduced piece, a PE's coroutine) with
/// fewer instructions than the system allocator, and large ones from memory the OS hands over cheaply
/// (the README's Speed section has the figures), without the trade-off of glibc's allocator kept from
/// returning memory by [`kernbench::sim::keep_freed_memory`].
///
/// What asks for no more than a word's alignment (nearly everything) takes mimalloc's plain
/// allocation, which aligns every block to a word: its aligned allocation, which mimalloc's own Rust
/// wrapper calls for everything, falls back whenever the current page has no free block at hand to a
/// path that allocates `align - 1` bytes more and costs several times as much (about 5 % of a
/// 65,536-PE timing-only run's instructions went to it).
#[derive(Clone, Copy, Debug, Default)]
pub struct Allocator;

/// The alignment every block mimalloc's plain allocation gives has.
const WORD: usize = size_of::<usize>();

// SAFETY: every pointer comes from mimalloc, with at least the layout's alignment (a word's from the
// plain calls, which is all they are used for), and goes back to it through `mi_free` or a realloc.
unsafe impl GlobalAlloc for Allocator {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: both are mimalloc's allocations.
        unsafe { new_block(layout, libmimalloc_sys::mi_malloc, libmimalloc_sys::mi_malloc_aligned) }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: both are mimalloc's allocations.
        unsafe { new_block(layout, libmimalloc_sys::mi_zalloc, libmimalloc_sys::mi_zalloc_aligned) }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, _layout: Layout) {
        // SAFETY: `ptr` came from this allocator, so from mimalloc, and is freed once (the caller's
        // contract).
        unsafe { libmimalloc_sys::mi_free(ptr.cast()) }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        use libmimalloc_sys::{mi_realloc, mi_realloc_aligned};
        // SAFETY: `ptr` came from this allocator with `layout` (the caller's contract); the new block
        // keeps its alignment.
        unsafe {
            if layout.align() <= WORD {
                mi_realloc(ptr.cast(), new_size).cast()
            } else {
                mi_realloc_aligned(ptr.cast(), new_size, layout.align()).cast()
            }
        }
    }
}

impl Allocator {
    /// Hands the memory mimalloc keeps after frees back to the OS: what each process of a spread run
    /// calls whenever it has freed a large part of what it holds, such as its set-up's whole lists
    /// ([`kernbench::sim::RunOptions::release_memory`]). Kept, that memory stays resident while the
    /// large blocks allocated next come fresh from the OS.
    ///
    /// From the first call on, mimalloc purges what is freed at once: by default it keeps freed memory
    /// a second for reuse, and a spread run's process, which frees and then fills large lists in turn
    /// (the set-up's, the rounds', the report's), would hold both at its peak.
    pub fn release_freed() {
        // SAFETY: a collection only walks and purges mimalloc's own free pages; any thread may ask.
        unsafe {
            // Collected first: with no delay, purges scheduled under the old one are never made.
            libmimalloc_sys::mi_collect(true);
            libmimalloc_sys::mi_option_set(PURGE_DELAY, 0);
        }
    }
}

/// mimalloc's `mi_option_purge_delay` (its place in `mi_option_t`, in `mimalloc.h` of versions 2 and 3;
/// `libmimalloc-sys` names no constant for it): how long freed memory is kept before it is purged, ms.
const PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// A block for `layout` from `plain` when a word's alignment is enough, from `aligned` otherwise.
///
/// # Safety
/// `plain` takes a size and `aligned` a size and a power-of-two alignment, and both return mimalloc's
/// blocks (or null).
#[inline]
unsafe fn new_block(
    layout: Layout,
    plain: unsafe extern "C" fn(usize) -> *mut c_void,
    aligned: unsafe extern "C" fn(usize, usize) -> *mut c_void,
) -> *mut u8 {
    // SAFETY: mimalloc accepts any size, and any power-of-two alignment (which a layout's is).
    unsafe {
        if layout.align() <= WORD { plain(layout.size()).cast() } else { aligned(layout.size(), layout.align()).cast() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn once_freed_memory_is_released_mimalloc_purges_what_is_freed_at_once() {
        Allocator::release_freed();
        // SAFETY: reading an option has no precondition.
        assert_eq!(unsafe { libmimalloc_sys::mi_option_get(PURGE_DELAY) }, 0);
    }

    #[test]
    fn every_block_has_its_layout_s_alignment_and_keeps_its_bytes_through_a_realloc() {
        for align in [1, 2, 4, 8, 16, 32, 64, 4096] {
            for size in [1, 3, 8, 24, 100, 1000, 5000, 100_000] {
                let layout = Layout::from_size_align(size, align).unwrap();
                // SAFETY: each block is written within its size and freed once, with its layout.
                unsafe {
                    let zeroed = Allocator.alloc_zeroed(layout);
                    assert_eq!(zeroed as usize % align, 0, "zeroed {size} B aligned {align}");
                    assert!((0..size).all(|i| *zeroed.add(i) == 0), "zeroed {size} B aligned {align}");
                    Allocator.dealloc(zeroed, layout);
                    let block = Allocator.alloc(layout);
                    assert_eq!(block as usize % align, 0, "{size} B aligned {align}");
                    (0..size).for_each(|i| *block.add(i) = i as u8);
                    let grown = Allocator.realloc(block, layout, 2 * size);
                    assert_eq!(grown as usize % align, 0, "{size} B aligned {align}, grown");
                    assert!((0..size).all(|i| *grown.add(i) == i as u8), "{size} B aligned {align}, grown");
                    Allocator.dealloc(grown, Layout::from_size_align(2 * size, align).unwrap());
                }
            }
        }
    }
}
