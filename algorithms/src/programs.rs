//! MSCCLang's examples as registry kernels: chunk programs ([`kernbench_core::program::examples`]),
//! each built for the number of ranks it runs on and run with its thread blocks as lanes, on `full`.

use std::sync::Arc;

use kernbench_core::program::{BuildError, Program, ProgramFamily, examples};
use kernbench_core::{ArgsError, KernelDef, Launch, ParamDef, Params};
use serde::de::DeserializeOwned;

/// The kernel's arguments from its JSON parameters.
fn args<T: DeserializeOwned>(def: &KernelDef, params: &Params) -> Result<T, ArgsError> {
    serde_json::from_value(serde_json::Value::Object(params.clone()))
        .map_err(|e| ArgsError::new(def.name, def.params, e))
}

/// The family of `build`'s programs.
fn family(build: impl Fn(usize) -> Result<Program, String> + Send + Sync + 'static) -> Arc<dyn Launch> {
    Arc::new(ProgramFamily::new(build))
}

fn text(error: BuildError) -> String {
    error.to_string()
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Channels {
    #[serde(default = "one")]
    channels: usize,
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Nodes {
    #[serde(default = "two")]
    gpus_per_node: usize,
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct NoArgs {}

fn one() -> usize {
    1
}

fn two() -> usize {
    2
}

/// MSCCLang's ring all-reduce as a chunk program, on `channels` rings.
pub static CHUNK_RING_ALLREDUCE: KernelDef = KernelDef {
    name: "chunk_ring_allreduce",
    params: &[ParamDef { name: "channels", ty: "usize", default: Some("1") }],
    summary: "MSCCLang's ring all-reduce as a chunk program: each channel a ring of fused steps",
    instantiate: |params| {
        let Channels { channels } = args(&CHUNK_RING_ALLREDUCE, params)?;
        Ok(family(move |n| examples::ring_allreduce(n, channels).map_err(text)))
    },
};

/// MSCCLang's hierarchical all-reduce as a chunk program, on nodes of `gpus_per_node` ranks (of the
/// most ranks up to that which divide the rank count, when it does not).
pub static CHUNK_HIERARCHICAL_ALLREDUCE: KernelDef = KernelDef {
    name: "chunk_hierarchical_allreduce",
    params: &[ParamDef { name: "gpus_per_node", ty: "usize", default: Some("2") }],
    summary: "MSCCLang's hierarchical all-reduce: reduce-scatter in a node, all-reduce across, all-gather in",
    instantiate: |params| {
        let Nodes { gpus_per_node } = args(&CHUNK_HIERARCHICAL_ALLREDUCE, params)?;
        Ok(family(move |n| {
            // Whole nodes: the most ranks per node, up to `gpus_per_node`, that divide the ranks.
            let g = (1..=gpus_per_node.clamp(1, n.max(1))).rev().find(|g| n % g == 0).unwrap_or(1);
            examples::hierarchical_allreduce(n / g, g).map_err(text)
        }))
    },
};

/// An all-to-all through the destination's scratch, as a chunk program.
pub static CHUNK_ALLTOALL: KernelDef = KernelDef {
    name: "chunk_alltoall",
    params: &[],
    summary: "all-to-all as a chunk program: blocks land in the destination's scratch, then a local copy",
    instantiate: |params| {
        let NoArgs {} = args(&CHUNK_ALLTOALL, params)?;
        Ok(family(|n| examples::alltoall_with_scratch(n).map_err(text)))
    },
};

/// An in-place ring all-gather, as a chunk program.
pub static CHUNK_ALLGATHER_IN_PLACE: KernelDef = KernelDef {
    name: "chunk_allgather_in_place",
    params: &[],
    summary: "in-place ring all-gather as a chunk program: each block once round the ring",
    instantiate: |params| {
        let NoArgs {} = args(&CHUNK_ALLGATHER_IN_PLACE, params)?;
        Ok(family(|n| examples::ring_allgather_in_place(n).map_err(text)))
    },
};
