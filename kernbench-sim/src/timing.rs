//! The timing model: simulated time for every PE and every physical channel of a run.
//!
//! Units are ns throughout, and bandwidths are GB/s = 1e9 bytes/s, so `bytes / GB/s` is ns.
//!
//! - A send costs its PE the injection overhead (`pe.injection_ns`), starting no earlier than the
//!   queue slot's credit is back. The message then crosses every channel of the route from sender to
//!   receiver (ring hops in a cube, mesh hops, SIP hops, and between nodes the NICs of the rail of
//!   the message's lane, as [`System::route_on`] gives it): each channel adds its latency and holds the
//!   message for `bytes / bandwidth`. With cut-through routing the head moves on after a hop's latency
//!   and the tail follows; with store-and-forward each hop waits for the whole message. A channel
//!   carries one message at a time, so two transfers on one channel in the same interval share it: the
//!   second starts when the first leaves. A channel keeps its bookings as intervals, so a message that
//!   is placed after another (a round later) but left earlier still takes the gap in front of it.
//! - A recv completes at the later of the PE's clock and the message's arrival; the slot's credit is
//!   back with the sender one route latency after that.
//! - Reductions cost `elements / compute rate`, loads and stores `bytes / memory rate`, at the spec's
//!   rates or a straggler's override.
//! - A barrier releases everyone at the latest arrival.
//! - Every kernel starts the call's launch time (`call.launch_ns`) and its protocol's base latency
//!   after the call; the `k`-th GPU a host thread drives (`RunOptions::gpus_per_thread`) `k` times
//!   `call.launch_per_gpu_ns` later; a straggler its start delay later still.
//!
//! - Lanes of one PE share its channels (above) and its engines (`pe.engines`): their injections,
//!   reductions, loads and stores are booked on the engine free first, each at its earliest free
//!   interval, so at most as many run at once as the PE has engines.
//!
//! Transfers of a round are placed on channels between rounds, in order of departure time (then
//! sender rank, queue, position), so the times are the same on one thread or many.
//!
//! # When a pipeline reaches the link's bound
//!
//! Sends do not block beyond credits and a transfer takes the link's time, not the sender's, so a
//! reduction overlaps the next transfer, transfers on different links overlap, and a link starts the
//! next message while the previous one's latency runs. A ring that keeps k messages of c bytes in
//! flight per link (k chunks of a segment in one lane, or one chunk in each of k lanes) never lets the
//! link idle when (k - 1) c/B >= alpha: the next message is ready before the link finishes the ones
//! queued. A credit is back alpha after its receive, so one queue streaming chunks also needs
//! (depth - 1) c/B >= 2 alpha (lanes each have their own queue). Then a ring all-reduce of S bytes on
//! N ranks takes its link bound 2(N-1)/N x S/B + alpha. Below S of about N x alpha x B every ring is
//! latency bound: 2(N-1) steps each pay alpha whatever the chunking.

use std::collections::BTreeMap;

use kernbench_core::route::Channel;
use kernbench_core::{Carriage, PeId, System};
use serde::{Deserialize, Serialize};
use smallvec::SmallVec;
use thin_vec::ThinVec;

use crate::error::RunError;
use crate::faults::{Fault, PeFaults};
use crate::protocol::prefetch;

/// How a message crosses a multi-hop route.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Routing {
    /// The head moves on after each hop's latency; the tail follows (wormhole / cut-through).
    #[default]
    CutThrough,
    /// Each hop receives the whole message before sending it on.
    StoreAndForward,
}

/// A PE that runs slower or starts late.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Straggler {
    /// Its reduction rate, in 1e9 elements per second, instead of the spec's.
    pub compute_gflops: Option<f64>,
    /// Its load/store rate, in GB/s, instead of the spec's.
    pub memory_gbps: Option<f64>,
    /// How late its kernel starts, in ns.
    pub start_delay_ns: f64,
}

/// The timing model's settings for a run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Timing {
    /// Cut-through or store-and-forward.
    pub routing: Routing,
    /// PEs that run slower or start late.
    pub stragglers: BTreeMap<PeId, Straggler>,
    /// Whether to record every operation and transfer as a span, for [`Trace`](crate::Trace).
    pub trace: bool,
    /// Links, NICs and PEs that slow down or fail from a time on. A slow channel carries what
    /// reaches it from the fault's time at `1 / F` of its bandwidth (its latency unchanged), and a
    /// slow PE takes `F` times as long for work it starts then (from time 0: a straggler whose
    /// rates are divided by `F` and whose injections take `F` times as long). A transfer that
    /// leaves after a channel on its route failed takes the shortest way round the failed ones
    /// ([`System::route_avoiding`]); where failed links cut its receiver off the run ends with
    /// [`RunError::Unreachable`], naming them, the ranks and the time (a transfer already on its
    /// way arrives). A PE whose kernel has not finished by its failure ends the run with
    /// [`RunError::PeFailed`]. Decided in simulated time, in the fixed order transfers are placed,
    /// so a faulted run is the same on any number of threads and processes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub faults: Vec<Fault>,
}

impl Timing {
    /// Checks every straggler against the ranges a system spec allows its rates and times: rates
    /// finite and at least [`System::MIN_RATE`], start delays from 0 to [`System::MAX_TIME_NS`], on a
    /// PE `system` has; and every fault ([`Fault::check`]). A run given a timing that fails this would
    /// end with [`RunError::NonFiniteTime`], or silently slow no PE.
    ///
    /// # Errors
    /// [`RunError::BadStraggler`] naming the first bad straggler's PE and field;
    /// [`RunError::BadFault`] naming the first bad fault.
    ///
    /// # Examples
    /// ```
    /// use kernbench_sim::{Straggler, Timing};
    /// use kernbench_core::{PeId, System};
    /// let system = System::shape(2, 1, 1, 1).unwrap();
    /// let slow = Straggler { compute_gflops: Some(0.0), ..Straggler::default() };
    /// let timing = Timing { stragglers: [(PeId::new(1, 0, 0), slow)].into(), ..Timing::default() };
    /// let error = timing.check(&system).unwrap_err();
    /// assert!(error.to_string().contains("(sip 1, cube 0, pe 0): compute_gflops is 0"), "{error}");
    /// ```
    pub fn check(&self, system: &System) -> Result<(), RunError> {
        for (&pe, straggler) in &self.stragglers {
            let bad = |field, value: f64, expected: String| {
                Err(RunError::BadStraggler { pe, field, value: format!("{value:?}"), expected })
            };
            if !system.contains(pe) {
                return Err(RunError::BadStraggler {
                    pe,
                    field: "pe",
                    value: "not in the system".to_owned(),
                    expected: format!("a PE of {}", system.describe()),
                });
            }
            let rates = [("compute_gflops", straggler.compute_gflops), ("memory_gbps", straggler.memory_gbps)];
            for (field, rate) in rates {
                if let Some(rate) = rate.filter(|&r| !(r.is_finite() && r >= System::MIN_RATE)) {
                    let expected = format!("a finite number of at least {} (1e9 units per second)", System::MIN_RATE);
                    return bad(field, rate, expected);
                }
            }
            let delay = straggler.start_delay_ns;
            if !(0.0..=System::MAX_TIME_NS).contains(&delay) {
                return bad("start_delay_ns", delay, format!("a number of ns from 0 to {:e}", System::MAX_TIME_NS));
            }
        }
        // The network numbers the faults that strike a channel in 16 bits.
        if self.faults.len() > usize::from(u16::MAX) {
            let (fault, why) = (format!("{} faults", self.faults.len()), format!("expected at most {}", u16::MAX));
            return Err(RunError::BadFault { fault, why });
        }
        self.faults.iter().try_for_each(|fault| fault.check(system))
    }
}

/// What a span of a PE's or a channel's time was spent on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SpanKind {
    /// Injecting a message.
    Send,
    /// Waiting for a message to arrive.
    Recv,
    /// Waiting for a credit to send.
    CreditWait,
    /// Waiting for the PE's compute, busy with another lane's work.
    ComputeWait,
    /// A reduction.
    Reduce,
    /// A load or store.
    Memory,
    /// Waiting at a barrier.
    Barrier,
    /// Waiting for a signal to be raised, or for the lane's puts to land.
    SignalWait,
    /// Before the kernel starts: the call's launch, and a straggler's late start.
    Delay,
    /// A channel carrying a message.
    Transfer,
}

/// One span of simulated time.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Span {
    /// What the time went to.
    pub kind: SpanKind,
    /// Start, ns.
    pub start_ns: f64,
    /// End, ns.
    pub end_ns: f64,
    /// Bytes involved (messages, reductions, loads and stores).
    pub bytes: u64,
}

/// One PE's simulated time, or one lane's.
///
/// A PE that runs one lane has its figures and spans here and no `lanes`. A PE that runs several has
/// one entry per lane in `lanes`, and here their sums (busy, blocked: lane-ns), its last lane's finish,
/// and no spans of its own.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PeTime {
    /// When its kernel (its last lane) finished, ns.
    pub finish_ns: f64,
    /// Time spent working: injecting messages, reducing, loading and storing.
    pub busy_ns: f64,
    /// Time spent waiting: for messages, credits, the PE's compute or a barrier.
    pub blocked_ns: f64,
    /// Time before its kernel started and after it finished, up to the end of the run.
    pub idle_ns: f64,
    /// Its spans, when the run was traced.
    pub spans: ThinVec<Span>,
    /// Each lane's time, in lane order, when the PE runs several (empty when it runs one).
    #[serde(default)]
    pub lanes: ThinVec<PeTime>,
}

impl PeTime {
    /// The time of a PE that ran several `lanes` (in lane order).
    pub(crate) fn of_lanes(lanes: ThinVec<PeTime>) -> PeTime {
        let mut pe = PeTime { finish_ns: f64::NEG_INFINITY, idle_ns: f64::INFINITY, ..PeTime::default() };
        for lane in &lanes {
            pe.finish_ns = pe.finish_ns.max(lane.finish_ns);
            pe.idle_ns = pe.idle_ns.min(lane.idle_ns);
            pe.busy_ns += lane.busy_ns;
            pe.blocked_ns += lane.blocked_ns;
        }
        pe.lanes = lanes;
        pe
    }
}

/// One physical channel's use.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ChannelTime {
    /// The channel.
    pub channel: Channel,
    /// Bytes it carried.
    pub bytes: u64,
    /// Time it was carrying data, ns.
    pub busy_ns: f64,
    /// `busy_ns` over the run's simulated time.
    pub utilization: f64,
    /// Its transfers, when the run was traced.
    pub spans: ThinVec<Span>,
}

/// The simulated time of a run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TimeReport {
    /// When the last kernel finished, ns.
    pub completion_ns: f64,
    /// Per participating PE, in rank order.
    pub pes: Vec<PeTime>,
    /// Every channel that carried data; its bytes are what the wire carried (a protocol's lines with
    /// their flags).
    pub channels: Vec<ChannelTime>,
    /// The protocol the messages were carried by, or `None`: as data.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<kernbench_core::Protocol>,
}

/// What a PE's work and sends cost it. Every PE of a run has the same rates but a straggler, so the
/// run holds them once and a straggler its own, not every lane's clock.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct Rates {
    pub(crate) ns_per_element: f64,
    pub(crate) ns_per_byte: f64,
    pub(crate) injection_ns: f64,
    /// Per byte a lane sends, the protocol's lane cap (0: none).
    pub(crate) lane_ns_per_byte: f64,
}

impl Rates {
    /// The rates of `pe` under `timing`, of a PE that is no straggler for `None` (zero without timing:
    /// a clock that never moves spends none).
    pub(crate) fn of(system: &System, timing: Option<&Timing>, carriage: &Carriage, pe: Option<PeId>) -> Rates {
        let Some(timing) = timing else { return Rates::default() };
        let spec = system.pe_spec();
        let straggler = pe.and_then(|pe| timing.stragglers.get(&pe)).copied().unwrap_or_default();
        Rates {
            ns_per_element: 1.0 / straggler.compute_gflops.unwrap_or(spec.compute_gflops),
            ns_per_byte: 1.0 / straggler.memory_gbps.unwrap_or(spec.memory_gbps),
            injection_ns: spec.injection_ns,
            lane_ns_per_byte: carriage.lane_ns_per_byte,
        }
    }

    /// What handing `bytes` to the network costs a lane: the injection overhead, and the bytes at the
    /// protocol's lane cap.
    pub(crate) fn injection(&self, bytes: u64) -> f64 {
        self.injection_ns + bytes as f64 * self.lane_ns_per_byte
    }
}

/// A lane's clock during a run.
#[derive(Clone, Debug, Default)]
pub(crate) struct Clock {
    pub(crate) on: bool,
    pub(crate) now: f64,
    pub(crate) busy: f64,
    pub(crate) blocked: f64,
    pub(crate) start_delay: f64,
    /// The lane's spans when the run is traced, and its PE's faults: one word for both, so that a lane
    /// with neither (a million of them in a large run) holds no more.
    rare: Option<Box<ClockRare>>,
}

/// What few clocks have: [`Clock`]'s rare part.
#[derive(Clone, Debug, Default)]
struct ClockRare {
    /// The lane's spans, when the run is traced.
    spans: Option<ThinVec<Span>>,
    /// The faults of its PE, if it has any.
    faults: Option<PeFaults>,
}

impl Clock {
    /// The clock of `pe` under `timing` (`None`: a clock that never moves).
    pub(crate) fn new(
        system: &System,
        timing: Option<&Timing>,
        carriage: &Carriage,
        pe: PeId,
        gpus_per_thread: usize,
    ) -> Clock {
        let Some(timing) = timing else { return Clock::default() };
        let straggler = timing.stragglers.get(&pe).copied().unwrap_or_default();
        // Every kernel starts after the call's launch and its protocol's base latency, later on each
        // further GPU its thread launches on, a straggler's later still.
        let call = system.call_spec();
        let launched_before = (pe.sip as usize % gpus_per_thread.max(1)) as f64;
        let start_delay =
            call.launch_ns + launched_before * call.launch_per_gpu_ns + carriage.base_ns + straggler.start_delay_ns;
        let (spans, faults) = (timing.trace.then(ThinVec::new), PeFaults::of(&timing.faults, pe));
        let rare = (spans.is_some() || faults.is_some()).then(|| Box::new(ClockRare { spans, faults }));
        let mut clock = Clock { on: true, now: 0.0, busy: 0.0, blocked: 0.0, start_delay, rare };
        clock.advance_to(SpanKind::Delay, start_delay, 0, false);
        clock
    }

    /// Starts the kernel `ns` later than the clock says (a call run together with others, started
    /// after them).
    pub(crate) fn start_later(&mut self, ns: f64) {
        if self.on && ns > 0.0 {
            self.start_delay += ns;
            let until = self.now + ns;
            self.advance_to(SpanKind::Delay, until, 0, false);
        }
    }

    /// Moves the clock to `until` (if later), counting the time as busy or blocked.
    #[inline]
    pub(crate) fn advance_to(&mut self, kind: SpanKind, until: f64, bytes: u64, busy: bool) {
        if !self.on || until <= self.now {
            return;
        }
        let spent = until - self.now;
        if busy {
            self.busy += spent;
        } else if kind != SpanKind::Delay {
            self.blocked += spent;
        }
        if let Some(spans) = self.rare.as_mut().and_then(|rare| rare.spans.as_mut()) {
            spans.push(Span { kind, start_ns: self.now, end_ns: until, bytes });
        }
        self.now = until;
    }

    /// The faults of the lane's PE, if it has any.
    #[inline]
    pub(crate) fn faults(&self) -> Option<&PeFaults> {
        self.rare.as_ref()?.faults.as_ref()
    }

    /// How many times as long work started now takes: its PE's slowdown.
    #[inline]
    pub(crate) fn slowdown(&self) -> f64 {
        self.faults().map_or(1.0, |faults| faults.slowdown_at(self.now))
    }

    /// Spends `ns` of work.
    pub(crate) fn work(&mut self, kind: SpanKind, ns: f64, bytes: u64) {
        let until = self.now + ns;
        self.advance_to(kind, until, bytes, true);
    }

    /// The first of the clock's own times (`start delay`, `busy`) that is not a finite number, with its
    /// value: where a time that is not finite arises, before waiting spreads it to other PEs.
    pub(crate) fn own_non_finite(&self) -> Option<(&'static str, f64)> {
        [("start delay", self.start_delay), ("busy", self.busy)].into_iter().find(|(_, value)| !value.is_finite())
    }

    /// The first of the clock's times (`start delay`, `busy`, `finish`, `blocked`) that is not a finite
    /// number, with its value. The run's completion is the latest finish, so it is finite when every
    /// finish is.
    pub(crate) fn non_finite(&self) -> Option<(&'static str, f64)> {
        self.own_non_finite().or_else(|| {
            [("finish", self.now), ("blocked", self.blocked)].into_iter().find(|(_, value)| !value.is_finite())
        })
    }

    /// The lane's part of the report, for a run that ended at `completion`.
    pub(crate) fn report(&mut self, completion: f64) -> PeTime {
        PeTime {
            finish_ns: self.now,
            busy_ns: self.busy,
            blocked_ns: self.blocked,
            idle_ns: completion - self.now + self.start_delay,
            spans: self.rare.as_mut().and_then(|rare| rare.spans.take()).unwrap_or_default(),
            lanes: ThinVec::new(),
        }
    }
}

/// The most bookings a channel keeps; past it the oldest half merge into one.
const MAX_BOOKINGS: usize = 4096;

/// A transfer sent in the current round, waiting to be placed on its channels.
///
/// What few transfers have (a reply, a put's lane, a multimem operation) takes no room of its own in
/// the others: a round of a million PEs' sends is a million transfers, in every process of a spread
/// run.
#[derive(Clone, Debug)]
pub(crate) struct Transfer {
    pub(crate) depart_ns: f64,
    pub(crate) position: u64,
    /// Bytes towards the receiver or target.
    pub(crate) bytes: u64,
    /// A get's reply's bytes, when `reply_queue` is not [`Transfer::NONE`].
    reply_bytes: u64,
    pub(crate) sender: u32,
    pub(crate) queue: u32,
    /// The queue a get's reply comes back on, or [`Transfer::NONE`].
    reply_queue: u32,
    /// The lane of a put, whose puts land with it, or [`Transfer::NONE`].
    put_by: u32,
    /// A multimem operation: `queue` is the requester's link up to the switch, and its parts follow
    /// `position` in the sender's outbox.
    multicast: Option<Box<Multicast>>,
}

impl Transfer {
    /// No queue, no lane.
    const NONE: u32 = u32::MAX;

    /// A message at `position` of queue `queue`, sent by rank `sender`.
    pub(crate) fn message(depart_ns: f64, sender: u32, queue: u32, position: u64, bytes: u64) -> Transfer {
        Transfer {
            depart_ns,
            position,
            bytes,
            reply_bytes: 0,
            sender,
            queue,
            reply_queue: Transfer::NONE,
            put_by: Transfer::NONE,
            multicast: None,
        }
    }

    /// This transfer with a get's reply, `(queue, bytes)`, and the lane of a put.
    pub(crate) fn with(mut self, reply: Option<(u32, u64)>, put_by: Option<u32>) -> Transfer {
        (self.reply_queue, self.reply_bytes) = reply.unwrap_or((Transfer::NONE, 0));
        self.put_by = put_by.unwrap_or(Transfer::NONE);
        self
    }

    /// This transfer as a multimem operation's.
    pub(crate) fn multicast_of(mut self, multicast: Option<Multicast>) -> Transfer {
        self.multicast = multicast.map(Box::new);
        self
    }

    /// A get's reply: the queue it comes back on, and its bytes.
    pub(crate) fn reply(&self) -> Option<(u32, u64)> {
        (self.reply_queue != Transfer::NONE).then_some((self.reply_queue, self.reply_bytes))
    }

    /// The lane of a put, whose puts land with it.
    pub(crate) fn put_by(&self) -> Option<u32> {
        (self.put_by != Transfer::NONE).then_some(self.put_by)
    }

    /// A multimem operation's: what it asks of the switch.
    pub(crate) fn multicast(&self) -> Option<Multicast> {
        self.multicast.as_deref().copied()
    }
}

/// What a multimem operation asks of the switch, over `parts` members.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Multicast {
    /// `multimem_ld_reduce`: the switch reads `bytes` of every member, reduces them, and sends the
    /// result down `down` (a queue whose last channel is the switch's link to the requester).
    Load { parts: u32, down: u32, bytes: u64 },
    /// `multimem_st`, or `multimem_red` (`reduce`): the switch fans the tile out to every member.
    Store { parts: u32, reduce: bool },
}

impl Multicast {
    /// The members it spans.
    pub(crate) fn parts(self) -> u32 {
        match self {
            Multicast::Load { parts, .. } | Multicast::Store { parts, .. } => parts,
        }
    }
}

/// When a resource (a channel, a PE's compute) is busy: intervals, sorted and disjoint. The first
/// [`INLINE_BOOKINGS`] are held in place: most of a large run's channels carry a message or two, and a
/// list of its own for each would cost a million-PE run an allocation per channel.
#[derive(Clone, Debug, Default)]
pub(crate) struct Bookings {
    busy: SmallVec<[(f64, f64); INLINE_BOOKINGS]>,
    /// Where the run of back-to-back intervals that ends the list starts (the start of one of them):
    /// work that occupies the resource and is ready inside that run can only go after it. A busy
    /// channel's pending bookings are such a run, in a list of their own, cold: placed without
    /// walking them.
    tail_start: f64,
}

/// Bookings a resource holds without a list of its own.
const INLINE_BOOKINGS: usize = 2;

impl Bookings {
    /// The bookings at the end of a list that work is looked for among first.
    const NEAR_END: usize = 8;

    /// Books the resource for work whose head is ready at `ready`, which occupies it for `occupy` ns
    /// and whose tail reaches it at `tail`: the earliest start at or after `ready` whose interval
    /// `start ..= max(start + occupy, tail)` fits between the intervals already booked. Work is booked
    /// round by round, not in time order, so work ready earlier than work booked before it still takes
    /// the gap in front of it.
    ///
    /// Once there are [`MAX_BOOKINGS`] the oldest merge, which keeps a booking's cost bounded however
    /// busy the resource; it can only make work later, and only work ready before almost everything
    /// the resource has done.
    #[inline]
    pub(crate) fn reserve(&mut self, ready: f64, occupy: f64, tail: f64) -> (f64, f64) {
        let (i, booked) = self.fit(ready, occupy, tail);
        self.book(i, booked);
        booked
    }

    /// Books `interval` at index `i` of the intervals booked, where [`Bookings::fit`] put it.
    #[inline]
    fn book(&mut self, i: usize, interval: (f64, f64)) {
        // Most work goes after everything booked, below the bound: a push, in the caller, without an
        // insertion's moves and checks, nor the registers they save.
        if i == self.busy.len() && i < MAX_BOOKINGS {
            self.follow_tail(interval);
            self.busy.push(interval);
        } else {
            self.insert(i, interval);
        }
    }

    /// Keeps [`Bookings::tail_start`] for `interval` about to be booked after every other: a gap
    /// before it starts a new run.
    #[inline]
    fn follow_tail(&mut self, interval: (f64, f64)) {
        if self.busy.last().is_none_or(|&(_, end)| end != interval.0) {
            self.tail_start = interval.0;
        }
    }

    /// [`Bookings::book`]'s other cases: work before the last booked, or one booking past the bound.
    /// Work before the last goes in a gap before the run that ends the list, or, taking no time, at a
    /// boundary inside it: the run stays back-to-back either way.
    #[inline(never)]
    fn insert(&mut self, i: usize, interval: (f64, f64)) {
        if i == self.busy.len() {
            self.follow_tail(interval);
        }
        self.busy.insert(i, interval);
        self.keep_bounded();
    }

    /// Where [`Bookings::reserve`] would put work, without booking it: the index of its interval
    /// among the booked ones, and the interval.
    #[inline(always)]
    fn fit(&self, ready: f64, occupy: f64, tail: f64) -> (usize, (f64, f64)) {
        let after_all = self.busy.len();
        // Most work is ready after everything booked so far: append.
        let last_end = match self.busy.last() {
            Some(&(_, end)) if end <= ready => return self.walk(after_all, ready, occupy, tail),
            None => return self.walk(after_all, ready, occupy, tail),
            Some(&(_, end)) => end,
        };
        // Work that takes time, ready inside the back-to-back run that ends the list, finds no gap
        // before its end: the walk below would go through the whole run.
        if occupy > 0.0 && ready >= self.tail_start {
            return self.walk(after_all, last_end, occupy, tail);
        }
        // The first booked interval that ends after `ready`; everything before it is over by then.
        self.walk(self.first_ending_after(ready), ready, occupy, tail)
    }

    /// Where work goes that can start at `from`, looked for from booked interval `i` on (the first
    /// that ends after `from`): the first gap it fits, or after the last.
    #[inline(always)]
    fn walk(&self, mut i: usize, from: f64, occupy: f64, tail: f64) -> (usize, (f64, f64)) {
        let span = |start: f64| (start, (start + occupy).max(tail));
        let mut start = from;
        while let Some(&(next_start, next_end)) = self.busy.get(i) {
            if span(start).1 <= next_start {
                break;
            }
            start = start.max(next_end);
            i += 1;
        }
        (i, span(start))
    }

    /// The index of the first booked interval that ends after `time` (the list's length if none does).
    /// Work is mostly ready near the end of a busy resource's bookings: the last few are looked at
    /// first, one after the other, on the lines the booking then walks and writes, before a search of
    /// the whole list.
    #[inline]
    fn first_ending_after(&self, time: f64) -> usize {
        // One test for both ways, so a time that is not a number finds what a search finds.
        let over = |&(_, end): &(f64, f64)| end <= time;
        let near = self.busy.len().saturating_sub(Bookings::NEAR_END);
        let mut i = self.busy.len();
        while i > near && !over(&self.busy[i - 1]) {
            i -= 1;
        }
        if i > near || near == 0 {
            return i;
        }
        self.busy[..near].partition_point(over)
    }

    /// Asks the CPU for the bookings a [`Bookings::reserve`] looks at first, the last few, when they
    /// are in a list of their own (see [`crate::protocol::prefetch`]).
    #[inline]
    pub(crate) fn ask_last(&self) {
        if self.busy.spilled() {
            let last = &self.busy[self.busy.len().saturating_sub(Bookings::NEAR_END)..];
            prefetch(last.as_ptr().cast(), size_of_val(last));
        }
    }

    /// Merges the oldest half of the bookings into one interval once there are too many: their gaps
    /// are closed, never opened, so no work gets earlier.
    #[inline]
    fn keep_bounded(&mut self) {
        if self.busy.len() > MAX_BOOKINGS {
            let half = self.busy.len() / 2;
            self.busy[0].1 = self.busy[half - 1].1;
            self.busy.drain(1..half);
            // A run that started inside the merged intervals now starts with their merge.
            if self.tail_start < self.busy[0].1 {
                self.tail_start = self.busy[0].0;
            }
        }
    }

    /// Forgets the intervals that ended by `floor`: no work can be ready earlier.
    pub(crate) fn forget_before(&mut self, floor: f64) {
        let done = self.busy.partition_point(|&(_, end)| end <= floor);
        // Keep the last one: it is where the next booking looks first.
        self.busy.drain(..done.min(self.busy.len().saturating_sub(1)));
        // A run whose first intervals were forgotten starts with what is left of it.
        if let Some(&(first, _)) = self.busy.first() {
            self.tail_start = self.tail_start.max(first);
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.busy.len()
    }
}

/// A PE's engines: each does one piece of work at a time (an injection, a reduction, a load or a
/// store), and work goes to the engine that can start it first (the lowest-numbered of those tied), so
/// with `k` engines up to `k` lanes work at once. One engine is the PE of one compute unit.
#[derive(Clone, Debug)]
pub(crate) struct Engines {
    engines: Vec<Bookings>,
}

impl Engines {
    /// `count` idle engines (at least one).
    pub(crate) fn new(count: usize) -> Engines {
        Engines { engines: vec![Bookings::default(); count.max(1)] }
    }

    /// Books `occupy` ns of work ready at `ready` on the engine that starts it first; returns when it
    /// starts.
    pub(crate) fn reserve(&mut self, ready: f64, occupy: f64) -> f64 {
        // (engine, place among its bookings, interval): the first engine that starts the work earliest.
        let (mut engine, (mut place, mut booked)) = (0, self.engines[0].fit(ready, occupy, 0.0));
        for (e, other) in self.engines.iter().enumerate().skip(1) {
            if booked.0 <= ready {
                break;
            }
            let (i, interval) = other.fit(ready, occupy, 0.0);
            if interval.0 < booked.0 {
                (engine, place, booked) = (e, i, interval);
            }
        }
        self.engines[engine].book(place, booked);
        booked.0
    }

    /// Forgets the work that ended by `floor` on every engine.
    pub(crate) fn forget_before(&mut self, floor: f64) {
        self.engines.iter_mut().for_each(|engine| engine.forget_before(floor));
    }

    /// The most bookings an engine holds.
    pub(crate) fn len(&self) -> usize {
        self.engines.iter().map(Bookings::len).max().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::Bookings;

    fn channel() -> Bookings {
        Bookings::default()
    }

    #[test]
    fn a_transfer_booked_later_but_ready_earlier_takes_the_gap_in_front() {
        let mut ch = channel();
        assert_eq!(ch.reserve(100.0, 50.0, 0.0), (100.0, 150.0));
        assert_eq!(ch.reserve(0.0, 50.0, 0.0), (0.0, 50.0));
        assert_eq!(ch.reserve(40.0, 50.0, 0.0), (50.0, 100.0), "fits exactly between the two");
        assert_eq!(ch.reserve(60.0, 10.0, 0.0), (150.0, 160.0), "no gap left before 150");
        assert_eq!(ch.busy[..], [(0.0, 50.0), (50.0, 100.0), (100.0, 150.0), (150.0, 160.0)]);
    }

    #[test]
    fn the_first_booking_ending_after_a_time_even_not_a_number_is_the_one_a_search_of_the_whole_list_finds() {
        for len in [0_usize, 1, 2, 3, 8, 9, 20] {
            let mut ch = channel();
            for k in 0..len {
                ch.reserve(10.0 * k as f64, 5.0, 0.0);
            }
            let times = (-1..=2 * len as i32 + 1).map(|h| 5.0 * f64::from(h));
            for t in times.chain([f64::NAN, f64::INFINITY, f64::NEG_INFINITY]) {
                let searched = ch.busy.partition_point(|&(_, end)| end <= t);
                assert_eq!(ch.first_ending_after(t), searched, "{len} bookings, time {t}");
            }
        }
    }

    #[test]
    fn work_goes_to_the_engine_that_starts_it_first_the_lowest_of_those_tied_and_into_gaps() {
        let mut engines = super::Engines::new(2);
        assert_eq!(engines.reserve(10.0, 5.0), 10.0, "both idle: engine 0");
        assert_eq!(engines.reserve(10.0, 5.0), 10.0, "engine 0 busy until 15: engine 1");
        assert_eq!(engines.reserve(11.0, 5.0), 15.0, "both busy: engine 0 frees first");
        assert_eq!(engines.reserve(0.0, 10.0), 0.0, "the gap before engine 0's first work");
        assert_eq!(engines.reserve(0.0, 11.0), 15.0, "no gap of 11 before 15 on either: engine 1 at 15");
        assert_eq!(engines.engines[0].busy[..], [(0.0, 10.0), (10.0, 15.0), (15.0, 20.0)]);
        assert_eq!(engines.engines[1].busy[..], [(10.0, 15.0), (15.0, 26.0)]);
    }

    /// Where [`Bookings::fit`] puts work when it walks every booking from the first that ends after
    /// `ready`: what its shortcut past a back-to-back run must agree with.
    fn walked(ch: &Bookings, ready: f64, occupy: f64, tail: f64) -> (usize, (f64, f64)) {
        ch.walk(ch.busy.partition_point(|&(_, end)| end <= ready), ready, occupy, tail)
    }

    #[test]
    fn work_ready_inside_a_back_to_back_run_goes_where_a_walk_of_every_booking_puts_it() {
        // A small generator, so that the sequences are the same on every run: bookings ready in and
        // out of order, of whole and zero lengths, with late tails, forgotten as a busy channel's
        // are (and, below, merged past the bound).
        let mut seed = 0x2545_f491_4f6c_dd1d_u64;
        let mut next = |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        for round in 0..200 {
            let mut ch = channel();
            for k in 0..300 {
                let early = if next(4) == 0 { 20.0 } else { 0.0 };
                let ready = (k * 10 + next(40)) as f64 - early;
                let occupy = [0.0, 5.0, 10.0, 12.5][next(4) as usize];
                let tail = if next(5) == 0 { ready + next(30) as f64 } else { 0.0 };
                assert_eq!(ch.fit(ready, occupy, tail), walked(&ch, ready, occupy, tail), "round {round}, {k}");
                ch.reserve(ready, occupy, tail);
                if next(50) == 0 {
                    ch.forget_before((k * 10) as f64 - 100.0);
                }
            }
        }
        // Past the bound the oldest merge, and the run they were part of starts with their merge.
        let mut ch = channel();
        for k in 0..=super::MAX_BOOKINGS {
            ch.reserve(5.0 * k as f64, 5.0, 0.0);
        }
        assert_eq!(ch.busy.len(), super::MAX_BOOKINGS / 2 + 2);
        assert_eq!(ch.tail_start, 0.0);
        assert_eq!(ch.fit(3.0, 1.0, 0.0), walked(&ch, 3.0, 1.0, 0.0));
    }

    #[test]
    fn two_transfers_ready_together_take_twice_as_long() {
        let mut ch = channel();
        assert_eq!(ch.reserve(0.0, 30.0, 0.0), (0.0, 30.0));
        assert_eq!(ch.reserve(0.0, 30.0, 0.0), (30.0, 60.0));
    }

    #[test]
    fn a_tail_that_arrives_late_holds_the_channel_until_it_passes() {
        let mut ch = channel();
        assert_eq!(ch.reserve(0.0, 10.0, 25.0), (0.0, 25.0));
        assert_eq!(ch.reserve(5.0, 10.0, 0.0), (25.0, 35.0));
    }

    #[test]
    fn a_crowded_channel_merges_its_oldest_bookings() {
        let mut ch = channel();
        for k in 0..=super::MAX_BOOKINGS {
            ch.reserve(10.0 * k as f64, 8.0, 0.0);
        }
        // 4097 bookings: the oldest 2048 became one, 2049 stay as they were.
        assert_eq!(ch.busy.len(), super::MAX_BOOKINGS / 2 + 2);
        assert_eq!(ch.busy[0], (0.0, 10.0 * (super::MAX_BOOKINGS / 2 - 1) as f64 + 8.0));
        // The merged interval has no gaps left: a short message ready early goes after it.
        let merged_end = ch.busy[0].1;
        assert!(ch.reserve(1.0, 1.0, 0.0).0 >= merged_end);
    }

    #[test]
    fn forgetting_drops_what_ended_by_the_floor_but_keeps_the_last_booking() {
        let mut ch = channel();
        for start in [0.0, 10.0, 20.0, 30.0] {
            ch.reserve(start, 10.0, 0.0);
        }
        ch.forget_before(25.0);
        assert_eq!(ch.busy[..], [(20.0, 30.0), (30.0, 40.0)]);
        ch.forget_before(100.0);
        assert_eq!(ch.busy[..], [(30.0, 40.0)]);
    }
}
