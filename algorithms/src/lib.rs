//! kernbench's shipped kernels and the default registry, `ccl.json`.

mod butterfly;
mod direct;
mod hierarchical;
mod hierarchical_a2a;
mod mesh;
mod nvls;
mod programs;
mod ring;
mod symmetric;
mod tree;
mod uneven;

pub use butterfly::{
    rabenseifner_allreduce, recursive_doubling_allgather, recursive_doubling_allreduce,
    recursive_halving_reduce_scatter,
};
pub use direct::{bruck_allgather, one_shot_allreduce, pairwise_alltoall};
pub use hierarchical::hierarchical_allreduce;
pub use hierarchical_a2a::hierarchical_all_to_all;
pub use mesh::{intercube_allreduce, mesh_2d_allreduce};
pub use programs::{CHUNK_ALLGATHER_IN_PLACE, CHUNK_ALLTOALL, CHUNK_HIERARCHICAL_ALLREDUCE, CHUNK_RING_ALLREDUCE};
pub use ring::{
    bidirectional_ring_allreduce, ring_allgather, ring_allreduce, ring_broadcast, ring_reduce, ring_reduce_scatter,
};
pub use symmetric::{
    symmetric_allgather, symmetric_alltoall, symmetric_one_shot_allreduce, symmetric_two_shot_allreduce,
};
pub use tree::{double_binary_tree_allreduce, tree_allreduce, tree_broadcast};
pub use uneven::{pairwise_uneven, symmetric_uneven};

mod catalog;
pub use catalog::{DEFAULT_CCL_JSON, KERNELS, default_registry, kernels, register_all};
