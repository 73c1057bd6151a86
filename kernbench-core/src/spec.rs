//! The simulated system: how many SIPs, cubes and PEs, and how fast their links are.
//!
//! Two stages: [`SystemSpec`] is what a JSON file says; [`System`] is a spec that passed every check,
//! so nothing downstream has to re-check sizes or rates.

use serde::{Deserialize, Serialize};

use crate::LinkClass;

/// Latency and bandwidth of one link class. Units: ns, and GB/s = 1e9 bytes/s.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkSpec {
    /// Time from the first byte leaving to the first byte arriving, in ns.
    pub latency_ns: f64,
    /// Bytes per second over one direction of one link, in GB/s (1e9 bytes/s).
    pub bandwidth_gbps: f64,
}

/// How SIPs are connected to each other.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SipInterconnect {
    /// Each SIP links to the next and the previous one.
    Ring,
    /// Every pair of SIPs has its own link.
    FullyConnected,
    /// Every SIP links to one switch; a SIP-to-SIP route crosses two links.
    Switched,
}

/// The rates of a PE. Units: GFLOP/s = 1e9 element operations/s; GB/s = 1e9 bytes/s.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PeSpec {
    /// Elementwise reduction rate, in 1e9 elements per second.
    pub compute_gflops: f64,
    /// Load/store rate between a PE and its buffers, in GB/s.
    pub memory_gbps: f64,
}
