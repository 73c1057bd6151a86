//! Topologies: which participating PE names which other one in which [`Direction`].
//!
//! Every topology is a function of the system and the participants and returns one schema,
//! [`Topology`]: the participants in `PeId` order (a participant's index is its rank) and, per rank,
//! its neighbours as `(direction, peer rank)`. Flat topologies (`ring_1d`, `mesh_2d`, `tree`,
//! `double_binary_tree`, `hypercube`, `full`) look only at ranks; `hierarchical_3level` and
//! `intercube` also look at where each participant sits in the machine.
//!
//! Rings of one member have no links, and rings of two link both directions to the other member:
//! each direction has its own queue, so a kernel that sends E and receives W works unchanged.
//!
//! The links of a topology grow linearly in its `N` ranks but for `full` (`N (N - 1)` directed links,
//! at most 1024 ranks); the messages its kernels send may grow faster. The shipped kernels on
//! `ring_1d` send `(N - 1)` or `2 (N - 1)` steps per rank, each in `chunks x lanes` pieces, on
//! `full` up to `N + 1` messages per rank, and on `mesh_2d` `2 (rows + cols - 2)`: `N^2`, `N^2` and
//! `N^1.5` in all; on `hypercube` they send `N log N`, on `tree`, `double_binary_tree` and
//! `hierarchical_3level` `N`, and on `intercube` `N` times the SIPs. `kernbench::estimate` has each
//! kernel's formula, and the `Communicator` refuses a call estimated past its limit of messages (2^26
//! unless raised), such as a ring all-reduce on 4,096 SIPs (about 2^28).

use std::collections::{BTreeMap, VecDeque};

use crate::machine::{CubeCoord, Direction, PeId, System};
use crate::names::{Builtin, NamedItem, UnknownName, listing, lookup};
use crate::plan::PlanError;

/// The neighbour lists of every participant: the one schema every topology returns.
///
/// Rings of one member have no links, and rings of two link both directions to the other member:
/// each direction has its own queue, so a kernel that sends E and receives W works unchanged.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Topology {
    /// The participating PEs, in `PeId` order; a PE's index is its rank.
    pub participants: Vec<PeId>,
    /// Per rank, its neighbours as `(direction, peer rank)`.
    pub neighbors: Vec<Vec<(Direction, usize)>>,
}

impl Topology {
    /// A topology of `participants` with no links yet.
    fn unlinked(participants: Vec<PeId>) -> Topology {
        let neighbors = vec![Vec::new(); participants.len()];
        Topology { participants, neighbors }
    }

    /// The number of participants.
    pub fn len(&self) -> usize {
        self.participants.len()
    }

    /// Whether there are no participants.
    pub fn is_empty(&self) -> bool {
        self.participants.is_empty()
    }

    /// The rank of a participant.
    pub fn rank_of(&self, pe: PeId) -> Option<usize> {
        self.participants.binary_search(&pe).ok()
    }

    /// Links `members` (ranks, in ring order) into a ring: `next` to the following member, `prev` to
    /// the preceding one.
    fn link_ring(&mut self, members: &[usize], next: Direction, prev: Direction) {
        let n = members.len();
        if n < 2 {
            return;
        }
        for (i, &rank) in members.iter().enumerate() {
            self.neighbors[rank].push((next, members[(i + 1) % n]));
            self.neighbors[rank].push((prev, members[(i + n - 1) % n]));
        }
    }

    /// Links `child` under `parent` in tree `tree`, as its child `k`.
    fn link_tree(&mut self, tree: u8, parent: usize, child: usize, k: u8) {
        self.neighbors[parent].push((Direction::Child(tree, k), child));
        self.neighbors[child].push((Direction::Parent(tree), parent));
    }
}

/// A topology: builds the neighbour lists of `participants` on `system`.
///
/// # Errors
/// [`PlanError`] when the participants are empty, repeated or outside the system, or when the
/// topology cannot link this set (saying why).
pub type TopologyFn = fn(&System, &[PeId]) -> Result<Topology, PlanError>;

const TABLE: [Builtin<TopologyFn>; 11] = [
    Builtin {
        item: NamedItem { name: "ring_1d", summary: "one ring over all participants: E to rank+1, W to rank-1" },
        function: ring_1d,
    },
    Builtin {
        item: NamedItem { name: "mesh_2d", summary: "ranks in an r x c grid, rows are E/W rings, columns N/S rings" },
        function: mesh_2d,
    },
    Builtin {
        item: NamedItem { name: "tree", summary: "binary tree in heap order: parent0, child0.0, child0.1" },
        function: tree,
    },
    Builtin {
        item: NamedItem {
            name: "double_binary_tree",
            summary: "two binary trees (tree 1 mirrored) so each rank is interior in at most one",
        },
        function: double_binary_tree,
    },
    Builtin {
        item: NamedItem { name: "hypercube", summary: "recursive doubling: dim<k> to rank xor 2^k, extras fold in" },
        function: hypercube,
    },
    Builtin {
        item: NamedItem { name: "full", summary: "every rank has a direct peer<j> to every other rank" },
        function: full,
    },
    Builtin {
        item: NamedItem {
            name: "multicast",
            summary: "as full, on a system whose switch multicasts and reduces (NVLS): every rank behind it",
        },
        function: multicast,
    },
    Builtin {
        item: NamedItem {
            name: "multicast_nodes",
            summary: "as full, on nodes whose switches multicast and reduce (NVLS): each node's ranks behind its own",
        },
        function: multicast_nodes,
    },
    Builtin {
        item: NamedItem {
            name: "circulant",
            summary: "a direct peer<j> to every rank r + 2^k and r - 2^k (mod n): ranks numbered from any root",
        },
        function: circulant,
    },
    Builtin {
        item: NamedItem {
            name: "hierarchical_3level",
            summary: "E/W ring in each cube, N/S ring of cube leaders, sip_next/sip_prev ring of SIP leaders",
        },
        function: hierarchical_3level,
    },
    Builtin {
        item: NamedItem {
            name: "intercube",
            summary: "cube leaders linked to mesh neighbours E/W/N/S, SIP leaders on a sip_next/sip_prev ring",
        },
        function: intercube,
    },
];

/// Every built-in topology, by name, for listings.
pub const TOPOLOGIES: &[NamedItem] = &listing(&TABLE);

/// The built-in topology called `name`.
///
/// # Errors
/// [`UnknownName`] listing the built-in topologies.
///
/// # Examples
/// ```
/// use kernbench_core::{PeId, System, topology_by_name};
/// let system = System::shape(4, 1, 1, 1).unwrap();
/// let ring = topology_by_name("ring_1d").unwrap().function;
/// let pes: Vec<PeId> = system.all_pes().collect();
/// let topo = ring(&system, &pes).unwrap();
/// assert_eq!(topo.neighbors[0], vec![(kernbench_core::Direction::E, 1), (kernbench_core::Direction::W, 3)]);
/// ```
pub fn topology_by_name(name: &str) -> Result<Builtin<TopologyFn>, UnknownName> {
    lookup("topology", &TABLE, name)
}

/// The participants in `PeId` order, after checking that there is at least one, none repeats and all
/// are in the system.
fn sorted_participants(system: &System, participants: &[PeId]) -> Result<Vec<PeId>, PlanError> {
    if participants.is_empty() {
        return Err(PlanError::NoParticipants);
    }
    if let Some(&pe) = participants.iter().find(|pe| !system.contains(**pe)) {
        return Err(PlanError::NotInSystem { pe, system: system.describe() });
    }
    let mut sorted = participants.to_vec();
    sorted.sort_unstable();
    if let Some(pair) = sorted.windows(2).find(|w| w[0] == w[1]) {
        return Err(PlanError::DuplicateParticipant { pe: pair[0] });
    }
    Ok(sorted)
}

/// One ring over all participants in rank order: `E` to rank+1, `W` to rank-1 (mod n).
///
/// # Errors
/// As [`TopologyFn`]; any non-empty set of distinct PEs of the system works.
pub fn ring_1d(system: &System, participants: &[PeId]) -> Result<Topology, PlanError> {
    let mut topo = Topology::unlinked(sorted_participants(system, participants)?);
    let ranks: Vec<usize> = (0..topo.len()).collect();
    topo.link_ring(&ranks, Direction::E, Direction::W);
    Ok(topo)
}

/// The grid `mesh_2d` arranges `n` ranks in: `(rows, cols)` with `rows` the largest divisor of `n`
/// not above `sqrt(n)`, so the grid is as square as `n` allows and never taller than wide (a prime
/// `n` gives one row).
///
/// # Examples
/// ```
/// use kernbench_core::mesh_2d_grid;
/// assert_eq!(mesh_2d_grid(6), (2, 3));
/// assert_eq!(mesh_2d_grid(16), (4, 4));
/// assert_eq!(mesh_2d_grid(7), (1, 7));
/// ```
pub fn mesh_2d_grid(n: usize) -> (usize, usize) {
    let rows = (1..=n).take_while(|r| r * r <= n).filter(|r| n % r == 0).last().unwrap_or(1);
    (rows, n / rows.max(1))
}

/// Ranks in a [`mesh_2d_grid`] of `rows x cols`, row-major (rank = row * cols + col): each row is a
/// ring `E` (next column) / `W`, each column a ring `N` (next row) / `S`. An axis of length 1 has no
/// links.
///
/// # Errors
/// As [`TopologyFn`]; any non-empty set of distinct PEs of the system works.
pub fn mesh_2d(system: &System, participants: &[PeId]) -> Result<Topology, PlanError> {
    let mut topo = Topology::unlinked(sorted_participants(system, participants)?);
    let (rows, cols) = mesh_2d_grid(topo.len());
    for row in 0..rows {
        let members: Vec<usize> = (0..cols).map(|col| row * cols + col).collect();
        topo.link_ring(&members, Direction::E, Direction::W);
    }
    for col in 0..cols {
        let members: Vec<usize> = (0..rows).map(|row| row * cols + col).collect();
        topo.link_ring(&members, Direction::N, Direction::S);
    }
    Ok(topo)
}

/// Links ranks `0..n` into a binary tree in heap order, rank `i` placed at heap position `pos(i)`
/// (`rank(pos)` is the inverse).
fn heap_tree(topo: &mut Topology, tree: u8, pos: impl Fn(usize) -> usize, rank: impl Fn(usize) -> usize) {
    let n = topo.len();
    for r in 0..n {
        let p = pos(r);
        for k in 0..2u8 {
            let child = 2 * p + 1 + usize::from(k);
            if child < n {
                topo.link_tree(tree, r, rank(child), k);
            }
        }
    }
}

/// A binary tree in heap order: rank `i`'s parent is `(i - 1) / 2`, its children `2i + 1` and
/// `2i + 2`; directions `parent0`, `child0.0`, `child0.1`.
///
/// # Errors
/// As [`TopologyFn`]; any non-empty set of distinct PEs of the system works.
pub fn tree(system: &System, participants: &[PeId]) -> Result<Topology, PlanError> {
    let mut topo = Topology::unlinked(sorted_participants(system, participants)?);
    heap_tree(&mut topo, 0, |r| r, |p| p);
    Ok(topo)
}

/// Two binary trees, so reductions can stream through both at once: tree 0 is [`tree`]; tree 1 is the
/// same heap over the mirrored ranks (rank `i` at heap position `n - 1 - i`), so the interior ranks of
/// tree 0 (the low ones) are leaves of tree 1 and each rank is interior in at most one tree.
/// Directions `parent<t>`, `child<t>.<k>`. Within one tree a rank never names a peer twice; across the
/// trees it may, which is fine because each direction has its own queue.
///
/// # Errors
/// As [`TopologyFn`]; any non-empty set of distinct PEs of the system works.
pub fn double_binary_tree(system: &System, participants: &[PeId]) -> Result<Topology, PlanError> {
    let mut topo = Topology::unlinked(sorted_participants(system, participants)?);
    let n = topo.len();
    heap_tree(&mut topo, 0, |r| r, |p| p);
    heap_tree(&mut topo, 1, |r| n - 1 - r, |p| n - 1 - p);
    Ok(topo)
}

/// The most participants [`hypercube`] links. Each rank has log2(n) neighbours, so its tables and
/// queues grow as n log2(n): a plan and a run of the recursive-doubling all-reduce hold about 1.3 KiB
/// per PE per dimension (against 3.2 KiB per PE in all for the hierarchical all-reduce), so 2^19
/// participants need about 12 GiB and 2^20 about 25 GiB, more than a 24 GiB machine holds.
pub const HYPERCUBE_MAX_PARTICIPANTS: usize = 1 << 19;

/// Recursive doubling: with `p2` the largest power of two not above `n`, ranks below `p2` link
/// `dim<k>` to `rank ^ 2^k` for every `k < log2(p2)`; each extra rank `i >= p2` links
/// `dim<log2(p2)>` to `i - p2` (and back), so it can fold its data into a partner first.
///
/// Each rank has about log2(n) neighbours, so the links and messages grow as n log2(n): at most
/// [`HYPERCUBE_MAX_PARTICIPANTS`] participants.
///
/// # Errors
/// As [`TopologyFn`], and [`PlanError::Unsupported`] above [`HYPERCUBE_MAX_PARTICIPANTS`]
/// participants.
pub fn hypercube(system: &System, participants: &[PeId]) -> Result<Topology, PlanError> {
    let mut topo = Topology::unlinked(sorted_participants(system, participants)?);
    let n = topo.len();
    if n > HYPERCUBE_MAX_PARTICIPANTS {
        return Err(PlanError::Unsupported {
            topology: "hypercube",
            reason: format!(
                "{n} participants would need {} links ({} per rank), more than fits in memory; expected at most \
                 {HYPERCUBE_MAX_PARTICIPANTS} participants (choose mapper leader_only or cube_leaders, or another topology)",
                n * n.ilog2() as usize,
                n.ilog2()
            ),
        });
    }
    let dims = n.ilog2();
    let p2 = 1usize << dims;
    // `dims` is at most 19 (at most HYPERCUBE_MAX_PARTICIPANTS ranks), so it fits a u8.
    let dim = |k: u32| Direction::Dim(k as u8);
    for r in 0..p2 {
        for k in 0..dims {
            topo.neighbors[r].push((dim(k), r ^ (1 << k)));
        }
    }
    for extra in p2..n {
        topo.neighbors[extra].push((dim(dims), extra - p2));
        topo.neighbors[extra - p2].push((dim(dims), extra));
    }
    Ok(topo)
}

/// The most participants [`full`] links: its tables grow as n² (n - 1 neighbours per rank), and
/// beyond this a direct-peer algorithm is not what anyone would run.
pub const FULL_MAX_PARTICIPANTS: usize = 1024;

/// Every rank has a direct peer `peer<j>` to every other rank `j` (`j` is the peer's rank): n - 1
/// neighbours per rank, so the links and messages grow as n²: at most [`FULL_MAX_PARTICIPANTS`]
/// participants.
///
/// # Errors
/// As [`TopologyFn`], and [`PlanError::Unsupported`] above [`FULL_MAX_PARTICIPANTS`] participants.
pub fn full(system: &System, participants: &[PeId]) -> Result<Topology, PlanError> {
    let mut topo = Topology::unlinked(sorted_participants(system, participants)?);
    let n = topo.len();
    if n > FULL_MAX_PARTICIPANTS {
        return Err(PlanError::Unsupported {
            topology: "full",
            reason: format!(
                "{n} participants would need {} direct links; expected at most {FULL_MAX_PARTICIPANTS} participants \
                 (choose mapper leader_only or cube_leaders, or another topology)",
                n * (n - 1)
            ),
        });
    }
    for (i, list) in topo.neighbors.iter_mut().enumerate() {
        // j < 1024, so it fits a u32.
        list.extend((0..n).filter(|&j| j != i).map(|j| (Direction::Peer(j as u32), j)));
    }
    Ok(topo)
}

/// [`full`], for kernels that use multicast objects (`tl.multicast`): refused unless the system's
/// switch multicasts and every participant hangs off it ([`System::check_multicast`]), so that an
/// algorithm written with `multimem` operations is never planned where they would fail, and `auto`
/// and a sweep of every algorithm pass it by there.
///
/// # Errors
/// As [`full`], and [`PlanError::Multicast`] naming why the participants cannot share a multicast
/// object.
pub fn multicast(system: &System, participants: &[PeId]) -> Result<Topology, PlanError> {
    // The participants are checked as every topology checks them first, then for the switch.
    let topology = full(system, participants)?;
    system.check_multicast(participants)?;
    Ok(topology)
}

/// [`full`], for kernels that multicast within each node (`tl.multicast_team` over `tl.team_node()`)
/// and reach the other nodes by messages: refused unless every node's switch multicasts and each
/// node's participants hang off it ([`System::check_multicast`], node by node).
///
/// # Errors
/// As [`full`], and [`PlanError::Multicast`] naming why one node's participants cannot share a
/// multicast object.
pub fn multicast_nodes(system: &System, participants: &[PeId]) -> Result<Topology, PlanError> {
    let topology = full(system, participants)?;
    let mut by_node: Vec<Vec<PeId>> = vec![Vec::new(); system.nodes()];
    for &pe in participants {
        by_node[system.node_of(pe.sip) as usize].push(pe);
    }
    for node in by_node.iter().filter(|members| !members.is_empty()) {
        system.check_multicast(node)?;
    }
    Ok(topology)
}

/// Every rank `r` has a direct peer `peer<j>` to the ranks `r + 2^k` and `r - 2^k` (mod n) for every
/// `2^k < n`, as `full` names them, so a kernel written for `full` that only uses those peers runs on
/// either: about 2 log2(n) neighbours a rank. These are the links of an algorithm that numbers its ranks
/// from a root, `v = (rank - root) mod n`, and steps by powers of two (a binomial tree from any root):
/// its edges are the same whatever the root, rotated, so on a ring or a switch its time does not depend
/// on the root. At most [`HYPERCUBE_MAX_PARTICIPANTS`] participants, whose tables grow as n log2(n) too.
///
/// # Errors
/// As [`TopologyFn`], and [`PlanError::Unsupported`] above [`HYPERCUBE_MAX_PARTICIPANTS`]
/// participants.
///
/// # Examples
/// ```
/// use kernbench_core::{Direction, PeId, System, circulant};
/// let system = System::shape(8, 1, 1, 1).unwrap();
/// let pes: Vec<PeId> = system.all_pes().collect();
/// let topo = circulant(&system, &pes).unwrap();
/// let peers: Vec<usize> = topo.neighbors[0].iter().map(|&(_, rank)| rank).collect();
/// assert_eq!(peers, [1, 2, 4, 6, 7]);
/// assert_eq!(topo.neighbors[0][0].0, Direction::Peer(1));
/// ```
pub fn circulant(system: &System, participants: &[PeId]) -> Result<Topology, PlanError> {
    let mut topo = Topology::unlinked(sorted_participants(system, participants)?);
    let n = topo.len();
    if n > HYPERCUBE_MAX_PARTICIPANTS {
        return Err(PlanError::Unsupported {
            topology: "circulant",
            reason: format!(
                "{n} participants would need about {} links; expected at most {HYPERCUBE_MAX_PARTICIPANTS} participants \
                 (choose mapper leader_only or cube_leaders, or another topology)",
                2 * n * n.ilog2() as usize
            ),
        });
    }
    let steps: Vec<usize> = (0..usize::BITS).map(|k| 1usize << k).take_while(|&step| step < n).collect();
    for (r, list) in topo.neighbors.iter_mut().enumerate() {
        let mut peers: Vec<usize> = steps.iter().flat_map(|&step| [(r + step) % n, (r + n - step) % n]).collect();
        peers.sort_unstable();
        peers.dedup();
        // At most 2^19 ranks, so a rank fits a u32.
        list.extend(peers.into_iter().map(|j| (Direction::Peer(j as u32), j)));
    }
    Ok(topo)
}

/// Ranks grouped by a key of their PE; groups come out in `PeId` order because participants are sorted.
fn groups_by<K: PartialEq>(participants: &[PeId], key: impl Fn(PeId) -> K) -> Vec<Vec<usize>> {
    let mut groups: Vec<Vec<usize>> = Vec::new();
    for (rank, &pe) in participants.iter().enumerate() {
        match groups.last_mut() {
            Some(group) if key(participants[group[0]]) == key(pe) => group.push(rank),
            _ => groups.push(vec![rank]),
        }
    }
    groups
}

/// Three levels, one ring each, for the hierarchical all-reduce: the participating PEs of each cube form an `E`/`W` ring (in PE order);
/// the lowest participant of each cube is its cube leader, and the cube leaders of a SIP form an
/// `N` (next) / `S` (previous) ring; the lowest participant of each SIP is its SIP leader, and the
/// SIP leaders form a `sip_next` / `sip_prev` ring. A level with one member has no links, so one SIP,
/// one cube or one PE per cube are all valid.
///
/// # Errors
/// As [`TopologyFn`]; any non-empty set of distinct PEs of the system works.
pub fn hierarchical_3level(system: &System, participants: &[PeId]) -> Result<Topology, PlanError> {
    let mut topo = Topology::unlinked(sorted_participants(system, participants)?);
    let cubes = groups_by(&topo.participants, |pe| (pe.sip, pe.cube));
    for cube in &cubes {
        topo.link_ring(cube, Direction::E, Direction::W);
    }
    let mut sip_leaders = Vec::new();
    let sip_of = |cube: &Vec<usize>| topo.participants[cube[0]].sip;
    let sips: Vec<Vec<usize>> =
        cubes.chunk_by(|a, b| sip_of(a) == sip_of(b)).map(|sip| sip.iter().map(|c| c[0]).collect()).collect();
    for cube_leaders in sips {
        topo.link_ring(&cube_leaders, Direction::N, Direction::S);
        sip_leaders.push(cube_leaders[0]);
    }
    topo.link_ring(&sip_leaders, Direction::SipNext, Direction::SipPrev);
    Ok(topo)
}

/// The cube mesh of each SIP and a ring of SIPs, for the inter-cube all-reduce: one participant per cube (its cube leader), linked to the participants of its
/// mesh neighbours, `E`/`W` for x±1 and `N`/`S` for y±1, without wraparound; the participant of
/// cube 0 of each SIP is its SIP leader, and the SIP leaders form a `sip_next` / `sip_prev` ring.
///
/// # Errors
/// As [`TopologyFn`], and [`PlanError::Unsupported`] when a cube has more than one participant, a
/// participating SIP has none in cube 0, or a participating cube cannot be reached from cube 0 through
/// participating mesh neighbours.
pub fn intercube(system: &System, participants: &[PeId]) -> Result<Topology, PlanError> {
    let mut topo = Topology::unlinked(sorted_participants(system, participants)?);
    let unsupported = |reason: String| PlanError::Unsupported { topology: "intercube", reason };
    let mut by_cube: BTreeMap<(u32, u32), usize> = BTreeMap::new();
    for cube in groups_by(&topo.participants, |pe| (pe.sip, pe.cube)) {
        let first = topo.participants[cube[0]];
        if cube.len() > 1 {
            let pes: Vec<String> = cube.iter().map(|&r| topo.participants[r].to_string()).collect();
            return Err(unsupported(format!(
                "it links one PE per cube (mapper cube_leaders or leader_only), but cube {} of SIP {} has {} \
                 participants: {}",
                first.cube,
                first.sip,
                cube.len(),
                pes.join(", ")
            )));
        }
        by_cube.insert((first.sip, first.cube), cube[0]);
    }
    // Both fit u32: the system has at most 2^24 PEs (System::MAX_PES).
    let (w, h) = (system.mesh().0 as u32, system.mesh().1 as u32);
    let mut sip_leaders = Vec::new();
    let mut reached = vec![false; topo.len()];
    for sip in groups_by(&topo.participants, |pe| pe.sip) {
        let sip_id = topo.participants[sip[0]].sip;
        let Some(&leader) = by_cube.get(&(sip_id, 0)) else {
            return Err(unsupported(format!(
                "SIP {sip_id} has no participant in cube 0, which would be its SIP leader"
            )));
        };
        sip_leaders.push(leader);
        reached[leader] = true;
        let mut queue = VecDeque::from([leader]);
        while let Some(rank) = queue.pop_front() {
            let c = system.cube_coord(topo.participants[rank].cube);
            let steps = [
                (Direction::E, (c.x + 1 < w).then(|| CubeCoord { x: c.x + 1, ..c })),
                (Direction::W, c.x.checked_sub(1).map(|x| CubeCoord { x, ..c })),
                (Direction::N, (c.y + 1 < h).then(|| CubeCoord { y: c.y + 1, ..c })),
                (Direction::S, c.y.checked_sub(1).map(|y| CubeCoord { y, ..c })),
            ];
            for (direction, coord) in steps {
                let Some(&peer) = coord.and_then(|coord| by_cube.get(&(sip_id, system.cube_index(coord)))) else {
                    continue;
                };
                topo.neighbors[rank].push((direction, peer));
                if !reached[peer] {
                    reached[peer] = true;
                    queue.push_back(peer);
                }
            }
        }
        if let Some(&lost) = sip.iter().find(|&&r| !reached[r]) {
            return Err(unsupported(format!(
                "{} cannot be reached from cube 0 of its SIP through participating mesh neighbours",
                topo.participants[lost]
            )));
        }
    }
    topo.link_ring(&sip_leaders, Direction::SipNext, Direction::SipPrev);
    Ok(topo)
}
