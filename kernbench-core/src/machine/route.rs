//! Routes between PEs over the physical channels of a system, for the timing model.
//!
//! The physical network:
//!
//! ```text
//!                    network switch                        (only with several nodes)
//!                 ┌───┴─────┐ ... ┌──────┐                 NIC links (inter_node)
//!      node 0: NIC 0 .. NIC R-1   node 1: NIC 0 .. NIC R-1   one NIC per rail
//!               └──┬──┘           (switch to NIC: inter_sip)
//!               node switch                                 (one node: the one switch)
//!   SIP s ──UCIe── SIP s+1        ring / fully_connected / switched, among a node's SIPs
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
//! A system of several nodes (see [`NodesSpec`](crate::machine::NodesSpec)) is switched inside each
//! node, and a route between nodes depends on the channel (lane) `c` it is taken on: from the SIP to
//! its node's switch, to the NIC of rail `c mod R` of that node, to the network switch, to the NIC of
//! the same rail of the other node, to that node's switch and to the SIP ([`System::route_on`]). So a
//! kernel's lanes spread over the rails as NCCL's channels spread over NICs. Routes inside a node,
//! and every route of a system of one node, are the same on every channel.
//!
//! [`System::fan_out`] counts the channels leaving a node: every channel some route uses, and no other,
//! so a bound built on it counts every path a kernel could take.

use crate::machine::{LinkClass, PeId, SipInterconnect, System};

/// An end of a physical channel.
///
/// A system of one node names its switch `Switch`, as before nodes existed, so its channels, reports
/// and traces are unchanged; a system of several nodes has a `NodeSwitch` per node instead.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize)]
pub enum Node {
    /// A PE; cubes and SIPs attach to the network through their PE 0 and (cube 0, PE 0).
    Pe(PeId),
    /// The switch of a [`SipInterconnect::Switched`] system of one node.
    Switch,
    /// The switch of node `k` of a system of several nodes.
    NodeSwitch(u32),
    /// The NIC of one rail of one node, between the node's switch and the network switch.
    Nic {
        /// The node.
        node: u32,
        /// The rail: `0 .. nics_per_node`.
        rail: u32,
    },
    /// The network switch that joins the nodes' NICs.
    Network,
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
}

/// What a walk along a route does with each channel it crosses, in order: a [`Route`] keeps it, the
/// summaries below fold it, so a figure of a route needs neither the route nor its allocation.
trait Hops {
    fn hop(&mut self, class: LinkClass, from: Node, to: Node);

    /// `steps` hops of `class` in a row, from `node(0)` to `node(1)`, on to `node(steps)`. A sink
    /// that does not look at the nodes counts them without naming each one.
    fn line(&mut self, class: LinkClass, steps: u32, node: impl Fn(u32) -> Node) {
        for i in 0..steps {
            self.hop(class, node(i), node(i + 1));
        }
    }

    /// Steps round a ring of `n` members from `from` to `to`, the shorter way (forward on a tie);
    /// `node(i)` names member `i`.
    fn ring(&mut self, class: LinkClass, n: u32, from: u32, to: u32, node: impl Fn(u32) -> Node) {
        let forward = (to + n - from) % n;
        let backward = n - forward;
        if forward <= backward {
            self.line(class, forward, |i| node((from + i) % n));
        } else {
            self.line(class, backward, |i| node((from + n - i) % n));
        }
    }
}

impl Hops for Route {
    fn hop(&mut self, class: LinkClass, from: Node, to: Node) {
        self.push(class, from, to);
    }
}

/// Below this, every whole number is a double, and so is the sum of two.
const EXACT_SUM: f64 = (1u64 << 53) as f64;

/// A route's latency, added channel by channel as summing the built route's channels adds it
/// (`Iterator::sum` starts from -0.0), so the same bits.
struct Latency<'s> {
    system: &'s System,
    ns: f64,
}

impl Hops for Latency<'_> {
    fn hop(&mut self, class: LinkClass, _: Node, _: Node) {
        self.ns += self.system.link(class).latency_ns;
    }

    fn line(&mut self, class: LinkClass, steps: u32, _: impl Fn(u32) -> Node) {
        let latency = self.system.link(class).latency_ns;
        // Whole numbers of ns below 2^53 add exactly, so a run of them is one product and one sum, the
        // same bits as the route's sum: a route across a ring of a thousand SIPs is a few lines, and a
        // lower bound walks a million routes.
        let exact = |x: f64| x.fract() == 0.0 && x.abs() < EXACT_SUM;
        if exact(latency) && exact(self.ns) && self.ns.abs() + f64::from(steps) * latency.abs() < EXACT_SUM {
            if steps > 0 {
                self.ns += f64::from(steps) * latency;
            }
            return;
        }
        // Otherwise added once a hop, in order, as the route's sum adds them.
        for _ in 0..steps {
            self.ns += latency;
        }
    }
}

/// How far a route reaches: how many channels it crosses and its farthest-reaching class.
#[derive(Default)]
struct Reach {
    hops: usize,
    farthest: Option<LinkClass>,
}

impl Hops for Reach {
    fn hop(&mut self, class: LinkClass, _: Node, _: Node) {
        self.hops += 1;
        self.farthest = self.farthest.max(Some(class));
    }

    fn line(&mut self, class: LinkClass, steps: u32, _: impl Fn(u32) -> Node) {
        if steps > 0 {
            self.hops += steps as usize;
            self.farthest = self.farthest.max(Some(class));
        }
    }
}

impl System {
    /// How many channels of each class leave `node`, indexed by `LinkClass as usize`: every channel
    /// a [route](System::route_on) on any channel can take from there. Every link has a channel each
    /// way, so as many of each class enter the node. A ring of two members (PEs of a cube, SIPs) is
    /// one link, a ring of one none; a node outside the system has none, and so have NICs, node
    /// switches and the network switch in a system of one node.
    ///
    /// # Examples
    /// ```
    /// use kernbench_core::{LinkClass, Node, PeId, SipInterconnect, System, SystemSpec};
    /// let system = System::builtin(); // 4 SIPs on a ring, 4x4 cubes, 8 PEs a cube
    /// let fan_out = |pe| system.fan_out(Node::Pe(pe));
    /// // A SIP's (cube 0, PE 0): its cube ring, the corner cube's two mesh neighbours, two SIPs.
    /// assert_eq!(fan_out(PeId::new(0, 0, 0)), [2, 2, 2, 0]);
    /// assert_eq!(fan_out(PeId::new(0, 5, 0)), [2, 4, 0, 0]);
    /// assert_eq!(fan_out(PeId::new(0, 5, 3)), [2, 0, 0, 0]);
    ///
    /// let spec = SystemSpec { sip_interconnect: SipInterconnect::Switched, ..System::shape(3, 1, 1, 1).unwrap().spec().clone() };
    /// let switched = System::from_spec(spec).unwrap();
    /// assert_eq!(switched.fan_out(Node::Pe(PeId::new(2, 0, 0)))[LinkClass::InterSip as usize], 1);
    /// assert_eq!(switched.fan_out(Node::Switch), [0, 0, 3, 0]);
    ///
    /// // Two nodes of 4 SIPs and 2 NICs: a node switch reaches its SIPs and its NICs.
    /// let json = r#"{"sips": 8, "mesh": {"w": 1, "h": 1}, "pes_per_cube": 1, "sip_interconnect": "switched",
    ///                "nodes": {"sips_per_node": 4, "nics_per_node": 2}}"#;
    /// let nodes = System::from_json_str(json).unwrap();
    /// assert_eq!(nodes.fan_out(Node::NodeSwitch(1)), [0, 0, 6, 0]);
    /// assert_eq!(nodes.fan_out(Node::Nic { node: 1, rail: 1 }), [0, 0, 1, 1]);
    /// assert_eq!(nodes.fan_out(Node::Network), [0, 0, 0, 4]);
    /// ```
    pub fn fan_out(&self, node: Node) -> [usize; LinkClass::ALL.len()] {
        let ring = |members: usize| (members - 1).min(2);
        let (sips, per_node, nodes, nics) = (self.sips(), self.sips_per_node(), self.nodes(), self.nics_per_node());
        let mut out = [0; LinkClass::ALL.len()];
        match node {
            Node::Switch => {
                if self.interconnect() == SipInterconnect::Switched && nodes == 1 && sips > 1 {
                    out[LinkClass::InterSip as usize] = sips;
                }
            }
            // With several nodes every SIP and every NIC of a node is reached through its switch.
            Node::NodeSwitch(k) => {
                if nodes > 1 && (k as usize) < nodes {
                    out[LinkClass::InterSip as usize] = per_node + nics;
                }
            }
            Node::Nic { node, rail } => {
                if (node as usize) < nodes && (rail as usize) < nics {
                    out[LinkClass::InterSip as usize] = 1;
                    out[LinkClass::InterNode as usize] = 1;
                }
            }
            Node::Network => {
                if nodes > 1 {
                    out[LinkClass::InterNode as usize] = nodes * nics;
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
                        // A ring or a full interconnect is a node's own (one node: the system's); a
                        // switched SIP reaches other nodes through its switch too.
                        out[LinkClass::InterSip as usize] = match self.interconnect() {
                            SipInterconnect::Ring => ring(per_node),
                            SipInterconnect::FullyConnected => per_node - 1,
                            SipInterconnect::Switched => usize::from(sips > 1),
                        };
                    }
                }
            }
            Node::Pe(_) => {}
        }
        out
    }

    /// The route from PE `a` to PE `b` on channel 0: round `a`'s cube ring to its PE 0 if the message
    /// leaves the cube, over the mesh (X, then Y) to the destination cube (or to cube 0, across the
    /// SIP interconnect, and from cube 0 on), then round the destination ring to `b`. Between nodes
    /// it crosses the NICs of rail 0 ([`System::route_on`] takes another channel's).
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
        self.route_on(a, b, 0)
    }

    /// The route from PE `a` to PE `b` on channel (lane) `channel`: as [`System::route`], but
    /// between nodes through the NICs of rail `channel mod nics_per_node`, so that a kernel's lanes
    /// share the NICs as NCCL's channels do. Inside a node every channel takes the same route.
    ///
    /// # Panics
    /// When `a` or `b` is not in the system (see [`System::try_route_on`]).
    ///
    /// # Examples
    /// ```
    /// use kernbench_core::{Node, PeId, System};
    /// let json = r#"{"sips": 4, "mesh": {"w": 1, "h": 1}, "pes_per_cube": 1, "sip_interconnect": "switched",
    ///                "nodes": {"sips_per_node": 2}}"#;
    /// let system = System::from_json_str(json).unwrap();
    /// // SIP 0 (node 0) to SIP 3 (node 1) on channel 3: rail 3 mod 2 = 1 on both sides.
    /// let route = system.route_on(PeId::new(0, 0, 0), PeId::new(3, 0, 0), 3);
    /// let nodes: Vec<Node> = route.channels.iter().map(|c| c.to).collect();
    /// assert_eq!(nodes, [
    ///     Node::NodeSwitch(0),
    ///     Node::Nic { node: 0, rail: 1 },
    ///     Node::Network,
    ///     Node::Nic { node: 1, rail: 1 },
    ///     Node::NodeSwitch(1),
    ///     Node::Pe(PeId::new(3, 0, 0)),
    /// ]);
    /// ```
    pub fn route_on(&self, a: PeId, b: PeId, channel: usize) -> Route {
        let mut route = Route::default();
        self.walk_or_panic(a, b, channel, &mut route);
        route
    }

    /// The route from `a` to `b` as [`System::route`] gives it, or `None` when either PE is not in
    /// the system.
    pub fn try_route(&self, a: PeId, b: PeId) -> Option<Route> {
        self.try_route_on(a, b, 0)
    }

    /// The route from `a` to `b` on `channel` as [`System::route_on`] gives it, or `None` when either
    /// PE is not in the system.
    pub fn try_route_on(&self, a: PeId, b: PeId, channel: usize) -> Option<Route> {
        let mut route = Route::default();
        self.walk(a, b, channel, &mut route)?;
        Some(route)
    }

    /// The latency of the route from PE `a` to PE `b` (the same on every channel): its channels'
    /// latencies added in order, the same bits as adding up [`System::route`]'s, without building it.
    ///
    /// # Panics
    /// When `a` or `b` is not in the system, as [`System::route`].
    ///
    /// # Examples
    /// ```
    /// use kernbench_core::{PeId, System};
    /// let system = System::shape(2, 2, 1, 4).unwrap();
    /// let (a, b) = (PeId::new(0, 1, 1), PeId::new(1, 0, 3));
    /// let built: f64 = system.route(a, b).channels.iter().map(|c| system.link(c.class).latency_ns).sum();
    /// assert_eq!(system.route_latency_ns(a, b), built);
    /// ```
    pub fn route_latency_ns(&self, a: PeId, b: PeId) -> f64 {
        let mut latency = Latency { system: self, ns: -0.0 };
        self.walk_or_panic(a, b, 0, &mut latency);
        latency.ns
    }

    /// The farthest-reaching class the route from PE `a` to PE `b` crosses, as
    /// [`Route::farthest_class`] of [`System::route`], without building it.
    ///
    /// # Panics
    /// When `a` or `b` is not in the system, as [`System::route`].
    pub fn route_farthest_class(&self, a: PeId, b: PeId) -> Option<LinkClass> {
        let mut reach = Reach::default();
        self.walk_or_panic(a, b, 0, &mut reach);
        reach.farthest
    }

    /// How many channels the route from PE `a` to PE `b` crosses and the farthest-reaching class
    /// among them, as [`Route::hops`] and [`Route::farthest_class`] of [`System::try_route`], without
    /// building it; `None` when either PE is not in the system.
    pub(crate) fn try_route_reach(&self, a: PeId, b: PeId) -> Option<(usize, Option<LinkClass>)> {
        let mut reach = Reach::default();
        self.walk(a, b, 0, &mut reach)?;
        Some((reach.hops, reach.farthest))
    }

    /// Hands `each` the channels of the route from PE `a` to PE `b` on `channel`, in order, as
    /// [`System::route_on`] lists them, without building the route.
    ///
    /// # Panics
    /// When `a` or `b` is not in the system, as [`System::route_on`].
    ///
    /// # Examples
    /// ```
    /// use kernbench_core::{PeId, System};
    /// let system = System::shape(2, 2, 1, 4).unwrap();
    /// let (a, b) = (PeId::new(0, 1, 1), PeId::new(1, 0, 3));
    /// let mut channels = Vec::new();
    /// system.for_each_channel_on(a, b, 0, |channel| channels.push(channel));
    /// assert_eq!(channels, system.route(a, b).channels);
    /// ```
    pub fn for_each_channel_on(&self, a: PeId, b: PeId, channel: usize, each: impl FnMut(Channel)) {
        struct Each<F>(F);
        impl<F: FnMut(Channel)> Hops for Each<F> {
            fn hop(&mut self, class: LinkClass, from: Node, to: Node) {
                (self.0)(Channel { class, from, to });
            }
        }
        self.walk_or_panic(a, b, channel, &mut Each(each));
    }

    fn walk_or_panic(&self, a: PeId, b: PeId, channel: usize, hops: &mut impl Hops) {
        if self.walk(a, b, channel, hops).is_none() {
            panic!("route {a} -> {b}: a PE is outside the system ({})", self.describe());
        }
    }

    /// Walks the route from `a` to `b` on `channel` (see [`System::route_on`]), handing `hops` each
    /// channel in order; `None` when either PE is not in the system.
    fn walk(&self, a: PeId, b: PeId, channel: usize, hops: &mut impl Hops) -> Option<()> {
        if !self.contains(a) || !self.contains(b) {
            return None;
        }
        let pes = self.pes_per_cube() as u32;
        if (a.sip, a.cube) == (b.sip, b.cube) {
            hops.ring(LinkClass::IntraCube, pes, a.pe, b.pe, |i| Node::Pe(PeId { pe: i, ..a }));
            return Some(());
        }
        hops.ring(LinkClass::IntraCube, pes, a.pe, 0, |i| Node::Pe(PeId { pe: i, ..a }));
        if a.sip == b.sip {
            self.mesh_route(hops, a.sip, a.cube, b.cube);
        } else {
            self.mesh_route(hops, a.sip, a.cube, 0);
            self.sip_route(hops, (a.sip, b.sip), channel);
            self.mesh_route(hops, b.sip, 0, b.cube);
        }
        hops.ring(LinkClass::IntraCube, pes, 0, b.pe, |i| Node::Pe(PeId { pe: i, ..b }));
        Some(())
    }

    /// Dimension-order routing between the PE 0s of two cubes of one SIP.
    fn mesh_route(&self, hops: &mut impl Hops, sip: u32, from: u32, to: u32) {
        let node = |x: u32, y: u32| Node::Pe(PeId::new(sip, self.cube_index(crate::machine::CubeCoord { x, y }), 0));
        let (at, dest) = (self.cube_coord(from), self.cube_coord(to));
        // `i` steps from `a` toward `b`.
        let toward = |a: u32, b: u32, i: u32| if a < b { a + i } else { a - i };
        hops.line(LinkClass::InterCube, at.x.abs_diff(dest.x), |i| node(toward(at.x, dest.x, i), at.y));
        hops.line(LinkClass::InterCube, at.y.abs_diff(dest.y), |i| node(dest.x, toward(at.y, dest.y, i)));
    }

    /// From SIP `from`'s (cube 0, PE 0) to SIP `to`'s: over the node's interconnect, or between
    /// nodes through the NICs of the rail of `channel`.
    fn sip_route(&self, hops: &mut impl Hops, (from, to): (u32, u32), channel: usize) {
        let node = |sip: u32| Node::Pe(PeId::new(sip, 0, 0));
        let (from_node, to_node) = (self.node_of(from), self.node_of(to));
        if from_node == to_node {
            let base = from_node * self.sips_per_node() as u32;
            match self.interconnect() {
                SipInterconnect::Ring => {
                    let members = self.sips_per_node() as u32;
                    hops.ring(LinkClass::InterSip, members, from - base, to - base, |i| node(base + i));
                }
                SipInterconnect::FullyConnected => hops.hop(LinkClass::InterSip, node(from), node(to)),
                SipInterconnect::Switched => {
                    hops.hop(LinkClass::InterSip, node(from), self.switch_of(from_node));
                    hops.hop(LinkClass::InterSip, self.switch_of(from_node), node(to));
                }
            }
            return;
        }
        // Several nodes: the spec checked that they are switched, so nics_per_node is at least 1.
        let rail = (channel % self.nics_per_node()) as u32;
        let (out_nic, in_nic) = (Node::Nic { node: from_node, rail }, Node::Nic { node: to_node, rail });
        hops.hop(LinkClass::InterSip, node(from), self.switch_of(from_node));
        hops.hop(LinkClass::InterSip, self.switch_of(from_node), out_nic);
        hops.hop(LinkClass::InterNode, out_nic, Node::Network);
        hops.hop(LinkClass::InterNode, Node::Network, in_nic);
        hops.hop(LinkClass::InterSip, in_nic, self.switch_of(to_node));
        hops.hop(LinkClass::InterSip, self.switch_of(to_node), node(to));
    }

    /// Every channel leaving `node`, in a fixed order (within a cube ring forward first; mesh +x, -x,
    /// +y, -y; SIP rings forward first; switches their SIPs, then their NICs): as many of each class
    /// as [`System::fan_out`] counts. The links a route around a failed one can take.
    ///
    /// # Examples
    /// ```
    /// use kernbench_core::{Node, PeId, System};
    /// let ring = System::shape(4, 1, 1, 1).unwrap();
    /// let ends: Vec<Node> = ring.links_from(Node::Pe(PeId::new(0, 0, 0))).iter().map(|c| c.to).collect();
    /// assert_eq!(ends, [Node::Pe(PeId::new(1, 0, 0)), Node::Pe(PeId::new(3, 0, 0))]);
    /// ```
    pub fn links_from(&self, node: Node) -> Vec<Channel> {
        let mut out = Route::default();
        let fan_out = self.fan_out(node);
        if fan_out == [0; LinkClass::ALL.len()] {
            return out.channels;
        }
        let sip_node = |sip: u32| Node::Pe(PeId::new(sip, 0, 0));
        // Members `next` and `prev` of a ring of `n` round `at`, as many as the ring has links.
        let ring = |out: &mut Route, class, n: u32, at: u32, node: &dyn Fn(u32) -> Node| {
            for (k, step) in [1, n - 1].into_iter().enumerate() {
                if (k as u32) < (n - 1).min(2) {
                    out.push(class, node(at), node((at + step) % n));
                }
            }
        };
        match node {
            Node::Pe(pe) => {
                let pes = self.pes_per_cube() as u32;
                ring(&mut out, LinkClass::IntraCube, pes, pe.pe, &|i| Node::Pe(PeId { pe: i, ..pe }));
                if pe.pe != 0 {
                    return out.channels;
                }
                let (w, h) = self.mesh();
                let at = self.cube_coord(pe.cube);
                let cube = |x: u32, y: u32| {
                    Node::Pe(PeId::new(pe.sip, self.cube_index(crate::machine::CubeCoord { x, y }), 0))
                };
                let steps = [(1, 0), (-1, 0), (0, 1), (0, -1)];
                for (dx, dy) in steps {
                    let (x, y) = (at.x as i64 + dx, at.y as i64 + dy);
                    if (0..w as i64).contains(&x) && (0..h as i64).contains(&y) {
                        out.push(LinkClass::InterCube, node, cube(x as u32, y as u32));
                    }
                }
                if pe.cube != 0 || fan_out[LinkClass::InterSip as usize] == 0 {
                    return out.channels;
                }
                let k = self.node_of(pe.sip);
                let (base, members) = (k * self.sips_per_node() as u32, self.sips_per_node() as u32);
                match self.interconnect() {
                    SipInterconnect::Ring => {
                        ring(&mut out, LinkClass::InterSip, members, pe.sip - base, &|i| sip_node(base + i));
                    }
                    SipInterconnect::FullyConnected => {
                        for other in (base..base + members).filter(|&s| s != pe.sip) {
                            out.push(LinkClass::InterSip, node, sip_node(other));
                        }
                    }
                    SipInterconnect::Switched => out.push(LinkClass::InterSip, node, self.switch_of(k)),
                }
            }
            Node::Switch => (0..self.sips() as u32).for_each(|s| out.push(LinkClass::InterSip, node, sip_node(s))),
            Node::NodeSwitch(k) => {
                let base = k * self.sips_per_node() as u32;
                for sip in base..base + self.sips_per_node() as u32 {
                    out.push(LinkClass::InterSip, node, sip_node(sip));
                }
                for rail in 0..self.nics_per_node() as u32 {
                    out.push(LinkClass::InterSip, node, Node::Nic { node: k, rail });
                }
            }
            Node::Nic { node: k, .. } => {
                out.push(LinkClass::InterSip, node, Node::NodeSwitch(k));
                out.push(LinkClass::InterNode, node, Node::Network);
            }
            Node::Network => {
                for k in 0..self.nodes() as u32 {
                    for rail in 0..self.nics_per_node() as u32 {
                        out.push(LinkClass::InterNode, node, Node::Nic { node: k, rail });
                    }
                }
            }
        }
        out.channels
    }

    /// The shortest route from PE `a` to PE `b` (fewest channels; of those tied, the first found
    /// taking [`System::links_from`] in order) over channels `dead` does not refuse: the way round
    /// failed links. When there is none, `Err` with every node `a` still reaches.
    ///
    /// # Examples
    /// ```
    /// use kernbench_core::{Node, PeId, System};
    /// let ring = System::shape(4, 1, 1, 1).unwrap();
    /// let sip = |s| Node::Pe(PeId::new(s, 0, 0));
    /// // Links cut both ways.
    /// let cut = |links: &'static [(u32, u32)]| {
    ///     move |c: &kernbench_core::Channel| links.iter().any(|&(x, y)| [(sip(x), sip(y)), (sip(y), sip(x))].contains(&(c.from, c.to)))
    /// };
    /// let route = ring.route_avoiding(PeId::new(0, 0, 0), PeId::new(1, 0, 0), cut(&[(0, 1)])).unwrap();
    /// assert_eq!(route.hops(), 3, "the long way round: 0 -> 3 -> 2 -> 1");
    /// let reached = ring.route_avoiding(PeId::new(0, 0, 0), PeId::new(2, 0, 0), cut(&[(0, 1), (2, 3)])).unwrap_err();
    /// assert_eq!(reached.into_iter().collect::<Vec<_>>(), [sip(0), sip(3)]);
    /// ```
    pub fn route_avoiding(
        &self,
        a: PeId,
        b: PeId,
        dead: impl Fn(&Channel) -> bool,
    ) -> Result<Route, std::collections::BTreeSet<Node>> {
        use std::collections::{BTreeMap, VecDeque};
        let (start, goal) = (Node::Pe(a), Node::Pe(b));
        // Each reached node with the channel it was reached by.
        let mut came_by: BTreeMap<Node, Option<Channel>> = BTreeMap::from([(start, None)]);
        let mut frontier = VecDeque::from([start]);
        while let Some(at) = frontier.pop_front() {
            if at == goal {
                let mut route = Route::default();
                let mut node = goal;
                while let Some(Some(channel)) = came_by.get(&node) {
                    route.channels.push(*channel);
                    node = channel.from;
                }
                route.channels.reverse();
                return Ok(route);
            }
            for channel in self.links_from(at) {
                if !dead(&channel) && !came_by.contains_key(&channel.to) {
                    came_by.insert(channel.to, Some(channel));
                    frontier.push_back(channel.to);
                }
            }
        }
        Err(came_by.into_keys().collect())
    }

    /// The switch of node `k`: the one [`Node::Switch`] of a system of one node, so that its channels
    /// are named as before nodes existed.
    pub(crate) fn switch_of(&self, k: u32) -> Node {
        if self.nodes() > 1 { Node::NodeSwitch(k) } else { Node::Switch }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use crate::machine::{LinkClass, Node, PeId, SipInterconnect, System, nodes_of, test_nodes, test_system};

    type Counts = [usize; LinkClass::ALL.len()];

    /// Every channel of every route on every channel a lane could take (one per rail), counted by
    /// the node it leaves and by the node it enters.
    fn routed(system: &System) -> (BTreeMap<Node, Counts>, BTreeMap<Node, Counts>) {
        let lanes = system.nics_per_node().max(1);
        let pairs = system.all_pes().flat_map(|a| system.all_pes().map(move |b| (a, b)));
        let channels: std::collections::BTreeSet<_> =
            pairs.flat_map(|(a, b)| (0..lanes).flat_map(move |c| system.route_on(a, b, c).channels)).collect();
        let (mut out, mut into) = (BTreeMap::new(), BTreeMap::new());
        for c in channels {
            out.entry(c.from).or_insert([0; 4])[c.class as usize] += 1;
            into.entry(c.to).or_insert([0; 4])[c.class as usize] += 1;
        }
        (out, into)
    }

    fn assert_fan_out_is_what_routes_use(system: &System) {
        let (out, into) = routed(system);
        for node in nodes_of(system) {
            let (want, shape) = (system.fan_out(node), system.describe());
            let interconnect = system.interconnect();
            assert_eq!(out.get(&node).copied().unwrap_or_default(), want, "out of {node:?} on {shape} {interconnect}");
            assert_eq!(into.get(&node).copied().unwrap_or_default(), want, "into {node:?} on {shape} {interconnect}");
        }
    }

    fn assert_links_from_are_the_fan_out(system: &System) {
        for node in nodes_of(system) {
            let mut counts = [0; 4];
            for channel in system.links_from(node) {
                assert_eq!(channel.from, node);
                counts[channel.class as usize] += 1;
            }
            assert_eq!(counts, system.fan_out(node), "{node:?} on {}", system.describe());
        }
    }

    #[test]
    fn links_from_a_node_are_the_channels_fan_out_counts() {
        for interconnect in [SipInterconnect::Ring, SipInterconnect::FullyConnected, SipInterconnect::Switched] {
            for (sips, mesh, pes) in [(1, (1, 1), 1), (2, (1, 1), 2), (3, (2, 1), 3), (4, (3, 2), 4), (5, (1, 2), 1)] {
                assert_links_from_are_the_fan_out(&test_system(sips, mesh, pes, interconnect));
            }
        }
        assert_links_from_are_the_fan_out(&test_nodes(3, 2, 2, (2, 1), 2));
    }

    #[test]
    fn a_route_avoiding_nothing_is_as_short_as_the_route() {
        let system = test_nodes(2, 2, 2, (2, 2), 3);
        for a in system.all_pes() {
            for b in system.all_pes() {
                let around = system.route_avoiding(a, b, |_| false).unwrap();
                assert_eq!(around.hops(), system.route(a, b).hops(), "{a} -> {b}");
            }
        }
    }

    #[test]
    fn a_dead_nic_is_avoided_through_another_rail() {
        let system = test_nodes(2, 2, 2, (1, 1), 1);
        let (a, b) = (PeId::new(0, 0, 0), PeId::new(3, 0, 0));
        let dead_nic = Node::Nic { node: 0, rail: 0 };
        let around = system.route_avoiding(a, b, |c| c.from == dead_nic || c.to == dead_nic).unwrap();
        assert!(around.channels.iter().any(|c| c.to == Node::Nic { node: 0, rail: 1 }), "{around:?}");
        assert_eq!(around.hops(), system.route(a, b).hops());
    }

    #[test]
    fn fan_out_counts_exactly_the_channels_routes_leave_and_enter_a_node_by() {
        for interconnect in [SipInterconnect::Ring, SipInterconnect::FullyConnected, SipInterconnect::Switched] {
            for (sips, mesh, pes) in [(1, (1, 1), 1), (2, (1, 1), 2), (3, (2, 1), 3), (4, (3, 2), 4), (5, (1, 2), 1)] {
                assert_fan_out_is_what_routes_use(&test_system(sips, mesh, pes, interconnect));
            }
        }
    }

    #[test]
    fn fan_out_counts_the_nics_of_every_node_on_every_rail() {
        // (nodes, SIPs a node, NICs a node, mesh, PEs a cube)
        for (nodes, per_node, nics, mesh, pes) in [
            (2, 1, 1, (1, 1), 1),
            (2, 4, 4, (1, 1), 1),
            (3, 2, 1, (2, 1), 2),
            (2, 3, 2, (1, 2), 2),
            (1, 4, 2, (1, 1), 1),
        ] {
            assert_fan_out_is_what_routes_use(&test_nodes(nodes, per_node, nics, mesh, pes));
        }
    }

    #[test]
    fn a_route_across_nodes_on_channel_c_crosses_the_nics_of_rail_c_mod_nics() {
        let system = test_nodes(2, 4, 3, (1, 1), 2);
        let (a, b) = (PeId::new(1, 0, 1), PeId::new(6, 0, 1));
        for channel in 0..7 {
            let rail = (channel % 3) as u32;
            let route = system.route_on(a, b, channel);
            let hop = |class, from, to| crate::machine::Channel { class, from, to };
            let (sip_a, sip_b) = (Node::Pe(PeId::new(1, 0, 0)), Node::Pe(PeId::new(6, 0, 0)));
            let (nic_a, nic_b) = (Node::Nic { node: 0, rail }, Node::Nic { node: 1, rail });
            let (switch_a, switch_b) = (Node::NodeSwitch(0), Node::NodeSwitch(1));
            assert_eq!(
                route.channels,
                [
                    hop(LinkClass::IntraCube, Node::Pe(a), sip_a),
                    hop(LinkClass::InterSip, sip_a, switch_a),
                    hop(LinkClass::InterSip, switch_a, nic_a),
                    hop(LinkClass::InterNode, nic_a, Node::Network),
                    hop(LinkClass::InterNode, Node::Network, nic_b),
                    hop(LinkClass::InterSip, nic_b, switch_b),
                    hop(LinkClass::InterSip, switch_b, sip_b),
                    hop(LinkClass::IntraCube, sip_b, Node::Pe(b)),
                ],
                "channel {channel}"
            );
            assert_eq!(route.farthest_class(), Some(LinkClass::InterNode));
        }
        // Inside a node every channel takes the one route, through the node's own switch.
        let inside = system.route_on(PeId::new(4, 0, 0), PeId::new(7, 0, 0), 2);
        assert_eq!(inside, system.route(PeId::new(4, 0, 0), PeId::new(7, 0, 0)));
        assert_eq!(inside.channels[0].to, Node::NodeSwitch(1));
    }

    #[test]
    fn a_route_s_latency_length_and_farthest_class_are_the_built_route_s_to_the_bit() {
        let whole = vec![
            test_system(5, (3, 2), 3, SipInterconnect::Ring),
            test_system(4, (2, 2), 2, SipInterconnect::FullyConnected),
            test_system(3, (2, 1), 2, SipInterconnect::Switched),
            test_nodes(3, 2, 2, (2, 1), 2),
        ];
        // The same with latencies whose sums depend on the order they are added in.
        let mut systems = whole.clone();
        for system in &mut systems {
            let mut spec = system.spec().clone();
            let fractional = [0.1, 0.7, 3.3];
            for (link, ns) in [&mut spec.links.intra_cube, &mut spec.links.inter_cube, &mut spec.links.inter_sip]
                .into_iter()
                .zip(fractional)
            {
                link.latency_ns = ns;
            }
            *system = System::from_spec(spec).unwrap();
        }
        // And a ring of SIPs whose routes run hundreds of hops of a class in a row.
        systems.extend(whole);
        systems.push(test_system(601, (2, 1), 1, SipInterconnect::Ring));
        for system in &systems {
            let pes: Vec<PeId> = system.all_pes().collect();
            // Every pair of a small system; from each of the first few PEs of a large one.
            let sources = if pes.len() > 200 { &pes[..3] } else { &pes[..] };
            for &a in sources {
                for &b in &pes {
                    let route = system.route(a, b);
                    let built: f64 = route.channels.iter().map(|c| system.link(c.class).latency_ns).sum();
                    assert_eq!(system.route_latency_ns(a, b).to_bits(), built.to_bits(), "{a} -> {b}");
                    assert_eq!(system.route_farthest_class(a, b), route.farthest_class(), "{a} -> {b}");
                    let reach = (route.hops(), route.farthest_class());
                    assert_eq!(system.try_route_reach(a, b), Some(reach), "{a} -> {b}");
                }
            }
        }
    }

    #[test]
    fn a_system_of_one_node_routes_as_a_system_without_nodes() {
        let plain = test_system(4, (1, 2), 2, SipInterconnect::Switched);
        let one_node = test_nodes(1, 4, 2, (1, 2), 2);
        for a in plain.all_pes() {
            for b in plain.all_pes() {
                assert_eq!(one_node.route_on(a, b, 1), plain.route(a, b), "{a} -> {b}");
            }
        }
        assert_eq!(one_node.fan_out(Node::Switch), plain.fan_out(Node::Switch));
        assert_eq!(one_node.fan_out(Node::Nic { node: 0, rail: 0 }), [0; 4]);
    }

    #[test]
    fn a_node_outside_the_system_has_no_channels() {
        let system = System::builtin();
        assert_eq!(system.fan_out(Node::Pe(PeId::new(4, 0, 0))), [0; 4]);
        assert_eq!(system.fan_out(Node::Switch), [0; 4]);
        assert_eq!(system.fan_out(Node::Network), [0; 4]);
        assert_eq!(system.fan_out(Node::NodeSwitch(0)), [0; 4]);
    }
}
