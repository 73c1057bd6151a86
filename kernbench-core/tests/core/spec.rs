//! System specs: the built-in system, the example configs, and a table of bad spec files.

use kernbench_core::{LinkClass, LinkSpec, PeId, SipInterconnect, SpecError, System, SystemSpec};

use crate::{assert_mentions, config, data};

#[test]
fn builtin_is_4_sips_of_4x4_cubes_of_8_pes() {
    let system = System::builtin();
    assert_eq!(system.sips(), 4);
    assert_eq!(system.mesh(), (4, 4));
    assert_eq!(system.cubes_per_sip(), 16);
    assert_eq!(system.pes_per_cube(), 8);
    assert_eq!(system.total_pes(), 512);
    assert_eq!(system, System::default());
}

#[test]
fn builtin_links_are_slower_the_farther_they_reach() {
    let system = System::builtin();
    let [intra, inter_cube, inter_sip, inter_node] = LinkClass::ALL.map(|c| system.link(c));
    assert!(intra.bandwidth_gbps > inter_cube.bandwidth_gbps);
    assert!(inter_cube.bandwidth_gbps > inter_sip.bandwidth_gbps);
    assert!(inter_sip.bandwidth_gbps > inter_node.bandwidth_gbps);
    assert!(intra.latency_ns < inter_cube.latency_ns);
    assert!(inter_cube.latency_ns < inter_sip.latency_ns);
    assert!(inter_sip.latency_ns < inter_node.latency_ns);
}

#[test]
fn cube_coord_is_row_major_on_a_wide_mesh() {
    let system = crate::system(1, 4, 2, 1);
    assert_eq!((system.cube_coord(0).x, system.cube_coord(0).y), (0, 0));
    assert_eq!((system.cube_coord(3).x, system.cube_coord(3).y), (3, 0));
    assert_eq!((system.cube_coord(5).x, system.cube_coord(5).y), (1, 1));
    for cube in 0..8 {
        assert_eq!(system.cube_index(system.cube_coord(cube)), cube);
    }
}

#[test]
fn all_pes_lists_every_pe_once_in_pe_id_order() {
    let system = crate::system(3, 2, 3, 5);
    let pes: Vec<PeId> = system.all_pes().collect();
    assert_eq!(pes.len(), system.total_pes());
    assert!(pes.windows(2).all(|w| w[0] < w[1]));
    assert!(pes.iter().all(|&pe| system.contains(pe)));
    assert_eq!(pes.last(), Some(&PeId::new(2, 5, 4)));
}

#[test]
fn contains_rejects_each_coordinate_out_of_range() {
    let system = crate::system(2, 1, 2, 4);
    assert!(system.contains(PeId::new(1, 1, 3)));
    assert!(!system.contains(PeId::new(2, 0, 0)));
    assert!(!system.contains(PeId::new(0, 2, 0)));
    assert!(!system.contains(PeId::new(0, 0, 4)));
}

#[test]
fn a_spec_without_optional_fields_takes_the_builtin_values() {
    let system = System::from_json_str(r#"{"sips": 2, "mesh": {"w": 1, "h": 2}, "pes_per_cube": 4}"#).unwrap();
    let builtin = System::builtin();
    for class in LinkClass::ALL {
        assert_eq!(system.link(class), builtin.link(class));
    }
    assert_eq!(system.interconnect(), SipInterconnect::Ring);
    assert_eq!(system.ipcq_depth(), builtin.ipcq_depth());
    assert_eq!(system.pe_spec(), builtin.pe_spec());
}

#[test]
fn a_spec_may_override_one_link_class_only() {
    let json = r#"{"sips": 2, "mesh": {"w": 1, "h": 1}, "pes_per_cube": 1,
                   "links": {"inter_sip": {"latency_ns": 1000, "bandwidth_gbps": 25}}}"#;
    let system = System::from_json_str(json).unwrap();
    assert_eq!(system.link(LinkClass::InterSip).bandwidth_gbps, 25.0);
    assert_eq!(system.link(LinkClass::IntraCube), System::builtin().link(LinkClass::IntraCube));
}

#[test]
fn a_system_round_trips_through_json() {
    let system = crate::system(3, 2, 1, 5);
    let json = serde_json::to_string(&system).unwrap();
    assert_eq!(System::from_json_str(&json).unwrap(), system);
    let decoded: System = serde_json::from_str(&json).unwrap();
    assert_eq!(decoded, system);
}

#[test]
fn deserializing_a_system_checks_it() {
    let err = serde_json::from_str::<System>(r#"{"sips": 0, "mesh": {"w": 1, "h": 1}, "pes_per_cube": 1}"#);
    assert_mentions(&err.unwrap_err().to_string(), &["`sips` is 0"]);
}

#[test]
fn a_million_pe_system_is_allowed() {
    let system = System::shape(16, 16, 16, 256).unwrap();
    assert_eq!(system.total_pes(), 1 << 20);
}

#[test]
fn max_pes_is_allowed_and_one_sip_more_is_too_large() {
    // 2^24 PEs: 4096 SIPs of 16x16 cubes of 16 PEs.
    let system = System::shape(4096, 16, 16, 16).unwrap();
    assert_eq!(system.total_pes(), System::MAX_PES);
    let err = System::shape(4097, 16, 16, 16).unwrap_err();
    assert!(matches!(err, SpecError::TooLarge { sips: 4097, .. }), "{err:?}");
}

#[test]
fn shape_rejects_a_zero_size_naming_it() {
    let err = System::shape(2, 1, 1, 0).unwrap_err();
    assert!(matches!(err, SpecError::ZeroSize { field: "pes_per_cube" }), "{err:?}");
}

#[test]
fn idealised_links_are_allowed_zero_latency_and_huge_rates() {
    let mut spec = SystemSpec::default();
    spec.links.intra_cube.latency_ns = 0.0;
    spec.pe.injection_ns = 0.0;
    spec.pe.compute_gflops = 1e300;
    spec.links.inter_sip.bandwidth_gbps = 1e6;
    System::from_spec(spec).unwrap();
}

#[test]
fn from_spec_rejects_a_nan_rate() {
    let mut spec = SystemSpec::default();
    spec.pe.memory_gbps = f64::NAN;
    let err = System::from_spec(spec).unwrap_err();
    assert!(matches!(&err, SpecError::BadRate { field, .. } if field == "pe.memory_gbps"), "{err:?}");
}

#[test]
fn from_spec_rejects_an_infinite_bandwidth() {
    let mut spec = SystemSpec::default();
    spec.links.inter_cube.bandwidth_gbps = f64::INFINITY;
    let err = System::from_spec(spec).unwrap_err();
    assert_mentions(&err.to_string(), &["links.inter_cube.bandwidth_gbps", "finite number of at least 0.001"]);
}

fn load_config(name: &str) -> System {
    System::from_file(&config(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

#[test]
fn config_default_equals_the_builtin_system() {
    assert_eq!(load_config("default.json"), System::builtin());
}

#[test]
fn config_small_2sip_is_2_sips_of_1x2_cubes_of_4_pes() {
    let system = load_config("small_2sip.json");
    assert_eq!((system.sips(), system.mesh(), system.pes_per_cube()), (2, (1, 2), 4));
}

#[test]
fn config_wide_mesh_is_wider_than_tall() {
    let (w, h) = load_config("wide_mesh.json").mesh();
    assert!(w > h, "{w}x{h}");
}

#[test]
fn config_switched_uses_a_switch() {
    assert_eq!(load_config("switched.json").interconnect(), SipInterconnect::Switched);
}

#[test]
fn config_single_sip_has_one_sip() {
    assert_eq!(load_config("single_sip.json").sips(), 1);
}

#[test]
fn config_fully_connected_links_every_pair() {
    assert_eq!(load_config("fully_connected.json").interconnect(), SipInterconnect::FullyConnected);
}

#[test]
fn every_config_file_loads() {
    let dir = config("");
    let mut count = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "json") {
            System::from_file(&path).unwrap_or_else(|e| panic!("{e}"));
            count += 1;
        }
    }
    assert!(count >= 5, "only {count} configs in {}", dir.display());
}

#[test]
fn a_missing_file_is_an_io_error_naming_the_file() {
    let path = data("specs/no_such_file.json");
    let err = System::from_file(&path).unwrap_err();
    assert!(matches!(&err, SpecError::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound));
    assert_mentions(&err.to_string(), &["no_such_file.json"]);
}

#[test]
fn a_bad_file_error_names_the_file_and_the_problem() {
    let err = System::from_file(&data("specs/zero_sips.json")).unwrap_err();
    assert!(matches!(err, SpecError::InFile { .. }));
    assert_mentions(&err.to_string(), &["zero_sips.json", "`sips` is 0"]);
}

/// Loads a bad spec from `tests/data/specs` and checks the variant and what the message names.
fn rejects(file: &str, is_expected: fn(&SpecError) -> bool, needles: &[&str]) {
    let err = System::from_file(&data(&format!("specs/{file}"))).expect_err(file);
    assert!(is_expected(err.root()), "{file}: unexpected {err:?}");
    assert_mentions(&err.to_string(), needles);
}

macro_rules! bad_specs {
    ($($test:ident: $file:literal => $pattern:pat, [$($needle:literal),* $(,)?];)*) => {$(
        #[test]
        fn $test() {
            rejects($file, |e| matches!(e, $pattern), &[$($needle),*]);
        }
    )*};
}

bad_specs! {
    bad_spec_unknown_field: "unknown_field.json" =>
        SpecError::Json { .. }, ["unknown field `sip`", "expected one of", "`sips`"];
    bad_spec_unknown_link_field: "unknown_link_field.json" =>
        SpecError::Json { .. }, ["unknown field `latency`", "latency_ns"];
    bad_spec_unknown_link_class: "unknown_link_class.json" =>
        SpecError::Json { .. }, ["unknown field `ucie`", "inter_sip"];
    bad_spec_missing_mesh: "missing_mesh.json" => SpecError::Json { .. }, ["missing field `mesh`"];
    bad_spec_wrong_type: "wrong_type.json" => SpecError::Json { .. }, ["invalid type", "line 1"];
    bad_spec_negative_sips: "negative_sips.json" => SpecError::Json { .. }, ["-1"];
    bad_spec_syntax_error: "syntax_error.json" => SpecError::Json { .. }, ["line 1"];
    bad_spec_bad_interconnect: "bad_interconnect.json" =>
        SpecError::Json { .. }, ["unknown variant `torus`", "fully_connected", "switched"];
    bad_spec_zero_sips: "zero_sips.json" => SpecError::ZeroSize { field: "sips" }, ["`sips` is 0", "at least 1"];
    bad_spec_zero_mesh_w: "zero_mesh_w.json" => SpecError::ZeroSize { field: "mesh.w" }, ["`mesh.w`"];
    bad_spec_zero_mesh_h: "zero_mesh_h.json" => SpecError::ZeroSize { field: "mesh.h" }, ["`mesh.h`"];
    bad_spec_zero_pes: "zero_pes.json" => SpecError::ZeroSize { field: "pes_per_cube" }, ["`pes_per_cube`"];
    bad_spec_negative_bandwidth: "negative_bandwidth.json" =>
        SpecError::BadRate { .. }, ["links.inter_sip.bandwidth_gbps", "-1", "at least 0.001"];
    bad_spec_subnormal_bandwidth: "subnormal_bandwidth.json" =>
        SpecError::BadRate { .. }, ["links.inter_sip.bandwidth_gbps", "5e-324", "at least 0.001"];
    bad_spec_negative_latency: "negative_latency.json" =>
        SpecError::BadTime { .. }, ["links.intra_cube.latency_ns", "-5", "from 0 to 1e12"];
    bad_spec_extreme_latency: "extreme_latency.json" =>
        SpecError::BadTime { .. }, ["links.inter_sip.latency_ns", "from 0 to 1e12"];
    bad_spec_huge_injection: "huge_injection.json" =>
        SpecError::BadTime { .. }, ["pe.injection_ns", "10000000000000", "from 0 to 1e12"];
    bad_spec_zero_compute: "zero_compute.json" => SpecError::BadRate { .. }, ["pe.compute_gflops"];
    bad_spec_zero_engines: "zero_engines.json" => SpecError::BadEngines { engines: 0 }, ["pe.engines", "1 to 1024"];
    bad_spec_negative_launch: "negative_launch.json" =>
        SpecError::BadTime { .. }, ["call.launch_ns", "-3", "from 0 to 1e12"];
    bad_spec_negative_launch_per_gpu: "negative_launch_per_gpu.json" =>
        SpecError::BadTime { .. }, ["call.launch_per_gpu_ns", "-1", "from 0 to 1e12"];
    bad_spec_no_protocols: "no_protocols.json" => SpecError::NoProtocols, ["`protocols`", "simple, ll, ll128"];
    bad_spec_negative_step: "negative_step.json" =>
        SpecError::BadTime { .. }, ["links.inter_sip.step_ns.ll", "-7", "from 0 to 1e12"];
    bad_spec_zero_pe_cap: "zero_pe_cap.json" => SpecError::BadRate { .. }, ["protocols.ll.pe_gbps", "at least 0.001"];
    bad_spec_unknown_protocol: "unknown_protocol.json" =>
        SpecError::Json { .. }, ["unknown field `ll129`", "ll128"];
    bad_spec_zero_ipcq_depth: "zero_ipcq_depth.json" => SpecError::ZeroIpcqDepth, ["ipcq_depth", "at least 1"];
    bad_spec_deep_ipcq: "deep_ipcq.json" => SpecError::DeepIpcq { depth: 100000000000 }, ["ipcq_depth", "at most 65536"];
    bad_spec_too_large: "too_large.json" => SpecError::TooLarge { .. }, ["65536 SIPs", "at most 16777216 PEs"];
    bad_spec_thirty_two_million_pes: "thirty_two_million_pes.json" => SpecError::TooLarge { .. }, ["8192 SIPs", "at most 16777216 PEs"];
    bad_spec_overflow: "overflow.json" => SpecError::TooLarge { .. }, ["too large", "16777216"];
    bad_spec_huge_latency: "huge_latency.json" => SpecError::Json { .. }, ["number out of range"];
    bad_spec_partial_node: "partial_node.json" =>
        SpecError::PartialNode { sips: 6, sips_per_node: 4 }, ["`sips` is 6", "`nodes.sips_per_node` (4)", "a multiple of 4 SIPs"];
    bad_spec_zero_sips_per_node: "zero_sips_per_node.json" =>
        SpecError::ZeroSize { field: "nodes.sips_per_node" }, ["`nodes.sips_per_node` is 0", "at least 1"];
    bad_spec_too_many_nics: "too_many_nics.json" =>
        SpecError::BadNics { nics: 5, sips_per_node: 4 }, ["`nodes.nics_per_node` is 5", "1 to 4 NICs"];
    bad_spec_zero_nics: "zero_nics.json" => SpecError::BadNics { nics: 0, .. }, ["`nodes.nics_per_node` is 0"];
    bad_spec_nodes_on_a_ring: "nodes_on_a_ring.json" =>
        SpecError::NodesNotSwitched { interconnect: SipInterconnect::Ring }, ["`sip_interconnect` is `ring`", "expected `switched`"];
    bad_spec_zero_nic_bandwidth: "zero_nic_bandwidth.json" =>
        SpecError::BadRate { .. }, ["nodes.nic.bandwidth_gbps", "at least 0.001"];
    bad_spec_negative_nic_latency: "negative_nic_latency.json" =>
        SpecError::BadTime { .. }, ["nodes.nic.latency_ns", "-1", "from 0 to 1e12"];
    bad_spec_inter_node_in_links: "inter_node_in_links.json" =>
        SpecError::Json { .. }, ["unknown field `inter_node`", "inter_sip"];
    bad_spec_unknown_nodes_field: "unknown_nodes_field.json" =>
        SpecError::Json { .. }, ["unknown field `nics`", "nics_per_node"];
    bad_spec_switch_not_switched: "switch_not_switched.json" =>
        SpecError::SwitchNotSwitched { interconnect: SipInterconnect::FullyConnected },
        ["field `switch`", "`fully_connected`", "expected `switched`"];
    bad_spec_zero_switch_reduce: "zero_switch_reduce.json" =>
        SpecError::BadRate { .. }, ["switch.reduce_gbps", "at least 0.001"];
    bad_spec_unknown_switch_field: "unknown_switch_field.json" =>
        SpecError::Json { .. }, ["unknown field `sharp`", "reduce_gbps"];
}

#[test]
fn a_switch_with_multicast_is_read_and_written_back_and_one_without_it_is_not_written() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/specs/switch_multicast.json");
    let system = System::from_file(&path).unwrap();
    let switch = system.multicast_switch().expect("the spec's switch multicasts");
    assert_eq!(switch.reduce_gbps, 480.0);
    let written = serde_json::to_string(system.spec()).unwrap();
    assert!(written.contains(r#""switch":{"multicast":true,"reduce_gbps":480.0}"#), "{written}");
    // Left out, nothing is written: every spec file of before stays as it was.
    let plain = System::shape(4, 1, 1, 1).unwrap();
    assert!(!serde_json::to_string(plain.spec()).unwrap().contains("switch"));
    assert!(plain.multicast_switch().is_none());
}

#[test]
fn multicast_spans_one_switch_s_sip_leaders_and_says_why_not_otherwise() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/specs/switch_multicast.json");
    let system = System::from_file(&path).unwrap();
    let leaders: Vec<PeId> = (0..8).map(|sip| PeId::new(sip, 0, 0)).collect();
    system.check_multicast(&leaders).unwrap();
    let ring = System::shape(4, 1, 1, 1).unwrap();
    let error = ring.check_multicast(&leaders[..4]).unwrap_err();
    assert!(error.to_string().contains("`sip_interconnect` is `ring`"), "{error}");
    let forwarding = r#"{"sips": 4, "mesh": {"w": 1, "h": 1}, "pes_per_cube": 2, "sip_interconnect": "switched"}"#;
    let error = System::from_json_str(forwarding).unwrap().check_multicast(&leaders[..4]).unwrap_err();
    assert!(error.to_string().contains("gives no `switch`"), "{error}");
    let two_pes = forwarding
        .replace("}\n", "")
        .replace(r#""switched"}"#, r#""switched", "switch": {"multicast": true, "reduce_gbps": 1}}"#);
    let error = System::from_json_str(&two_pes).unwrap().check_multicast(&[PeId::new(0, 0, 1)]).unwrap_err();
    assert!(error.to_string().contains("expected SIP leaders"), "{error}");
    let nodes = r#"{"sips": 4, "mesh": {"w": 1, "h": 1}, "pes_per_cube": 1, "sip_interconnect": "switched",
                    "nodes": {"sips_per_node": 2}, "switch": {"multicast": true, "reduce_gbps": 1}}"#;
    let error = System::from_json_str(nodes).unwrap().check_multicast(&leaders[..4]).unwrap_err();
    assert!(error.to_string().contains("two-level NVLS across nodes is not modelled"), "{error}");
}

#[test]
fn nodes_group_consecutive_sips_with_one_nic_per_sip_unless_told() {
    let json = r#"{"sips": 16, "mesh": {"w": 1, "h": 1}, "pes_per_cube": 1, "sip_interconnect": "switched",
                   "nodes": {"sips_per_node": 8, "nic": {"latency_ns": 3000, "bandwidth_gbps": 50}}}"#;
    let system = System::from_json_str(json).unwrap();
    assert_eq!((system.nodes(), system.sips_per_node(), system.nics_per_node()), (2, 8, 8));
    assert_eq!((system.node_of(7), system.node_of(8)), (0, 1));
    assert_eq!(system.link(LinkClass::InterNode), LinkSpec::new(3000.0, 50.0));
    assert_eq!(system.describe(), "2 nodes x 8 SIPs x 1x1 cubes x 1 PEs");
    let json = serde_json::to_string(&system).unwrap();
    assert!(!json.contains("nics_per_node"), "{json}");
    assert_eq!(System::from_json_str(&json).unwrap(), system);
}

#[test]
fn a_system_without_nodes_is_one_node_and_writes_no_nodes() {
    let system = System::builtin();
    assert_eq!((system.nodes(), system.sips_per_node(), system.nics_per_node()), (1, 4, 0));
    assert!(!serde_json::to_string(&system).unwrap().contains("nodes"));
    // A spec of one node on a ring is allowed: it never leaves the node.
    let json = r#"{"sips": 4, "mesh": {"w": 1, "h": 1}, "pes_per_cube": 1, "nodes": {"sips_per_node": 4}}"#;
    assert_eq!(System::from_json_str(json).unwrap().nodes(), 1);
}

#[test]
fn an_endless_spec_file_is_refused_at_the_size_bound() {
    let err = System::from_file(std::path::Path::new("/dev/zero")).unwrap_err();
    assert!(matches!(err, SpecError::Io { .. }), "{err:?}");
    assert_mentions(&err.to_string(), &["/dev/zero", "larger than 16 MiB"]);
}

#[test]
fn a_decoding_error_keeps_the_decoders_error_as_its_source() {
    let err =
        System::from_json_str("{\n  \"sips\": 4,\n  \"mesh\": {\"w\": 1, \"h\": 1},\n  \"pes_per_cube\": \"one\"\n}")
            .unwrap_err();
    let source = std::error::Error::source(&err).expect("the decoder's error is the source");
    let decoder = source.downcast_ref::<serde_json::Error>().expect("a serde_json::Error");
    assert_eq!((decoder.line(), decoder.classify()), (4, serde_json::error::Category::Data), "{decoder}");
    assert_eq!(err.to_string().lines().count(), 1, "{err}");
}
