//! The machine's own speed, measured in the same run as the runtime's figures: the units those are
//! judged in, so that a slower or busier machine can be judged by ratios.

use std::collections::VecDeque;
use std::hint::black_box;

use kernbench::prelude::*;

use crate::lines::{Goal, figure};
use crate::{RUNS, again, best_of, quick, time};

/// The machine's own speed on one core, measured now: the units the runtime's figures are judged in.
pub struct Machine {
    /// A `VecDeque` push_back + pop_front, in ns: the least a message through a queue can cost.
    pub push_pop_ns: f64,
    /// memcpy of a buffer larger than the caches, in GB/s.
    pub memcpy_gbps: f64,
    /// In-place f32 add of two such buffers (`Tile::reduce_in_place`), in GB/s of the result.
    pub add_gbps: f64,
    /// The first write to memory fresh from the OS, in GB/s of pages, as a new process meets it: what
    /// a run pays for every page it is the first to touch (its buffers, queues, coroutines and lists),
    /// and a large run touches gigabytes. On a virtual machine it depends on whether the host still
    /// backs the pages, which memory used a moment ago it does and memory long unused it may not.
    pub fresh_gbps: f64,
}

pub fn machine() -> Machine {
    let ops = if quick() { 10_000_000u64 } else { 100_000_000 };
    let mut queue: VecDeque<u64> = VecDeque::with_capacity(64);
    let push_pop_ns = best_of(|| {
        let (_, secs) = time(|| {
            for i in 0..ops {
                queue.push_back(black_box(i));
                black_box(queue.pop_front());
            }
        });
        secs * 1e9 / ops as f64
    });

    let (n, reps) = (InPlaceAdd::elements(), InPlaceAdd::REPS);
    let src = vec![1.0f32; n];
    let mut dst = vec![0.0f32; n];
    let copy_secs = best_of(|| {
        time(|| {
            for _ in 0..reps {
                dst.copy_from_slice(black_box(&src));
                black_box(&mut dst);
            }
        })
        .1
    });
    let memcpy_gbps = (reps * n * 4) as f64 / copy_secs / 1e9;

    let mut add = InPlaceAdd::new();
    let add_gbps = (0..RUNS).map(|_| add.gbps()).fold(0.0, f64::max);
    let figures = again(FRESH_RUN, "");
    let [fresh_gbps, again_gbps] = figures[..] else { panic!("unexpected figures {figures:?}") };
    let m = Machine { push_pop_ns, memcpy_gbps, add_gbps, fresh_gbps };
    println!("{}", figure("machine: VecDeque push+pop", m.push_pop_ns, "ns", Goal::None, "one core"));
    println!(
        "{}",
        figure("machine: memcpy", m.memcpy_gbps, "GB/s", Goal::None, &format!("{} MiB buffers", (n * 4) >> 20))
    );
    println!("{}", figure("machine: in-place f32 add", m.add_gbps, "GB/s", Goal::None, "Tile::reduce_in_place"));
    let note = format!("{} MiB, a new process; mapped again: {again_gbps:.2}", fresh_bytes() >> 20);
    println!("{}", figure("machine: first touch of fresh memory", m.fresh_gbps, "GB/s", Goal::None, &note));
    m
}

/// Set, makes this benchmark's process measure the first touch of fresh memory ([`fresh_memory`])
/// and print it: in a process of its own, which has touched nothing yet, as each run it judges.
pub const FRESH_RUN: &str = "KERNBENCH_BENCH_FRESH";

/// The bytes [`fresh_memory`] touches: about as much as the large runs' peaks.
fn fresh_bytes() -> usize {
    if quick() { 64 << 20 } else { 1 << 30 }
}

/// GB/s of the first touch of a new mapping of [`fresh_bytes`] in this process, and the best of
/// [`RUNS`] more mappings of the same size, whose pages the OS (and the host) have just handed back.
pub fn fresh_memory() -> (f64, f64) {
    let bytes = fresh_bytes();
    let first = first_touch_secs(bytes);
    let again = best_of(|| first_touch_secs(bytes));
    (bytes as f64 / first / 1e9, bytes as f64 / again / 1e9)
}

/// Seconds to write one byte in every page of a new mapping of `bytes` from the OS: each write is
/// the page's first, which the OS (and on a virtual machine, its host) serves by zeroing a page.
fn first_touch_secs(bytes: usize) -> f64 {
    // SAFETY: sysconf only reads a constant of the system.
    let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096);
    let (prot, flags) = (libc::PROT_READ | libc::PROT_WRITE, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS);
    // SAFETY: a new private anonymous mapping, written only inside its `bytes` and unmapped once
    // timed; nothing else knows of it.
    unsafe {
        let start = libc::mmap(std::ptr::null_mut(), bytes, prot, flags, -1, 0);
        assert_ne!(start, libc::MAP_FAILED, "a fresh mapping of {bytes} bytes");
        let start = start.cast::<u8>();
        let (_, secs) = time(|| (0..bytes).step_by(page).for_each(|at| start.add(at).write_volatile(1)));
        libc::munmap(start.cast(), bytes);
        secs
    }
}

/// The machine's in-place f32 add (`Tile::reduce_in_place`) of two buffers larger than the caches,
/// faulted in and warm: what a reduction's bandwidth is judged against.
pub struct InPlaceAdd {
    acc: Tile,
    other: Tile,
}

impl InPlaceAdd {
    /// Adds of this many elements, [`InPlaceAdd::REPS`] at a time.
    pub fn elements() -> usize {
        if quick() { 1 << 20 } else { 16 << 20 }
    }

    pub const REPS: usize = 8;

    pub fn new() -> InPlaceAdd {
        let mut acc = Tile::filled(F32, InPlaceAdd::elements(), 1.0);
        let other = Tile::filled(F32, InPlaceAdd::elements(), 2.0);
        acc.reduce_in_place(&other, ReduceOp::Sum).unwrap();
        InPlaceAdd { acc, other }
    }

    /// One timing of [`InPlaceAdd::REPS`] adds: GB/s of the result.
    pub fn gbps(&mut self) -> f64 {
        let (_, secs) = time(|| {
            for _ in 0..InPlaceAdd::REPS {
                self.acc.reduce_in_place(&self.other, ReduceOp::Sum).unwrap();
            }
        });
        (InPlaceAdd::REPS * InPlaceAdd::elements() * 4) as f64 / secs / 1e9
    }
}
