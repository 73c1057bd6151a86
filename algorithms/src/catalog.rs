//! The shipped kernels as a [`KernelSet`], and the default registry that names them.

use kernbench_core::{KernelDef, KernelSet, Registry};

/// The default `ccl.json`: every shipped algorithm and the selection rules per collective.
pub const DEFAULT_CCL_JSON: &str = include_str!("../ccl.json");

/// Every shipped kernel.
pub const KERNELS: &[&KernelDef] = &[
    &crate::bidirectional_ring_allreduce::KERNEL,
    &crate::bruck_allgather::KERNEL,
    &crate::CHUNK_ALLGATHER_IN_PLACE,
    &crate::CHUNK_ALLTOALL,
    &crate::CHUNK_HIERARCHICAL_ALLREDUCE,
    &crate::CHUNK_RING_ALLREDUCE,
    &crate::double_binary_tree_allreduce::KERNEL,
    &crate::hierarchical_all_to_all::KERNEL,
    &crate::hierarchical_allreduce::KERNEL,
    &crate::intercube_allreduce::KERNEL,
    &crate::mesh_2d_allreduce::KERNEL,
    &crate::one_shot_allreduce::KERNEL,
    &crate::pairwise_alltoall::KERNEL,
    &crate::rabenseifner_allreduce::KERNEL,
    &crate::recursive_doubling_allgather::KERNEL,
    &crate::recursive_doubling_allreduce::KERNEL,
    &crate::recursive_halving_reduce_scatter::KERNEL,
    &crate::ring_allgather::KERNEL,
    &crate::ring_allreduce::KERNEL,
    &crate::ring_broadcast::KERNEL,
    &crate::ring_reduce::KERNEL,
    &crate::ring_reduce_scatter::KERNEL,
    &crate::symmetric_allgather::KERNEL,
    &crate::symmetric_alltoall::KERNEL,
    &crate::symmetric_one_shot_allreduce::KERNEL,
    &crate::symmetric_two_shot_allreduce::KERNEL,
    &crate::tree_allreduce::KERNEL,
    &crate::tree_broadcast::KERNEL,
];

/// Adds every shipped kernel to `set`.
pub fn register_all(set: &mut KernelSet) {
    for def in KERNELS {
        set.register(def);
    }
}

/// A set holding every shipped kernel, and `msccl_program`, which runs an MSCCL-IR XML file
/// ([`kernbench_core::program::MSCCL_PROGRAM`]).
pub fn kernels() -> KernelSet {
    let mut set = KernelSet::new();
    register_all(&mut set);
    set.register(&kernbench_core::program::MSCCL_PROGRAM);
    set
}

/// The default registry, parsed from [`DEFAULT_CCL_JSON`].
///
/// # Panics
/// Never: a test parses the shipped file and checks it against the shipped kernels.
pub fn default_registry() -> Registry {
    Registry::from_json_str(DEFAULT_CCL_JSON, &kernels()).expect("the shipped ccl.json is valid (checked by a test)")
}
