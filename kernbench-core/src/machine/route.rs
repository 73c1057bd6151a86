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
