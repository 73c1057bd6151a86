//! How the processes of a spread run place a round's transfers on the channels: each on its own copy
//! of every channel's bookings ([`Placement::Whole`]), or each on its own channels only, a transfer
//! passed from process to process hop by hop ([`Placement::Divided`]).
//!
//! Divided, a channel belongs to the process of the first queue to cross it (queues are made in rank
//! order, so a process's channels are consecutive ids), which alone holds its bookings. A process
//! holds the round's transfers that concern it alone (those on queues that cross its channels or end
//! at its PEs, [`Network::concerns`]): its own, and those the round's hand-over brought it from the
//! processes that made them ([`Network::others`]); each is named by its place in the order of
//! placement ([`order_key`]), the same in every process. A round is placed in passes. In each, every
//! process walks its unplaced transfers in the order of placement, and books each on its channels
//! while the next channel is its own, until one is
//! another's; then the transfer waits, and so do its later channels here: a channel takes its
//! transfers in the order of placement, as in one process, so a transfer that would reach it later in
//! the order does not take it first. After each pass every process sends every other where its
//! transfers got to (all but those placed whole between two of its own PEs, which concern no other
//! process) and whether it still has one waiting; the passes go on while any process has. The first
//! unplaced transfer in the order always moves, since nothing before it holds its next channel, so
//! the passes end; routes that stay in one process's channels are placed in the first. Bookings are
//! made on each channel in the same order and with the same times as in one process: the times are
//! the same bits.

use serde::{Deserialize, Serialize};

use crate::error::RunError;
use crate::network::Network;
use crate::rounds::order_key;
use crate::timing::Transfer;

use super::Spread;

/// How a spread run's processes place transfers on the channels (see the module docs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Placement {
    /// Divided when the run has at least [`Placement::DIVIDED_FROM`] queues and can be
    /// ([`Placement::Divided`]); whole otherwise (the default).
    #[default]
    Auto,
    /// Every process keeps every channel's bookings and places every transfer: no exchange beyond the
    /// round's hand-over, and the whole network model in every process.
    Whole,
    /// Each process keeps its own channels' bookings only and books transfers on them, passing each
    /// on to the process of its next channel: a few exchanges a round, and each process's share of the
    /// network model. Not for a traced run, one with faults, or a system with a multicast switch
    /// (whose one reduction engine every multimem operation books).
    Divided,
}

impl Placement {
    /// The fewest queues at which [`Placement::Auto`] divides: below them the model is small beside
    /// the rest of a process, and the exchanges of each round's passes cost more than they save.
    pub const DIVIDED_FROM: usize = 1 << 16;

    /// Why a run cannot place divided, if it cannot: `traced`, `faulted`, and whether its system has
    /// a multicast switch.
    pub(crate) fn refusal(traced: bool, faulted: bool, switch: bool) -> Option<&'static str> {
        match (traced, faulted, switch) {
            (true, ..) => Some("a traced run keeps every channel's transfers in every process"),
            (_, true, _) => Some("a run with faults finds detours over channels of any process"),
            (.., true) => Some("the multicast switch's one reduction engine is booked by every process"),
            _ => None,
        }
    }

    /// Whether a spread run of `queues` queues, which can place divided or not (`refusal`), does.
    pub(crate) fn divides(self, queues: usize, refused: bool) -> bool {
        match self {
            Placement::Whole => false,
            Placement::Divided => true,
            Placement::Auto => !refused && queues >= Placement::DIVIDED_FROM,
        }
    }
}

/// Where a transfer has got to along its route, and its get's reply's after it.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
struct Along {
    /// The channels crossed: of its route, then of its reply's.
    hop: u32,
    /// When its first byte can enter the next channel, and when its last can.
    front: (f64, f64),
    /// When it arrived (its last byte and its protocol's step), once it has; NaN before.
    arrived: f64,
}

/// A transfer's way: where its route's channels and its reply's are in the network's routes
/// ([`Network::route_at`]), and the bytes each puts on the wire.
struct Way {
    there: std::ops::Range<usize>,
    back: std::ops::Range<usize>,
    bytes: (u64, u64),
}

impl Way {
    fn of(t: &Transfer, network: &Network) -> Way {
        let reply = t.reply();
        Way {
            there: network.route(t.queue),
            back: reply.map_or(0..0, |(q, _)| network.route(q)),
            bytes: (network.wire_bytes(t.bytes), reply.map_or(0, |(_, b)| network.wire_bytes(b))),
        }
    }

    fn hops(&self) -> u32 {
        (self.there.len() + self.back.len()) as u32
    }

    /// The channel of hop `hop` and the bytes it carries.
    fn at(&self, hop: u32, network: &Network) -> (u32, u64) {
        let hop = hop as usize;
        match hop.checked_sub(self.there.len()) {
            None => (network.route_at(self.there.start + hop), self.bytes.0),
            Some(back) => (network.route_at(self.back.start + back), self.bytes.1),
        }
    }
}

impl Spread<'_> {
    /// Places `transfers`, in the order of placement, divided over the processes (see the module
    /// docs); returns, for each transfer this process has to do with ([`Network::concerns`]), its
    /// place in `transfers`, when it arrives and, for a get, when its reply is back. `transfers` need
    /// not be all of the round's, but must hold every one that concerns this process.
    ///
    /// # Errors
    /// An exchange that failed.
    pub(crate) fn place_divided<'t>(
        &self,
        network: &mut Network,
        transfers: impl Iterator<Item = &'t Transfer>,
    ) -> Result<Vec<(u32, f64, Option<f64>)>, RunError> {
        let concerns =
            |t: &Transfer| network.concerns(t.queue) || t.reply().is_some_and(|(back, _)| network.concerns(back));
        let alone = |t: &Transfer| {
            network.concerns_alone(t.queue) && t.reply().is_none_or(|(back, _)| network.concerns_alone(back))
        };
        // The transfers this process has to do with, by place in `transfers`.
        let mine: Vec<(u32, &Transfer)> =
            transfers.enumerate().filter(|(_, t)| concerns(t)).map(|(i, t)| (i as u32, t)).collect();
        let alone: Vec<bool> = mine.iter().map(|&(_, t)| alone(t)).collect();
        let mut along: Vec<Along> = mine
            .iter()
            .map(|&(_, t)| {
                let mut a = Along { hop: 0, front: (t.depart_ns, t.depart_ns), arrived: f64::NAN };
                settle(&mut a, t, &Way::of(t, network), network);
                a
            })
            .collect();
        let unplaced = |a: &Along, t: &Transfer, network: &Network| a.hop < Way::of(t, network).hops();
        let mut waiting: Vec<u32> =
            (0..mine.len() as u32).filter(|&i| unplaced(&along[i as usize], mine[i as usize].1, network)).collect();
        let mut held: rustc_hash::FxHashSet<u32> = Default::default();
        // Until no process has a transfer left to place.
        let mut more = true;
        while more {
            held.clear();
            // Where this pass took transfers other processes have to do with, by their order's key.
            let mut moved: Vec<((u128, u64), Along)> = Vec::new();
            for &i in &waiting {
                let t = mine[i as usize].1;
                let way = Way::of(t, network);
                let mut a = along[i as usize];
                let from = a.hop;
                while a.hop < way.hops() {
                    let (id, bytes) = way.at(a.hop, network);
                    if !network.books(id) || held.contains(&id) {
                        break;
                    }
                    a.front = network.book_hop(id, a.front, bytes);
                    a.hop += 1;
                    settle(&mut a, t, &way, network);
                }
                // Its later channels here wait for it: a channel takes transfers in order.
                held.extend((a.hop..way.hops()).map(|hop| way.at(hop, network).0).filter(|&id| network.books(id)));
                if a.hop != from {
                    along[i as usize] = a;
                    // A transfer placed whole here, between PEs here, is no other process's business.
                    if a.hop < way.hops() || !alone[i as usize] {
                        moved.push((order_key(t), a));
                    }
                }
            }
            waiting.retain(|&i| unplaced(&along[i as usize], mine[i as usize].1, network));
            // Whether a channel anywhere asks for old bookings to be forgotten is agreed on here: the
            // forgetting gathers every process's clocks, so every process must take part.
            let told = (moved, network.forget_due, !waiting.is_empty());
            more = false;
            for (theirs, forget_due, waits) in self.gather(told)? {
                network.forget_due |= forget_due;
                more |= waits;
                for (key, a) in theirs {
                    if let Ok(i) = mine.binary_search_by_key(&key, |&(_, t)| order_key(t)) {
                        along[i] = a;
                    }
                }
            }
            waiting.retain(|&i| unplaced(&along[i as usize], mine[i as usize].1, network));
        }
        Ok(mine
            .iter()
            .zip(along)
            .map(|(&(place, t), a)| (place, a.arrived, t.reply().map(|(q, _)| a.front.1 + network.step(q))))
            .collect())
    }
}

/// Marks `a` arrived once it has crossed its route's channels: its arrival is its last byte's and its
/// protocol's step, and a get's reply leaves then.
fn settle(a: &mut Along, t: &Transfer, way: &Way, network: &Network) {
    if a.arrived.is_nan() && a.hop as usize == way.there.len() {
        a.arrived = a.front.1 + network.step(t.queue);
        if t.reply().is_some() {
            a.front = (a.arrived, a.arrived);
        }
    }
}
