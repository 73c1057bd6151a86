//! The shipped kernels as a [`KernelSet`], and the default registry that names them.

use kernbench_core::{KernelDef, KernelSet, Registry};

/// The default `ccl.json`: every shipped algorithm and the selection rules per collective.
pub const DEFAULT_CCL_JSON: &str = include_str!("../ccl.json");

/// Every shipped kernel.
pub const KERNELS: &[&KernelDef] = &[
    &crate::ring::bidirectional_ring_allreduce::KERNEL,
    &crate::direct::bruck_allgather::KERNEL,
    &crate::programs::CHUNK_ALLGATHER_IN_PLACE,
    &crate::programs::CHUNK_ALLTOALL,
    &crate::programs::CHUNK_HIERARCHICAL_ALLREDUCE,
    &crate::programs::CHUNK_RING_ALLREDUCE,
    &crate::tree::double_binary_tree_allreduce::KERNEL,
    &crate::hierarchical_a2a::hierarchical_all_to_all::KERNEL,
    &crate::hierarchical::hierarchical_allreduce::KERNEL,
    &crate::mesh::intercube_allreduce::KERNEL,
    &crate::mesh::mesh_2d_allreduce::KERNEL,
    &crate::direct::one_shot_allreduce::KERNEL,
    &crate::direct::pairwise_alltoall::KERNEL,
    &crate::nvls::nvls_allgather::KERNEL,
    &crate::nvls::nvls_allreduce::KERNEL,
    &crate::nvls::nvls_reduce_scatter::KERNEL,
    &crate::nvls::nvls_tree_allreduce::KERNEL,
    &crate::butterfly::rabenseifner_allreduce::KERNEL,
    &crate::butterfly::recursive_doubling_allgather::KERNEL,
    &crate::butterfly::recursive_doubling_allreduce::KERNEL,
    &crate::butterfly::recursive_halving_reduce_scatter::KERNEL,
    &crate::ring::ring_allgather::KERNEL,
    &crate::ring::ring_allreduce::KERNEL,
    &crate::ring::ring_broadcast::KERNEL,
    &crate::ring::ring_reduce::KERNEL,
    &crate::ring::ring_reduce_scatter::KERNEL,
    &crate::symmetric::symmetric_allgather::KERNEL,
    &crate::symmetric::symmetric_alltoall::KERNEL,
    &crate::symmetric::symmetric_one_shot_allreduce::KERNEL,
    &crate::symmetric::symmetric_two_shot_allreduce::KERNEL,
    &crate::tree::tree_allreduce::KERNEL,
    &crate::tree::tree_broadcast::KERNEL,
    &crate::uneven::pairwise_uneven::KERNEL,
    &crate::uneven::symmetric_uneven::KERNEL,
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
