//! Mutations of JSON text for property tests of the parsers that read users' files (fields deleted,
//! duplicated, renamed, retyped or set to extreme numbers, and random characters spliced in), and the
//! check their errors must pass.
//!
//! Shared by kernbench-core's tests (system specs) and the integration tests (registries), which
//! include this file by path; it uses only `proptest` and `serde_json`.

use proptest::prelude::*;
use proptest::sample::Index;
use serde_json::Value;

/// Values that are not JSON a serializer would write but that a user's file may hold, as raw text:
/// numbers at and past the limits of f64, u64 and usize, negative sizes, and NaN both as a bare word
/// (malformed) and as a string.
const EXTREMES: &[&str] = &[
    "0",
    "-1",
    "-0",
    "1",
    "0.5",
    "5e-324",
    "1e-3",
    "9.99e-4",
    "1e308",
    "1e400",
    "-1e308",
    "1e12",
    "1000000000001",
    "4194304",
    "4194305",
    "65536",
    "65537",
    "18446744073709551615",
    "18446744073709551616",
    "340282366920938463463374607431768211456",
    "\"NaN\"",
    "NaN",
    "Infinity",
    "\"\"",
    "\"ring\"",
    "\"a\\nb\"",
    "\"\\u0000\"",
    "true",
    "null",
    "[]",
    "{}",
    "[1,2]",
];

/// Keys a field may be renamed to: near misses, empty, with an escaped newline or control character,
/// and long.
fn odd_key() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        Just("speed".to_owned()),
        Just("sip\\ns".to_owned()),
        Just("a\\u0007b".to_owned()),
        Just("x".repeat(2000)),
        "[a-z_]{1,12}",
    ]
}

/// One change to one node of a JSON document.
#[derive(Clone, Debug)]
enum Mutation {
    /// Remove the node from its object or array.
    Delete,
    /// Write the node's first field a second time (a duplicate key), or an array's first item twice.
    Duplicate,
    /// Rename the node's first field (objects only; others are left alone).
    Rename(String),
    /// Replace the node with raw text (one of [`EXTREMES`], or a long string).
    Raw(String),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        2 => Just(Mutation::Delete),
        1 => Just(Mutation::Duplicate),
        1 => odd_key().prop_map(Mutation::Rename),
        4 => proptest::sample::select(EXTREMES).prop_map(|raw| Mutation::Raw(raw.to_owned())),
        1 => "[a-z`\"]{1,4}".prop_map(|unit| Mutation::Raw(Value::String(unit.repeat(500)).to_string())),
    ]
}

/// A placeholder string for raw text, replaced after serialising; no real document holds it.
fn marker(i: usize) -> String {
    format!("@@raw{i}@@")
}

/// Every node's path, in document order, the root first.
fn paths(value: &Value, here: &mut Vec<PathStep>, out: &mut Vec<Vec<PathStep>>) {
    out.push(here.clone());
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                here.push(PathStep::Key(k.clone()));
                paths(v, here, out);
                here.pop();
            }
        }
        Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                here.push(PathStep::Item(i));
                paths(v, here, out);
                here.pop();
            }
        }
        _ => {}
    }
}

#[derive(Clone, Debug)]
enum PathStep {
    Key(String),
    Item(usize),
}

fn node_mut<'a>(mut value: &'a mut Value, path: &[PathStep]) -> &'a mut Value {
    for step in path {
        value = match (step, value) {
            (PathStep::Key(k), Value::Object(map)) => map.get_mut(k).expect("paths come from this document"),
            (PathStep::Item(i), Value::Array(items)) => &mut items[*i],
            _ => unreachable!("paths come from this document"),
        };
    }
    value
}

/// Applies `mutation` at `path`; raw text goes into `raws`, its node holding the marker.
fn apply(doc: &mut Value, path: &[PathStep], mutation: &Mutation, raws: &mut Vec<String>) {
    match mutation {
        Mutation::Delete => {
            let Some((last, parent)) = path.split_last() else { return };
            match (last, node_mut(doc, parent)) {
                (PathStep::Key(k), Value::Object(map)) => {
                    map.remove(k);
                }
                (PathStep::Item(i), Value::Array(items)) => {
                    items.remove(*i);
                }
                _ => {}
            }
        }
        Mutation::Duplicate => match node_mut(doc, path) {
            Value::Object(map) => {
                // serde_json's Map cannot hold a key twice: write the object as raw text instead.
                let Some((k, v)) = map.iter().next() else { return };
                let entry = format!("{}:{}", Value::String(k.clone()), v);
                let rest = Value::Object(map.clone()).to_string();
                let text = format!("{{{entry},{}", &rest[1..]);
                raws.push(text);
                *node_mut(doc, path) = Value::String(marker(raws.len() - 1));
            }
            Value::Array(items) => {
                if let Some(first) = items.first().cloned() {
                    items.insert(0, first);
                }
            }
            _ => {}
        },
        Mutation::Rename(key) => {
            if let Value::Object(map) = node_mut(doc, path) {
                let Some((k, v)) = map.iter().next().map(|(k, v)| (k.clone(), v.clone())) else { return };
                map.remove(&k);
                // Renamed keys are raw text, so their escapes reach the parser as written.
                let entry = format!("\"{key}\":{v}");
                let rest = Value::Object(map.clone()).to_string();
                let text = if rest == "{}" { format!("{{{entry}}}") } else { format!("{{{entry},{}", &rest[1..]) };
                raws.push(text);
                *node_mut(doc, path) = Value::String(marker(raws.len() - 1));
            }
        }
        Mutation::Raw(text) => {
            raws.push(text.clone());
            *node_mut(doc, path) = Value::String(marker(raws.len() - 1));
        }
    }
}

/// Random characters, some of them JSON's own punctuation, to splice into a document.
fn noise() -> impl Strategy<Value = String> {
    prop_oneof![
        "[{}\\[\\]\",:0-9eE+\\-. a-z]{1,8}",
        any::<Vec<u8>>().prop_map(|bytes| String::from_utf8_lossy(&bytes).into_owned()),
        "\\PC{1,8}",
    ]
}

/// `base` (a JSON document) with one to three nodes mutated and, sometimes, random characters spliced
/// in or the text cut short.
pub fn mutated(base: &str) -> impl Strategy<Value = String> + use<> {
    let doc: Value = serde_json::from_str(base).expect("the base document is JSON");
    let edits = proptest::collection::vec((any::<Index>(), mutation()), 1..=3);
    let splice = proptest::option::weighted(0.25, (any::<Index>(), noise()));
    let cut = proptest::option::weighted(0.05, any::<Index>());
    (edits, splice, cut).prop_map(move |(edits, splice, cut)| {
        let mut doc = doc.clone();
        let mut raws = Vec::new();
        for (index, mutation) in edits {
            // Paths are re-listed after each edit: an earlier one may have removed or replaced nodes.
            let mut now = Vec::new();
            paths(&doc, &mut Vec::new(), &mut now);
            let path = &now[index.index(now.len())];
            apply(&mut doc, path, &mutation, &mut raws);
        }
        let mut text = doc.to_string();
        // Later raws may hold earlier markers (a duplicated object that held one): replace last first.
        for (i, raw) in raws.iter().enumerate().rev() {
            text = text.replace(&Value::String(marker(i)).to_string(), raw);
        }
        if let Some((at, noise)) = splice {
            let at = boundary(&text, at);
            text.insert_str(at, &noise);
        }
        if let Some(at) = cut {
            let at = boundary(&text, at);
            text.truncate(at);
        }
        text
    })
}

/// A char boundary of `text` picked by `index`.
fn boundary(text: &str, index: Index) -> usize {
    let bounds: Vec<usize> = text.char_indices().map(|(i, _)| i).chain([text.len()]).collect();
    bounds[index.index(bounds.len())]
}

/// `message` is one line of at most `max` characters.
pub fn one_line_within(message: &str, max: usize) -> Result<(), TestCaseError> {
    prop_assert!(!message.contains(['\n', '\r']), "not one line: {:?}", message);
    let length = message.chars().count();
    prop_assert!(length <= max, "{} characters, more than {}: {:?}", length, max, message);
    Ok(())
}
