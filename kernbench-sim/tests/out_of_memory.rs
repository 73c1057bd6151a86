//! A tile the allocator cannot provide ends the run in its PE's `OutOfMemory` error, and the process
//! goes on. A binary of its own: the test caps the process's address space (`RLIMIT_AS`), which would
//! starve the tests of any binary it shared.
#![cfg(target_os = "linux")]

use kernbench_core::prelude::*;
use kernbench_core::{Op, System, TileError};
use kernbench_sim::RunError;
use kernbench_sim::testing::{MockError, MockRun};
use serde_json::json;

/// Rank 1 asks for `len` f32 zeros and drops them; every rank passes its input through.
#[ccl_kernel(crate = "kernbench_core")]
fn zeros_on_rank_1(tl: &Tl, len: usize) {
    let x = tl.load(Input);
    if tl.rank() == 1 {
        let zeros = tl.zeros(F32, len);
        tl.note("zeros", zeros.len());
    }
    tl.store(Output, &x);
}

/// The process's address space so far, in bytes.
fn address_space_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status is readable");
    let line = status.lines().find(|l| l.starts_with("VmSize:")).expect("status has VmSize");
    let kib: u64 = line.split_whitespace().nth(1).and_then(|v| v.parse().ok()).expect("VmSize is a number of kB");
    kib * 1024
}

#[test]
fn a_tile_the_allocator_refuses_is_out_of_memory_of_its_pe_and_the_process_goes_on() {
    let mut old = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit and setrlimit only read and write the struct passed.
    assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_AS, &mut old) }, 0);
    // 1 GiB more than the process holds: plenty for a run of 2 PEs, far less than 16 GiB.
    let capped = libc::rlimit { rlim_cur: address_space_bytes() + (1 << 30), rlim_max: old.rlim_max };
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_AS, &capped) }, 0);

    let system = System::shape(1, 1, 1, 2).unwrap();
    let run = |len: usize| {
        MockRun::new(&system, "ring_1d", "all_pes", &zeros_on_rank_1::KERNEL).params(json!({ "len": len })).run()
    };
    // 2^32 f32 are 16 GiB: under Tile::MAX_BYTES, so the allocator is asked, and refuses.
    let result = run(1 << 32);

    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_AS, &old) }, 0);
    let Err(MockError::Run(error)) = result else { panic!("expected a run error, got {result:?}") };
    assert_eq!(
        error,
        RunError::Kernel(KernelError::OutOfMemory {
            pe: PeId::new(0, 0, 1),
            op: Op::Zeros,
            source: TileError::OutOfMemory { dtype: F32, len: 1 << 32, bytes: 1 << 34 },
        })
    );
    assert!(error.to_string().contains("could not provide 17179869184 bytes"), "{error}");
    // The process goes on, and the same kernel runs when what it asks for fits.
    let report = run(1 << 10).expect("1024 zeros fit");
    assert_eq!(report.pes()[1].notes["zeros"], "1024");
}
