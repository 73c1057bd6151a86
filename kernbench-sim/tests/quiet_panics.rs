//! A kernel's panic is reported in the run's error and nowhere else, while every other panic still
//! reaches the hook installed before the runtime's. A binary of its own: the panic hook is
//! process-wide, and this test must install its hook before any run installs the runtime's.

use std::sync::Mutex;

use kernbench_core::System;
use kernbench_core::prelude::*;
use kernbench_sim::RunError;
use kernbench_sim::testing::{MockError, MockRun};

/// What the hook installed before the runtime's was shown.
static SHOWN: Mutex<Vec<String>> = Mutex::new(Vec::new());

#[ccl_kernel(crate = "kernbench_core")]
fn rank_one_panics(tl: &Tl) {
    if tl.rank() == 1 {
        panic!("rank one gives up");
    }
}

#[test]
fn a_kernels_panic_is_in_the_error_only_and_other_panics_reach_the_previous_hook() {
    std::panic::set_hook(Box::new(|info| SHOWN.lock().unwrap().push(info.to_string())));
    let system = System::shape(1, 1, 1, 2).unwrap();
    let result = MockRun::new(&system, "ring_1d", "all_pes", &rank_one_panics::KERNEL).threads(2).run();
    let Err(MockError::Run(error)) = result else { panic!("expected a run error, got {result:?}") };
    assert_eq!(error, RunError::Panicked { pe: PeId::new(0, 0, 1), message: "rank one gives up".to_owned() });
    assert_eq!(*SHOWN.lock().unwrap(), Vec::<String>::new(), "a kernel's panic reached the panic hook");

    let outside = std::panic::catch_unwind(|| panic!("not in a kernel"));
    assert!(outside.is_err());
    let shown = SHOWN.lock().unwrap();
    assert!(shown.len() == 1 && shown[0].contains("not in a kernel"), "{shown:?}");
}
