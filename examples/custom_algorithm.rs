//! Bring your own algorithm: write a kernel in your crate, describe it in your own registry JSON, merge
//! that into the defaults, and let the `Communicator` select it.
//!
//! ```text
//! cargo run --example custom_algorithm
//! ```

use kernbench::prelude::*;
use kernbench::samples::sample_tensor;
use kernbench::{Communicator, DpPolicy, KernelSet, RegistrySpec, System};

/// Chain all-reduce: partial sums flow east from rank 0 to the last rank, which sends the total back
/// west along the chain.
#[ccl_kernel]
pub fn chain_allreduce(tl: &Tl) {
    let (rank, size, op) = (tl.rank(), tl.size(), tl.op());
    let mut acc = tl.load(Input);
    if rank > 0 {
        let partial = tl.recv(W, acc.len(), acc.dtype());
        let own = acc;
        acc = partial;
        tl.reduce(&mut acc, &own, op);
    }
    if rank + 1 < size {
        tl.send(E, &acc);
        acc = tl.recv(E, acc.len(), acc.dtype());
    } else {
        tl.finish(&mut acc, op, size);
    }
    if rank > 0 {
        tl.send(W, &acc);
    }
    tl.store(Output, &acc);
}

/// The user's registry: one algorithm, and a rule that picks it for small all-reduces. Merged rules go
/// first, so this rule wins below 1 KiB and the default rules decide above.
const MY_CCL_JSON: &str = r#"{
  "algorithms": {
    "chain": {
      "collective": "all_reduce", "kernel": "chain_allreduce", "topology": "ring_1d",
      "mapper": "leader_only", "validator": "single_shard", "buffer_kind": "tcm", "params": {},
      "summary": "partial sums east along a chain, the total back west"
    }
  },
  "selection": {
    "all_reduce": [{"algorithm": "chain", "max_bytes": 1024}]
  }
}"#;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut kernels = KernelSet::new();
    kernels.register(&chain_allreduce::KERNEL);
    let mine: RegistrySpec = serde_json::from_str(MY_CCL_JSON)?;
    let mut registry = kernbench::algorithms::default_registry();
    registry.merge(mine, &kernels)?;

    let system = System::builtin();
    let mut comm = Communicator::with_registry(system.clone(), registry);
    for bytes in [512, 64 << 10] {
        let mut tensor = sample_tensor(&system, bytes, F32, ReduceOp::Sum, DpPolicy::LEADER)?;
        let report = comm.all_reduce(&mut tensor, ReduceOp::Sum)?;
        println!("{report}");
        assert!(report.postcondition.held);
        assert_eq!(report.algorithm == "chain", bytes <= 1024);
    }
    Ok(())
}
