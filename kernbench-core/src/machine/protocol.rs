//! How messages are carried: NCCL's three protocols, their figures in a system spec, and the choice of
//! one per call as NCCL's tuning model makes it.
//!
//! A protocol is a property of a call: every message of the call is carried by it. What it changes is
//! what the machine spends per message (what the kernels move is the same):
//!
//! | protocol | on the wire | per message | per lane |
//! |---|---|---|---|
//! | `Simple` | the data | the link class's `step_ns.simple` | `lane_gbps`, `pe_gbps` |
//! | `LL` | 16-byte lines of 8 data bytes and two flags: twice the data | `step_ns.ll` | `lane_gbps`, `pe_gbps` |
//! | `LL128` | 128-byte lines of 120 data bytes and a flag | `step_ns.ll128` | `lane_gbps`, `pe_gbps` |
//!
//! and every kernel of the call starts the protocol's `base_ns` after the call's launch. `step_ns` is
//! the cost of one step of a pipeline beyond the wire (NCCL's `hwLat`: the flag or FIFO handshake and the
//! thread block's loop), paid once per message on top of its links' latencies; `lane_gbps` is the most
//! data one lane (a GPU's channel, on its own SM) moves per second in the protocol, paid by the sending
//! lane, and `pe_gbps` the most a PE moves over all its lanes (NCCL caps `LL` so), which its lanes'
//! sends share. A system without `protocols` carries every message as today's model does: whole data, nothing
//! per message or per call beyond the links and the launch.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::machine::LinkClass;

/// A protocol: how a call's messages are carried. In JSON by its [key](Protocol::key).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    /// NCCL's `Simple`: the data as it is, a handshake per step; the most bandwidth, the highest
    /// per-step latency.
    #[default]
    Simple,
    /// `LL` (low latency): 8 data bytes per 16-byte line, each line with its own flags, so a receiver
    /// polls the data itself; the lowest latency, half the bandwidth.
    Ll,
    /// `LL128`: 120 data bytes per 128-byte line with a flag; near-full bandwidth at a latency between.
    Ll128,
}

impl Protocol {
    /// Every protocol, in the order `auto` prefers on a tie.
    pub const ALL: [Protocol; 3] = [Protocol::Ll, Protocol::Ll128, Protocol::Simple];

    /// Its name in MSCCL-IR and NCCL (`NCCL_PROTO`): `Simple`, `LL`, `LL128`.
    pub fn name(self) -> &'static str {
        match self {
            Protocol::Simple => "Simple",
            Protocol::Ll => "LL",
            Protocol::Ll128 => "LL128",
        }
    }

    /// Its key in a system spec's `protocols` and `step_ns`: `simple`, `ll`, `ll128`.
    pub fn key(self) -> &'static str {
        match self {
            Protocol::Simple => "simple",
            Protocol::Ll => "ll",
            Protocol::Ll128 => "ll128",
        }
    }

    /// `(line bytes, data bytes per line)` of a protocol that carries data in lines with flags.
    pub fn line(self) -> Option<(u64, u64)> {
        match self {
            Protocol::Simple => None,
            Protocol::Ll => Some((16, 8)),
            Protocol::Ll128 => Some((128, 120)),
        }
    }

    /// The bytes on the wire for `bytes` of data: whole lines, flags included.
    ///
    /// ```
    /// use kernbench_core::Protocol;
    /// assert_eq!(Protocol::Simple.wire_bytes(1000), 1000);
    /// assert_eq!(Protocol::Ll.wire_bytes(1000), 2000);
    /// assert_eq!(Protocol::Ll128.wire_bytes(1000), 9 * 128);
    /// ```
    #[inline]
    pub fn wire_bytes(self, bytes: u64) -> u64 {
        // An arm a protocol, so that each knows its line as constants and divides by a shift or a
        // multiplication, not a division: a timed run does this for every message.
        match self {
            Protocol::Simple => bytes,
            Protocol::Ll => Protocol::Ll.in_lines(bytes),
            Protocol::Ll128 => Protocol::Ll128.in_lines(bytes),
        }
    }

    /// [`Protocol::wire_bytes`] of a protocol that carries data in lines.
    #[inline(always)]
    fn in_lines(self, bytes: u64) -> u64 {
        let (line, data) = self.line().unwrap_or((1, 1));
        bytes.div_ceil(data).saturating_mul(line)
    }

    /// The most threads NCCL runs a channel of this protocol on (`NCCL_LL_MAX_NTHREADS` 512,
    /// `NCCL_LL128_MAX_NTHREADS` 640, `NCCL_SIMPLE_MAX_NTHREADS` 512).
    pub fn max_threads(self) -> u64 {
        match self {
            Protocol::Simple | Protocol::Ll => 512,
            Protocol::Ll128 => 640,
        }
    }

    /// The bytes NCCL gives each thread of a call at least before it runs fewer channels
    /// (`NCCL_LL_THREAD_THRESHOLD` 8, times the ranks for a ring; `NCCL_LL128_THREAD_THRESHOLD` 8;
    /// `NCCL_SIMPLE_THREAD_THRESHOLD` 64).
    pub fn thread_threshold(self, ring_ranks: Option<usize>) -> u64 {
        match self {
            Protocol::Ll => 8 * ring_ranks.unwrap_or(1).max(1) as u64,
            Protocol::Ll128 => 8,
            Protocol::Simple => 64,
        }
    }

    /// Data bytes per wire byte at full lines: 1, 1/2, 120/128.
    pub fn efficiency(self) -> f64 {
        self.line().map_or(1.0, |(line, data)| data as f64 / line as f64)
    }

    /// The bytes of each chunk a thread block moves per pass of its step list (the executor's
    /// `chunkSize`, NCCL's defaults): a connection step (`Simple`: a 4 MiB buffer in 8 steps, 512 KiB;
    /// `LL`: the 8-byte data halves of 16-byte lines, 32 KiB of a 64 KiB step; `LL128`: 120 of each
    /// 128 bytes, 576,000 of a 614,400-byte step) times the steps per chunk (4 for `Simple`, 1
    /// otherwise).
    pub fn pass_bytes(self) -> usize {
        match self {
            Protocol::Simple => 2 << 20,
            Protocol::Ll => 32 << 10,
            Protocol::Ll128 => 576_000,
        }
    }

    /// The bytes a step moves per message within a pass: a slice (`Simple`: 2 steps, 1 MiB; the others
    /// a whole pass). A fused step forwards each slice as it arrives, so a ring of them streams.
    pub fn slice_bytes(self) -> usize {
        match self {
            Protocol::Simple => 1 << 20,
            Protocol::Ll | Protocol::Ll128 => self.pass_bytes(),
        }
    }
}

impl fmt::Display for Protocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A name that is no protocol.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown protocol `{}`: expected auto, simple, ll or ll128 (any case)", crate::quote::Quoted(.0))]
pub struct UnknownProtocol(pub String);

/// A run asked for a protocol its system gives no figures for.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("protocol {protocol} is not one of this system's: {}", available_list(.available))]
pub struct ProtocolNotGiven {
    /// The protocol asked for.
    pub protocol: Protocol,
    /// The ones the system gives, in [`Protocol::ALL`] order.
    pub available: Vec<Protocol>,
}

fn available_list(available: &[Protocol]) -> String {
    if available.is_empty() {
        "it gives none (a spec's `protocols` gives them), so it carries every message as data".to_owned()
    } else {
        let names: Vec<&str> = available.iter().map(|p| p.key()).collect();
        format!("expected one of {}", names.join(", "))
    }
}

/// Which protocol a call runs: one named, or the one NCCL's tuning model picks for its size
/// ([`crate::collective::tuning`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum ProtocolChoice {
    /// The fastest by NCCL's tuning model among those the system gives figures for.
    #[default]
    Auto,
    /// This one.
    Only(Protocol),
}

impl FromStr for ProtocolChoice {
    type Err = UnknownProtocol;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "auto" => Ok(ProtocolChoice::Auto),
            "simple" => Ok(ProtocolChoice::Only(Protocol::Simple)),
            "ll" => Ok(ProtocolChoice::Only(Protocol::Ll)),
            "ll128" => Ok(ProtocolChoice::Only(Protocol::Ll128)),
            _ => Err(UnknownProtocol(s.to_owned())),
        }
    }
}

impl fmt::Display for ProtocolChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProtocolChoice::Auto => f.write_str("auto"),
            ProtocolChoice::Only(p) => f.write_str(p.key()),
        }
    }
}

/// A protocol's figures that do not depend on the link: see the [module](self).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ProtocolSpec {
    /// Time from a kernel's launch to its first message (NCCL's base latency of the protocol), in ns.
    pub base_ns: f64,
    /// The most data one lane moves per second in this protocol, in GB/s; no cap when left out.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lane_gbps: Option<f64>,
    /// The most data a PE moves per second in this protocol over all its lanes together, in GB/s (NCCL's
    /// `llMaxBw` for `LL`); no cap when left out.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pe_gbps: Option<f64>,
}

/// The protocols a system carries messages by, each with its figures; one left out cannot be used.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ProtocolsSpec {
    /// `Simple`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub simple: Option<ProtocolSpec>,
    /// `LL`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ll: Option<ProtocolSpec>,
    /// `LL128`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ll128: Option<ProtocolSpec>,
}

impl ProtocolsSpec {
    /// The figures of `protocol`, if the system gives them.
    pub fn get(&self, protocol: Protocol) -> Option<ProtocolSpec> {
        match protocol {
            Protocol::Simple => self.simple,
            Protocol::Ll => self.ll,
            Protocol::Ll128 => self.ll128,
        }
    }

    /// The protocol's figures, to change.
    pub fn get_mut(&mut self, protocol: Protocol) -> &mut Option<ProtocolSpec> {
        match protocol {
            Protocol::Simple => &mut self.simple,
            Protocol::Ll => &mut self.ll,
            Protocol::Ll128 => &mut self.ll128,
        }
    }

    /// The protocols given, in [`Protocol::ALL`] order.
    pub fn given(&self) -> impl Iterator<Item = Protocol> + '_ {
        Protocol::ALL.into_iter().filter(|&p| self.get(p).is_some())
    }
}

/// Per protocol, the time one message's step costs over a link class beyond its latency, in ns.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StepSpec {
    /// `Simple`.
    pub simple: f64,
    /// `LL`.
    pub ll: f64,
    /// `LL128`.
    pub ll128: f64,
}

impl StepSpec {
    /// The step time of `protocol`.
    pub fn get(&self, protocol: Protocol) -> f64 {
        match protocol {
            Protocol::Simple => self.simple,
            Protocol::Ll => self.ll,
            Protocol::Ll128 => self.ll128,
        }
    }

    /// The step time of `protocol`, to change.
    pub fn get_mut(&mut self, protocol: Protocol) -> &mut f64 {
        match protocol {
            Protocol::Simple => &mut self.simple,
            Protocol::Ll => &mut self.ll,
            Protocol::Ll128 => &mut self.ll128,
        }
    }
}

/// What carrying a run's messages by one protocol costs on one system: the figures the timing model
/// reads, resolved once per run ([`System::carriage`](crate::machine::System::carriage)).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Carriage {
    /// The protocol, or `None` on a system without protocols (every message carried as data).
    pub protocol: Option<Protocol>,
    /// Added to every kernel's start, ns.
    pub base_ns: f64,
    /// Per byte of data a lane sends, ns (0: no cap).
    pub lane_ns_per_byte: f64,
    /// Per byte of data a PE sends over all its lanes, ns (0: no cap).
    pub pe_ns_per_byte: f64,
    /// Per link class ([`LinkClass::ALL`] order), what a message's step costs beyond its latency, ns.
    pub step_ns: [f64; LinkClass::ALL.len()],
}

impl Carriage {
    /// The bytes on the wire for `bytes` of data.
    #[inline]
    pub fn wire_bytes(&self, bytes: u64) -> u64 {
        self.protocol.map_or(bytes, |p| p.wire_bytes(bytes))
    }

    /// A message's step cost over a route whose farthest class is `class`.
    pub fn step_ns(&self, class: Option<LinkClass>) -> f64 {
        class.map_or(0.0, |c| self.step_ns[c as usize])
    }
}
