//! A timed run as a Chrome / Perfetto trace: the spans of [`timing`](crate::timing)'s report, one
//! track per PE (or lane) and per channel.

use std::fmt::Write as _;

use kernbench_core::PeId;
use serde::{Deserialize, Serialize};

use crate::timing::{PeTime, SpanKind, TimeReport};

/// A run's spans as a Chrome / Perfetto trace (the Trace Event Format): one track per PE (per lane of a
/// PE that runs several), one per channel that carried data. Open it at ui.perfetto.dev or chrome://tracing.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Trace {
    /// The trace events.
    #[serde(rename = "traceEvents")]
    pub trace_events: Vec<serde_json::Value>,
    /// How viewers show time.
    #[serde(rename = "displayTimeUnit")]
    pub display_time_unit: String,
}

impl Trace {
    /// The trace of a timed run of `pes` (rank order).
    pub fn new(pes: &[PeId], time: &TimeReport) -> Trace {
        use serde_json::json;
        // The format counts microseconds; fractions keep the ns.
        let us = |ns: f64| ns / 1000.0;
        let mut events = vec![
            json!({"name": "process_name", "ph": "M", "pid": 0, "args": {"name": "PEs"}}),
            json!({"name": "process_name", "ph": "M", "pid": 1, "args": {"name": "channels"}}),
        ];
        // One track per lane: a PE of one lane is one track named by the PE, as before lanes.
        let tracks = pes.iter().zip(&time.pes).flat_map(|(pe, t)| {
            let lanes: Vec<(String, &PeTime)> = if t.lanes.is_empty() {
                vec![(pe.to_string(), t)]
            } else {
                t.lanes.iter().enumerate().map(|(lane, l)| (format!("{pe} lane {lane}"), l)).collect()
            };
            lanes
        });
        for (tid, (name, t)) in tracks.enumerate() {
            events.push(json!({"name": "thread_name", "ph": "M", "pid": 0, "tid": tid, "args": {"name": name}}));
            for span in &t.spans {
                events.push(json!({
                    "name": span_name(span.kind), "cat": "pe", "ph": "X", "pid": 0, "tid": tid,
                    "ts": us(span.start_ns), "dur": us(span.end_ns - span.start_ns), "args": {"bytes": span.bytes},
                }));
            }
        }
        for (i, ch) in time.channels.iter().enumerate() {
            let mut name = String::new();
            let _ = write!(name, "{} {} -> {}", ch.channel.class, node(ch.channel.from), node(ch.channel.to));
            events.push(json!({"name": "thread_name", "ph": "M", "pid": 1, "tid": i, "args": {"name": name}}));
            for span in &ch.spans {
                events.push(json!({
                    "name": "transfer", "cat": "channel", "ph": "X", "pid": 1, "tid": i,
                    "ts": us(span.start_ns), "dur": us(span.end_ns - span.start_ns), "args": {"bytes": span.bytes},
                }));
            }
        }
        Trace { trace_events: events, display_time_unit: "ns".to_owned() }
    }
}

fn span_name(kind: SpanKind) -> &'static str {
    match kind {
        SpanKind::Send => "send",
        SpanKind::Recv => "recv (waiting)",
        SpanKind::CreditWait => "blocked on credit",
        SpanKind::ComputeWait => "compute wait",
        SpanKind::Reduce => "reduce",
        SpanKind::Memory => "load/store",
        SpanKind::Barrier => "barrier",
        SpanKind::SignalWait => "signal wait",
        SpanKind::Delay => "late start",
        SpanKind::Transfer => "transfer",
    }
}

fn node(n: kernbench_core::route::Node) -> String {
    use kernbench_core::route::Node;
    match n {
        Node::Pe(pe) => pe.to_string(),
        Node::Switch => "switch".to_owned(),
        Node::NodeSwitch(k) => format!("switch of node {k}"),
        Node::Nic { node, rail } => format!("NIC {rail} of node {node}"),
        Node::Network => "network switch".to_owned(),
    }
}
