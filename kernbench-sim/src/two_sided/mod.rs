//! Two-sided traffic: queues (IPCQs) with credits, the ports a PE reaches them through, send and
//! receive, barriers, and what the merge of a round publishes. Uses lanes, the round protocol, the
//! race detector's message orders and the timing model.
//!
//! Each directed neighbour edge of the install plan gets a queue of `ipcq_depth` slots per channel.
//! `send` takes a credit (a free slot) and waits while there is none; `recv` takes the oldest message,
//! checks its dtype, length and generation, and hands the credit back. The first lane of a PE to send
//! on a (direction, channel) owns that sending side for the run, and the first to receive its receiving
//! side, so lanes never take each other's messages or credits.

mod barrier;
mod install;
mod publish;
pub(crate) mod queue;
mod send_recv;
pub(crate) mod slots;

pub(crate) use barrier::{Arrival, BarrierKey, Barriers};
pub(crate) use install::{Installed, install};
pub(crate) use publish::{Crossing, side_owner, wake_side};
pub(crate) use send_recv::Endpoint;

use kernbench_core::Direction;
use smallvec::SmallVec;

use crate::protocol::Cells;
use crate::race::MessageOrders;
use queue::{Queues, Side};

/// The run's two-sided part: its queues and what travels beside them, and its barriers.
pub(crate) struct TwoSided {
    pub(crate) queues: Queues,
    /// Per PE this process holds: its ports and what its lanes touched.
    pub(crate) pes: Cells<PeLinks>,
    /// What messages in flight carry of their senders' place in the order, under the race detector.
    pub(crate) orders: MessageOrders,
    /// Whether the race detector is on.
    pub(crate) detector: bool,
    pub(crate) barriers: Barriers,
}

/// A direction of a PE and the queues behind it: one per channel, numbered from the first.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Port {
    /// Its direction's [`Direction::key`]: what lookups compare, and the direction itself (a port is
    /// two words, not three: a million PEs hold several).
    pub(crate) key: u64,
    /// The queue of channel 0 out of the PE; channel `c`'s is `out_queue + c`.
    pub(crate) out_queue: u32,
    /// The queue of channel 0 into the PE; channel `c`'s is `in_queue + c`.
    pub(crate) in_queue: u32,
}

impl Port {
    /// The direction of the port.
    pub(crate) fn direction(&self) -> Direction {
        Direction::from_key(self.key).expect("a port's key is its direction's")
    }
}

/// A PE's two-sided part: its ports, and the queue sides its lanes touched this round, in one cache
/// line. Both lists are held in place up to two entries (most PEs of a large run have two ports, a
/// ring's, and touch a side of each a round): every send and receive reads the ports and writes the
/// touched list, and lists of their own would cost each a load from another line, missed when a large
/// run's PEs take turns; room for more would be a second line for every PE.
pub(crate) struct PeLinks {
    /// Sorted by direction key (so errors list them in order).
    pub(crate) ports: SmallVec<[Port; 2]>,
    /// The queue sides the PE's lanes pushed to or popped from in the current round, each once.
    pub(crate) touched: SmallVec<[(u32, Side); 2]>,
}

impl PeLinks {
    /// The port for `direction`: most tables are a handful of entries, where a scan beats a binary
    /// search; `full` topologies have hundreds.
    #[inline]
    pub(crate) fn find(&self, direction: Direction) -> Option<Port> {
        const SCAN: usize = 16;
        let (ports, key) = (&self.ports, direction.key());
        if ports.len() <= SCAN {
            ports.iter().find(|p| p.key == key).copied()
        } else {
            ports.binary_search_by_key(&key, |p| p.key).ok().map(|i| ports[i])
        }
    }

    /// The direction queue `q` leaves this PE by (when `side` is [`Side::Sender`]) or reaches it by,
    /// and its channel, read off the ports: a queue keeps neither, for a million-PE run's queues are
    /// millions. An edge's `channels` queues are consecutive from a multiple of `channels`, channel
    /// 0's being its ports'.
    pub(crate) fn end_of(&self, q: u32, side: Side, channels: u32) -> (Direction, usize) {
        let (channel, first) = (q % channels, q - q % channels);
        let mut ports = self.ports.iter();
        let port = ports.find(|p| if side == Side::Sender { p.out_queue } else { p.in_queue } == first);
        (port.expect("a queue's PEs have a port for it").direction(), channel as usize)
    }

    /// The sides among the last touched that [`PeLinks::touch`] looks for a side in: a PE that takes
    /// turns between a few queues (receives from one side, sends to the other, piece after piece)
    /// touches each once, and a PE that touches hundreds (a `full` topology) does not scan them all
    /// at every step. A side listed twice costs only its second publish, which finds nothing new.
    const RECENT: usize = 4;

    #[inline]
    fn touch(&mut self, queue: u32, side: Side) {
        if !self.touched.iter().rev().take(PeLinks::RECENT).any(|&t| t == (queue, side)) {
            self.touched.push((queue, side));
        }
    }
}

#[cfg(test)]
mod tests {
    use smallvec::SmallVec;

    use super::{PeLinks, Side};

    #[test]
    fn a_pe_s_links_are_one_cache_line() {
        assert_eq!(size_of::<PeLinks>(), 64);
    }

    #[test]
    fn a_pe_taking_turns_between_queue_sides_lists_each_once_a_round() {
        let mut links = PeLinks { ports: SmallVec::new(), touched: SmallVec::new() };
        // Piece after piece: a receive from one side, a send to the other.
        for _ in 0..3 {
            links.touch(7, Side::Receiver);
            links.touch(9, Side::Sender);
        }
        // The same queue's other side is another side.
        links.touch(9, Side::Receiver);
        assert_eq!(links.touched[..], [(7, Side::Receiver), (9, Side::Sender), (9, Side::Receiver)]);
        // A side touched before the last few is listed again, which costs only a second publish.
        for q in 10..15 {
            links.touch(q, Side::Sender);
        }
        links.touch(7, Side::Receiver);
        assert_eq!(links.touched.iter().filter(|&&t| t == (7, Side::Receiver)).count(), 2);
    }
}
