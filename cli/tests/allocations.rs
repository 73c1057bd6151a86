//! A message costs no allocation: once a run is set up, its sends and receives, its rounds and (under
//! the timing model) its transfers' placement reuse what the run already holds, so a run of many
//! messages allocates exactly as often as a run of few.
//!
//! A binary of its own: it counts every allocation of the thread that makes the run, which, on one
//! thread, makes all of the run's. Not the process's: the test harness's other threads allocate too,
//! more or less often as the machine is loaded (counted, they would fail this test now and then on a
//! busy machine).

use std::alloc::{GlobalAlloc, Layout, System as SystemAllocator};
use std::cell::Cell;

#[path = "../benches/runtime/kernels.rs"]
mod kernels;

use kernbench::sim::Timing;
use kernbench::sim::testing::MockRun;
use kernbench::{KernelDef, System};
use kernels::{ping_pong, stream};
use serde_json::json;

/// The system allocator, counting the allocations and reallocations each thread makes through it.
struct Counting;

thread_local! {
    /// This thread's allocations and reallocations so far.
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

/// Counts one allocation of this thread (none once its thread-locals are gone, as it ends).
fn count() {
    let _ = ALLOCATIONS.try_with(|count| count.set(count.get() + 1));
}

/// This thread's allocations so far.
fn allocations_so_far() -> u64 {
    ALLOCATIONS.with(Cell::get)
}

// SAFETY: every call is passed on to the system allocator unchanged.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: as the caller's.
        unsafe { SystemAllocator.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as the caller's.
        unsafe { SystemAllocator.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count();
        // SAFETY: as the caller's.
        unsafe { SystemAllocator.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// The allocations of one run of `kernel` with `count` messages each way it sends, on two PEs with
/// queues `depth` deep, and the messages it sent.
fn allocations(kernel: &KernelDef, count: u64, depth: usize, timing: Option<Timing>) -> (u64, u64) {
    let spec = json!({"sips": 1, "mesh": {"w": 1, "h": 1}, "pes_per_cube": 2, "ipcq_depth": depth});
    let system = System::from_json_str(&spec.to_string()).unwrap();
    let run = MockRun::new(&system, "ring_1d", "all_pes", kernel).params(json!({ "count": count })).timing(timing);
    let before = allocations_so_far();
    let report = run.run().unwrap();
    let after = allocations_so_far();
    (after - before, report.totals().messages_sent)
}

#[test]
fn a_run_of_many_messages_allocates_as_often_as_a_run_of_few() {
    let kernels = [(&stream::KERNEL, 4), (&stream::KERNEL, 64), (&ping_pong::KERNEL, 4)];
    for (kernel, depth) in kernels {
        for timing in [None, Some(Timing::default())] {
            // The first run also makes what a process makes once (the thread pool, lazy statics).
            allocations(kernel, 10, depth, timing.clone());
            let (few, few_sent) = allocations(kernel, 1_000, depth, timing.clone());
            let (many, many_sent) = allocations(kernel, 20_000, depth, timing.clone());
            assert!(many_sent >= 20 * few_sent, "{} sent {many_sent} against {few_sent}", kernel.name);
            assert_eq!(
                many,
                few,
                "{} (depth {depth}, timed: {}): {many} allocations for {many_sent} messages, {few} for {few_sent}",
                kernel.name,
                timing.is_some()
            );
        }
    }
}
