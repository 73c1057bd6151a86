//! Routes between PEs over the physical channels of a system, for the timing model.
//!
//! The physical network:
//!
//! ```text
//!  SIP s ──UCIe── SIP s+1          ring / fully_connected / switched (via one switch)
//!   │ attached at (cube 0, PE 0)
//!   cube mesh, NoC: (x,y) ── (x±1,y), (x,y±1), no wraparound; attached at each cube's PE 0
//!    │
//!    PE ring: PE i ── PE i±1 mod P
//! ```
//!
//! Every hop is a [`Channel`]: one direction of one link, between two [`Node`]s. Mesh channels join
//! the PE 0s of neighbouring cubes and SIP channels the (cube 0, PE 0)s of SIPs, because those PEs are
//! where a cube attaches to the NoC and a SIP to UCIe. Routing is deterministic: the shorter way round
//! a ring (ties go forward, to PE i+1 or SIP s+1), X before Y in the mesh.
//!
//! [`System::fan_out`] counts the channels leaving a node: every channel some route uses, and no other,
//! so a bound built on it counts every path a kernel could take.

use crate::machine::{LinkClass, PeId, SipInterconnect, System};

/// An end of a physical channel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize)]
pub enum Node {
    /// A PE; cubes and SIPs attach to the network through their PE 0 and (cube 0, PE 0).
    Pe(PeId),
    /// The switch of a [`SipInterconnect::Switched`] system.
    Switch,
}

/// One direction of one physical link: transfers on the same channel share its bandwidth.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize)]
pub struct Channel {
    /// The link class, which sets latency and bandwidth.
    pub class: LinkClass,
    /// Where data enters the channel.
    pub from: Node,
    /// Where it leaves.
    pub to: Node,
}

/// The channels a message crosses from one PE to another, in order.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Route {
    /// The channels, first to last; each one's `to` is the next one's `from`.
    pub channels: Vec<Channel>,
}

impl Route {
    /// The number of channels crossed (0 from a PE to itself).
    pub fn hops(&self) -> usize {
        self.channels.len()
    }

    /// The farthest-reaching class crossed, which bounds the route's bandwidth; `None` for an empty
    /// route.
    pub fn farthest_class(&self) -> Option<LinkClass> {
        self.channels.iter().map(|c| c.class).max()
    }

    /// The number of channels of `class` crossed.
    pub fn count(&self, class: LinkClass) -> usize {
        self.channels.iter().filter(|c| c.class == class).count()
    }

    fn push(&mut self, class: LinkClass, from: Node, to: Node) {
        self.channels.push(Channel { class, from, to });
    }

    /// Steps round a ring of `n` members from `from` to `to`, the shorter way (forward on a tie);
    /// `node(i)` names member `i`.
    fn ring(&mut self, class: LinkClass, n: u32, from: u32, to: u32, node: impl Fn(u32) -> Node) {
        let forward = (to + n - from) % n;
        let backward = n - forward;
        let (steps, next): (u32, fn(u32, u32) -> u32) =
            if forward <= backward { (forward, |i, n| (i + 1) % n) } else { (backward, |i, n| (i + n - 1) % n) };
        let mut at = from;
        for _ in 0..steps {
            let to = next(at, n);
            self.push(class, node(at), node(to));
            at = to;
        }
    }
}

impl System {
    /// How many channels of each class leave `node`, indexed by `LinkClass as usize`: every channel
    /// a [route](System::route) can take from there. Every link has a channel each way, so as many
    /// of each class enter the node. A ring of two members (PEs of a cube, SIPs) is one link, a
    /// ring of one none; a node outside the system has none.
    ///
    /// # Examples
    /// ```
    /// use kernbench_core::{LinkClass, Node, PeId, SipInterconnect, System, SystemSpec};
    /// let system = System::builtin(); // 4 SIPs on a ring, 4x4 cubes, 8 PEs a cube
    /// let fan_out = |pe| system.fan_out(Node::Pe(pe));
    /// // A SIP's (cube 0, PE 0): its cube ring, the corner cube's two mesh neighbours, two SIPs.
    /// assert_eq!(fan_out(PeId::new(0, 0, 0)), [2, 2, 2]);
    /// assert_eq!(fan_out(PeId::new(0, 5, 0)), [2, 4, 0]);
    /// assert_eq!(fan_out(PeId::new(0, 5, 3)), [2, 0, 0]);
    ///
    /// let spec = SystemSpec { sip_interconnect: SipInterconnect::Switched, ..System::shape(3, 1, 1, 1).unwrap().spec().clone() };
    /// let switched = System::from_spec(spec).unwrap();
    /// assert_eq!(switched.fan_out(Node::Pe(PeId::new(2, 0, 0)))[LinkClass::InterSip as usize], 1);
    /// assert_eq!(switched.fan_out(Node::Switch), [0, 0, 3]);
    /// ```
    pub fn fan_out(&self, node: Node) -> [usize; LinkClass::ALL.len()] {
        let ring = |members: usize| (members - 1).min(2);
        let sips = self.sips();
        let mut out = [0; LinkClass::ALL.len()];
        match node {
            Node::Switch => {
                if self.interconnect() == SipInterconnect::Switched && sips > 1 {
                    out[LinkClass::InterSip as usize] = sips;
                }
            }
            Node::Pe(pe) if self.contains(pe) => {
                out[LinkClass::IntraCube as usize] = ring(self.pes_per_cube());
                if pe.pe == 0 {
                    let (w, h) = self.mesh();
                    let at = self.cube_coord(pe.cube);
                    let (x, y) = (at.x as usize, at.y as usize);
                    out[LinkClass::InterCube as usize] =
                        usize::from(x > 0) + usize::from(x + 1 < w) + usize::from(y > 0) + usize::from(y + 1 < h);
                    if pe.cube == 0 {
                        out[LinkClass::InterSip as usize] = match self.interconnect() {
                            SipInterconnect::Ring => ring(sips),
                            SipInterconnect::FullyConnected => sips - 1,
                            SipInterconnect::Switched => usize::from(sips > 1),
                        };
                    }
                }
            }
            Node::Pe(_) => {}
        }
        out
    }

    /// The route from PE `a` to PE `b`: round `a`'s cube ring to its PE 0 if the message leaves the
    /// cube, over the mesh (X, then Y) to the destination cube (or to cube 0, across the SIP
    /// interconnect, and from cube 0 on), then round the destination ring to `b`.
    ///
    /// # Panics
    /// When `a` or `b` is not in the system (see [`System::try_route`]).
    ///
    /// # Examples
    /// ```
    /// use kernbench_core::{LinkClass, PeId, System};
    /// let system = System::shape(2, 2, 1, 4).unwrap();
    /// let route = system.route(PeId::new(0, 1, 1), PeId::new(1, 0, 3));
    /// // pe1 -> pe0, cube 1 -> cube 0, SIP 0 -> SIP 1, pe0 -> pe3 (backwards round 4).
    /// assert_eq!(route.hops(), 4);
    /// assert_eq!(route.farthest_class(), Some(LinkClass::InterSip));
    /// assert_eq!(system.route(PeId::new(0, 0, 2), PeId::new(0, 0, 2)).hops(), 0);
    /// ```
    pub fn route(&self, a: PeId, b: PeId) -> Route {
        match self.try_route(a, b) {
            Some(route) => route,
            None => panic!("route {a} -> {b}: a PE is outside the system ({})", self.describe()),
        }
    }

    /// The route from `a` to `b` as [`System::route`] gives it, or `None` when either PE is not in
    /// the system.
    pub fn try_route(&self, a: PeId, b: PeId) -> Option<Route> {
        if !self.contains(a) || !self.contains(b) {
            return None;
        }
        let mut route = Route::default();
        let pes = self.pes_per_cube() as u32;
        if (a.sip, a.cube) == (b.sip, b.cube) {
            route.ring(LinkClass::IntraCube, pes, a.pe, b.pe, |i| Node::Pe(PeId { pe: i, ..a }));
            return Some(route);
        }
        route.ring(LinkClass::IntraCube, pes, a.pe, 0, |i| Node::Pe(PeId { pe: i, ..a }));
        if a.sip == b.sip {
            self.mesh_route(&mut route, a.sip, a.cube, b.cube);
        } else {
            self.mesh_route(&mut route, a.sip, a.cube, 0);
            self.sip_route(&mut route, a.sip, b.sip);
            self.mesh_route(&mut route, b.sip, 0, b.cube);
        }
        route.ring(LinkClass::IntraCube, pes, 0, b.pe, |i| Node::Pe(PeId { pe: i, ..b }));
        Some(route)
    }

    /// Dimension-order routing between the PE 0s of two cubes of one SIP.
    fn mesh_route(&self, route: &mut Route, sip: u32, from: u32, to: u32) {
        let node = |x: u32, y: u32| Node::Pe(PeId::new(sip, self.cube_index(crate::machine::CubeCoord { x, y }), 0));
        let (mut at, dest) = (self.cube_coord(from), self.cube_coord(to));
        while at.x != dest.x {
            let x = if at.x < dest.x { at.x + 1 } else { at.x - 1 };
            route.push(LinkClass::InterCube, node(at.x, at.y), node(x, at.y));
            at.x = x;
        }
        while at.y != dest.y {
            let y = if at.y < dest.y { at.y + 1 } else { at.y - 1 };
            route.push(LinkClass::InterCube, node(at.x, at.y), node(at.x, y));
            at.y = y;
        }
    }

    /// From SIP `from`'s (cube 0, PE 0) to SIP `to`'s, over the interconnect.
    fn sip_route(&self, route: &mut Route, from: u32, to: u32) {
        let node = |sip: u32| Node::Pe(PeId::new(sip, 0, 0));
        match self.interconnect() {
            SipInterconnect::Ring => route.ring(LinkClass::InterSip, self.sips() as u32, from, to, node),
            SipInterconnect::FullyConnected => route.push(LinkClass::InterSip, node(from), node(to)),
            SipInterconnect::Switched => {
                route.push(LinkClass::InterSip, node(from), Node::Switch);
                route.push(LinkClass::InterSip, Node::Switch, node(to));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use crate::machine::{Node, PeId, SipInterconnect, System, test_system};

    /// Every channel of every route, counted by the node it leaves and by the node it enters.
    fn routed(system: &System) -> (BTreeMap<Node, [usize; 3]>, BTreeMap<Node, [usize; 3]>) {
        let channels: std::collections::BTreeSet<_> =
            system.all_pes().flat_map(|a| system.all_pes().flat_map(move |b| system.route(a, b).channels)).collect();
        let (mut out, mut into) = (BTreeMap::new(), BTreeMap::new());
        for c in channels {
            out.entry(c.from).or_insert([0; 3])[c.class as usize] += 1;
            into.entry(c.to).or_insert([0; 3])[c.class as usize] += 1;
        }
        (out, into)
    }

    #[test]
    fn fan_out_counts_exactly_the_channels_routes_leave_and_enter_a_node_by() {
        for interconnect in [SipInterconnect::Ring, SipInterconnect::FullyConnected, SipInterconnect::Switched] {
            for (sips, mesh, pes) in [(1, (1, 1), 1), (2, (1, 1), 2), (3, (2, 1), 3), (4, (3, 2), 4), (5, (1, 2), 1)] {
                let system = test_system(sips, mesh, pes, interconnect);
                let (out, into) = routed(&system);
                let nodes = system.all_pes().map(Node::Pe).chain([Node::Switch]);
                for node in nodes {
                    let want = system.fan_out(node);
                    let shape = system.describe();
                    assert_eq!(
                        out.get(&node).copied().unwrap_or_default(),
                        want,
                        "out of {node:?} on {shape} {interconnect}"
                    );
                    assert_eq!(
                        into.get(&node).copied().unwrap_or_default(),
                        want,
                        "into {node:?} on {shape} {interconnect}"
                    );
                }
            }
        }
    }

    #[test]
    fn a_node_outside_the_system_has_no_channels() {
        let system = System::builtin();
        assert_eq!(system.fan_out(Node::Pe(PeId::new(4, 0, 0))), [0; 3]);
        assert_eq!(system.fan_out(Node::Switch), [0; 3]);
    }
}
