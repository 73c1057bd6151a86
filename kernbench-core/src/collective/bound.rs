//! Lower bounds on a collective's time: how soon any kernel could finish it on a given system, the
//! numerator of a sweep's `sol`.
//!
//! It lives beside [`postcondition`](super::postcondition): a postcondition says what every
//! kernel of a collective must compute, a bound how soon any kernel could have computed it. It is
//! the collective's needs (what must move between ranks) set against the machine's means (its
//! channels, from [`System::fan_out`], and its routes), so it uses [`machine`](crate::machine) and
//! nothing of plans or runtimes: the caller names the participants.
//!
//! # The timing rules it rests on
//!
//! From the timing model (`kernbench-sim`'s `timing`): a send costs its PE the
//! injection overhead `o` before the message leaves; the message crosses every channel (one
//! direction of one link) of its route, holding each for `bytes / bandwidth` and paying each one's
//! latency after it; a channel carries one message at a time; a run ends when its last PE has
//! received its last message. So a channel of latency `L` and bandwidth `B` carries what a run of
//! length `T` needs only inside `[o, T - L]`: nothing leaves before the first injection is over, and
//! a byte that leaves the channel at `t` arrives no earlier than `t + L`. Over a set of channels whose
//! smallest latency is `L`, `bytes <= sum(B) (T - o - L)`, so
//!
//! ```text
//! T >= o + L + bytes / sum(B)
//! ```
//!
//! A bandwidth bound plus one hop's latency and one injection is still a lower bound: the latency is
//! paid after the last byte, which a pure bandwidth bound leaves out.
//!
//! The bound assumes what every kernel of the simulator does: a message that tells a PE about an
//! element carries the whole element (tiles of the collective's dtype, nothing compressed), and
//! only PEs reduce, except on a system whose switch computes ([`System::multicast_switch`]: NVLS),
//! where the switch (each node's) reduces too; the network switch between nodes only forwards.
//! Compute, loads and stores, the switch's reductions included, cost time too; leaving them out
//! keeps the bound a bound.
//!
//! # The bound
//!
//! `T >= o + max(region bounds, totals, latency)`, where, with `n` ranks, `x` the bytes of a rank's
//! input (its contribution, for all-gather), `c_q` the bytes of chunk `q` of an input (the
//! [`chunk_range`] split into `n`), and for a region `R` holding `g` of the ranks (`h = n - g`
//! outside; a region with every rank, or none, needs nothing):
//!
//! | collective | `out(R)`: must leave `R` | `in(R)`: must enter `R` |
//! | --- | --- | --- |
//! | all_reduce | `x` | `x` |
//! | all_gather | `g x` | `h x` |
//! | reduce_scatter | `sum c_q, q not in R` | `sum c_q, q in R` |
//! | all_to_all | `g sum c_q, q not in R` | `h sum c_q, q in R` |
//! | broadcast | `x` if the root is in `R` | `x` if it is not |
//! | reduce | `x` if the root is not in `R` | `x` if it is |
//! | all_to_all_v, send_recv | what ranks in `R` send to ranks outside | what ranks outside send to ranks in `R` |
//!
//! and the totals over the `K` regions of one kind that hold ranks are `2 (K - 1) x` both ways for
//! all-reduce, and `sum out(R)` and `sum in(R)` for the others (`(K - 1) x` into the regions without
//! the root for broadcast, out of them for reduce). With one region per rank and `B` out of each,
//! the totals give nccl-tests' bus bandwidth: `T >= 2 (n-1)/n x / B` for all-reduce, `(n-1)/n` of
//! the gathered size over `B` for all-gather, `(n-1)/n x / B` for reduce-scatter and all-to-all.
//!
//! 1. **Region bounds** (the per-PE bound and cuts). A region's border is the channels from inside
//!    it to outside, `C(R)` GB/s in all with smallest latency `L(R)` (as many channels, of the same
//!    classes, cross it inwards: every link has one each way):
//!    `T >= o + L(R) + max(out(R), in(R)) / C(R)`. The regions are each participating PE (what it
//!    must send over every channel leaving it that the system has, whichever ones an algorithm
//!    uses), each cube, each SIP, each half of the SIPs (SIPs `0 .. S/2` and the rest, for 3
//!    SIPs or more: on a ring its border is two links, fully connected `a (S - a)` of them, switched
//!    the `a` links of its own SIPs to their switches, which stand outside both halves: every
//!    message that leaves the half's SIPs crosses one of them, even when a node's switch and all
//!    of its SIPs are in the half), and in a system of several nodes each node (its border: the
//!    links of its NICs to the network switch, one per rail, which every message between nodes
//!    crosses whichever rail its lane takes). Data of a region's ranks is known
//!    only inside it, so what `out(R)` counts leaves by messages sent from inside, each crossing the
//!    border; what `in(R)` counts arrives by messages received inside, each crossing it inwards.
//! 2. **Totals.** Over every region of one kind that holds ranks, each message between regions
//!    crosses the border of its sender's region outwards and that of its receiver's inwards, so
//!    `T >= o + min L(R) + total / sum C(R)`. But for all-reduce, the totals add what each region
//!    must send (or receive), which distinct messages carry. All-reduce needs more: it is
//!    gossip among the `K` regions, which takes at least `2 (K - 1)` messages per element. Take the
//!    first message after which some region `X` holds every contribution to an element: by then each
//!    of the other `K - 1` regions has sent one (its contribution reached `X`), and after it each of
//!    them still receives one (none of them held everything before it), `2 (K - 1)` distinct
//!    messages. The argument needs every holder of a partial result to be a region: when the
//!    switch computes, it is not (it combines the contributions it receives and multicasts the
//!    result), so a region's contribution need leave it only once and the result enter it only
//!    once. There the all-reduce totals fall to `K x` both ways, the sum of the regions' own
//!    `(x, x)`, for every kind of region but nodes, which only the network switch joins.
//!    Reduce-scatter's totals already ask only that: each region's data for the others' chunks
//!    leaves it once and its own reduced chunks enter it once, whoever reduces.
//! 3. **Latency.** A PE that needs data of another cannot have it before one route latency after the
//!    first injection: routes are the least-latency paths of the machine (a cube is left only
//!    through its PE 0, a SIP through its cube 0's PE 0 and a node through its switch and one NIC;
//!    rings go the shorter way, the mesh X then Y, every link of a class has the same latency, and
//!    the routes of every rail between two PEs cross the same classes, so channel 0's stands for
//!    all), so relaying through a third PE only adds. `T >= o + d(p, q)` over the pairs where `q` needs something of `p`: every ordered
//!    pair for all-reduce and all-gather, those whose receiver's chunk is not empty for
//!    reduce-scatter and all-to-all, root to rank for broadcast, rank to root for reduce, and those
//!    with a count for all-to-all-v and send/recv (each of them tried, not a sweep). The
//!    farthest pair is found by a double sweep (the farthest receiver from rank 0, the farthest
//!    sender from it, the farthest receiver from that): always a real pair, so a lower bound, and
//!    the diameter on every system its tests try (rings, full and switched interconnects of cube
//!    meshes), in time linear in the ranks.

use std::ops::Range;

use serde::Serialize;

use super::Collective;
use crate::counts::Counts;
use crate::machine::{LinkClass, Node, PeId, SipInterconnect, System};
use crate::tile::chunk_range;

/// A collective call as the bound sees it: what must move, between which PEs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CallShape<'a> {
    /// The collective.
    pub collective: Collective,
    /// The participating PEs, in rank order: an install plan's participants.
    pub ranks: &'a [PeId],
    /// Elements of each rank's input: its contribution for all-gather, whose output is `n` times
    /// as long.
    pub elements: usize,
    /// Bytes of one element.
    pub element_bytes: usize,
    /// The root rank of broadcast and reduce; the others ignore it.
    pub root: usize,
    /// The per-pair counts of all-to-all-v and send/recv (in elements), for which `elements` is
    /// ignored; the others ignore them.
    pub counts: Option<&'a Counts>,
}

/// A lower bound on a call's simulated time, and which of its terms set it.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct TimeBound {
    /// The bound, ns: 0 when nothing must move.
    pub ns: f64,
    /// The term that set it.
    pub limit: Limit,
}

/// The term of [`lower_bound`] that set a bound.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Limit {
    /// Nothing must move: one rank, or no elements.
    Nothing,
    /// What one region must send or receive, over the channels crossing its border.
    Region {
        /// The kind of region.
        region: Region,
        /// Whether what leaves it or what enters it set the bound.
        flow: Flow,
    },
    /// What every region of a kind must send or receive together, over all their borders.
    AllRegions {
        /// The kind of region.
        region: Region,
        /// Whether what leaves them or what enters them set the bound.
        flow: Flow,
    },
    /// The route latency between the farthest two ranks of which one needs data of the other.
    Latency,
}

/// A kind of region of the machine whose border a bound counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Region {
    /// One participating PE: every channel leaving it.
    Pe,
    /// One cube: its NoC links, and its SIP's UCIe links for cube 0.
    Cube,
    /// One SIP: its UCIe links.
    Sip,
    /// SIPs `0 .. S/2`, or the rest: the SIP interconnect's bisection.
    HalfTheSips,
    /// One node of a system of several: its NICs' links to the network switch.
    Node,
}

impl Region {
    /// Every kind, smallest first but for `Node`, last so that on a system where it ties with another
    /// kind the other still names the bound, as before nodes existed.
    pub const ALL: [Region; 5] = [Region::Pe, Region::Cube, Region::Sip, Region::HalfTheSips, Region::Node];
}

/// Whether bytes leave a region or enter it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Flow {
    /// Leaving it.
    Out,
    /// Entering it.
    In,
}

/// A lower bound on the simulated time of `call` on `system` that no kernel can beat: the largest of
/// the region bounds, totals and latency bound of the [module docs](self), plus one injection.
///
/// # Panics
/// When a rank is not a PE of `system`, or, for broadcast and reduce of two ranks or more, when
/// `root` is not a rank.
///
/// # Examples
/// ```
/// use kernbench_core::bound::{CallShape, Flow, Limit, Region, lower_bound};
/// use kernbench_core::{Collective, PeId, System};
/// // 4 SIPs of one PE on a ring: each PE has two 64 GB/s channels out, 500 ns each; o = 10 ns.
/// let system = System::shape(4, 1, 1, 1).unwrap();
/// let ranks: Vec<PeId> = (0..4).map(|sip| PeId::new(sip, 0, 0)).collect();
/// let call = CallShape { collective: Collective::AllReduce, ranks: &ranks, elements: 1 << 20, element_bytes: 4, root: 0, counts: None };
/// // 2 (n - 1) x = 6 x 4 MiB over 4 PEs x 128 GB/s, plus a hop and an injection.
/// let bound = lower_bound(&system, &call);
/// assert_eq!(bound.ns, 6.0 * 4194304.0 / 512.0 + 500.0 + 10.0);
/// assert_eq!(bound.limit, Limit::AllRegions { region: Region::Pe, flow: Flow::Out });
/// ```
pub fn lower_bound(system: &System, call: &CallShape<'_>) -> TimeBound {
    let n = call.ranks.len();
    let mut best = TimeBound { ns: 0.0, limit: Limit::Nothing };
    if n < 2 || call.elements == 0 {
        return best;
    }
    if matches!(call.collective, Collective::Broadcast | Collective::Reduce) {
        assert!(call.root < n, "root {} is not a rank: expected 0..{n}", call.root);
    }
    let element_bytes = call.element_bytes as f64;
    let chunks: Vec<f64> =
        (0..n).map(|q| chunk_range(call.elements, q, n).map_or(0.0, |r| r.len() as f64 * element_bytes)).collect();
    // Summed once: every region's needs read it, and a region per rank would make summing it there
    // quadratic in the ranks.
    let all_chunks: f64 = chunks.iter().sum();
    let mut consider = |ns: f64, limit: Limit| {
        if ns > best.ns {
            best = TimeBound { ns, limit };
        }
    };
    for region in Region::ALL {
        let Regions { ranks, groups } = regions(system, call.ranks, region);
        let (mut capacity, mut latency, mut total_out, mut total_in) = (0.0, f64::INFINITY, 0.0, 0.0);
        for group in &groups {
            let (out, into) = needs(call, &chunks, all_chunks, &ranks[group.ranks.clone()]);
            if group.capacity_gbps > 0.0 {
                for (bytes, flow) in [(out, Flow::Out), (into, Flow::In)] {
                    if bytes > 0.0 {
                        consider(group.latency_ns + bytes / group.capacity_gbps, Limit::Region { region, flow });
                    }
                }
            }
            capacity += group.capacity_gbps;
            latency = f64::min(latency, group.latency_ns);
            total_out += out;
            total_in += into;
        }
        // Only where PEs alone reduce: a switch that computes holds partial results outside every
        // region but a node.
        let switch_reduces = system.multicast_switch().is_some() && region != Region::Node;
        if call.collective == Collective::AllReduce && !switch_reduces {
            let gossip = 2.0 * (groups.len() as f64 - 1.0) * call.elements as f64 * element_bytes;
            (total_out, total_in) = (gossip, gossip);
        }
        if capacity > 0.0 {
            for (bytes, flow) in [(total_out, Flow::Out), (total_in, Flow::In)] {
                if bytes > 0.0 {
                    consider(latency + bytes / capacity, Limit::AllRegions { region, flow });
                }
            }
        }
    }
    consider(farthest_pair_ns(system, call, &chunks), Limit::Latency);
    if best.limit != Limit::Nothing {
        best.ns += system.pe_spec().injection_ns;
    }
    best
}

/// One region's ranks (where they are in [`Regions::ranks`]), and its border: the bandwidth of the
/// channels leaving it and their smallest latency.
struct Group {
    ranks: Range<usize>,
    capacity_gbps: f64,
    latency_ns: f64,
}

/// The regions of one kind that hold ranks: every rank, region by region (each region's in rank
/// order), and the regions.
#[derive(Default)]
struct Regions {
    ranks: Vec<usize>,
    groups: Vec<Group>,
}

/// The regions of one kind that hold ranks, in the order of their keys.
fn regions(system: &System, ranks: &[PeId], region: Region) -> Regions {
    let sips = system.sips() as u32;
    if region == Region::HalfTheSips && sips < 3 {
        // Two SIPs' halves are the SIPs themselves.
        return Regions::default();
    }
    if region == Region::Node && system.nodes() < 2 {
        // One node is the whole system: nothing leaves it.
        return Regions::default();
    }
    let key = |pe: PeId| match region {
        Region::Pe => (pe.sip, pe.cube, pe.pe),
        Region::Cube => (pe.sip, pe.cube, 0),
        Region::Sip => (pe.sip, 0, 0),
        Region::HalfTheSips => (u32::from(pe.sip >= sips / 2), 0, 0),
        Region::Node => (system.node_of(pe.sip), 0, 0),
    };
    // Sorted by key, then rank: ranks usually come in the order of their PEs, so already sorted,
    // which the sort sees in one pass, where a map of regions would look each rank up.
    let mut keyed: Vec<((u32, u32, u32), usize)> =
        ranks.iter().enumerate().map(|(rank, &pe)| (key(pe), rank)).collect();
    keyed.sort_unstable();
    let mut start = 0;
    let groups = keyed
        .chunk_by(|x, y| x.0 == y.0)
        .map(|members| {
            let ((a, b, c), ranks) = (members[0].0, start..start + members.len());
            start = ranks.end;
            let border = match region {
                Region::Pe => system.fan_out(Node::Pe(PeId::new(a, b, c))),
                Region::Cube => leaving(system.fan_out(Node::Pe(PeId::new(a, b, 0))), LinkClass::InterCube),
                Region::Sip => leaving(system.fan_out(Node::Pe(PeId::new(a, 0, 0))), LinkClass::InterSip),
                Region::HalfTheSips => {
                    let (sips, half) =
                        (sips as usize, if a == 0 { sips as usize / 2 } else { sips.div_ceil(2) as usize });
                    let links = match system.interconnect() {
                        SipInterconnect::Ring => 2,
                        SipInterconnect::FullyConnected => half * (sips - half),
                        SipInterconnect::Switched => half,
                    };
                    let mut border = [0; LinkClass::ALL.len()];
                    border[LinkClass::InterSip as usize] = links;
                    border
                }
                Region::Node => {
                    // Each NIC's link to the network switch; its link to the node's switch is inside.
                    let mut border = [0; LinkClass::ALL.len()];
                    border[LinkClass::InterNode as usize] = (0..system.nics_per_node() as u32)
                        .map(|rail| system.fan_out(Node::Nic { node: a, rail })[LinkClass::InterNode as usize])
                        .sum();
                    border
                }
            };
            let (capacity_gbps, latency_ns) = LinkClass::ALL
                .into_iter()
                .filter(|&class| border[class as usize] > 0)
                .map(|class| {
                    (border[class as usize] as f64 * system.link(class).bandwidth_gbps, system.link(class).latency_ns)
                })
                .fold((0.0, f64::INFINITY), |(c, l), (bw, lat)| (c + bw, f64::min(l, lat)));
            Group { ranks, capacity_gbps, latency_ns }
        })
        .collect();
    Regions { ranks: keyed.into_iter().map(|(_, rank)| rank).collect(), groups }
}

/// A node's channels of `class` and farther-reaching ones: those that leave its cube (from
/// `InterCube`) or its SIP (`InterSip`), when the node is where they attach.
fn leaving(mut fan_out: [usize; LinkClass::ALL.len()], class: LinkClass) -> [usize; LinkClass::ALL.len()] {
    for closer in LinkClass::ALL.into_iter().filter(|&c| c < class) {
        fan_out[closer as usize] = 0;
    }
    fan_out
}

/// The bytes that must leave and enter a region holding `members` (the table of the module docs);
/// `all_chunks` is the sum of `chunks`.
fn needs(call: &CallShape<'_>, chunks: &[f64], all_chunks: f64, members: &[usize]) -> (f64, f64) {
    let n = call.ranks.len();
    let (inside, outside) = (members.len() as f64, (n - members.len()) as f64);
    if members.is_empty() || members.len() == n {
        return (0.0, 0.0);
    }
    let x = call.elements as f64 * call.element_bytes as f64;
    let own: f64 = members.iter().map(|&q| chunks[q]).sum();
    let others = all_chunks - own;
    let has_root = members.contains(&call.root);
    if let Some(counts) = call.counts.filter(|_| call.collective.takes_counts()) {
        let mut inside = vec![false; n];
        members.iter().for_each(|&m| inside[m] = true);
        let (mut out, mut into) = (0, 0);
        for &m in members {
            for q in (0..n).filter(|&q| !inside[q]) {
                out += counts.count(m, q);
                into += counts.count(q, m);
            }
        }
        let bytes = |elements: usize| elements as f64 * call.element_bytes as f64;
        return (bytes(out), bytes(into));
    }
    match call.collective {
        Collective::AllReduce => (x, x),
        Collective::AllGather => (inside * x, outside * x),
        Collective::ReduceScatter => (others, own),
        Collective::AllToAll => (inside * others, outside * own),
        // Without counts, nothing is known to move.
        Collective::AllToAllV | Collective::SendRecv => (0.0, 0.0),
        Collective::Broadcast if has_root => (x, 0.0),
        Collective::Broadcast => (0.0, x),
        Collective::Reduce if has_root => (0.0, x),
        Collective::Reduce => (x, 0.0),
    }
}

/// The route latency of the farthest pair of ranks where the second needs data of the first, by a
/// double sweep (see the module docs).
fn farthest_pair_ns(system: &System, call: &CallShape<'_>, chunks: &[f64]) -> f64 {
    let ranks = call.ranks;
    let latency = |from: usize, to: usize| system.route_latency_ns(ranks[from], ranks[to]);
    let farthest = |candidates: &mut dyn Iterator<Item = usize>, distance: &dyn Fn(usize) -> f64| {
        candidates.map(|r| (distance(r), r)).fold((0.0, 0), |best, next| if next.0 > best.0 { next } else { best })
    };
    let all = || 0..ranks.len();
    if let Some(counts) = call.counts.filter(|_| call.collective.takes_counts()) {
        let pairs = all().flat_map(|p| all().map(move |q| (p, q)));
        return pairs
            .filter(|&(p, q)| p != q && counts.count(p, q) > 0)
            .map(|(p, q)| latency(p, q))
            .fold(0.0, f64::max);
    }
    match call.collective {
        Collective::Broadcast => farthest(&mut all(), &|q| latency(call.root, q)).0,
        Collective::Reduce => farthest(&mut all(), &|p| latency(p, call.root)).0,
        collective => {
            let needs_data =
                |q: usize| matches!(collective, Collective::AllReduce | Collective::AllGather) || chunks[q] > 0.0;
            let (first, receiver) = farthest(&mut all().filter(|&q| needs_data(q)), &|q| latency(0, q));
            let (second, sender) = farthest(&mut all(), &|p| latency(p, receiver));
            let (third, _) = farthest(&mut all().filter(|&q| needs_data(q)), &|q| latency(sender, q));
            first.max(second).max(third)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::counts::Transfer;
    use crate::machine::{test_nodes, test_system};

    const O: f64 = 10.0;
    /// 4 MiB of f32: a rank's input in the bandwidth cases.
    const X: f64 = 4194304.0;

    fn leaders(system: &System) -> Vec<PeId> {
        (0..system.sips() as u32).map(|sip| PeId::new(sip, 0, 0)).collect()
    }

    #[test]
    fn exchanges_by_counts_need_what_their_counts_send() {
        let system = System::shape(4, 1, 1, 1).unwrap();
        let ranks = leaders(&system);
        // nccl-tests' shift of 4 MiB: each PE sends its input over its two 64 GB/s channels.
        let shift = Counts::shift(4, 1 << 20);
        let call = |collective, counts| CallShape {
            collective,
            ranks: &ranks,
            elements: 1 << 20,
            element_bytes: 4,
            root: 0,
            counts: Some(counts),
        };
        let got = lower_bound(&system, &call(Collective::SendRecv, &shift));
        assert_eq!(got.ns, X / 128.0 + 500.0 + O);
        // Nothing sent but rank 0's 4 MiB to rank 2, two hops away: what one PE's channels carry, plus
        // one hop; the latency bound of the two hops is lower.
        let one = Counts::from_transfers(4, &[Transfer { from: 0, to: 2, count: 1 << 20 }]).unwrap();
        let got = lower_bound(&system, &call(Collective::AllToAllV, &one));
        assert_eq!(got.ns, X / 128.0 + 500.0 + O);
        let none = Counts::from_transfers(4, &[]).unwrap();
        assert_eq!(lower_bound(&system, &call(Collective::AllToAllV, &none)).limit, Limit::Nothing);
    }

    fn bound(system: &System, collective: Collective, ranks: &[PeId], elements: usize, root: usize) -> TimeBound {
        lower_bound(system, &CallShape { collective, ranks, elements, element_bytes: 4, root, counts: None })
    }

    /// 4 SIPs of one PE on a ring, built-in links: every PE (and SIP) has two 64 GB/s channels out,
    /// 500 ns each; half the SIPs have two between them.
    #[test]
    fn per_pe_bounds_on_a_ring_of_four_match_hand_computed_values() {
        let system = System::shape(4, 1, 1, 1).unwrap();
        let ranks = leaders(&system);
        let (pe, hop) = (128.0, 500.0 + O);
        let region = |region, flow| Limit::Region { region, flow };
        let cases = [
            // 2 (n-1) x over every PE's 128 GB/s: 6 x / 512.
            (Collective::AllReduce, 0, 6.0 * X / 512.0, Limit::AllRegions { region: Region::Pe, flow: Flow::Out }),
            // Each PE receives the other three contributions of x.
            (Collective::AllGather, 0, 3.0 * X / pe, region(Region::Pe, Flow::In)),
            // Each PE sends three chunks of x / 4.
            (Collective::ReduceScatter, 0, 0.75 * X / pe, region(Region::Pe, Flow::Out)),
            // Every PE but the root receives x and the root sends it: rank 0's receiving is seen first.
            (Collective::Broadcast, 1, X / pe, region(Region::Pe, Flow::In)),
            (Collective::Reduce, 2, X / pe, region(Region::Pe, Flow::Out)),
        ];
        for (collective, root, ns, limit) in cases {
            let got = bound(&system, collective, &ranks, 1 << 20, root);
            assert_eq!((got.ns, got.limit), (ns + hop, limit), "{collective}");
        }
    }

    #[test]
    fn all_to_all_on_a_ring_is_bound_by_its_bisection() {
        // Each half sends its two ranks' blocks for the other half, 2 x 2 x (x / 4) = x, over the two
        // links between the halves; a PE sends only 3 x / 4 over its two.
        let system = System::shape(4, 1, 1, 1).unwrap();
        let got = bound(&system, Collective::AllToAll, &leaders(&system), 1 << 20, 0);
        assert_eq!(got.ns, X / 128.0 + 500.0 + O);
        assert_eq!(got.limit, Limit::Region { region: Region::HalfTheSips, flow: Flow::Out });
    }

    #[test]
    fn all_to_all_behind_a_switch_is_bound_by_each_pe_s_one_link() {
        // 4 SIPs of one PE, each with one 64 GB/s channel to the switch: a PE sends three blocks of
        // x / 4 over it, where half the SIPs send x over their two.
        let system = test_system(4, (1, 1), 1, SipInterconnect::Switched);
        let got = bound(&system, Collective::AllToAll, &leaders(&system), 1 << 20, 0);
        assert_eq!(got.ns, 0.75 * X / 64.0 + 500.0 + O);
        assert_eq!(got.limit, Limit::Region { region: Region::Pe, flow: Flow::Out });
    }

    #[test]
    fn every_pe_of_two_sips_is_bound_by_the_one_link_between_them() {
        // 2 SIPs x 2 cubes x 2 PEs, all eight ranks: a cube's PEs share one 256 GB/s link, its cubes
        // one 128 GB/s NoC link, the SIPs one 64 GB/s UCIe link. Each SIP must send its partial sum
        // of x over that link: x / 64, where every PE's channels together allow 14 x / 2688 and every
        // cube's 6 x / 640.
        let system = System::shape(2, 2, 1, 2).unwrap();
        let ranks: Vec<PeId> = system.all_pes().collect();
        let got = bound(&system, Collective::AllReduce, &ranks, 1 << 20, 0);
        assert_eq!(got.ns, X / 64.0 + 500.0 + O);
        assert_eq!(got.limit, Limit::Region { region: Region::Sip, flow: Flow::Out });
    }

    #[test]
    fn small_calls_are_bound_by_the_farthest_pair() {
        // One element: the bandwidth terms are a few ns, the route from SIP 0 to SIP 2 two hops.
        let system = System::shape(4, 1, 1, 1).unwrap();
        let ranks = leaders(&system);
        for collective in Collective::ALL {
            let got = bound(&system, collective, &ranks, 1, 0);
            assert_eq!((got.ns, got.limit), (1000.0 + O, Limit::Latency), "{collective}");
        }
        // Reduce-scatter of one element over the ranks of SIPs 0 and 1: only rank 0's chunk holds
        // it, so the one route that counts, into rank 0, is one hop, and rank 0 receiving its 4 bytes
        // over the channels into it takes a little longer.
        let got = bound(&system, Collective::ReduceScatter, &ranks[..2], 1, 0);
        assert_eq!(
            (got.ns, got.limit),
            (4.0 / 128.0 + 500.0 + O, Limit::Region { region: Region::Pe, flow: Flow::In })
        );
    }

    #[test]
    fn nothing_must_move_for_one_rank_or_no_elements() {
        let system = System::shape(4, 1, 1, 1).unwrap();
        let ranks = leaders(&system);
        assert_eq!(bound(&system, Collective::AllReduce, &ranks[..1], 1 << 20, 0).limit, Limit::Nothing);
        assert_eq!(bound(&system, Collective::AllGather, &ranks, 0, 0).ns, 0.0);
    }

    fn route_ns(system: &System, a: PeId, b: PeId) -> f64 {
        system.route(a, b).channels.iter().map(|c| system.link(c.class).latency_ns).sum()
    }

    /// The systems the latency tests try: 5 SIPs on each interconnect, and 3 nodes of 2 SIPs.
    fn latency_systems() -> Vec<System> {
        let interconnects = [SipInterconnect::Ring, SipInterconnect::FullyConnected, SipInterconnect::Switched];
        let mut systems: Vec<System> = interconnects.map(|i| test_system(5, (3, 2), 3, i)).into();
        systems.push(test_nodes(3, 2, 2, (3, 1), 3));
        systems
    }

    #[test]
    fn routes_are_least_latency_so_relaying_never_beats_them() {
        for system in latency_systems() {
            let pes: Vec<PeId> = system.all_pes().step_by(7).collect();
            let shape = system.describe();
            for &a in &pes {
                for &b in &pes {
                    // Every rail's route between two PEs takes as long: channel 0's stands for all.
                    let rails: Vec<f64> = (0..system.nics_per_node().max(1))
                        .map(|c| {
                            system.route_on(a, b, c).channels.iter().map(|ch| system.link(ch.class).latency_ns).sum()
                        })
                        .collect();
                    assert!(rails.iter().all(|&ns| ns == rails[0]), "{a} -> {b} on {shape}: {rails:?}");
                    for &via in &pes {
                        let (direct, relayed) =
                            (route_ns(&system, a, b), route_ns(&system, a, via) + route_ns(&system, via, b));
                        assert!(direct <= relayed, "{a} -> {b}: {direct} ns, {relayed} ns via {via} on {shape}");
                    }
                }
            }
        }
    }

    #[test]
    fn the_double_sweep_finds_the_diameter() {
        for system in latency_systems() {
            let shape = system.describe();
            let ranks: Vec<PeId> = system.all_pes().collect();
            let diameter = ranks
                .iter()
                .flat_map(|&a| ranks.iter().map(move |&b| (a, b)))
                .map(|(a, b)| route_ns(&system, a, b))
                .fold(0.0, f64::max);
            let call = CallShape {
                collective: Collective::AllGather,
                ranks: &ranks,
                elements: 1,
                element_bytes: 4,
                root: 0,
                counts: None,
            };
            assert_eq!(farthest_pair_ns(&system, &call, &[4.0; 90]), diameter, "{shape}");
        }
    }

    #[test]
    fn a_switch_that_reduces_lowers_the_all_reduce_bound_to_one_crossing_each_way() {
        // 8 SIPs of one PE behind a switch, 64 GB/s and 500 ns a link: PEs alone must gossip,
        // 2 (n-1) x over the 8 links up, 14 x / 512; with the switch reducing, each PE's x up (and
        // down) once over its own link, x / 64.
        let json = r#"{"sips": 8, "mesh": {"w": 1, "h": 1}, "pes_per_cube": 1, "sip_interconnect": "switched"}"#;
        let plain = System::from_json_str(json).unwrap();
        let got = bound(&plain, Collective::AllReduce, &leaders(&plain), 1 << 20, 0);
        assert_eq!(
            (got.ns, got.limit),
            (14.0 * X / 512.0 + 500.0 + O, Limit::AllRegions { region: Region::Pe, flow: Flow::Out })
        );
        let nvls = r#"{"sips": 8, "mesh": {"w": 1, "h": 1}, "pes_per_cube": 1, "sip_interconnect": "switched",
                       "switch": {"multicast": true, "reduce_gbps": 100}}"#;
        let computing = System::from_json_str(nvls).unwrap();
        let got = bound(&computing, Collective::AllReduce, &leaders(&computing), 1 << 20, 0);
        assert_eq!(got.ns, X / 64.0 + 500.0 + O);
        // A switch that only forwards leaves the bound as it was.
        let forwarding = System::from_json_str(&nvls.replace("true", "false")).unwrap();
        assert_eq!(
            bound(&forwarding, Collective::AllReduce, &leaders(&forwarding), 1 << 20, 0),
            bound(&plain, Collective::AllReduce, &leaders(&plain), 1 << 20, 0)
        );
    }

    #[test]
    fn the_nics_of_a_node_bound_what_must_leave_it() {
        // 2 nodes of 4 SIPs of one PE, 2 NICs of 10 GB/s, 1000 ns each: node 0 must send its partial
        // sum of x over its 20 GB/s of NICs, where every PE's one 64 GB/s channel allows 14 x / 512.
        let json = r#"{"sips": 8, "mesh": {"w": 1, "h": 1}, "pes_per_cube": 1, "sip_interconnect": "switched",
                       "nodes": {"sips_per_node": 4, "nics_per_node": 2, "nic": {"latency_ns": 1000, "bandwidth_gbps": 10}}}"#;
        let system = System::from_json_str(json).unwrap();
        let got = bound(&system, Collective::AllReduce, &leaders(&system), 1 << 20, 0);
        assert_eq!(got.ns, X / 20.0 + 1000.0 + O);
        assert_eq!(got.limit, Limit::Region { region: Region::Node, flow: Flow::Out });
        // With one node the same SIPs have no NIC border, and their own links bound the call.
        let one_node = System::from_json_str(&json.replace("\"sips\": 8", "\"sips\": 4")).unwrap();
        let got = bound(&one_node, Collective::AllReduce, &leaders(&one_node), 1 << 20, 0);
        assert_ne!(got.limit, Limit::Region { region: Region::Node, flow: Flow::Out });
    }
}
