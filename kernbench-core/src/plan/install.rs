//! Install plans: per SIP, per participating PE, the neighbour table a kernel's directions resolve to.
//!
//! A plan is built in three steps (mapper -> topology -> routes) and then checked with
//! [`check_plan`]: every peer exists and takes part, every link is listed from both ends in directions
//! that pair up, no PE names a direction twice or itself. What the build returns is a [`CheckedPlan`],
//! which only a check makes, so a runtime trusts every plan it is handed without checking it again.

use serde::{Deserialize, Serialize};

use crate::machine::{Direction, LinkClass, MulticastError, PeId, System};
use crate::names::Builtin;
use crate::names::{UnknownName, comma_list};
use crate::plan::{Mapper, Topology, TopologyFn, mapper_by_name, topology_by_name};

/// One neighbour of a PE: the direction the kernel names, the peer PE it reaches, and the link.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NeighborTableEntry {
    /// The direction the kernel sends or receives on.
    pub direction: Direction,
    /// The PE at the other end.
    pub peer: PeId,
    /// The farthest-reaching link class the route to the peer crosses.
    pub link: LinkClass,
    /// The number of physical channels the route crosses (1 for adjacent PEs).
    pub hops: u32,
}

/// One participating PE's part of a plan.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeInstall {
    /// The PE.
    pub pe: PeId,
    /// Its position among all participants, in `PeId` order (its rank in the topology).
    pub rank: usize,
    /// Its neighbour table.
    pub neighbors: Vec<NeighborTableEntry>,
}

/// One SIP's participating PEs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SipPlan {
    /// The SIP (the rank of the collective).
    pub sip: u32,
    /// Its participating PEs, in `PeId` order.
    pub pes: Vec<PeInstall>,
}

/// What a runtime installs to run one algorithm on one system.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct InstallPlan {
    /// The topology the neighbour tables come from.
    pub topology: String,
    /// The mapper that chose the participants.
    pub mapper: String,
    /// Per SIP, in SIP order: every SIP of the system, even one with no participant.
    pub sips: Vec<SipPlan>,
}

/// Why an install plan could not be built or failed its check. Names the PEs and directions involved.
///
/// An unknown name, no participants or an unsupported participant set is the configuration's fault
/// (the registry entry or the system); the rest mean a topology produced a broken graph.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PlanError {
    /// A topology or mapper name that does not exist.
    #[error(transparent)]
    UnknownName(#[from] UnknownName),
    /// A plan checked on a system of another shape than the one it is to run on (the caller's fault).
    #[error("the plan was checked on a system of {plan}, not this one of {system}: build it for this system")]
    OtherSystem {
        /// The shape it was checked on.
        plan: String,
        /// The system it was to run on.
        system: String,
    },
    /// The mapper chose no PE, so there is nothing to run.
    #[error("no participating PEs: a plan needs at least one")]
    NoParticipants,
    /// A participant listed twice.
    #[error("participant {pe} is listed twice: expected each PE at most once")]
    DuplicateParticipant {
        /// The PE.
        pe: PeId,
    },
    /// A participant that the system does not have.
    #[error("participant {pe} is not in the system ({system})")]
    NotInSystem {
        /// The PE.
        pe: PeId,
        /// The system's shape.
        system: String,
    },
    /// The topology cannot link this participant set.
    #[error("topology `{topology}` cannot link these participants: {reason}")]
    Unsupported {
        /// The topology.
        topology: &'static str,
        /// Why, and what it would accept.
        reason: String,
    },
    /// The topology needs a multicast switch the system does not give its participants (the
    /// configuration's fault: run the algorithm on a system whose spec has `switch.multicast`).
    #[error("topology `multicast` cannot link these participants: {0}")]
    Multicast(#[from] MulticastError),
    /// A topology's neighbour lists do not match its participants.
    #[error("topology has {participants} participants but {lists} neighbour lists: expected one list per rank")]
    NeighborListCount {
        /// Participants.
        participants: usize,
        /// Neighbour lists.
        lists: usize,
    },
    /// A topology names a peer rank past the last participant.
    #[error("{pe}: direction {direction} names rank {rank}, but there are only {len} participants")]
    BadPeerRank {
        /// The PE whose list it is.
        pe: PeId,
        /// The direction.
        direction: Direction,
        /// The rank named.
        rank: usize,
        /// The number of participants.
        len: usize,
    },
    /// A SIP's plan holds a PE of another SIP, or SIPs are out of order.
    #[error("{pe} is listed under SIP {sip}: expected every PE under its own SIP, SIPs in order")]
    WrongSip {
        /// The PE.
        pe: PeId,
        /// The SIP whose plan lists it.
        sip: u32,
    },
    /// A PE's rank is not its position in `PeId` order.
    #[error("{pe} has rank {rank}, expected {expected}: ranks number participants in PeId order")]
    RankOrder {
        /// The PE.
        pe: PeId,
        /// The rank it has.
        rank: usize,
        /// Its position among the participants.
        expected: usize,
    },
    /// A neighbour that is not in the system.
    #[error("{pe}: direction {direction} leads to {peer}, which is not in the system ({system})")]
    PeerNotInSystem {
        /// The PE whose table it is.
        pe: PeId,
        /// The direction.
        direction: Direction,
        /// The peer.
        peer: PeId,
        /// The system's shape.
        system: String,
    },
    /// A neighbour that exists but does not take part, so it would never answer.
    #[error("{pe}: direction {direction} leads to {peer}, which does not take part in the plan")]
    PeerNotParticipant {
        /// The PE whose table it is.
        pe: PeId,
        /// The direction.
        direction: Direction,
        /// The peer.
        peer: PeId,
    },
    /// A PE that names itself as a neighbour.
    #[error("{pe}: direction {direction} leads back to itself: expected a link to another PE")]
    SelfLink {
        /// The PE.
        pe: PeId,
        /// The direction.
        direction: Direction,
    },
    /// A PE that lists one direction twice, so its queue would be ambiguous.
    #[error("{pe} lists direction {direction} twice (to {first} and {second}): expected each direction once")]
    DuplicateDirection {
        /// The PE.
        pe: PeId,
        /// The direction.
        direction: Direction,
        /// The first peer it leads to.
        first: PeId,
        /// The second.
        second: PeId,
    },
    /// A link listed from one end only (or in directions that do not pair).
    #[error(
        "{pe} lists {peer} as {direction}, but {peer} lists {pe} as [{}]: expected a direction that pairs with {direction}",
        comma_list(back)
    )]
    Asymmetric {
        /// The PE.
        pe: PeId,
        /// Its direction to the peer.
        direction: Direction,
        /// The peer.
        peer: PeId,
        /// The directions in which the peer lists the PE.
        back: Vec<Direction>,
    },
    /// A link whose far end lists the PE in several directions that pair with it, so a message's
    /// arrival queue would be ambiguous.
    #[error(
        "{pe} lists {peer} as {direction}, and {peer} lists {pe} as [{}], more than one of which pairs with it: \
         expected exactly one",
        comma_list(candidates)
    )]
    AmbiguousPair {
        /// The PE.
        pe: PeId,
        /// Its direction to the peer.
        direction: Direction,
        /// The peer.
        peer: PeId,
        /// The peer's directions to the PE that pair with `direction`.
        candidates: Vec<Direction>,
    },
}

/// An install plan that passed [`check_plan`] on a system of its shape. Only [`CheckedPlan::check`]
/// (and the builds of [`InstallPlan`], which call it) makes one, so whoever is handed one need not check
/// it again; it reads as the plan it holds.
///
/// # Examples
/// ```
/// use kernbench_core::{CheckedPlan, InstallPlan, System};
/// let system = System::shape(4, 1, 1, 1).unwrap();
/// let plan: CheckedPlan = InstallPlan::build(&system, "ring_1d", "leader_only").unwrap();
/// assert_eq!(plan.len(), 4);
/// // A plan made by hand is checked into one.
/// let again = CheckedPlan::check(plan.clone().into_inner(), &system).unwrap();
/// assert_eq!(again, plan);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckedPlan {
    plan: InstallPlan,
    /// The shape of the system it was checked on: SIPs, cubes per SIP, PEs per cube.
    extents: (u32, u32, u32),
}

impl CheckedPlan {
    /// `plan`, once [`check_plan`] finds nothing wrong with it on `system`.
    ///
    /// # Errors
    /// What [`check_plan`] finds.
    pub fn check(plan: InstallPlan, system: &System) -> Result<CheckedPlan, PlanError> {
        check_plan(&plan, system)?;
        Ok(CheckedPlan { plan, extents: system.extents() })
    }

    /// Whether it was checked on a system of `system`'s shape, so that it may run there.
    ///
    /// # Errors
    /// [`PlanError::OtherSystem`] naming both shapes.
    pub fn fits(&self, system: &System) -> Result<(), PlanError> {
        if self.extents == system.extents() {
            return Ok(());
        }
        let (sips, cubes, pes) = self.extents;
        Err(PlanError::OtherSystem {
            plan: format!("{sips} SIPs x {cubes} cubes x {pes} PEs"),
            system: system.describe(),
        })
    }

    /// The plan.
    pub fn into_inner(self) -> InstallPlan {
        self.plan
    }
}

impl std::ops::Deref for CheckedPlan {
    type Target = InstallPlan;

    fn deref(&self) -> &InstallPlan {
        &self.plan
    }
}

impl Serialize for CheckedPlan {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.plan.serialize(serializer)
    }
}

impl InstallPlan {
    /// Every participating PE, in rank order.
    pub fn participants(&self) -> impl ExactSizeIterator<Item = &PeInstall> + '_ {
        Counted { inner: self.sips.iter().flat_map(|s| s.pes.iter()), left: self.len() }
    }

    /// The farthest link class a route from the first participant to another crosses on `system`: the
    /// class whose figures bound the call's steps. `None` with fewer than two participants.
    pub fn farthest_class(&self, system: &System) -> Option<LinkClass> {
        let mut pes = self.participants().map(|p| p.pe);
        let first = pes.next()?;
        pes.filter_map(|pe| system.route_farthest_class(first, pe)).max()
    }

    /// The number of participating PEs.
    pub fn len(&self) -> usize {
        self.sips.iter().map(|s| s.pes.len()).sum()
    }

    /// Whether no PE participates.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Builds and checks the plan of the named built-in topology and mapper on `system`: a lookup of
    /// each name, then [`InstallPlan::build_with`].
    ///
    /// # Errors
    /// [`PlanError::UnknownName`] for an unknown name; otherwise as [`InstallPlan::build_with`].
    ///
    /// # Examples
    /// ```
    /// use kernbench_core::{Direction, InstallPlan, LinkClass, System};
    /// let system = System::shape(4, 2, 2, 8).unwrap();
    /// let plan = InstallPlan::build(&system, "ring_1d", "leader_only").unwrap();
    /// assert_eq!(plan.len(), 4);
    /// let first = &plan.sips[0].pes[0];
    /// assert_eq!(first.neighbors[0].direction, Direction::E);
    /// assert_eq!(first.neighbors[0].link, LinkClass::InterSip);
    /// ```
    pub fn build(system: &System, topology_name: &str, mapper_name: &str) -> Result<CheckedPlan, PlanError> {
        InstallPlan::build_with(system, topology_by_name(topology_name)?, mapper_by_name(mapper_name)?)
    }

    /// Builds and checks the plan of `topology` over the participants `mapper` chooses on `system`.
    ///
    /// # Errors
    /// The topology's error when it cannot link the mapper's choice, or what [`check_plan`] finds.
    pub fn build_with(
        system: &System,
        topology: Builtin<TopologyFn>,
        mapper: Builtin<Mapper>,
    ) -> Result<CheckedPlan, PlanError> {
        let links = (topology.function)(system, &mapper.participants(system))?;
        InstallPlan::from_topology(system, &links, topology.name(), mapper.name())
    }

    /// Turns a topology's neighbour lists into per-PE tables with routes, and checks the result.
    /// `topology_name` and `mapper_name` are recorded in the plan.
    ///
    /// # Errors
    /// [`PlanError::NeighborListCount`] or [`PlanError::BadPeerRank`] for a malformed topology, a
    /// participant outside the system, or what [`check_plan`] finds.
    pub fn from_topology(
        system: &System,
        topology: &Topology,
        topology_name: &str,
        mapper_name: &str,
    ) -> Result<CheckedPlan, PlanError> {
        let len = topology.participants.len();
        if topology.neighbors.len() != len {
            return Err(PlanError::NeighborListCount { participants: len, lists: topology.neighbors.len() });
        }
        let (sips, _, _) = system.extents();
        // Each SIP's list sized up front (grown by doubling, the lists of a million PEs were copied
        // again and again).
        let mut per_sip = vec![0; sips as usize];
        for pe in &topology.participants {
            if let Some(count) = per_sip.get_mut(pe.sip as usize) {
                *count += 1;
            }
        }
        let mut plan = InstallPlan {
            topology: topology_name.to_owned(),
            mapper: mapper_name.to_owned(),
            sips: (0..sips).zip(per_sip).map(|(sip, count)| SipPlan { sip, pes: Vec::with_capacity(count) }).collect(),
        };
        for (rank, (&pe, links)) in topology.participants.iter().zip(&topology.neighbors).enumerate() {
            let Some(sip_plan) = plan.sips.get_mut(pe.sip as usize).filter(|_| system.contains(pe)) else {
                return Err(PlanError::NotInSystem { pe, system: system.describe() });
            };
            let mut neighbors = Vec::with_capacity(links.len());
            for &(direction, peer_rank) in links {
                // Each error made only when it is the answer (`let ... else`): made eagerly, it is
                // built and dropped for every link of a million PEs.
                let Some(&peer) = topology.participants.get(peer_rank) else {
                    return Err(PlanError::BadPeerRank { pe, direction, rank: peer_rank, len });
                };
                let (hops, link) = system.try_route_reach(pe, peer).ok_or_else(|| PlanError::PeerNotInSystem {
                    pe,
                    direction,
                    peer,
                    system: system.describe(),
                })?;
                let Some(link) = link else { return Err(PlanError::SelfLink { pe, direction }) };
                // A route crosses at most a ring, a mesh and the SIPs: far below u32::MAX.
                let hops = u32::try_from(hops).unwrap_or(u32::MAX);
                neighbors.push(NeighborTableEntry { direction, peer, link, hops });
            }
            sip_plan.pes.push(PeInstall { pe, rank, neighbors });
        }
        CheckedPlan::check(plan, system)
    }

    /// The install of a participating PE.
    pub fn find(&self, pe: PeId) -> Option<&PeInstall> {
        let sip = self.sips.iter().find(|s| s.sip == pe.sip)?;
        sip.pes.binary_search_by_key(&pe, |p| p.pe).ok().map(|i| &sip.pes[i])
    }

    /// Where a message that `pe` sends on `direction` arrives: the peer and the peer's direction back
    /// to `pe` (the one that pairs with `direction`). `None` when `pe` has no such direction. In a
    /// plan that passed [`check_plan`] the answer is unique.
    pub fn arrival(&self, pe: PeId, direction: Direction) -> Option<(PeId, Direction)> {
        let entry = self.find(pe)?.neighbors.iter().find(|n| n.direction == direction)?;
        let back =
            self.find(entry.peer)?.neighbors.iter().find(|n| n.peer == pe && direction.pairs_with(n.direction))?;
        Some((entry.peer, back.direction))
    }
}

/// An iterator that knows how many items it has left, so what is collected from it is allocated once:
/// a million participants, collected by doubling, were copied twenty times.
struct Counted<I> {
    inner: I,
    left: usize,
}

impl<I: Iterator> Iterator for Counted<I> {
    type Item = I::Item;

    fn next(&mut self) -> Option<I::Item> {
        let item = self.inner.next()?;
        self.left -= 1;
        Some(item)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl<I: Iterator> ExactSizeIterator for Counted<I> {}

/// Where a plan's participants sit, for questions asked once per link of a large plan: the rank of a
/// PE is a lookup, and the links from a participant back to a PE a binary search in its links sorted
/// by peer (`full` topologies have a thousand links per PE). A million-PE plan takes three
/// allocations, not a million.
#[derive(Debug)]
pub struct PlanLinks {
    /// Per PE of the system ([`System::pe_index`]), its rank, or `u32::MAX` when it does not take part.
    rank_of: Vec<u32>,
    /// The system's shape, to find a PE's index.
    system: System,
    /// Participant `i`'s links are `links[starts[i]..starts[i + 1]]`.
    starts: Vec<usize>,
    /// Each participant's links, sorted by peer.
    links: Vec<Link>,
}

/// A link of a participant: its peer's [`System::pe_index`] (`u32::MAX` for a peer not in the
/// system), its direction, and its index in the participant's neighbour table. Half the room of the
/// peer's `PeId` and a word of index: a million-PE plan has millions, and every process of a spread
/// run holds them all while it installs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Link {
    peer: u32,
    direction: Direction,
    index: u32,
}

impl PlanLinks {
    /// The index of `participants` (in rank order, each in `system`) on `system`.
    pub fn new(system: &System, participants: &[&PeInstall]) -> PlanLinks {
        let mut rank_of = vec![u32::MAX; system.total_pes()];
        // Sized up front: grown by doubling, a million participants' links were copied again and
        // again, each copy faulting in fresh memory.
        let mut starts = Vec::with_capacity(participants.len() + 1);
        starts.push(0);
        let mut links = Vec::with_capacity(participants.iter().map(|install| install.neighbors.len()).sum());
        for (rank, install) in participants.iter().enumerate() {
            if let Some(i) = system.pe_index(install.pe) {
                // A plan has at most System::MAX_PES participants: far below u32::MAX.
                rank_of[i] = rank as u32;
            }
            let from = links.len();
            links.extend(install.neighbors.iter().enumerate().map(|(i, e)| Link {
                // A system has at most System::MAX_PES PEs, a table as many entries: both fit a u32.
                peer: system.pe_index(e.peer).map_or(u32::MAX, |peer| peer as u32),
                direction: e.direction,
                index: i as u32,
            }));
            links[from..].sort_unstable();
            starts.push(links.len());
        }
        PlanLinks { rank_of, system: system.clone(), starts, links }
    }

    /// The rank of `pe`, or `None` when it does not take part (or is not in the system).
    pub fn rank(&self, pe: PeId) -> Option<usize> {
        let rank = *self.rank_of.get(self.system.pe_index(pe)?)?;
        (rank != u32::MAX).then_some(rank as usize)
    }

    /// The links of the participant of rank `rank` whose peer is `pe`: each one's direction and index
    /// in that participant's neighbour table.
    pub fn to(&self, rank: usize, pe: PeId) -> impl Iterator<Item = (Direction, usize)> + '_ {
        // A PE outside the system has no links (a peer outside it is kept as no index: `u32::MAX`).
        let (links, peer) = match self.system.pe_index(pe) {
            Some(peer) => (&self.links[self.starts[rank]..self.starts[rank + 1]], peer as u32),
            None => (&self.links[..0], u32::MAX),
        };
        let start = links.partition_point(|link| link.peer < peer);
        links[start..]
            .iter()
            .take_while(move |link| link.peer == peer)
            .map(|link| (link.direction, link.index as usize))
    }
}

/// Checks that a plan is well formed on `system`: SIPs in order holding their own PEs, ranks in
/// `PeId` order, every peer in the system and participating, no self-links, no direction twice on a
/// PE, and every link listed from both ends in exactly one pair of directions that
/// [`Direction::pairs_with`] accepts.
///
/// # Errors
/// The first problem found, as the [`PlanError`] variant that names it.
pub fn check_plan(plan: &InstallPlan, system: &System) -> Result<(), PlanError> {
    let mut participants: Vec<&PeInstall> = Vec::with_capacity(plan.len());
    let mut last_sip = None;
    for sip_plan in &plan.sips {
        for install in &sip_plan.pes {
            let pe = install.pe;
            if !system.contains(pe) {
                return Err(PlanError::NotInSystem { pe, system: system.describe() });
            }
            if pe.sip != sip_plan.sip || last_sip.is_some_and(|last| last >= sip_plan.sip) {
                return Err(PlanError::WrongSip { pe, sip: sip_plan.sip });
            }
            if participants.last().is_some_and(|prev| prev.pe == pe) {
                return Err(PlanError::DuplicateParticipant { pe });
            }
            if install.rank != participants.len() || participants.last().is_some_and(|prev| prev.pe > pe) {
                return Err(PlanError::RankOrder { pe, rank: install.rank, expected: participants.len() });
            }
            participants.push(install);
        }
        last_sip = Some(sip_plan.sip);
    }
    if participants.is_empty() {
        return Err(PlanError::NoParticipants);
    }
    let by_peer = PlanLinks::new(system, &participants);
    let mut directions: Vec<(Direction, usize)> = Vec::new();
    for install in &participants {
        let pe = install.pe;
        directions.clear();
        directions.extend(install.neighbors.iter().enumerate().map(|(i, e)| (e.direction, i)));
        directions.sort_unstable();
        if let Some(w) = directions.windows(2).find(|w| w[0].0 == w[1].0) {
            let (first, second) = (install.neighbors[w[0].1].peer, install.neighbors[w[1].1].peer);
            return Err(PlanError::DuplicateDirection { pe, direction: w[0].0, first, second });
        }
        for entry in &install.neighbors {
            let (direction, peer) = (entry.direction, entry.peer);
            if peer == pe {
                return Err(PlanError::SelfLink { pe, direction });
            }
            if !system.contains(peer) {
                return Err(PlanError::PeerNotInSystem { pe, direction, peer, system: system.describe() });
            }
            let Some(far) = by_peer.rank(peer) else {
                return Err(PlanError::PeerNotParticipant { pe, direction, peer });
            };
            let back = || by_peer.to(far, pe).map(|(d, _)| d);
            // Exactly one link back pairs with this one; the lists are made only to name a failure.
            match back().filter(|&d| direction.pairs_with(d)).count() {
                1 => {}
                0 => return Err(PlanError::Asymmetric { pe, direction, peer, back: back().collect() }),
                _ => {
                    let candidates = back().filter(|&d| direction.pairs_with(d)).collect();
                    return Err(PlanError::AmbiguousPair { pe, direction, peer, candidates });
                }
            }
        }
    }
    Ok(())
}
