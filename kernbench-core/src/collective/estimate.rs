//! Estimates of what a call will cost before it runs, its peak memory and its messages, so that a call
//! that cannot fit or would run for hours is refused before anything is allocated. Uses
//! [`plan`](crate::plan) (a call's install plan); a caller with a registry's algorithm passes its kernel's
//! name and parameters.
//!
//! # Peak memory
//!
//! [`peak_memory`] counts what a call keeps alive at once (measured with `/usr/bin/time -v` on release
//! builds of `kernbench run COLLECTIVE --bytes SIZE`, 4 SIPs of the built-in system, f32, allocator set
//! up by `kernbench-sim`'s `keep_freed_memory`):
//!
//! ```text
//! collective       size  inputs I  outputs O  reference R  peak RSS   peak - (I + O + R)
//! all_reduce       512M  2048M     2048M      512M         5188M      0.28 I
//! all_reduce       128M   512M      512M      128M         1300M      0.29 I
//! all_gather        64M    64M      256M       64M          725M      1.33 O
//! broadcast         64M   256M      256M        0M          836M      1.27 O
//! all_to_all        64M   256M      256M       64M          901M      1.27 O
//! reduce_scatter    64M   256M       64M       64M          548M      0.64 I
//! reduce            64M   256M       64M       64M          452M      0.27 I
//! ```
//!
//! `I` is every rank's input, `O` every rank's output (for reduce, only the root's is new), `R` the
//! postcondition's reference (one reduced rank for the reductions, the gathered tensor once for
//! all-gather, one rank's blocks at a time for all-to-all, nothing for broadcast, whose reference
//! shares the root's input). The rest is messages in flight, the kernels' working copies and the
//! allocator's slack: at most 3/4 of `I` for the reducing collectives and 3/2 of `O` for the ones that
//! forward data, plus a fixed 64 MiB (a tiny run peaks at 5 MB). The estimate is an upper bound on
//! these measurements, not a prediction of each one.
//!
//! A timing-only call's tiles carry no data, so its peak follows its ranks, lanes, queues, routes and
//! messages instead ([`timing_only_memory`] of a [`RunSize`]). Peak RSS of `kernbench run
//! --timing-only` on the built-in system or `configs/systems/ring16.json` with more SIPs and PEs
//! (release build, mimalloc; the 4,096-SIP hierarchical run with `--max-memory`, as its estimate is
//! more than a 24 GiB machine has free; the 16,384-SIP ring takes 16 minutes):
//!
//! ```text
//! algorithm               system                ranks     lanes     queues    hops     messages  peak    estimate
//! ring (1 MiB)            1024 SIPs x 1 PE      1024      4096      8192      8192     16.8M     0.03G   0.10G
//! bidirectional_ring      1024 SIPs x 1 PE      1024      4096      8192      8192     33.5M     0.04G   0.10G
//! ring (1 MiB)            4096 SIPs x 1 PE      4096      16384     32768     32768    268.4M    0.08G   0.22G
//! ring (1 MiB)            16384 SIPs x 1 PE     16384     65536     131072    131072   4294.7M   0.25G   0.68G
//! hierarchical_allreduce  16 SIPs x 16x16x16    65536     65536     139296    147424   262144    0.12G   0.16G
//! hierarchical_allreduce  256 SIPs x 16x16x16   1048576   1048576   2228736   2358784  4194304   1.34G   1.60G
//! hierarchical_allreduce  4096 SIPs x 16x16x16  16777216  16777216  35659776  37.7M    67.1M     21.04G  24.69G
//! pairwise_alltoall       512 SIPs x 1 PE       512       512       261632    33.6M    261632    0.43G   0.64G
//! pairwise_alltoall       1024 SIPs x 1 PE      1024      1024      1047552   268.4M   1047552   2.17G   4.32G
//! ```
//!
//! What each part holds: a rank, its PE's state, ports and buffers and its entries in the caller's
//! plan and layout (about 285 B); a lane, its state and task (about 230 B) beside its coroutine, whose
//! size is the kernel's ([`RunSize::state`]: 224 B for the hierarchical all-reduce, 592 B for the
//! ring); a queue, itself, its plan entry, port and route (about 140 B); a slot a message takes, 40 B
//! (one no message takes is never written); a hop, the route's entry as it is built (the all-to-alls
//! give about 8 B); a channel, its figures and first two bookings (64 B), and the bookings past those
//! in a list of its own (16 B each; each message books every channel its route crosses, and the
//! network model forgets old ones once a channel has more than 128: the rings, whose every channel
//! carries thousands of messages, hold about 128 a channel at their peaks); and what a kernel keeps
//! for the messages it sends (the rings keep nothing: a piece without data is cut again from its
//! part's shape when it is used, see [`Tl::timing_only`](crate::kernel::Tl::timing_only)). So 64 MiB,
//! 320 B a rank, 320 B a lane beside its coroutine, 160 B a queue, 48 B a slot a message takes, 16 B a
//! hop, 64 B a channel, 16 B a listed booking (room for 256 a channel, which a list grows to by
//! doubling where forgetting keeps up) and 16 B a message its kernel may keep ([`kept_messages`])
//! bound them, by 1.2 to 3x (the all-to-all's routes and the rings' lists are the loosest parts).
//!
//! # Messages
//!
//! [`messages`] counts the messages a call sends: its participants `N` times the most any one of them
//! sends, from the shipped kernels' schedules, with `c` the kernel's `chunks` and `l` its `lanes`
//! parameter (1 where it has none; the kernels clamp both to the data and the queue depth, so the
//! estimate is an upper bound) and `d = ceil(log2 N)`:
//!
//! ```text
//! kernel                                    messages a rank sends    in all, grows as
//! ring_allreduce                            2 (N - 1) c l            N^2
//! bidirectional_ring_allreduce              4 (N - 1) c l            N^2
//! ring_allgather, ring_reduce_scatter       (N - 1) c l              N^2
//! one_shot_allreduce, pairwise_alltoall     N - 1                    N^2
//! symmetric_one_shot_allreduce, symmetric_allgather, symmetric_alltoall
//!                                           N - 1 puts               N^2
//! symmetric_two_shot_allreduce              2 (N - 1) puts           N^2
//! chunk_ring_allreduce                      2 (N - 1) channels       N^2
//! chunk_hierarchical_allreduce              2 (N - 1)                N^2
//! chunk_alltoall, chunk_allgather_in_place  N - 1                    N^2
//!   (chunk programs: per slice of each chunk, 1 MiB for `Simple`)
//! hierarchical_all_to_all                   N + 1                    N^2
//! mesh_2d_allreduce                         2 (cols - 1) + 2 (rows - 1)  N^1.5 (mesh_2d_grid(N))
//! intercube_allreduce                       2 (S - 1) + 4, S SIPs    N S
//! recursive_doubling_*, recursive_halving_reduce_scatter, bruck_allgather, tree_broadcast
//!                                           d + 2                    N log N
//! rabenseifner_allreduce                    2 d + 2                  N log N
//! tree_allreduce                            3 c                      N
//! double_binary_tree_allreduce              6 c                      N
//! ring_broadcast, ring_reduce               128 c (pieces by size)   N
//! hierarchical_allreduce                    2 c (each piece up and down once)   N
//! nvls_allreduce                            2 c l (multimem ops)     N
//! nvls_allgather, nvls_reduce_scatter       c l                      N
//! nvls_tree_allreduce                       (N + 1) c l              N^2
//! any other kernel                          its plan neighbours (each at least once)
//! ```
//!
//! The rings, the direct exchanges and the 2-D mesh send more than linearly many messages in all: a
//! 1 KiB `ring` all-reduce (4 lanes of 2 pieces) on a ring of 4,096 SIPs sends about 2^28 messages,
//! where the same on 16 SIPs sends under 2,000. [`DEFAULT_MAX_MESSAGES`] bounds them.

use serde_json::{Map, Value};

use super::Collective;
use crate::kernel::Launch;
use crate::machine::System;
use crate::plan::{InstallPlan, mesh_2d_grid};

/// The fixed part of a run's peak: the process, its threads and the plan, with room to spare.
const FIXED_BYTES: u64 = 64 << 20;

/// The most messages a call that moves data may send unless its caller allows more (the facade's
/// `Communicator::max_messages`): 2^26, about 67 million, a long run at the simulator's message rate
/// (the README's Speed section). The shipped commands and tests send at most a few hundred thousand,
/// and the 4,096-SIP ring all-reduce of the [module docs](self) about 2^28. A timing-only call is
/// bounded by memory instead: [`timing_only_memory`] counts its messages.
pub const DEFAULT_MAX_MESSAGES: u64 = 1 << 26;

/// The estimated peak memory, in bytes, of one call of `collective` over `ranks` ranks that each
/// hold `input_bytes` bytes of input (see the [module docs](self) for the measurements behind it).
/// Saturates at `u64::MAX` rather than overflow.
///
/// # Examples
/// ```
/// use kernbench_core::Collective;
/// use kernbench_core::collective::estimate::peak_memory;
/// // 4 ranks of 512 MiB: 2 GiB in, 2 GiB out, 512 MiB of reference, 1.5 GiB in flight, 64 MiB.
/// assert_eq!(peak_memory(Collective::AllReduce, 4, 512 << 20), (6 << 30) + (64 << 20));
/// ```
pub fn peak_memory(collective: Collective, ranks: usize, input_bytes: u64) -> u64 {
    let n = ranks.max(1) as u64;
    let inputs = input_bytes.saturating_mul(n);
    let (outputs, reference) = match collective {
        Collective::AllReduce => (inputs, input_bytes),
        // Only the root writes its output; the others keep sharing their input's buffer.
        Collective::Reduce | Collective::ReduceScatter => (input_bytes, input_bytes),
        Collective::AllGather => (inputs.saturating_mul(n), inputs),
        Collective::Broadcast => (inputs, 0),
        Collective::AllToAll | Collective::AllToAllV | Collective::SendRecv => (inputs, input_bytes),
    };
    let in_flight = match collective {
        Collective::AllReduce | Collective::Reduce | Collective::ReduceScatter => (inputs / 4).saturating_mul(3),
        Collective::AllGather
        | Collective::Broadcast
        | Collective::AllToAll
        | Collective::AllToAllV
        | Collective::SendRecv => (outputs / 2).saturating_mul(3),
    };
    [inputs, outputs, reference, in_flight, FIXED_BYTES].into_iter().fold(0, u64::saturating_add)
}

/// What a timing-only call's run is made of, as [`timing_only_memory`] counts it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RunSize {
    /// Its participants.
    pub ranks: usize,
    /// Its lanes, every rank's added up: a coroutine and a lane's state each.
    pub lanes: u64,
    /// The bytes of one lane's coroutine: its kernel's state ([`Launch`]'s `state_bytes`), which
    /// every lane holds beside the lane's own state.
    pub state: u64,
    /// Its queues: each directed edge of its plan, on each of its channels (as many as the most lanes
    /// a rank runs).
    pub queues: u64,
    /// The slots its messages can take: a slot no message takes is never written and costs nothing,
    /// so at most one a message, and at least each queue's first (a run's messages go to every queue
    /// it has, and the first slots of neighbouring queues share pages), and no more than the queues
    /// have (the system's IPCQ depth a queue).
    pub slots: u64,
    /// The channels its queues' routes cross, added up over the queues.
    pub hops: u64,
    /// The distinct channels those routes cross, at most: no more than the hops, nor than the
    /// system has on each of the run's channels. The network model keeps each one's bookings.
    pub channels: u64,
    /// The messages it sends ([`messages`]).
    pub messages: u64,
    /// Those of its messages whose tiles its kernel may keep until it ends ([`kept_messages`]).
    pub kept: u64,
}

impl RunSize {
    /// The run of the kernel called `kernel`, started as `launch`, on `plan` (its plan on `system`),
    /// sending `messages`.
    pub fn of(kernel: &str, launch: &dyn Launch, plan: &InstallPlan, system: &System, messages: u64) -> RunSize {
        let ranks = plan.len();
        let (mut lanes, mut channels) = (0u64, 1u64);
        for rank in 0..ranks {
            let n = launch.lanes(rank, ranks).max(1) as u64;
            (lanes, channels) = (lanes + n, channels.max(n));
        }
        let edges = plan.participants().flat_map(|p| &p.neighbors);
        let (edges, hops) = edges.fold((0u64, 0u64), |(n, hops), e| (n + 1, hops + u64::from(e.hops)));
        let queues = edges.saturating_mul(channels);
        let slots = queues.saturating_mul(system.ipcq_depth() as u64).min(messages.max(queues));
        let hops = hops.saturating_mul(channels);
        let distinct = hops.min((system.channel_count() as u64).saturating_mul(channels));
        let state = launch.state_bytes() as u64;
        let kept = kept_messages(kernel, messages);
        RunSize { ranks, lanes, state, queues, slots, hops, channels: distinct, messages, kept }
    }
}

/// Of `messages` that the kernel called `kernel` sends, those whose tiles it may keep until it ends
/// ([`RunSize::kept`]): all of them, but none for the rings, which in a timing-only run keep each
/// ring's parts as a few numbers and make a piece's shape when they send or receive it (see
/// [`Tl::timing_only`](crate::kernel::Tl::timing_only)), and none for the hierarchical all-reduce,
/// which reduces what it receives into its pieces and receives its results in their place.
///
/// # Examples
/// ```
/// use kernbench_core::collective::estimate::kept_messages;
/// assert_eq!(kept_messages("ring_allreduce", 1 << 30), 0);
/// assert_eq!(kept_messages("pairwise_alltoall", 56), 56);
/// ```
pub fn kept_messages(kernel: &str, messages: u64) -> u64 {
    match kernel {
        "ring_allreduce"
        | "bidirectional_ring_allreduce"
        | "ring_allgather"
        | "ring_reduce_scatter"
        | "hierarchical_allreduce" => 0,
        _ => messages,
    }
}

/// The estimated peak memory, in bytes, of one timing-only call of `run`'s size, whatever the sizes of
/// its messages: its tiles carry no data, so what it holds grows with its PEs, lanes and queues (their
/// states, coroutines, slots and routes), the channels those routes cross (their bookings) and its
/// messages, not with its bytes. See the [module docs](self) for the measurements. Saturates at
/// `u64::MAX` rather than overflow.
///
/// # Examples
/// ```
/// use kernbench_core::collective::estimate::{RunSize, timing_only_memory};
/// // Any size of a call over 8 ranks of a lane and two queues each, with a thousand messages: about
/// // the fixed part.
/// let run =
///     RunSize { ranks: 8, lanes: 8, state: 256, queues: 16, slots: 64, hops: 16, channels: 16, messages: 1000, kept: 1000 };
/// assert!(timing_only_memory(&run) < 128 << 20);
/// ```
pub fn timing_only_memory(run: &RunSize) -> u64 {
    [
        FIXED_BYTES,
        (run.ranks as u64).saturating_mul(TIMING_ONLY_RANK_BYTES),
        run.lanes.saturating_mul(TIMING_ONLY_LANE_BYTES.saturating_add(run.state)),
        run.queues.saturating_mul(TIMING_ONLY_QUEUE_BYTES),
        run.slots.saturating_mul(TIMING_ONLY_SLOT_BYTES),
        run.hops.saturating_mul(TIMING_ONLY_HOP_BYTES),
        run.channels.saturating_mul(TIMING_ONLY_CHANNEL_BYTES),
        listed_bookings(run).saturating_mul(TIMING_ONLY_BOOKING_BYTES),
        run.kept.saturating_mul(TIMING_ONLY_MESSAGE_BYTES),
    ]
    .into_iter()
    .fold(0, u64::saturating_add)
}

/// What a timing-only run holds per rank, above the fixed part: a PE's state, ports and buffers, and
/// its entries in the plan and the tensor's layout that the caller holds (see the module docs for the
/// measurements behind these).
const TIMING_ONLY_RANK_BYTES: u64 = 320;

/// What it holds per lane beside the coroutine ([`RunSize::state`]): the lane's state, its task, and
/// the little its kernel allocates (a list of pieces).
const TIMING_ONLY_LANE_BYTES: u64 = 320;

/// What it holds per queue: the queue, its plan entry, port and route.
const TIMING_ONLY_QUEUE_BYTES: u64 = 160;

/// What it holds per slot a message takes: a message's record (40 B).
const TIMING_ONLY_SLOT_BYTES: u64 = 48;

/// What it holds per channel a queue's route crosses: the route's entry, as it is built.
const TIMING_ONLY_HOP_BYTES: u64 = 16;

/// What it holds per distinct channel: its bookings and figures, its first
/// [`CHANNEL_HELD_BOOKINGS`] bookings among them.
const TIMING_ONLY_CHANNEL_BYTES: u64 = 64;

/// The bookings a channel holds in place; more go to a list of their own (the network model's, in
/// `kernbench-sim`).
const CHANNEL_HELD_BOOKINGS: u64 = 2;

/// The room a channel's list of bookings takes, in bookings, where forgetting keeps up: the network
/// model forgets old bookings once a channel has more than 128, so a list doubles to room for 256
/// (the rings' peaks of the module docs hold about 128 a channel). A run whose forgetting frees too
/// little (one PE far behind the others holds back what may be forgotten) raises that bound and can
/// keep more.
const CHANNEL_LISTED_BOOKINGS: u64 = 256;

/// What a booking in a channel's list holds: its interval.
const TIMING_ONLY_BOOKING_BYTES: u64 = 16;

/// The bookings `run`'s channels hold in lists of their own: each message books every channel its
/// route crosses (a queue's hops, on average), a channel holds its first few in place, and forgetting
/// keeps its list to room for [`CHANNEL_LISTED_BOOKINGS`].
fn listed_bookings(run: &RunSize) -> u64 {
    let crossings = run.messages.saturating_mul(run.hops) / run.queues.max(1);
    let held = run.channels.saturating_mul(CHANNEL_HELD_BOOKINGS);
    crossings.saturating_sub(held).min(run.channels.saturating_mul(CHANNEL_LISTED_BOOKINGS))
}

/// What a timing-only run holds per message its kernel may keep ([`RunSize::kept`]) at most, above
/// the fixed part (see the module docs).
const TIMING_ONLY_MESSAGE_BYTES: u64 = 16;

/// The symmetric heap, in bytes, that one call of the kernel called `kernel` on `ranks` ranks of
/// `input_bytes` each allocates in all, beside [`peak_memory`]: every rank's copy of the buffers the one-sided kernels
/// declare (an inbox of every rank's input for the one-shot all-reduce and the all-gather, one part
/// per rank and the gathered result for the two-shot, a block per rank for the all-to-all); 0 for
/// kernels that declare none. Saturates at `u64::MAX` rather than overflow.
///
/// # Examples
/// ```
/// use kernbench_core::collective::estimate::symmetric_heap;
/// // 4 ranks, each an inbox of 4 inputs of 1 MiB.
/// assert_eq!(symmetric_heap("symmetric_one_shot_allreduce", 4, 1 << 20), 16 << 20);
/// assert_eq!(symmetric_heap("ring_allreduce", 4, 1 << 20), 0);
/// ```
pub fn symmetric_heap(kernel: &str, ranks: usize, input_bytes: u64) -> u64 {
    let n = ranks.max(1) as u64;
    let part = input_bytes.div_ceil(n);
    let per_rank = match kernel {
        "symmetric_one_shot_allreduce" | "symmetric_allgather" => n.saturating_mul(input_bytes),
        "symmetric_two_shot_allreduce" => n.saturating_mul(part).saturating_add(input_bytes),
        "symmetric_alltoall" => n.saturating_mul(part),
        _ => 0,
    };
    per_rank.saturating_mul(n)
}

/// The estimated number of messages one call of the kernel called `kernel`, with the parameters
/// `params`, sends on `plan` (its install plan on the system), whatever the size: the formula of the
/// kernel in the [module docs](self). Saturates at `u64::MAX` rather than overflow.
///
/// # Examples
/// ```
/// use kernbench_core::collective::estimate::messages;
/// use kernbench_core::{InstallPlan, System};
/// let plan = InstallPlan::build(&System::shape(16, 1, 1, 1).unwrap(), "ring_1d", "leader_only").unwrap();
/// let params = serde_json::json!({ "chunks": 2, "lanes": 4 });
/// // 16 ranks, each 2 (16 - 1) steps of 2 pieces on 4 lanes.
/// assert_eq!(messages("ring_allreduce", params.as_object().unwrap(), &plan), 16 * 2 * 15 * 2 * 4);
/// ```
pub fn messages(kernel: &str, params: &Map<String, Value>, plan: &InstallPlan) -> u64 {
    let n = plan.len() as u64;
    let param = |name: &str| params.get(name).and_then(Value::as_u64).unwrap_or(1).max(1);
    let (c, l) = (param("chunks"), param("lanes"));
    let steps = n.saturating_sub(1);
    let d = u64::from(n.max(1).next_power_of_two().trailing_zeros());
    let per_rank = match kernel {
        "ring_allreduce" => 2 * steps,
        "bidirectional_ring_allreduce" => 4 * steps,
        "ring_allgather" | "ring_reduce_scatter" => steps,
        "one_shot_allreduce" | "pairwise_alltoall" => steps,
        "symmetric_one_shot_allreduce" | "symmetric_allgather" | "symmetric_alltoall" => steps,
        "symmetric_two_shot_allreduce" => 2 * steps,
        "chunk_ring_allreduce" => 2 * steps * param("channels"),
        "chunk_hierarchical_allreduce" => 2 * steps,
        "chunk_alltoall" | "chunk_allgather_in_place" => steps,
        "hierarchical_all_to_all" => n + 1,
        "mesh_2d_allreduce" => {
            let (rows, cols) = mesh_2d_grid(plan.len().max(1));
            2 * (cols as u64 - 1) + 2 * (rows as u64 - 1)
        }
        "intercube_allreduce" => 2 * (plan.sips.len() as u64).saturating_sub(1) + 4,
        "recursive_doubling_allreduce"
        | "recursive_doubling_allgather"
        | "recursive_halving_reduce_scatter"
        | "bruck_allgather"
        | "tree_broadcast" => d + 2,
        "rabenseifner_allreduce" => 2 * d + 2,
        "tree_allreduce" => 3,
        "double_binary_tree_allreduce" => 6,
        // At least `chunks` pieces, and up to 128 for large data (`MAX_CHAIN_PIECES` of the kernels).
        "ring_broadcast" | "ring_reduce" => 128,
        // A multimem operation a piece (at most `chunks` a lane): a load and a store, or one of them.
        "nvls_allreduce" => 2,
        "nvls_allgather" | "nvls_reduce_scatter" => 1,
        // A load and a store a piece, and a message to each rail peer (at most every other rank).
        "nvls_tree_allreduce" => 2 + steps,
        // Every rank but the top leader gets each piece once going up and once coming down.
        "hierarchical_allreduce" => 2,
        _ => return plan.participants().map(|p| p.neighbors.len() as u64).fold(0, u64::saturating_add),
    };
    [n, per_rank, c, l].into_iter().fold(1, u64::saturating_mul)
}

/// `bytes` for people: in GiB, MiB or KiB with two decimals, or in bytes below 1 KiB.
///
/// # Examples
/// ```
/// use kernbench_core::collective::estimate::human;
/// assert_eq!(human(3 << 29), "1.50 GiB");
/// assert_eq!(human(512), "512 B");
/// ```
pub fn human(bytes: u64) -> String {
    const UNITS: [(u64, &str); 3] = [(1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")];
    match UNITS.iter().find(|&&(size, _)| bytes >= size) {
        Some(&(size, unit)) => format!("{:.2} {unit}", bytes as f64 / size as f64),
        None => format!("{bytes} B"),
    }
}
