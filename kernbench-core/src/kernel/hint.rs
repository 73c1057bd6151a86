//! Hints to the host's CPU: they change no value anyone reads, so no run's result, only how soon the
//! host has what a kernel or the runtime will read next. A large run's state is far larger than any
//! cache, and its polls take turns, so what a lane touches next is cold; asked for early, its miss
//! overlaps the work in between.

/// Asks the CPU to bring the `bytes` from `start` into its cache, without reading them. Any address
/// will do: a prefetch never faults.
#[inline]
pub fn prefetch_bytes(start: *const u8, bytes: usize) {
    const LINE: usize = 64;
    let first = start as usize & !(LINE - 1);
    let end = (start as usize).saturating_add(bytes);
    for line in 0..(end - first).div_ceil(LINE) {
        prefetch_line(first.wrapping_add(line * LINE) as *const u8);
    }
}

/// Asks the CPU for the cache line `value` starts on, for a kernel that walks a list too long for the
/// cache: the ring all-reduce asks for the piece its next receive goes into while the current message
/// is handled. One line, enough for a value of a few words (a [`Tile`](crate::Tile) is three); a
/// longer one is [`prefetch_bytes`].
///
/// ```
/// use kernbench_core::kernel::hint::prefetch;
/// let pieces = vec![0u64; 4096];
/// prefetch(&pieces[2048]);
/// ```
#[inline]
pub fn prefetch<T>(value: &T) {
    // One line, not every line the value spans: a loop over lines cost the ring more than the misses
    // it saved.
    prefetch_line(std::ptr::from_ref(value).cast());
}

/// Asks for the cache lines of `value` just before this lane is next polled: what a kernel about to
/// wait reads first when it wakes. A large run polls thousands of lanes between a lane's wait and its
/// wake, so what the lane touched last is cold again by then, and a [`prefetch`] made now would be
/// too; the runtime asks for these lines a few lanes before this one's turn. Name a few lines (the
/// mock runtime asks for the first 512 bytes of a longer value): the ring all-reduce names the pieces
/// from the one its receive goes into to the one the next receive does, a slice of a few tiles. The
/// latest call before a wait counts; outside a running kernel, or on a runtime that does not ask, it
/// does nothing.
///
/// ```
/// use kernbench_core::kernel::hint::prefetch_when_woken;
/// let pieces = vec![0u64; 4096];
/// prefetch_when_woken(&pieces[2046..=2049]);
/// ```
#[inline]
pub fn prefetch_when_woken<T: ?Sized>(value: &T) {
    super::tl::wake_hint(std::ptr::from_ref(value).cast(), size_of_val(value));
}

/// Asks the CPU for the cache line `at` lies on.
#[inline]
fn prefetch_line(at: *const u8) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        // SAFETY: SSE is part of every x86_64 target; a prefetch never faults, whatever the address,
        // and reads nothing the program sees.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(at.cast()) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = at;
}

#[cfg(test)]
mod tests {
    use super::{prefetch, prefetch_bytes};

    #[test]
    fn a_prefetch_of_any_address_neither_faults_nor_changes_what_is_read() {
        prefetch_bytes(std::ptr::null(), 4096);
        prefetch_bytes(usize::MAX as *const u8, 0);
        prefetch_bytes(std::ptr::dangling(), 1 << 20);
        let values = vec![7u32; 1000];
        values.iter().for_each(prefetch);
        assert!(values.iter().all(|&v| v == 7));
    }
}
