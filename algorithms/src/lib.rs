//! kernbench's shipped kernels and the default registry, `ccl.json`.

mod hierarchical;
mod ring;

pub use hierarchical::hierarchical_allreduce;
pub use ring::{
    bidirectional_ring_allreduce, ring_allgather, ring_allreduce, ring_broadcast, ring_reduce, ring_reduce_scatter,
};

mod catalog;
pub use catalog::{DEFAULT_CCL_JSON, KERNELS, default_registry, kernels, register_all};
