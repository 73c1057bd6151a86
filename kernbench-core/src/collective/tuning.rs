//! NCCL's tuning model: a call's time per protocol as `latency + bytes / bandwidth`, with per-step
//! latencies and per-lane caps, and the protocol it picks. It ranks protocols for `auto`
//! ([`ProtocolChoice::Auto`](crate::machine::ProtocolChoice)); the simulated time of the call is the
//! timing model's, not this.

use crate::collective::Collective;
use crate::machine::{LinkClass, Protocol, System};

/// The shape of an algorithm as NCCL's tuning model sees it: how many pipeline steps a call takes, and
/// so how often it pays a step's latency.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pattern {
    /// A ring over the ranks: `2 (n - 1)` steps for all-reduce, `n - 1` for the others.
    Ring,
    /// A tree over the ranks: up and down its depth.
    Tree,
}

impl Pattern {
    /// The steps a call of `collective` over `ranks` takes in this pattern.
    pub fn steps(self, collective: Collective, ranks: usize) -> usize {
        let n = ranks.max(1);
        match (self, collective) {
            (Pattern::Ring, Collective::AllReduce) => 2 * (n - 1),
            (Pattern::Ring, _) => n - 1,
            // Depth of a binary tree of n nodes, up for the reduce and down for the broadcast.
            (Pattern::Tree, Collective::AllReduce) => 2 * (usize::BITS - n.leading_zeros()) as usize,
            (Pattern::Tree, _) => (usize::BITS - n.leading_zeros()) as usize,
        }
    }
}

/// NCCL's tuning model's time for a call of `bytes` per rank ([`Pattern::steps`] steps over `ranks`
/// whose messages cross `class`, on `lanes` lanes) carried by `protocol`, in ns: the protocol's base
/// latency, the steps' latency (the link's and the protocol's step), and the bytes each rank puts on
/// the wire at the lower of the link's rate and the lanes' cap. `None` when the system gives no figures
/// for `protocol`.
pub fn tuned_time(
    system: &System,
    call: (Pattern, Collective, usize),
    class: LinkClass,
    lanes: usize,
    bytes: u64,
    protocol: Protocol,
) -> Option<f64> {
    let (pattern, collective, ranks) = call;
    let figures = system.protocols()?.get(protocol)?;
    let link = system.link(class);
    let steps = pattern.steps(collective, ranks) as f64;
    let latency = figures.base_ns + steps * (link.latency_ns + system.step_ns(class).get(protocol));
    // A ring step moves 1/n of the data; so does a tree's pipelined chunk, the whole once per way.
    let moved = bytes as f64 * steps / ranks.max(1) as f64;
    let link_rate = link.bandwidth_gbps * protocol.efficiency();
    let lanes_rate = figures.lane_gbps.map_or(f64::INFINITY, |cap| cap * lanes.max(1) as f64);
    let rate = link_rate.min(lanes_rate).min(figures.pe_gbps.unwrap_or(f64::INFINITY));
    Some(latency + moved / rate)
}

/// The protocol NCCL's tuning model picks for the call (see [`tuned_time`]): the fastest of those the
/// system gives figures for, earlier in [`Protocol::ALL`] on a tie; `None` on a system without protocols.
pub fn pick(
    system: &System,
    call: (Pattern, Collective, usize),
    class: LinkClass,
    lanes: usize,
    bytes: u64,
) -> Option<Protocol> {
    let timed = Protocol::ALL.into_iter().filter_map(|p| Some((tuned_time(system, call, class, lanes, bytes, p)?, p)));
    timed
        .fold(None, |best: Option<(f64, Protocol)>, (t, p)| match best {
            Some((best_t, _)) if best_t <= t => best,
            _ => Some((t, p)),
        })
        .map(|(_, p)| p)
}

/// The lanes (NCCL's channels) a call of `bytes` (NCCL's `nBytes`) carried by `protocol` runs on, of
/// the `lanes` its algorithm has: NCCL gives every thread of a call at least
/// [`Protocol::thread_threshold`] bytes, so a smaller call runs fewer channels (one less at a time,
/// each of [`Protocol::max_threads`] threads), at least one.
///
/// # Examples
/// ```
/// use kernbench_core::Protocol;
/// use kernbench_core::collective::tuning::{Pattern, lanes_for};
/// // 8 ranks on a ring, LL: 512 threads x 64 bytes = 32 KiB a channel.
/// assert_eq!(lanes_for(Protocol::Ll, Pattern::Ring, 8, 256 << 10, 24), 8);
/// assert_eq!(lanes_for(Protocol::Ll, Pattern::Ring, 8, 1 << 30, 24), 24);
/// assert_eq!(lanes_for(Protocol::Simple, Pattern::Ring, 8, 8, 24), 1);
/// ```
pub fn lanes_for(protocol: Protocol, pattern: Pattern, ranks: usize, bytes: u64, lanes: usize) -> usize {
    let ring_ranks = (pattern == Pattern::Ring).then_some(ranks);
    let per_lane = protocol.max_threads() * protocol.thread_threshold(ring_ranks);
    let wanted = (bytes / per_lane).max(1);
    usize::try_from(wanted).unwrap_or(usize::MAX).min(lanes.max(1))
}
