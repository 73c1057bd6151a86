//! Queues and ports from an install plan.

use kernbench_core::{InstallPlan, PlanLinks, System};
use smallvec::SmallVec;

use super::queue::{Queue, Queues};
use super::{PeLinks, Port};

/// What [`install`] builds.
pub(crate) struct Installed {
    /// The queues of the edges it keeps.
    pub(crate) queues: Queues,
    /// Every queue's sender and receiver rank and channel, by number: what its route depends on
    /// (the channel picks the NICs of a route between nodes).
    pub(crate) routes: Vec<(u32, u32, u32)>,
    /// The ports of each PE held, in rank order.
    pub(crate) links: Vec<PeLinks>,
}

/// Builds `channels` queues of `depth` slots per directed neighbour edge and the ports of each PE, for a
/// checked plan: of the PEs whose ranks `holds` (a spread run holds its process's), and of the queues
/// with a side in one of them. The queues a PE sends into on direction `d` are those its peer receives
/// from on the direction that pairs with `d` and names the PE back (the plan's check makes it unique);
/// an edge's channels are consecutive queues.
pub(crate) fn install(
    system: &System,
    plan: &InstallPlan,
    (depth, channels): (usize, usize),
    holds: impl Fn(usize) -> bool,
) -> Installed {
    let installs: Vec<_> = plan.participants().collect();
    let by_peer = PlanLinks::new(system, &installs);
    // The ports of the PEs held, in rank order, and each rank's place among them (most ranks of a
    // spread run are not held: a word each, not a list's room).
    let mut place = vec![u32::MAX; installs.len()];
    let mut links: Vec<PeLinks> = Vec::with_capacity((0..installs.len()).filter(|&rank| holds(rank)).count());
    for (rank, install) in installs.iter().enumerate().filter(|&(rank, _)| holds(rank)) {
        place[rank] = links.len() as u32;
        let ports = install.neighbors.iter().map(|n| Port { key: n.direction.key(), out_queue: 0, in_queue: 0 });
        links.push(PeLinks { ports: ports.collect(), touched: SmallVec::new() });
    }
    let edges = installs.iter().map(|i| i.neighbors.len()).sum::<usize>() * channels;
    // Sized up front (the queues a spread run leaves out are capacity never touched): grown by
    // doubling, a million PEs' queues were copied again and again, and each copy faulted in.
    let (mut queues, mut routes, mut numbers) =
        (Vec::with_capacity(edges), Vec::with_capacity(edges), Vec::with_capacity(edges));
    for (rank, install) in installs.iter().enumerate() {
        for (i, entry) in install.neighbors.iter().enumerate() {
            let Some(peer) = by_peer.rank(entry.peer) else { continue };
            let back = by_peer.to(peer, install.pe).find(|&(d, _)| entry.direction.pairs_with(d));
            let Some((_, back)) = back else { continue };
            let first = routes.len() as u32;
            let ends = (rank as u32, peer as u32);
            let keep = holds(rank) || holds(peer);
            for channel in 0..channels as u32 {
                if keep {
                    numbers.push(routes.len() as u32);
                    queues.push(Queue::new(ends));
                }
                routes.push((ends.0, ends.1, channel));
            }
            // Only the ports of PEs held were made.
            if let Some(port) = port(&mut links, &place, rank, i) {
                port.out_queue = first;
            }
            if let Some(port) = port(&mut links, &place, peer, back) {
                port.in_queue = first;
            }
        }
    }
    for links in &mut links {
        links.ports.sort_unstable_by_key(|p| p.key);
    }
    let shape = (depth, channels);
    let queues =
        if numbers.len() == routes.len() { Queues::all(queues, shape) } else { Queues::some(queues, numbers, shape) };
    Installed { queues, routes, links }
}

/// Port `i` of rank `rank`, whose place among `links` is `place[rank]`: `None` for a rank not held.
fn port<'l>(links: &'l mut [PeLinks], place: &[u32], rank: usize, i: usize) -> Option<&'l mut Port> {
    links.get_mut(place[rank] as usize).and_then(|l| l.ports.get_mut(i))
}
