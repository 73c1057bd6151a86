//! The registry: loading, selection, merging, kernel checks, and a table of bad registry files.

use std::sync::Arc;

use kernbench_core::{
    ArgsError, BufferKind, Collective, KernelDef, KernelFuture, KernelSet, Launch, LayoutKind, ParamDef, Registry,
    RegistryError, RegistrySpec, Tl,
};

use crate::{assert_mentions, data};

const REGISTRY: &str = r#"{
  "algorithms": {
    "recursive_doubling": {"collective": "all_reduce", "kernel": "rd_allreduce", "topology": "hypercube",
                           "mapper": "leader_only", "validator": "single_shard", "buffer_kind": "tcm",
                           "summary": "latency-optimal"},
    "hierarchical_allreduce": {"collective": "all_reduce", "kernel": "hier_allreduce",
                               "topology": "hierarchical_3level", "mapper": "all_pes",
                               "validator": "multi_pe_sip_local", "buffer_kind": "hbm"},
    "ring": {"collective": "all_reduce", "kernel": "ring_allreduce", "topology": "ring_1d",
             "mapper": "leader_only", "validator": "single_shard", "buffer_kind": "tcm",
             "params": {"chunks": 4}},
    "tree_bcast": {"collective": "broadcast", "kernel": "tree_bcast", "topology": "tree",
                   "mapper": "leader_only", "validator": "single_shard", "buffer_kind": "tcm"}
  },
  "selection": {
    "all_reduce": [{"algorithm": "recursive_doubling", "max_bytes": 65536},
                   {"algorithm": "hierarchical_allreduce", "layout": "multi_pe"},
                   {"algorithm": "ring"}],
    "broadcast": [{"algorithm": "tree_bcast", "min_bytes": 1024, "max_bytes": 4096}]
  }
}"#;

fn registry() -> Registry {
    Registry::from_json_str(REGISTRY, &kernels()).unwrap()
}

fn selected(bytes: u64, layout: LayoutKind) -> (String, usize) {
    let r = registry();
    let s = r.select(Collective::AllReduce, bytes, layout).unwrap();
    (s.algorithm.name.clone(), s.rule_index)
}

#[test]
fn a_registry_loads_its_entries() {
    let r = registry();
    let ring = r.get("ring").unwrap();
    assert_eq!(ring.name, "ring");
    assert_eq!(ring.collective, Collective::AllReduce);
    assert_eq!(ring.buffer_kind, BufferKind::Tcm);
    assert_eq!(ring.params["chunks"], 4);
    assert_eq!(r.get("recursive_doubling").unwrap().summary, "latency-optimal");
    assert_eq!(r.algorithms().count(), 4);
    assert_eq!(r.rules(Collective::AllReduce).len(), 3);
    assert!(r.rules(Collective::AllToAll).is_empty());
}

#[test]
fn select_takes_the_first_matching_rule() {
    assert_eq!(selected(1024, LayoutKind::MultiPe), ("recursive_doubling".into(), 0));
    assert_eq!(selected(1 << 20, LayoutKind::MultiPe), ("hierarchical_allreduce".into(), 1));
    assert_eq!(selected(1 << 20, LayoutKind::OnePe), ("ring".into(), 2));
}

#[test]
fn select_bounds_are_inclusive() {
    assert_eq!(selected(65536, LayoutKind::OnePe).0, "recursive_doubling");
    assert_eq!(selected(65537, LayoutKind::OnePe).0, "ring");
    let r = registry();
    assert!(r.select(Collective::Broadcast, 1024, LayoutKind::OnePe).is_ok());
    assert!(r.select(Collective::Broadcast, 4096, LayoutKind::OnePe).is_ok());
}

#[test]
fn select_explains_its_choice() {
    let r = registry();
    let s = r.select(Collective::AllReduce, 1024, LayoutKind::OnePe).unwrap();
    assert_eq!(s.reason, "rule 1 of all_reduce (recursive_doubling): bytes 1024 <= max_bytes 65536");
    let s = r.select(Collective::AllReduce, 1 << 20, LayoutKind::MultiPe).unwrap();
    assert_eq!(s.reason, "rule 2 of all_reduce (hierarchical_allreduce): layout multi_pe is multi_pe");
    let s = r.select(Collective::AllReduce, 1 << 20, LayoutKind::OnePe).unwrap();
    assert_eq!(s.reason, "rule 3 of all_reduce (ring): no conditions");
}

#[test]
fn select_without_a_match_lists_the_rules() {
    let err = registry().select(Collective::Broadcast, 10, LayoutKind::OnePe).unwrap_err();
    assert!(matches!(err, RegistryError::NoRule { bytes: 10, .. }), "{err:?}");
    assert_mentions(&err.to_string(), &["broadcast", "10 bytes", "1: tree_bcast (min_bytes 1024, max_bytes 4096)"]);
}

#[test]
fn select_for_a_collective_without_rules_says_so() {
    let err = registry().select(Collective::AllGather, 10, LayoutKind::OnePe).unwrap_err();
    assert_mentions(&err.to_string(), &["all_gather has no rules", "selection.all_gather"]);
}

#[test]
fn get_an_unknown_algorithm_lists_the_known_ones() {
    let err = registry().get("rnig").unwrap_err();
    assert!(matches!(err, RegistryError::UnknownAlgorithm { .. }));
    assert_mentions(&err.to_string(), &["unknown algorithm `rnig`", "ring", "tree_bcast"]);
}

const USER: &str = r#"{
  "algorithms": {
    "ring": {"collective": "all_reduce", "kernel": "my_ring", "topology": "ring_1d", "mapper": "leader_only",
             "validator": "single_shard", "buffer_kind": "hbm"}
  },
  "selection": {"all_reduce": [{"algorithm": "ring", "min_bytes": 1048576}]}
}"#;

#[test]
fn merge_overrides_entries_by_name() {
    let mut r = registry();
    r.merge(Registry::from_json_str(USER, &user_kernels()).unwrap(), &user_kernels()).unwrap();
    assert_eq!(r.get("ring").unwrap().kernel.name, "my_ring");
    assert_eq!(r.get("tree_bcast").unwrap().kernel.name, "tree_bcast");
}

#[test]
fn merge_puts_user_rules_first() {
    let mut r = registry();
    r.merge(Registry::from_json_str(USER, &user_kernels()).unwrap(), &user_kernels()).unwrap();
    let s = r.select(Collective::AllReduce, 1 << 21, LayoutKind::MultiPe).unwrap();
    assert_eq!((s.algorithm.name.as_str(), s.rule_index), ("ring", 0));
    assert_eq!(r.rules(Collective::AllReduce).len(), 4);
}

#[test]
fn merge_accepts_rules_naming_base_algorithms() {
    let mut r = registry();
    let user: RegistrySpec =
        serde_json::from_str(r#"{"selection": {"all_reduce": [{"algorithm": "ring", "max_bytes": 16}]}}"#).unwrap();
    r.merge(user, &kernels()).unwrap();
    assert_eq!(r.select(Collective::AllReduce, 8, LayoutKind::OnePe).unwrap().algorithm.name, "ring");
}

#[test]
fn a_failed_merge_leaves_the_registry_unchanged() {
    let mut r = registry();
    let user: RegistrySpec = serde_json::from_str(r#"{"selection": {"all_reduce": [{"algorithm": "nope"}]}}"#).unwrap();
    assert!(matches!(r.merge(user, &kernels()).unwrap_err(), RegistryError::UnknownRuleAlgorithm { .. }));
    assert_eq!(r, registry());
}

#[test]
fn a_registry_round_trips_through_json() {
    let json = serde_json::to_string(&registry()).unwrap();
    assert_eq!(Registry::from_json_str(&json, &kernels()).unwrap(), registry());
}

// --- kernels ---

struct Noop;

impl Launch for Noop {
    fn launch(&self, _tl: Tl) -> KernelFuture {
        Box::pin(async { Ok(()) })
    }
}

const CHUNKS: &[ParamDef] = &[ParamDef { name: "chunks", ty: "usize", default: None }];

fn instantiate_chunks(params: &serde_json::Map<String, serde_json::Value>) -> Result<Arc<dyn Launch>, ArgsError> {
    match params.get("chunks") {
        Some(v) if v.is_u64() && params.len() == 1 => Ok(Arc::new(Noop)),
        _ => Err(ArgsError::new("ring_allreduce", CHUNKS, "missing field `chunks`")),
    }
}

fn instantiate_none(params: &serde_json::Map<String, serde_json::Value>) -> Result<Arc<dyn Launch>, ArgsError> {
    match params.keys().next() {
        None => Ok(Arc::new(Noop)),
        Some(k) => Err(ArgsError::new("noop", &[], format!("unknown field `{k}`"))),
    }
}

static RING: KernelDef =
    KernelDef { name: "ring_allreduce", params: CHUNKS, summary: "", instantiate: instantiate_chunks };
static RD: KernelDef = KernelDef { name: "rd_allreduce", params: &[], summary: "", instantiate: instantiate_none };
static HIER: KernelDef = KernelDef { name: "hier_allreduce", params: &[], summary: "", instantiate: instantiate_none };
static BCAST: KernelDef = KernelDef { name: "tree_bcast", params: &[], summary: "", instantiate: instantiate_none };

fn kernels() -> KernelSet {
    let mut set = KernelSet::new();
    set.register(&RING).register(&RD).register(&HIER).register(&BCAST);
    set
}

/// The base kernels and the user's `my_ring`.
fn user_kernels() -> KernelSet {
    let mut set = kernels();
    set.register(&MY_RING);
    set
}

static MY_RING: KernelDef = KernelDef { name: "my_ring", params: &[], summary: "", instantiate: instantiate_none };

#[test]
fn loading_binds_every_kernel_with_its_params() {
    let r = registry();
    assert_eq!(r.get("ring").unwrap().kernel.name, "ring_allreduce");
    assert_eq!(r.get("ring").unwrap().topology.name(), "ring_1d");
    assert_eq!(r.get("hierarchical_allreduce").unwrap().mapper.name(), "all_pes");
    assert_eq!(r.get("recursive_doubling").unwrap().validator.name(), "single_shard");
}

#[test]
fn loading_names_a_missing_kernel_and_the_known_ones() {
    let mut set = KernelSet::new();
    set.register(&RING).register(&RD).register(&HIER);
    let err = Registry::from_json_str(REGISTRY, &set).unwrap_err();
    assert!(matches!(&err, RegistryError::MissingKernel { algorithm, .. } if algorithm == "tree_bcast"), "{err:?}");
    assert_mentions(
        &err.to_string(),
        &["algorithms.tree_bcast.kernel", "unknown kernel `tree_bcast`", "ring_allreduce"],
    );
}

#[test]
fn loading_names_params_the_kernel_rejects() {
    let mut r = registry();
    let user: RegistrySpec = serde_json::from_str(
        r#"{"algorithms": {"ring": {"collective": "all_reduce", "kernel": "ring_allreduce", "topology": "ring_1d",
            "mapper": "leader_only", "validator": "single_shard", "buffer_kind": "tcm", "params": {"chunk": 4}}}}"#,
    )
    .unwrap();
    let err = r.merge(user, &kernels()).unwrap_err();
    assert!(matches!(&err, RegistryError::KernelArgs { algorithm, .. } if algorithm == "ring"), "{err:?}");
    assert_mentions(&err.to_string(), &["algorithms.ring.params", "chunks: usize"]);
}

// --- bad registry files ---

#[test]
fn a_missing_registry_file_names_the_file() {
    let err = Registry::from_file(&data("registries/none.json"), &kernels()).unwrap_err();
    assert!(matches!(err, RegistryError::Io { .. }));
    assert_mentions(&err.to_string(), &["none.json"]);
}

fn rejects(file: &str, is_expected: fn(&RegistryError) -> bool, needles: &[&str]) {
    let err = Registry::from_file(&data(&format!("registries/{file}")), &kernels()).expect_err(file);
    assert!(is_expected(err.root()), "{file}: unexpected {err:?}");
    assert_mentions(&err.to_string(), &[file]);
    assert_mentions(&err.to_string(), needles);
}

macro_rules! bad_registries {
    ($($test:ident: $file:literal => $pattern:pat, [$($needle:literal),* $(,)?];)*) => {$(
        #[test]
        fn $test() {
            rejects($file, |e| matches!(e, $pattern), &[$($needle),*]);
        }
    )*};
}

bad_registries! {
    bad_registry_syntax_error: "syntax_error.json" => RegistryError::Json { .. }, ["EOF while parsing", "line 2"];
    bad_registry_unknown_top_field: "unknown_top_field.json" =>
        RegistryError::Json { .. }, ["unknown field `selections`", "selection"];
    bad_registry_unknown_entry_field: "unknown_entry_field.json" =>
        RegistryError::Json { .. }, ["unknown field `n_elem`", "params"];
    bad_registry_missing_kernel: "missing_kernel.json" => RegistryError::Json { .. }, ["missing field `kernel`"];
    bad_registry_unknown_collective: "unknown_collective.json" =>
        RegistryError::Json { .. }, ["unknown variant `allreduce`", "all_reduce"];
    bad_registry_bad_buffer_kind: "bad_buffer_kind.json" =>
        RegistryError::Json { .. }, ["unknown variant `sram`", "tcm", "hbm"];
    bad_registry_unknown_topology: "unknown_topology.json" =>
        RegistryError::UnknownComponent { .. }, ["algorithms.ring.topology", "unknown topology `ring`", "ring_1d"];
    bad_registry_unknown_mapper: "unknown_mapper.json" =>
        RegistryError::UnknownComponent { .. }, ["algorithms.ring.mapper", "unknown mapper `leaders`", "leader_only"];
    bad_registry_unknown_validator: "unknown_validator.json" =>
        RegistryError::UnknownComponent { .. }, ["algorithms.ring.validator", "`one_shard`", "single_shard"];
    bad_registry_rule_unknown_algorithm: "rule_unknown_algorithm.json" =>
        RegistryError::UnknownRuleAlgorithm { rule: 2, .. }, ["selection.all_reduce", "rule 2", "`rign`", "[ring]"];
    bad_registry_rule_wrong_collective: "rule_wrong_collective.json" =>
        RegistryError::RuleCollectiveMismatch { .. }, ["selection.broadcast", "implements all_reduce"];
    bad_registry_rule_min_above_max: "rule_min_above_max.json" =>
        RegistryError::EmptyBounds { min: 4096, max: 1024, .. }, ["min_bytes 4096 > max_bytes 1024", "inclusive"];
    bad_registry_rule_negative_bytes: "rule_negative_bytes.json" => RegistryError::Json { .. }, ["-1", "u64"];
    bad_registry_rule_unknown_layout: "rule_unknown_layout.json" =>
        RegistryError::Json { .. }, ["unknown variant `many_pe`", "one_pe", "multi_pe"];
    bad_registry_rule_unknown_field: "rule_unknown_field.json" =>
        RegistryError::Json { .. }, ["unknown field `max_size`", "max_bytes"];
}

#[test]
fn collective_names_parse_and_print() {
    for c in Collective::ALL {
        assert_eq!(c.to_string().parse::<Collective>().unwrap(), c);
        assert_eq!(serde_json::to_string(&c).unwrap(), format!("\"{c}\""));
        // The command line takes nccl-tests' names too; JSON only the collective's own.
        assert_eq!(c.nccl_tests_name().parse::<Collective>().unwrap(), c);
    }
    let err = "all_gathr".parse::<Collective>().unwrap_err();
    assert_mentions(&err.to_string(), &["unknown collective `all_gathr`", "all_gather", "all_to_all_v", "sendrecv"]);
}

#[test]
fn a_registry_file_that_is_not_text_is_refused_naming_the_first_bad_byte() {
    let path = std::env::temp_dir().join(format!("kernbench-binary-registry-{}.json", std::process::id()));
    std::fs::write(&path, b"{\"algorithms\": \xff}").unwrap();
    let err = Registry::from_file(&path, &kernels()).unwrap_err();
    std::fs::remove_file(&path).unwrap();
    assert!(matches!(err, RegistryError::Io { .. }), "{err:?}");
    assert_mentions(&err.to_string(), &["byte 15 is not UTF-8"]);
}

#[test]
fn a_decoding_error_keeps_the_decoders_error_as_its_source() {
    let kernels = KernelSet::new();
    let err =
        Registry::from_json_str("{\"algorithms\": {},\n \"selection\": {\"all\\nreduce\": []}}", &kernels).unwrap_err();
    let source = std::error::Error::source(&err).expect("the decoder's error is the source");
    let decoder = source.downcast_ref::<serde_json::Error>().expect("a serde_json::Error");
    assert_eq!(decoder.line(), 2, "{decoder}");
    // The decoder quotes the name whole, on two lines; the error escapes it, on one.
    assert_eq!(decoder.to_string().lines().count(), 2, "{decoder}");
    assert_eq!(err.to_string().lines().count(), 1, "{err}");
}
