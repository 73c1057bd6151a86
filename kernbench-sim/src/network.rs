//! The network of the timing model: every channel a run's queues route over, each queue's route,
//! and the placing of transfers on them (see [`crate::timing`] for the rules); with the run's faults,
//! the way round failed links.

use kernbench_core::route::Channel;
use kernbench_core::{Carriage, LinkClass, PeId, System};
use rayon::prelude::*;
use thin_vec::ThinVec;

use crate::error::RunError;
use crate::faults::{Detour, LinkFaults};
use crate::protocol::prefetch;
use crate::timing::{Bookings, ChannelTime, Multicast, Routing, Span, SpanKind, Timing};

/// A channel with more bookings than this asks for old ones to be forgotten.
const FORGET_ABOVE: usize = 64;

/// What channels carried, bytes and busy time, for the channels' report: of every channel in a run
/// in one process. In a spread run each process keeps only those of its own channels, those a queue
/// of its PEs is the first to cross (a run of consecutive ids, since queues are made in rank order and
/// a process holds consecutive ranks): placing whole, every process books every transfer and would
/// add up the same figures; divided, it books only its own channels. The processes that report the
/// channels gather them at the end.
struct Figures {
    /// The first channel id whose figures these are.
    first: usize,
    /// Bytes and busy ns of channels `first..first + carried.len()`.
    carried: Vec<(u64, f64)>,
    /// Whether channels added to the model later (a detour's) are this process's: the last process's.
    open: bool,
}

impl Figures {
    /// Adds a transfer of `bytes` that kept channel `id` busy `busy_ns`, if the channel is this
    /// process's.
    #[inline]
    fn add(&mut self, id: u32, bytes: u64, busy_ns: f64) {
        if let Some((carried, busy)) = self.carried.get_mut((id as usize).wrapping_sub(self.first)) {
            *carried += bytes;
            *busy += busy_ns;
        }
    }
}

/// Which queues a process of a divided placement has to do with, a bit per queue in queue order: those
/// that cross one of its channels or end at one of its PEs (`here`), and of those, the ones no other
/// process has to do with (`alone`: between two of its PEs, over its channels only). A transfer on a
/// queue that is not here is never looked at, nor handed to this process; one on a queue here alone
/// is placed without a word to the others. The queues here and not alone, few beside the others,
/// keep which other processes they concern (`shared`: queue and process, by queue), the processes
/// a transfer on them is handed to.
#[derive(Default)]
struct Concerns {
    here: Bits,
    alone: Bits,
    shared: Vec<(u32, u32)>,
}

impl Concerns {
    /// The next queue's bits, from `processes`, every process the queue concerns (its ends' and its
    /// channels' owners, each once), for process `me`.
    fn add(&mut self, processes: &[u32], me: u32) {
        let queue = self.here.len as u32;
        let here = processes.contains(&me);
        let alone = processes == [me];
        self.here.push(here);
        self.alone.push(alone);
        if here && !alone {
            self.shared.extend(processes.iter().filter(|&&p| p != me).map(|&p| (queue, p)));
        }
    }

    /// The processes other than this one that queue `queue` concerns, if it concerns this one.
    fn others(&self, queue: u32) -> impl Iterator<Item = u32> + '_ {
        let first = self.shared.partition_point(|&(q, _)| q < queue);
        self.shared[first..].iter().take_while(move |&&(q, _)| q == queue).map(|&(_, p)| p)
    }
}

/// A list of bits.
#[derive(Default)]
struct Bits {
    words: Vec<u64>,
    len: usize,
}

impl Bits {
    fn push(&mut self, bit: bool) {
        if self.len % 64 == 0 {
            self.words.push(0);
        }
        if let Some(word) = self.words.last_mut() {
            *word |= u64::from(bit) << (self.len % 64);
        }
        self.len += 1;
    }

    /// Bit `i` (false past the end).
    fn get(&self, i: usize) -> bool {
        self.words.get(i / 64).is_some_and(|word| word >> (i % 64) & 1 == 1)
    }
}

/// Each link class's latency and time per byte, held once for every channel of the class, at the
/// class's place in [`LinkClass::ALL`] (its declaration order, so `class as usize`).
#[derive(Clone, Copy)]
struct Links([(f64, f64); LinkClass::ALL.len()]);

impl Links {
    fn of(system: &System) -> Links {
        Links(LinkClass::ALL.map(|class| {
            let link = system.link(class);
            (link.latency_ns, 1.0 / link.bandwidth_gbps)
        }))
    }

    fn latency_ns(&self, class: LinkClass) -> f64 {
        self.0[class as usize].0
    }

    fn ns_per_byte(&self, class: LinkClass) -> f64 {
        self.0[class as usize].1
    }
}

/// Every channel the run's queues route over, and each queue's route.
pub(crate) struct Network {
    routing: Routing,
    links: Links,
    /// Each channel's number in the system ([`System::channel_number`]): a word where the channel
    /// itself would take nine, and what names it again for the report.
    numbers: Vec<u32>,
    /// Each channel's link class, whose figures every channel of the class shares (see [`Links`]):
    /// beside the channels' states, where it would take a byte and a word of padding in each.
    classes: Vec<LinkClass>,
    /// Per channel this process books, the intervals it is carrying data in: one message at a time.
    /// Channel `id`'s are at `id - booked_from`: every channel's, from 0, unless the placement is
    /// divided ([`Network::divided`]), when they are this process's own channels' only.
    channels: Vec<Bookings>,
    booked_from: usize,
    /// Whether this process books its own channels only, and places transfers hop by hop with the
    /// other processes ([`crate::spread::Placement::Divided`]).
    divided: bool,
    /// Then, which queues it has to do with.
    concerns: Concerns,
    figures: Figures,
    /// Per channel, its transfers, when the run is traced (beside the channels, not in them: an
    /// untraced million-PE run would hold an empty list per channel).
    spans: Option<Vec<ThinVec<Span>>>,
    /// Queue `q`'s channels are `route_channels[route_start[q]..route_start[q + 1]]`.
    route_start: Vec<u32>,
    route_channels: Vec<u32>,
    /// Sum of the route's latencies, per queue: how long a credit takes to get back.
    route_latency: Vec<f64>,
    /// What carrying a message costs beyond its links: its protocol's lines and step.
    carriage: Carriage,
    /// The switch's reduction ([`System::multicast_switch`]): ns per byte of result (0: it has none),
    /// and when it is busy. One resource for the whole switch.
    reduce_ns_per_byte: f64,
    reducer: Bookings,
    /// A channel has more bookings than this: time to forget the old ones. It doubles when forgetting
    /// frees too little, so a run whose slowest PE stays early does not pay for it every round.
    forget_at: usize,
    /// Whether a channel has passed `forget_at`.
    pub(crate) forget_due: bool,
    /// The run's slow and failed links and NICs, when it has any.
    faults: Option<Box<LinkFaults>>,
}

impl Network {
    /// The network of queues `(sender, receiver, channel)` between `pes`: a queue of channel (lane)
    /// `c` takes [`System::route_on`] channel `c`, so between nodes each lane crosses the NICs of its
    /// rail. `(owner, me, last)`: the process that holds a rank, this process, and whether it is the
    /// last (`|_| 0`, 0 and true for a run in one process), for the channels whose figures it keeps
    /// ([`Figures`]); `divided`: whether this process books only those channels, its own
    /// ([`crate::spread::Placement::Divided`]).
    pub(crate) fn new(
        system: &System,
        timing: &Timing,
        carriage: &Carriage,
        pes: &[PeId],
        queues: impl ExactSizeIterator<Item = (u32, u32, u32)>,
        (owner, me, last, divided): (impl Fn(u32) -> u32, u32, bool, bool),
    ) -> Network {
        let holds = |rank| owner(rank) == me;
        // Sized up front: grown by doubling, a million PEs' routes were copied and faulted in again
        // and again. Most routes are one channel, each its own (a neighbour link); a run over the
        // whole system uses most of its channels, and room not written is never touched.
        let n = queues.len();
        let mut route_start = Vec::with_capacity(n + 1);
        route_start.push(0);
        let mut network = Network {
            routing: timing.routing,
            links: Links::of(system),
            numbers: Vec::with_capacity(system.channel_count().min(2 * n)),
            classes: Vec::new(),
            channels: Vec::new(),
            booked_from: 0,
            divided,
            concerns: Concerns::default(),
            figures: Figures { first: 0, carried: Vec::new(), open: last },
            spans: timing.trace.then(Vec::new),
            route_start,
            route_channels: Vec::with_capacity(n),
            route_latency: Vec::with_capacity(n),
            carriage: *carriage,
            reduce_ns_per_byte: system.multicast_switch().map_or(0.0, |switch| 1.0 / switch.reduce_gbps),
            reducer: Bookings::default(),
            forget_at: 2 * FORGET_ABOVE,
            forget_due: false,
            faults: LinkFaults::of(system, &timing.faults, pes),
        };
        // Routes are interned channel by channel, a billion lookups on a big system: by the channel's
        // number in the system, in an array (a million-PE run's map of channels held more than the
        // channels themselves). Each holds its channel's id + 1; 0 until a route crosses it.
        let mut ids = vec![0u32; system.channel_count()];
        // Each channel's class, for its state once their number is known.
        let mut classes = Vec::with_capacity(network.numbers.capacity());
        // The ids of the channels whose figures this process keeps.
        let mut own: Option<std::ops::Range<usize>> = None;
        // Divided, the first channel id of each process's (their ids are consecutive, in process
        // order), and the processes the queue at hand concerns.
        let (mut owned_from, mut processes) = (Vec::<u32>::new(), Vec::<u32>::new());
        for (sender, receiver, channel) in queues {
            let held = holds(sender);
            if let Some(faults) = &mut network.faults {
                faults.ends.push((sender, receiver));
            }
            let mut latency = 0.0;
            let ends = (pes[sender as usize], pes[receiver as usize]);
            let (numbers, classes) = (&mut network.numbers, &mut classes);
            if divided {
                processes.clear();
                processes.extend([owner(sender), owner(receiver)]);
            }
            system.for_each_channel_on(ends.0, ends.1, channel as usize, |channel| {
                latency += network.links.latency_ns(channel.class);
                let number = system.channel_number(&channel).expect("a route's channels are its system's");
                if ids[number] == 0 {
                    // A system has at most 2^24 PEs and a few channels each: numbers fit a u32.
                    numbers.push(number as u32);
                    classes.push(channel.class);
                    ids[number] = numbers.len() as u32;
                    let id = numbers.len() - 1;
                    if held {
                        let own = own.get_or_insert(id..id);
                        debug_assert_eq!(own.end, id, "a process's channels are consecutive ids");
                        own.end = id + 1;
                    }
                    if divided {
                        // Its owner's first channel, and the first of any process before it without one.
                        owned_from.resize((owner(sender) as usize + 1).max(owned_from.len()), id as u32);
                    }
                }
                let id = ids[number] - 1;
                network.route_channels.push(id);
                if divided {
                    processes.push(owned_from.partition_point(|&first| first <= id) as u32 - 1);
                }
            });
            if divided {
                processes.sort_unstable();
                processes.dedup();
                network.concerns.add(&processes, me);
            }
            // A word a route's start: 2^32 routed channels would be 16 GiB of this list alone, and
            // several times that of queues and slots.
            let start = u32::try_from(network.route_channels.len()).expect("fewer than 2^32 routed channels");
            network.route_start.push(start);
            network.route_latency.push(latency);
        }
        let own = own.unwrap_or(classes.len()..classes.len());
        // The channels' states once their number is known: a list grown by doubling would hold twice
        // the room of the largest part of the model.
        let booked = if divided { own.clone() } else { 0..classes.len() };
        network.booked_from = booked.start;
        network.channels = booked.map(|_| Bookings::default()).collect();
        network.figures.first = own.start;
        network.figures.carried = vec![(0, 0.0); own.len()];
        network.classes = classes;
        if let Some(spans) = &mut network.spans {
            spans.resize_with(network.numbers.len(), ThinVec::new);
        }
        if let Some(faults) = &mut network.faults {
            for (id, &number) in network.numbers.iter().enumerate() {
                faults.add_channel(system.numbered_channel(number as usize), id as u32);
            }
        }
        network
    }

    /// Where queue `queue`'s channels are among every route's ([`Network::route_at`]).
    pub(crate) fn route(&self, queue: u32) -> std::ops::Range<usize> {
        self.route_start[queue as usize] as usize..self.route_start[queue as usize + 1] as usize
    }

    /// Asks the CPU for where queue `queue`'s route is (see [`crate::protocol::prefetch`]): the first
    /// of four steps ahead of placing a transfer on it.
    #[inline]
    pub(crate) fn ask_route(&self, queue: u32) {
        let q = queue as usize;
        if let Some(start) = self.route_start.get(q) {
            prefetch(std::ptr::from_ref(start).cast(), 2 * size_of::<u32>());
        }
    }

    /// The second step: queue `queue`'s channels' ids.
    #[inline]
    pub(crate) fn ask_channels_of(&self, queue: u32) {
        if let Some(ids) = self.route_channels.get(self.route(queue)) {
            prefetch(ids.as_ptr().cast(), size_of_val(ids));
        }
    }

    /// The third step: queue `queue`'s channels, their bookings, classes and figures.
    #[inline]
    pub(crate) fn ask_channels(&self, queue: u32) {
        for (id, bookings) in self.route_bookings(queue) {
            if let Some(bookings) = bookings {
                prefetch(std::ptr::from_ref(bookings).cast(), size_of::<Bookings>());
            }
            if let Some(class) = self.classes.get(id) {
                prefetch(std::ptr::from_ref(class).cast(), 1);
            }
            if let Some(figures) = self.figures.carried.get(id.wrapping_sub(self.figures.first)) {
                prefetch(std::ptr::from_ref(figures).cast(), size_of_val(figures));
            }
        }
    }

    /// The fourth step: the last bookings of queue `queue`'s channels ([`Bookings::ask_last`]).
    #[inline]
    pub(crate) fn ask_bookings(&self, queue: u32) {
        self.route_bookings(queue).filter_map(|(_, bookings)| bookings).for_each(Bookings::ask_last);
    }

    /// Queue `queue`'s channels' ids, each with its bookings when this process books the channel.
    #[inline]
    fn route_bookings(&self, queue: u32) -> impl Iterator<Item = (usize, Option<&Bookings>)> {
        let ids = self.route_channels.get(self.route(queue)).unwrap_or_default();
        ids.iter().map(|&id| (id as usize, self.channels.get((id as usize).wrapping_sub(self.booked_from))))
    }

    /// Adds `channel`, numbered `number` in the system, idle; returns its id.
    fn add_channel(&mut self, channel: Channel, number: u32) -> u32 {
        self.numbers.push(number);
        self.classes.push(channel.class);
        self.channels.push(Bookings::default());
        if self.figures.open {
            self.figures.carried.push((0, 0.0));
        }
        if let Some(spans) = &mut self.spans {
            spans.push(ThinVec::new());
        }
        let id = (self.numbers.len() - 1) as u32;
        if let Some(faults) = &mut self.faults {
            faults.add_channel(channel, id);
        }
        id
    }

    /// The route a message leaving on `queue` at `depart` takes when links have failed by then: `None`
    /// for its own, or the way round the failed ones.
    ///
    /// # Errors
    /// [`RunError::Unreachable`] when failed links cut the receiver off.
    fn detour(&mut self, queue: u32, depart: f64) -> Result<Option<Vec<u32>>, RunError> {
        let own = &self.route_channels[self.route(queue)];
        let Some(faults) = &mut self.faults else { return Ok(None) };
        let (key, route) = match faults.detour(queue, depart, own)? {
            Detour::Own => return Ok(None),
            Detour::Known(ids) => return Ok(Some(ids)),
            Detour::New(key, route) => (key, route),
        };
        let mut ids = Vec::with_capacity(route.channels.len());
        for channel in route.channels {
            let faults = self.faults.as_ref().expect("faults: a detour");
            let id = match faults.index.get(&channel) {
                Some(&id) => id,
                None => {
                    let number = faults.system.channel_number(&channel).expect("a detour's channels are its system's");
                    self.add_channel(channel, number as u32)
                }
            };
            ids.push(id);
        }
        self.faults.as_mut().expect("faults: a detour").remember(key, ids.clone());
        Ok(Some(ids))
    }

    /// Whether this process books its own channels only ([`Network::new`]'s `divided`).
    pub(crate) fn divided(&self) -> bool {
        self.divided
    }

    /// The channel at place `at` among every route's channels ([`Network::route`]).
    pub(crate) fn route_at(&self, at: usize) -> u32 {
        self.route_channels[at]
    }

    /// Whether this process has to do with queue `queue` in a divided placement ([`Concerns`]): it
    /// crosses one of its channels or ends at one of its PEs.
    pub(crate) fn concerns(&self, queue: u32) -> bool {
        self.concerns.here.get(queue as usize)
    }

    /// Whether queue `queue` concerns no other process in a divided placement ([`Concerns`]): it runs
    /// between two of this process's PEs over its channels only.
    pub(crate) fn concerns_alone(&self, queue: u32) -> bool {
        self.concerns.alone.get(queue as usize)
    }

    /// The processes other than this one that a transfer on queue `queue` concerns in a divided
    /// placement ([`Concerns`]): those it is handed to. None for a queue this process has nothing to
    /// do with.
    pub(crate) fn others(&self, queue: u32) -> impl Iterator<Item = u32> + '_ {
        self.concerns.others(queue)
    }

    /// Whether this process books channel `id`: every channel, unless the placement is divided.
    pub(crate) fn books(&self, id: u32) -> bool {
        (id as usize).wrapping_sub(self.booked_from) < self.channels.len()
    }

    /// The bytes a message of `bytes` of data puts on the wire, as the run's protocol carries it.
    pub(crate) fn wire_bytes(&self, bytes: u64) -> u64 {
        self.carriage.wire_bytes(bytes)
    }

    /// Books `wire_bytes` on channel `id` (one this process [books](Network::books)), the first byte
    /// ready to enter at `front.0` and the last at `front.1`; returns when the first can enter the
    /// next channel and when the last has: one channel of [`Network::deliver`]'s route, in a run
    /// without faults.
    pub(crate) fn book_hop(&mut self, id: u32, front: (f64, f64), wire_bytes: u64) -> (f64, f64) {
        self.booking().0.hop(id, front, wire_bytes, |_, _| 1.0)
    }

    /// The first channel of queue `queue`'s route and what a byte of data takes to cross it, as the
    /// run's protocol carries it (`None` for a route of no channels).
    pub(crate) fn first_channel(&self, queue: u32) -> Option<(u32, f64)> {
        let &id = self.route_channels[self.route(queue)].first()?;
        let wire = self.carriage.wire_bytes(1 << 20) as f64 / f64::from(1 << 20);
        Some((id, wire * self.links.ns_per_byte(self.classes[id as usize])))
    }

    /// Every queue's route latency (the sum of its channels'), taken out: how long a credit takes to
    /// get back to the sender.
    pub(crate) fn take_route_latency(&mut self) -> Vec<f64> {
        std::mem::take(&mut self.route_latency)
    }

    /// Places a message of `bytes` of data leaving on queue `queue` at `depart` on its channels, as the
    /// run's protocol puts it on the wire; returns when its last byte has arrived and the protocol's
    /// step is done.
    ///
    /// # Errors
    /// [`RunError::Unreachable`] when failed links cut the receiver off.
    pub(crate) fn deliver(&mut self, queue: u32, depart: f64, bytes: u64) -> Result<f64, RunError> {
        let own = self.route(queue);
        if self.faults.is_none() && own.len() == 1 {
            // Most routes are one link (a neighbour's): its hop alone, without the walk's setup, and
            // without the registers the other cases' code would save on every message.
            let bytes = self.carriage.wire_bytes(bytes);
            let step = self.step(queue);
            let (mut booking, routes, _) = self.booking();
            return Ok(booking.hop(routes[own.start], (depart, depart), bytes, |_, _| 1.0).1 + step);
        }
        self.deliver_on_route(queue, depart, bytes)
    }

    /// [`Network::deliver`] over a route of several channels, or with faults.
    #[inline(never)]
    fn deliver_on_route(&mut self, queue: u32, depart: f64, bytes: u64) -> Result<f64, RunError> {
        let bytes = self.carriage.wire_bytes(bytes);
        let step = self.step(queue);
        let own = self.route(queue);
        let tail = if self.faults.is_none() {
            let (booking, routes, _) = self.booking();
            booking.carry(&routes[own], depart, bytes, |_, _| 1.0)
        } else {
            let detour = self.detour(queue, depart)?;
            let (booking, routes, faults) = self.booking();
            let faults = faults.expect("a faulted network");
            let route = detour.as_deref().unwrap_or(&routes[own]);
            booking.carry(route, depart, bytes, |id, t| faults.slowdown(id, t))
        };
        Ok(tail + step)
    }

    /// Places `bytes` of data on one channel of queue `queue`'s route, its first (`last: false`) or
    /// its last, leaving at `depart` as the run's protocol puts it on the wire; returns when its last
    /// byte has crossed it. A multimem operation's legs: a route between two ranks behind a switch is
    /// up to the switch and down from it, so the first channel is the sender's link up and the last
    /// the switch's link down to the receiver.
    ///
    /// # Errors
    /// [`RunError::Unreachable`] when the channel has failed by `depart`: a switch's legs take no
    /// other way.
    fn leg(&mut self, queue: u32, last: bool, depart: f64, bytes: u64) -> Result<f64, RunError> {
        let bytes = self.carriage.wire_bytes(bytes);
        let own = self.route(queue);
        let (booking, routes, faults) = self.booking();
        let route = &routes[own];
        let Some(&id) = (if last { route.last() } else { route.first() }) else { return Ok(depart) };
        if let Some(faults) = faults {
            faults.check_leg(queue, id, depart)?;
        }
        Ok(booking.carry(&[id], depart, bytes, |id, t| faults.map_or(1.0, |f| f.slowdown(id, t))))
    }

    /// The channels' bookings, borrowed apart from the rest of the model, with every route's channels
    /// ([`Network::route`]) and the run's faults.
    #[inline(always)]
    fn booking(&mut self) -> (Booking<'_>, &[u32], Option<&LinkFaults>) {
        let booking = Booking {
            links: &self.links,
            classes: &self.classes,
            channels: (&mut self.channels, self.booked_from),
            figures: &mut self.figures,
            spans: &mut self.spans,
            routing: self.routing,
            forget: (self.forget_at, &mut self.forget_due),
        };
        (booking, &self.route_channels, self.faults.as_deref())
    }

    /// The protocol's step over queue `queue`'s route: its farthest link class's. Found from the
    /// route's channels, which placing it reads anyway, not kept a word a queue. Without a protocol,
    /// none: a test where it is asked for (every timed message), the walk of the route a call.
    #[inline(always)]
    pub(crate) fn step(&self, queue: u32) -> f64 {
        if self.carriage.protocol.is_none() { 0.0 } else { self.protocol_step(queue) }
    }

    /// [`Network::step`] under a protocol.
    #[inline(never)]
    fn protocol_step(&self, queue: u32) -> f64 {
        let route = &self.route_channels[self.route(queue)];
        self.carriage.step_ns(route.iter().map(|&id| self.classes[id as usize]).max())
    }

    /// Books the switch's reduction of `bytes` of result, ready at `ready`; returns when it is done.
    fn reduce(&mut self, ready: f64, bytes: u64) -> f64 {
        if self.reduce_ns_per_byte == 0.0 {
            return ready;
        }
        self.reducer.reserve(ready, bytes as f64 * self.reduce_ns_per_byte, 0.0).1
    }

    /// Places a multimem operation leaving on `up` (a queue whose first channel is the requester's
    /// link to the switch) at `depart`, over its members' legs `(to, from)` (queues whose last channel
    /// is the switch's link down to the member, whose first is the member's link up), in member
    /// order. Returns when each member's part reaches the member, and for a load when the reduced
    /// result is back at the requester.
    ///
    /// - A load: the request (`request` bytes) reaches the switch; the switch asks each member,
    ///   whose `bytes` cross its link up; once all are in, the switch reduces them at its rate and
    ///   the result crosses the link down to the requester once.
    /// - A store: the tile (`request` bytes) crosses the requester's link up once, then the
    ///   switch's link down to each member; a reducing store passes the switch's reduction first,
    ///   once per member.
    pub(crate) fn deliver_multicast(
        &mut self,
        multicast: Multicast,
        up: u32,
        depart: f64,
        request: u64,
        legs: &[(u32, u32)],
    ) -> Result<(Vec<f64>, Option<f64>), RunError> {
        let at_switch = self.leg(up, false, depart, request)?;
        match multicast {
            Multicast::Load { down, bytes, .. } => {
                let mut ready = at_switch;
                let mut asked = Vec::with_capacity(legs.len());
                for &(to, from) in legs {
                    let at_member = self.leg(to, true, at_switch, request)?;
                    ready = ready.max(self.leg(from, false, at_member, bytes)?);
                    asked.push(at_member);
                }
                let reduced = self.reduce(ready, bytes);
                let back = self.leg(down, true, reduced, bytes)? + self.step(down);
                Ok((asked, Some(back)))
            }
            Multicast::Store { reduce, .. } => {
                let arrivals = legs
                    .iter()
                    .map(|&(to, _)| {
                        let ready = if reduce { self.reduce(at_switch, request) } else { at_switch };
                        Ok(self.leg(to, true, ready, request)? + self.step(to))
                    })
                    .collect::<Result<_, RunError>>()?;
                Ok((arrivals, None))
            }
        }
    }

    /// The protocol the run's messages are carried by.
    pub(crate) fn protocol(&self) -> Option<kernbench_core::Protocol> {
        self.carriage.protocol
    }

    /// Forgets bookings that ended by `floor`, the earliest time any future message can leave; returns
    /// how many the channel with the most still has, of those this process books.
    pub(crate) fn forget_before(&mut self, floor: f64) -> usize {
        self.reducer.forget_before(floor);
        let mut longest = 0;
        for ch in &mut self.channels {
            if ch.len() > FORGET_ABOVE {
                ch.forget_before(floor);
            }
            longest = longest.max(ch.len());
        }
        self.forget_after(longest);
        longest
    }

    /// Asks for old bookings to be forgotten again once a channel has twice `longest`, the most any
    /// channel has now: a divided placement's processes agree on it, so that each forgets when one
    /// process would.
    pub(crate) fn forget_after(&mut self, longest: usize) {
        self.forget_at = (2 * longest).max(2 * FORGET_ABOVE);
        self.forget_due = false;
    }

    /// What this process's channels carried ([`Figures`]), taken out: bytes and busy ns of each of
    /// a run of consecutive channel ids, the first process's first.
    pub(crate) fn take_figures(&mut self) -> Vec<(u64, f64)> {
        std::mem::take(&mut self.figures.carried)
    }

    /// What the channels carried, `figures` holding every channel's bytes and busy ns by id (every
    /// process's [`Network::take_figures`], in process order), with what names each channel, taken
    /// out of the model, which is freed: the channels' report ([`Carried::report`]) makes entries
    /// several times a channel's state, and makes them in its place. `None` when `figures` are not
    /// one per channel.
    pub(crate) fn carried(self, figures: Vec<(u64, f64)>) -> Option<Carried> {
        (figures.len() == self.numbers.len()).then_some(Carried { numbers: self.numbers, figures, spans: self.spans })
    }
}

/// What the channels of a run carried, from [`Network::carried`].
#[derive(Default)]
pub(crate) struct Carried {
    /// Each channel's number in the system, by id.
    numbers: Vec<u32>,
    /// Each channel's bytes and busy ns, by id.
    figures: Vec<(u64, f64)>,
    /// Per channel id, its transfers, when the run was traced.
    spans: Option<Vec<ThinVec<Span>>>,
}

impl Carried {
    /// Every channel that carried data, for a run that ended at `completion`, made on `pool` when
    /// there is one (a million-PE run's millions of entries are fresh memory, which one thread
    /// would fault in alone).
    pub(crate) fn report(self, system: &System, completion: f64, pool: Option<&rayon::ThreadPool>) -> Vec<ChannelTime> {
        // Counted first: a filtered iterator does not know its length, and a million channels' ids
        // collected by doubling would be copied again and again.
        let mut used = Vec::with_capacity(self.figures.iter().filter(|f| f.0 > 0).count());
        used.extend((0u32..).zip(&self.figures).filter(|(_, f)| f.0 > 0).map(|(id, _)| id));
        let (numbers, figures) = (&self.numbers, &self.figures);
        let time = |&id: &u32| {
            let (bytes, busy_ns) = figures[id as usize];
            ChannelTime {
                channel: system.numbered_channel(numbers[id as usize] as usize),
                bytes,
                busy_ns,
                utilization: if completion > 0.0 { busy_ns / completion } else { 0.0 },
                spans: ThinVec::new(),
            }
        };
        let mut times = Vec::new();
        match pool {
            Some(pool) => pool.install(|| used.par_iter().map(time).collect_into_vec(&mut times)),
            None => times.extend(used.iter().map(time)),
        }
        // A traced run's transfers, moved into their channels' entries.
        if let Some(mut spans) = self.spans {
            for (time, &id) in times.iter_mut().zip(&used) {
                time.spans = std::mem::take(&mut spans[id as usize]);
            }
        }
        times
    }
}

/// The channels a transfer is booked on, borrowed apart from the rest of the network.
struct Booking<'n> {
    links: &'n Links,
    classes: &'n [LinkClass],
    /// The bookings of channels from the id beside them.
    channels: (&'n mut [Bookings], usize),
    figures: &'n mut Figures,
    spans: &'n mut Option<Vec<ThinVec<Span>>>,
    routing: Routing,
    /// Bookings past which a channel asks for old ones to be forgotten, and whether one has.
    forget: (usize, &'n mut bool),
}

impl Booking<'_> {
    /// Books `bytes` leaving at `depart` on every channel of `route` in turn, each taking `slowdown(id,
    /// ready)` times its time per byte; returns when the last byte has arrived.
    #[inline(always)]
    fn carry(mut self, route: &[u32], depart: f64, bytes: u64, slowdown: impl Fn(u32, f64) -> f64) -> f64 {
        let mut front = (depart, depart);
        for &id in route {
            front = self.hop(id, front, bytes, &slowdown);
        }
        front.1
    }

    /// Books `bytes` on channel `id`, its first byte able to enter at `front.0` and its last at
    /// `front.1`, taking `slowdown(id, ready)` times its time per byte; returns when the first byte can
    /// enter the next channel and when the last has.
    #[inline(always)]
    fn hop(&mut self, id: u32, (head, tail): (f64, f64), bytes: u64, slowdown: impl Fn(u32, f64) -> f64) -> (f64, f64) {
        let class = self.classes[id as usize];
        let ch = &mut self.channels.0[id as usize - self.channels.1];
        let ready = match self.routing {
            Routing::CutThrough => head,
            Routing::StoreAndForward => tail,
        };
        let occupy = bytes as f64 * self.links.ns_per_byte(class) * slowdown(id, ready);
        let (start, end) = ch.reserve(ready, occupy, tail);
        *self.forget.1 |= ch.len() > self.forget.0;
        self.figures.add(id, bytes, end - start);
        if let Some(spans) = self.spans {
            spans[id as usize].push(Span { kind: SpanKind::Transfer, start_ns: start, end_ns: end, bytes });
        }
        let latency = self.links.latency_ns(class);
        (start + latency, end + latency)
    }
}

#[cfg(test)]
mod tests {
    use kernbench_core::{Carriage, LinkClass, PeId, System};

    use super::Network;
    use crate::timing::Timing;

    #[test]
    fn a_divided_model_books_only_the_channels_its_processs_queues_cross_first_and_knows_which_queues_concern_it() {
        // A ring of 4 SIPs, one queue each way round; the first process holds SIPs 0 and 1.
        let system = System::shape(4, 1, 1, 1).unwrap();
        let pes: Vec<PeId> = (0..4).map(|sip| PeId::new(sip, 0, 0)).collect();
        let queues = || (0..4).map(|s| (s, (s + 1) % 4, 0));
        let timing = Timing::default();
        let carriage = Carriage::default();
        let whole =
            Network::new(&system, &timing, &carriage, &pes, queues(), (|rank| u32::from(rank >= 2), 0, false, false));
        let mut divided =
            Network::new(&system, &timing, &carriage, &pes, queues(), (|rank| u32::from(rank >= 2), 0, false, true));
        assert!(divided.divided() && !whole.divided());
        assert_eq!((whole.channels.len(), divided.channels.len()), (4, 2));
        let own: Vec<u32> = (0..4).filter(|&id| divided.books(id)).collect();
        assert_eq!(own, [divided.route_at(0), divided.route_at(1)], "the channels of SIPs 0 and 1's queues");
        // It has to do with the queues that end at its PEs; the one between two of them, alone.
        assert_eq!((0..4).map(|q| divided.concerns(q)).collect::<Vec<_>>(), [true, true, false, true]);
        assert_eq!((0..4).map(|q| divided.concerns_alone(q)).collect::<Vec<_>>(), [true, false, false, false]);
        // A transfer on a queue from or to the other process is handed to it, and only such one.
        let others = |network: &Network| (0..4).map(|q| network.others(q).collect()).collect::<Vec<Vec<u32>>>();
        assert_eq!(others(&divided), [vec![], vec![1], vec![], vec![1]]);
        let second =
            Network::new(&system, &timing, &carriage, &pes, queues(), (|rank| u32::from(rank >= 2), 1, true, true));
        assert_eq!(others(&second), [vec![], vec![0], vec![], vec![0]]);
        // A hop books as a whole route's first channel would.
        let mut alone = whole;
        let arrive = alone.deliver(0, 5.0, 1 << 20).unwrap();
        let bytes = divided.wire_bytes(1 << 20);
        assert_eq!(divided.book_hop(own[0], (5.0, 5.0), bytes).1 + divided.step(0), arrive);
    }

    #[test]
    fn bits_read_back_as_pushed_across_words_and_false_past_the_end() {
        let mut bits = super::Bits::default();
        let pushed: Vec<bool> = (0..200).map(|i| i % 3 == 0 || i == 64).collect();
        for &bit in &pushed {
            bits.push(bit);
        }
        assert!((0..200).all(|i| bits.get(i) == pushed[i]));
        assert!(!bits.get(200) && !bits.get(10_000));
    }

    #[test]
    fn detours_of_two_queues_over_the_same_links_share_them() {
        // Two lanes from SIP 0 to SIP 1 of a ring of 4; with 0-1 cut both go 0 -> 3 -> 2 -> 1, over
        // channels no queue's own route takes.
        let system = System::shape(4, 1, 1, 1).unwrap();
        let timing = Timing { faults: vec!["link=0-1:fail".parse().unwrap()], ..Timing::default() };
        let pes: Vec<PeId> = (0..4).map(|sip| PeId::new(sip, 0, 0)).collect();
        let queues = [(0, 1, 0), (0, 1, 1)].into_iter();
        let mut network = Network::new(&system, &timing, &Carriage::default(), &pes, queues, (|_| 0, 0, true, false));
        let first = network.deliver(0, 0.0, 1 << 20).unwrap();
        let second = network.deliver(1, 0.0, 1 << 20).unwrap();
        let distinct: std::collections::BTreeSet<_> = network.numbers.iter().collect();
        assert_eq!(distinct.len(), network.numbers.len(), "a link interned as several channels: {:?}", network.numbers);
        // Sharing the links, the second waits for the first.
        let occupy = (1 << 20) as f64 / system.link(LinkClass::InterSip).bandwidth_gbps;
        assert!(second >= first + 0.99 * occupy, "{second} ns against {first} ns");
    }
}
