//! Properties of reading a system spec from JSON a user wrote: mutated shipped specs never panic, every
//! error is one short line, and every spec accepted is inside the documented ranges.

use kernbench_core::{LinkClass, SpecError, System, SystemSpec};
use proptest::prelude::*;

use crate::mutate::{mutated, one_line_within};

/// The longest error message a user should have to read on one line. The decoder's messages name the
/// field, the expected ones and a line and column; ours name a field and a range.
const MAX_MESSAGE: usize = 400;

/// Every shipped system file, and the built-in spec as JSON.
fn bases() -> Vec<String> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs/systems");
    let mut bases: Vec<String> = std::fs::read_dir(dir)
        .expect("configs/systems exists")
        .map(|entry| std::fs::read_to_string(entry.unwrap().path()).unwrap())
        .collect();
    bases.sort();
    bases.push(serde_json::to_string(&SystemSpec::default()).unwrap());
    // Nodes, which no shipped system has yet.
    bases.push(
        r#"{"sips": 8, "mesh": {"w": 1, "h": 1}, "pes_per_cube": 2, "sip_interconnect": "switched",
            "nodes": {"sips_per_node": 4, "nics_per_node": 2, "nic": {"latency_ns": 3000, "bandwidth_gbps": 50}}}"#
            .to_owned(),
    );
    bases
}

fn spec_text() -> impl Strategy<Value = String> {
    let strategies: Vec<_> = bases().iter().map(|base| mutated(base)).collect();
    proptest::strategy::Union::new(strategies)
}

/// An accepted system holds only values inside the ranges `System` documents.
fn within_documented_ranges(system: &System) -> Result<(), TestCaseError> {
    let spec = system.spec();
    let sizes = [spec.sips, spec.mesh.w, spec.mesh.h, spec.pes_per_cube];
    prop_assert!(sizes.iter().all(|&s| s >= 1), "a size is 0: {:?}", spec);
    let total = sizes.iter().try_fold(1usize, |acc, &s| acc.checked_mul(s));
    prop_assert!(total.is_some_and(|t| t <= System::MAX_PES), "too many PEs: {:?}", spec);
    prop_assert!((1..=System::MAX_IPCQ_DEPTH).contains(&spec.ipcq_depth), "{:?}", spec);
    let links = LinkClass::ALL.map(|class| system.link(class));
    let rates = links.iter().map(|l| l.bandwidth_gbps).chain([spec.pe.compute_gflops, spec.pe.memory_gbps]);
    for rate in rates {
        prop_assert!(rate.is_finite() && rate >= System::MIN_RATE, "rate {} in {:?}", rate, spec);
    }
    for time in links.iter().map(|l| l.latency_ns).chain([spec.pe.injection_ns]) {
        prop_assert!((0.0..=System::MAX_TIME_NS).contains(&time), "time {} in {:?}", time, spec);
    }
    if let Some(nodes) = spec.nodes {
        let nics = nodes.nics_per_node.unwrap_or(nodes.sips_per_node);
        prop_assert!(nodes.sips_per_node >= 1 && spec.sips % nodes.sips_per_node == 0, "{:?}", spec);
        prop_assert!((1..=nodes.sips_per_node).contains(&nics), "{:?}", spec);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    #[test]
    fn a_mutated_spec_is_a_valid_system_or_one_short_line(text in spec_text()) {
        match System::from_json_str(&text) {
            Ok(system) => within_documented_ranges(&system)?,
            Err(e) => one_line_within(&e.to_string(), MAX_MESSAGE)?,
        }
    }
}

/// A spec with the raw JSON `entry` added at its top level.
fn with_entry(entry: &str) -> Result<System, SpecError> {
    System::from_json_str(&format!(r#"{{"sips": 2, "mesh": {{"w": 1, "h": 1}}, "pes_per_cube": 1, {entry}}}"#))
}

#[test]
fn the_shipped_specs_are_valid() {
    for base in bases() {
        System::from_json_str(&base).expect("a shipped spec");
    }
}

#[test]
fn an_unknown_field_with_a_long_name_is_quoted_short() {
    let long = "x".repeat(5000);
    let message = with_entry(&format!(r#""{long}": 1"#)).unwrap_err().to_string();
    assert!(message.chars().count() <= MAX_MESSAGE, "{message}");
    assert!(message.contains(&format!("unknown field `{}... (4952 more characters)`", "x".repeat(48))), "{message}");
}

#[test]
fn a_name_with_an_escaped_newline_stays_on_one_line() {
    for entry in [r#""sip\ns": 1"#, r#""sip_interconnect": "ring\n\u0007""#] {
        let e = with_entry(entry).unwrap_err();
        let message = e.to_string();
        assert!(!message.contains('\n'), "{entry}: {message}");
        assert!(message.contains(r"\n"), "the newline is shown escaped: {message}");
        // The decoder's error stays the source, for its line and column; printing the chain whole is
        // the caller's choice (the CLI leaves the decoder's raw message out).
        let source = std::error::Error::source(&e).and_then(|s| s.downcast_ref::<serde_json::Error>());
        assert!(source.is_some_and(|s| s.line() == 1), "the decoder's error is the source: {e:?}");
    }
}

#[test]
fn a_name_holding_backticks_or_a_long_string_value_gives_a_short_message() {
    let long = "x".repeat(3000);
    let entries = [
        format!(r#""`{long}": 1"#),
        format!(r#""a`b`{long}": 1"#),
        format!(r#""sip_interconnect": "{long}""#),
        format!(r#""ipcq_depth": "{long}""#),
    ];
    for entry in &entries {
        let message = with_entry(entry).unwrap_err().to_string();
        assert!(message.chars().count() <= MAX_MESSAGE, "{} characters: {message}", message.chars().count());
        assert!(message.contains("line 1 column"), "where it is wrong is kept: {message}");
    }
}
