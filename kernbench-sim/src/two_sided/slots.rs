//! A queue's slots and the slab that holds every queue's: a slot is a message in flight or a credit
//! back with its sender, and a slot of zero bytes is free, so that slots no message takes cost nothing.

use std::alloc::Layout;
use std::cell::UnsafeCell;
use std::mem::MaybeUninit;
use std::num::NonZeroU64;
use std::ptr::NonNull;

use kernbench_core::Tile;

/// One message in flight.
pub(crate) struct Message {
    pub(crate) tile: Tile,
    /// Never zero (message generations count from 1), which leaves a [`Slot`] room to say it is free
    /// without a word of its own.
    pub(crate) generation: NonZeroU64,
    /// Simulated time in ns: when the sender finished injecting it until its round's transfers are
    /// placed (what the merge lists and the hand-over carries), then when its last byte reaches the
    /// receiver (what a receive waits for). One word for both: a million-PE run has millions of slots.
    pub(crate) at_ns: f64,
}

/// One slot of a queue: a message, or, when the message's generation reads 0, free, its credit back
/// with the sender from the simulated time its `at_ns` reads. So a slot of zero bytes is free from
/// time 0, and the slab comes zeroed ([`Slab`]): a slot no message ever takes is never written, nor
/// is its page touched (a large all-reduce's queues carry a message or two each, in queues of 4 slots
/// or more).
#[repr(transparent)]
pub(super) struct Slot(MaybeUninit<Message>);

impl Slot {
    /// The message's generation, or 0 when free: a word of it whatever it holds.
    fn generation(&self) -> u64 {
        // SAFETY: the generation's word is initialized in every slot (zeroed, or written with a
        // message or by `free`); a `NonZeroU64` has a `u64`'s layout.
        unsafe { (&raw const (*self.0.as_ptr()).generation).cast::<u64>().read() }
    }

    pub(super) fn message(&self) -> Option<&Message> {
        // SAFETY: a slot whose generation is not 0 holds a whole message (`hold` and `fill` write
        // one, `free` zeroes the generation).
        (self.generation() != 0).then(|| unsafe { self.0.assume_init_ref() })
    }

    pub(super) fn message_mut(&mut self) -> Option<&mut Message> {
        // SAFETY: as in `message`.
        (self.generation() != 0).then(|| unsafe { self.0.assume_init_mut() })
    }

    /// When a free slot's credit reached the sender; `None` when it holds a message.
    pub(super) fn free_from(&self) -> Option<f64> {
        // SAFETY: `at_ns` is initialized in every slot, as the generation is.
        (self.generation() == 0).then(|| unsafe { (&raw const (*self.0.as_ptr()).at_ns).read() })
    }

    /// Holds `message`; it must be free. Written, not read: a queue's first lap writes slots nothing
    /// has touched, whose pages a read would fault in twice ([`super::queue::Queue::try_push`]).
    pub(super) fn hold(&mut self, message: Message) {
        self.0.write(message);
    }

    /// Holds `message`, dropping the one it held.
    pub(super) fn fill(&mut self, message: Message) {
        drop(self.free(0.0));
        self.0.write(message);
    }

    /// Free from `credit_at_ns`: the message it held, if any.
    pub(super) fn free(&mut self, credit_at_ns: f64) -> Option<Message> {
        // SAFETY: a slot whose generation is not 0 holds a whole message, read out once here: its
        // generation is zeroed before the slot is read again.
        let message = (self.generation() != 0).then(|| unsafe { self.0.assume_init_read() });
        let slot = self.0.as_mut_ptr();
        // SAFETY: writes two plain words of the slot's own memory.
        unsafe {
            (&raw mut (*slot).generation).cast::<u64>().write(0);
            (&raw mut (*slot).at_ns).write(credit_at_ns);
        }
        message
    }
}

/// Every queue's slots, in one block of zero bytes (free slots, see [`Slot`]): from the OS itself
/// when large, whose fresh pages cost no memory until written, where an allocator may hand back memory
/// it has used and must zero by writing every page.
pub(super) struct Slab {
    start: NonNull<UnsafeCell<Slot>>,
    count: usize,
    /// Whether it is the OS's mapping rather than the allocator's block.
    mapped: bool,
}

// SAFETY: the slab owns its slots, as a vector of them would; Message (a tile and two words) is `Send`.
unsafe impl Send for Slab {}

impl Slab {
    /// From this many bytes, a slab is the OS's mapping.
    const MAPPED_FROM: usize = 1 << 20;

    /// `count` free slots.
    pub(super) fn zeroed(count: usize) -> Slab {
        if count == 0 {
            return Slab { start: NonNull::dangling(), count, mapped: false };
        }
        let layout = Layout::array::<UnsafeCell<Slot>>(count).expect("a slab the address space holds");
        #[cfg(target_os = "linux")]
        if layout.size() >= Slab::MAPPED_FROM {
            // SAFETY: a new private anonymous mapping, which the kernel gives zeroed and page-aligned
            // (more than a slot's alignment); nothing else is touched.
            let start = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    layout.size(),
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                    -1,
                    0,
                )
            };
            if start == libc::MAP_FAILED {
                std::alloc::handle_alloc_error(layout);
            }
            // SAFETY: a successful mapping is not null.
            return Slab { start: unsafe { NonNull::new_unchecked(start.cast()) }, count, mapped: true };
        }
        // SAFETY: the layout is not empty: `count` is not 0 and a slot is not zero-sized.
        let start = unsafe { std::alloc::alloc_zeroed(layout) };
        let Some(start) = NonNull::new(start.cast()) else { std::alloc::handle_alloc_error(layout) };
        Slab { start, count, mapped: false }
    }
}

impl std::ops::Deref for Slab {
    type Target = [UnsafeCell<Slot>];

    fn deref(&self) -> &[UnsafeCell<Slot>] {
        // SAFETY: `count` slots from `start`, zeroed (free slots) when made, alive until dropped.
        unsafe { std::slice::from_raw_parts(self.start.as_ptr(), self.count) }
    }
}

impl Drop for Slab {
    /// Gives the memory back; the messages in its slots are [`Queues`](super::queue::Queues)'s to
    /// drop first.
    fn drop(&mut self) {
        if self.count == 0 {
            return;
        }
        let layout = Layout::array::<UnsafeCell<Slot>>(self.count).expect("the slab's layout, as made");
        if self.mapped {
            #[cfg(target_os = "linux")]
            // SAFETY: the whole mapping `zeroed` made, unmapped once; no slot is reached after.
            unsafe {
                libc::munmap(self.start.as_ptr().cast(), layout.size());
            }
        } else {
            // SAFETY: the allocator's block `zeroed` made with this layout, freed once.
            unsafe { std::alloc::dealloc(self.start.as_ptr().cast(), layout) };
        }
    }
}

#[cfg(test)]
mod tests {
    use std::num::NonZeroU64;

    use kernbench_core::{Dtype, Tile};

    use super::{Message, Slab};

    fn message(len: usize) -> Message {
        Message { tile: Tile::without_data(Dtype::F32, len), generation: NonZeroU64::MIN, at_ns: 2.5 }
    }

    #[test]
    fn a_slab_small_or_mapped_is_free_slots_that_hold_a_message_until_freed_with_its_credit() {
        // One from the allocator, one the OS's mapping (MAPPED_FROM bytes and more).
        for count in [3, Slab::MAPPED_FROM / size_of::<Message>() + 1] {
            let slab = Slab::zeroed(count);
            assert_eq!(slab.len(), count);
            for cell in [&slab[0], &slab[count - 1]] {
                // SAFETY: the test is the slab's only user.
                let slot = unsafe { &mut *cell.get() };
                assert_eq!((slot.free_from(), slot.message().is_none()), (Some(0.0), true));
                slot.hold(message(7));
                assert_eq!((slot.free_from(), slot.message().map(|m| m.tile.len())), (None, Some(7)));
                slot.fill(message(9));
                assert_eq!(slot.message_mut().map(|m| (m.tile.len(), m.at_ns)), Some((9, 2.5)));
                assert_eq!(slot.free(4.0).map(|m| m.tile.len()), Some(9));
                assert_eq!((slot.free_from(), slot.free(5.0).is_none()), (Some(4.0), true));
            }
        }
    }
}
