//! Channel numbers: each channel of a system has a number of its own in `0..channel_count()`, so a
//! model of the channels a run uses indexes arrays by it rather than a map of channels, and keeps a
//! word where a channel would take nine.

use crate::machine::route::{Channel, Node};
use crate::machine::{LinkClass, PeId, SipInterconnect, System};

impl System {
    /// How many numbers [`System::channel_number`] gives out: room for every channel of the system.
    ///
    /// # Examples
    /// ```
    /// use kernbench_core::System;
    /// // 4 SIPs on a ring, 4x4 cubes, 8 PEs a cube: each PE's two ring channels, each cube's four
    /// // mesh directions, each SIP's two ring channels, and the switches' to the SIPs (a system's
    /// // switch and a node's, neither used on a ring).
    /// assert_eq!(System::builtin().channel_count(), 4 * 16 * 8 * 2 + 4 * 16 * 4 + 4 * 2 + 4 + 4);
    /// ```
    pub fn channel_count(&self) -> usize {
        self.channel_blocks().end
    }

    /// A number in `0..channel_count()` for `channel`, a different one for every channel of the
    /// system (every channel [`System::links_from`] gives): its slot among a fixed number of slots
    /// for the node it leaves (a PE's cube ring forward and back; a cube's mesh +x, -x, +y, -y; a
    /// SIP's interconnect; the switches', NICs' and network's links). `None` for a channel the system
    /// does not have. A model of the channels a run uses indexes by it, not by a map of channels.
    ///
    /// # Examples
    /// ```
    /// use kernbench_core::{Channel, LinkClass, Node, PeId, System};
    /// let system = System::shape(1, 1, 1, 4).unwrap();
    /// let ring = |from, to| Channel { class: LinkClass::IntraCube, from: Node::Pe(PeId::new(0, 0, from)), to: Node::Pe(PeId::new(0, 0, to)) };
    /// assert_eq!(system.channel_number(&ring(1, 2)), Some(2)); // PE 1 forward
    /// assert_eq!(system.channel_number(&ring(1, 0)), Some(3)); // PE 1 back
    /// assert_eq!(system.channel_number(&ring(0, 2)), None, "not neighbours");
    /// ```
    pub fn channel_number(&self, channel: &Channel) -> Option<usize> {
        use LinkClass::{InterCube, InterNode, InterSip, IntraCube};
        let blocks = self.channel_blocks();
        let (per_node, nics) = (self.sips_per_node() as u32, self.nics_per_node() as u32);
        let nic =
            |node: u32, rail: u32| (node < self.nodes() as u32 && rail < nics).then_some((node * nics + rail) as usize);
        let leader = |pe: PeId| self.contains(pe) && pe.cube == 0 && pe.pe == 0;
        match (channel.class, channel.from, channel.to) {
            (IntraCube, Node::Pe(a), Node::Pe(b)) if self.contains(b) && (a.sip, a.cube) == (b.sip, b.cube) => {
                Some(2 * self.pe_index(a)? + ring_slot(self.pes_per_cube() as u32, a.pe, b.pe)?)
            }
            (InterCube, Node::Pe(a), Node::Pe(b)) if self.contains(a) && self.contains(b) && a.sip == b.sip => {
                let (at, to) = (self.cube_coord(a.cube), self.cube_coord(b.cube));
                let slot = match (i64::from(to.x) - i64::from(at.x), i64::from(to.y) - i64::from(at.y)) {
                    _ if a.pe != 0 || b.pe != 0 => return None,
                    (1, 0) => 0,
                    (-1, 0) => 1,
                    (0, 1) => 2,
                    (0, -1) => 3,
                    _ => return None,
                };
                let cube = a.sip as usize * self.cubes_per_sip() + a.cube as usize;
                Some(blocks.mesh + 4 * cube + slot)
            }
            (InterSip, Node::Pe(a), to) if leader(a) => {
                let node = self.node_of(a.sip);
                let base = node * per_node;
                let slot = match (self.interconnect(), to) {
                    (_, Node::Pe(b)) if !leader(b) || self.node_of(b.sip) != node => return None,
                    (SipInterconnect::Ring, Node::Pe(b)) => ring_slot(per_node, a.sip - base, b.sip - base)?,
                    (SipInterconnect::FullyConnected, Node::Pe(b)) if b.sip != a.sip => (b.sip - base) as usize,
                    (SipInterconnect::Switched, to) if to == self.switch_of(node) && self.sips() > 1 => 0,
                    _ => return None,
                };
                Some(blocks.sip + blocks.sip_slots * a.sip as usize + slot)
            }
            (InterSip, Node::Switch, Node::Pe(b))
                if leader(b) && self.nodes() == 1 && self.interconnect() == SipInterconnect::Switched =>
            {
                Some(blocks.switch + b.sip as usize)
            }
            (InterSip, Node::NodeSwitch(k), to) if self.nodes() > 1 && k < self.nodes() as u32 => {
                let slot = match to {
                    Node::Pe(b) if leader(b) && self.node_of(b.sip) == k => (b.sip - k * per_node) as usize,
                    Node::Nic { node, rail } if node == k && rail < nics => (per_node + rail) as usize,
                    _ => return None,
                };
                Some(blocks.node_switch + k as usize * (per_node + nics) as usize + slot)
            }
            (InterSip, Node::Nic { node, rail }, Node::NodeSwitch(k)) if k == node => {
                Some(blocks.nic + 2 * nic(node, rail)?)
            }
            (InterNode, Node::Nic { node, rail }, Node::Network) => Some(blocks.nic + 2 * nic(node, rail)? + 1),
            (InterNode, Node::Network, Node::Nic { node, rail }) => Some(blocks.network + nic(node, rail)?),
            _ => None,
        }
    }

    /// The channel numbered `number` by [`System::channel_number`]; `None` for a number no channel of
    /// the system has (a slot for a link a mesh edge, a short ring or a shape without switches lacks).
    ///
    /// # Examples
    /// ```
    /// use kernbench_core::{PeId, System};
    /// let system = System::builtin();
    /// let channel = system.route(PeId::new(0, 5, 3), PeId::new(2, 0, 0)).channels[4];
    /// let number = system.channel_number(&channel).unwrap();
    /// assert_eq!(system.channel_at(number), Some(channel));
    /// ```
    pub fn channel_at(&self, number: usize) -> Option<Channel> {
        // Each candidate is checked by numbering it again: a slot the system lacks names no channel.
        self.slot_channel(number).filter(|candidate| self.channel_number(candidate) == Some(number))
    }

    /// The channel numbered `number`, for a number [`System::channel_number`] gave: what
    /// [`System::channel_at`] answers, without numbering the channel again to check that the system
    /// has it. For a caller naming many channels it numbered itself (a run's report names every
    /// channel it used: at a million PEs, the check took a tenth of a second).
    ///
    /// # Panics
    /// For a number of no slot (at or above [`System::channel_count`]); for a number of a slot the
    /// system lacks, a debug build panics and a release build names a channel the system does not
    /// have.
    ///
    /// # Examples
    /// ```
    /// use kernbench_core::{PeId, System};
    /// let system = System::builtin();
    /// let channel = system.route(PeId::new(0, 5, 3), PeId::new(2, 0, 0)).channels[4];
    /// assert_eq!(system.numbered_channel(system.channel_number(&channel).unwrap()), channel);
    /// ```
    pub fn numbered_channel(&self, number: usize) -> Channel {
        let channel = self.slot_channel(number).expect("a number below the channel count");
        debug_assert_eq!(self.channel_number(&channel), Some(number), "a number of a channel the system has");
        channel
    }

    /// The channel slot `number` would hold, if the system has it: `None` for a number of no slot, or
    /// of a mesh slot off the mesh's edge.
    fn slot_channel(&self, number: usize) -> Option<Channel> {
        use LinkClass::{InterCube, InterNode, InterSip, IntraCube};
        let blocks = self.channel_blocks();
        let (cubes, pes) = (self.cubes_per_sip(), self.pes_per_cube());
        let (per_node, nics) = (self.sips_per_node(), self.nics_per_node());
        let pe = |sip: usize, cube: usize, pe: usize| Node::Pe(PeId::new(sip as u32, cube as u32, pe as u32));
        // A member's neighbour in a ring of `n`: slot 0 forward, 1 back.
        let step = |at: usize, n: usize, slot: usize| if slot == 0 { (at + 1) % n } else { (at + n - 1) % n };
        Some(match number {
            n if n < blocks.mesh => {
                let (at, slot) = (n / 2, n % 2);
                let (sip, cube, at) = (at / (cubes * pes), at / pes % cubes, at % pes);
                Channel { class: IntraCube, from: pe(sip, cube, at), to: pe(sip, cube, step(at, pes, slot)) }
            }
            n if n < blocks.sip => {
                let (cube, slot) = ((n - blocks.mesh) / 4, (n - blocks.mesh) % 4);
                let (sip, cube) = (cube / cubes, cube % cubes);
                let at = self.cube_coord(cube as u32);
                let (dx, dy) = [(1, 0), (-1, 0), (0, 1), (0, -1)][slot];
                let (x, y) = (i64::from(at.x) + dx, i64::from(at.y) + dy);
                let to =
                    self.cube_index(crate::machine::CubeCoord { x: u32::try_from(x).ok()?, y: u32::try_from(y).ok()? });
                Channel { class: InterCube, from: pe(sip, cube, 0), to: pe(sip, to as usize, 0) }
            }
            n if n < blocks.switch => {
                let (sip, slot) = ((n - blocks.sip) / blocks.sip_slots, (n - blocks.sip) % blocks.sip_slots);
                let base = self.node_of(sip as u32) as usize * per_node;
                let to = match self.interconnect() {
                    SipInterconnect::Ring => pe(base + step(sip - base, per_node, slot), 0, 0),
                    SipInterconnect::FullyConnected => pe(base + slot, 0, 0),
                    SipInterconnect::Switched => self.switch_of(self.node_of(sip as u32)),
                };
                Channel { class: InterSip, from: pe(sip, 0, 0), to }
            }
            n if n < blocks.node_switch => {
                Channel { class: InterSip, from: Node::Switch, to: pe(n - blocks.switch, 0, 0) }
            }
            n if n < blocks.nic => {
                let (k, slot) =
                    ((n - blocks.node_switch) / (per_node + nics), (n - blocks.node_switch) % (per_node + nics));
                let to = if slot < per_node {
                    pe(k * per_node + slot, 0, 0)
                } else {
                    Node::Nic { node: k as u32, rail: (slot - per_node) as u32 }
                };
                Channel { class: InterSip, from: Node::NodeSwitch(k as u32), to }
            }
            n if n < blocks.network => {
                let (nic, side) = ((n - blocks.nic) / 2, (n - blocks.nic) % 2);
                let from = Node::Nic { node: (nic / nics) as u32, rail: (nic % nics) as u32 };
                match side {
                    0 => Channel { class: InterSip, from, to: Node::NodeSwitch((nic / nics) as u32) },
                    _ => Channel { class: InterNode, from, to: Node::Network },
                }
            }
            n if n < blocks.end => {
                let nic = n - blocks.network;
                Channel {
                    class: InterNode,
                    from: Node::Network,
                    to: Node::Nic { node: (nic / nics) as u32, rail: (nic % nics) as u32 },
                }
            }
            _ => return None,
        })
    }

    /// Where each kind of node's slots start among the numbers [`System::channel_number`] gives, PEs'
    /// cube rings first (two slots a PE), and where they end.
    fn channel_blocks(&self) -> ChannelBlocks {
        let (nodes, per_node, nics) = (self.nodes(), self.sips_per_node(), self.nics_per_node());
        let sip_slots = match self.interconnect() {
            SipInterconnect::Ring => 2,
            SipInterconnect::FullyConnected => per_node,
            SipInterconnect::Switched => 1,
        };
        let mesh = 2 * self.total_pes();
        let sip = mesh + 4 * self.sips() * self.cubes_per_sip();
        let switch = sip + sip_slots * self.sips();
        let node_switch = switch + self.sips();
        let nic = node_switch + nodes * (per_node + nics);
        let network = nic + 2 * nodes * nics;
        ChannelBlocks { sip_slots, mesh, sip, switch, node_switch, nic, network, end: network + nodes * nics }
    }
}

/// Where [`System::channel_number`]'s slots for each kind of node start.
struct ChannelBlocks {
    /// Slots a SIP has for its interconnect: 2 on a ring, one per SIP of its node fully connected, 1
    /// switched.
    sip_slots: usize,
    mesh: usize,
    sip: usize,
    switch: usize,
    node_switch: usize,
    nic: usize,
    network: usize,
    end: usize,
}

/// The slot of the link from member `at` to member `to` of a ring of `n`: 0 forward, 1 back (a ring
/// of two has the one link forward); `None` when they are not neighbours.
fn ring_slot(n: u32, at: u32, to: u32) -> Option<usize> {
    if n < 2 || at >= n || to == at {
        None
    } else if to == (at + 1) % n {
        Some(0)
    } else if to == (at + n - 1) % n {
        Some(1)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use crate::machine::{LinkClass, Node, PeId, SipInterconnect, System, nodes_of, test_nodes, test_system};

    fn assert_channel_numbers_are_distinct_and_in_range(system: &System) {
        let mut seen = std::collections::BTreeMap::new();
        for node in nodes_of(system) {
            for channel in system.links_from(node) {
                let number = system.channel_number(&channel).unwrap_or_else(|| panic!("{channel:?} has no number"));
                assert!(number < system.channel_count(), "{channel:?}: {number} on {}", system.describe());
                if let Some(other) = seen.insert(number, channel) {
                    panic!("{channel:?} and {other:?} are both {number} on {}", system.describe());
                }
            }
        }
    }

    fn assert_numbers_name_their_channels(system: &System) {
        for node in nodes_of(system) {
            for channel in system.links_from(node) {
                let number = system.channel_number(&channel).unwrap();
                assert_eq!(system.channel_at(number), Some(channel), "{number} on {}", system.describe());
                assert_eq!(system.numbered_channel(number), channel, "{number} on {}", system.describe());
            }
        }
        for number in 0..system.channel_count() + 3 {
            if let Some(channel) = system.channel_at(number) {
                assert_eq!(system.channel_number(&channel), Some(number), "{channel:?} on {}", system.describe());
            }
        }
    }

    /// Systems of every interconnect, of rings of one and two, and of several nodes.
    fn numbered_systems() -> Vec<System> {
        let interconnects = [SipInterconnect::Ring, SipInterconnect::FullyConnected, SipInterconnect::Switched];
        let shapes = [(1, (1, 1), 1), (2, (1, 1), 2), (3, (2, 1), 3), (4, (3, 2), 4), (5, (1, 2), 1)];
        let systems = interconnects.into_iter().flat_map(|interconnect| {
            shapes.into_iter().map(move |(sips, mesh, pes)| test_system(sips, mesh, pes, interconnect))
        });
        let nodes = [(2, 1, 1, (1, 1), 1), (3, 2, 2, (2, 1), 2), (2, 3, 2, (1, 2), 3)];
        systems
            .chain(nodes.into_iter().map(|(n, per_node, nics, mesh, pes)| test_nodes(n, per_node, nics, mesh, pes)))
            .collect()
    }

    #[test]
    fn a_channel_s_number_names_it_and_no_other() {
        // Checked or not (`numbered_channel`), for every channel.
        numbered_systems().iter().for_each(assert_numbers_name_their_channels);
    }

    #[test]
    fn every_channel_of_a_system_has_a_number_of_its_own() {
        numbered_systems().iter().for_each(assert_channel_numbers_are_distinct_and_in_range);
    }

    #[test]
    fn a_channel_the_system_does_not_have_has_no_number() {
        use crate::machine::Channel;
        let system = test_nodes(2, 2, 2, (2, 2), 4);
        let pe = |sip, cube, pe| Node::Pe(PeId::new(sip, cube, pe));
        let foreign = [
            (LinkClass::IntraCube, pe(0, 0, 0), pe(0, 0, 2)), // not ring neighbours
            (LinkClass::IntraCube, pe(0, 0, 0), pe(0, 1, 1)), // another cube
            (LinkClass::InterCube, pe(0, 0, 1), pe(0, 1, 1)), // mesh links join PE 0s
            (LinkClass::InterCube, pe(0, 0, 0), pe(0, 3, 0)), // diagonal
            (LinkClass::InterCube, pe(0, 0, 0), pe(1, 1, 0)), // another SIP
            (LinkClass::InterSip, pe(0, 1, 0), Node::NodeSwitch(0)), // not a SIP's leader
            (LinkClass::InterSip, pe(0, 0, 0), Node::NodeSwitch(1)), // another node's switch
            (LinkClass::InterSip, Node::NodeSwitch(0), pe(2, 0, 0)), // a SIP of the other node
            (LinkClass::InterSip, Node::NodeSwitch(2), pe(0, 0, 0)), // no such node
            (LinkClass::InterNode, Node::Nic { node: 0, rail: 2 }, Node::Network), // no such rail
            (LinkClass::InterSip, Node::Switch, pe(0, 0, 0)), // the one switch of a system of one node
            (LinkClass::InterNode, pe(4, 0, 0), Node::Network), // no such SIP
        ];
        for (class, from, to) in foreign {
            let channel = Channel { class, from, to };
            assert_eq!(system.channel_number(&channel), None, "{channel:?}");
        }
    }
}
