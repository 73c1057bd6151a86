//! Properties of reading a registry from JSON a user wrote: a mutated shipped `ccl.json` never panics,
//! every error is one short line, and every registry accepted survives writing and reading back.

use kernbench::Registry;
use kernbench_algorithms::{DEFAULT_CCL_JSON, KERNELS, default_registry, kernels};
use proptest::prelude::*;

use crate::mutate::{mutated, one_line_within};

/// The longest error message a user should have to read on one line, less the list of known names
/// an error may add.
const MAX_MESSAGE: usize = 400;

/// The longest message allowed: [`MAX_MESSAGE`] plus the longest list an error gives whole, of every
/// kernel or every shipped algorithm (`unknown kernel `x`: known kernels are ...`). The library lists
/// them all so that a caller can choose; the CLI cuts such lists short on its one line.
fn max_message() -> usize {
    let listed = |names: Vec<usize>| names.iter().map(|n| n + 2).sum::<usize>();
    let kernels = listed(KERNELS.iter().map(|k| k.name.len()).collect());
    let algorithms = listed(default_registry().algorithms().map(|a| a.name.len()).collect());
    MAX_MESSAGE + kernels.max(algorithms)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1500))]

    #[test]
    fn a_mutated_registry_resolves_or_fails_in_one_short_line(text in mutated(DEFAULT_CCL_JSON)) {
        match Registry::from_json_str(&text, &kernels()) {
            Ok(registry) => {
                let written = serde_json::to_string(&registry).unwrap();
                let again = Registry::from_json_str(&written, &kernels());
                prop_assert!(again.is_ok(), "{} does not read back: {:?}", written, again.err());
            }
            Err(e) => one_line_within(&e.to_string(), max_message())?,
        }
    }
}

/// The shipped registry with `from` replaced by `to` in its text.
fn edited(from: &str, to: &str) -> String {
    assert!(DEFAULT_CCL_JSON.contains(from), "ccl.json holds {from}");
    DEFAULT_CCL_JSON.replacen(from, to, 1)
}

#[test]
fn a_kernel_name_with_an_escaped_newline_stays_on_one_line() {
    let text = edited(r#""kernel": "ring_reduce""#, r#""kernel": "a\nb""#);
    let message = Registry::from_json_str(&text, &kernels()).unwrap_err().to_string();
    assert!(!message.contains('\n'), "{message}");
    assert!(message.contains(r"unknown kernel `a\nb`"), "{message}");
}

#[test]
fn a_long_algorithm_name_is_quoted_short_in_every_error() {
    let long = "y".repeat(3000);
    let short = format!("{}... (2952 more characters)", "y".repeat(48));
    let rule = edited(r#"{"algorithm": "ring_reduce""#, &format!(r#"{{"algorithm": "{long}""#));
    let topology = edited(r#""topology": "tree""#, &format!(r#""topology": "{long}""#));
    for text in [rule, topology] {
        let message = Registry::from_json_str(&text, &kernels()).unwrap_err().to_string();
        assert!(message.chars().count() < max_message(), "{message}");
        assert!(message.contains(&short), "{message}");
    }
    let registry = default_registry();
    let message = registry.get(&long).unwrap_err().to_string();
    assert!(message.starts_with(&format!("unknown algorithm `{short}`")), "{message}");
}
