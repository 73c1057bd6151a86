//! Routes, hand-checked on small systems.

use kernbench_core::{Channel, LinkClass, Node, PeId, System, SystemSpec};

use crate::system;

fn pe(sip: u32, cube: u32, pe: u32) -> Node {
    Node::Pe(PeId::new(sip, cube, pe))
}

fn hop(class: LinkClass, from: Node, to: Node) -> Channel {
    Channel { class, from, to }
}

fn with_interconnect(name: &str, sips: usize) -> System {
    let json =
        format!(r#"{{"sips": {sips}, "mesh": {{"w": 2, "h": 2}}, "pes_per_cube": 4, "sip_interconnect": "{name}"}}"#);
    System::from_json_str(&json).unwrap()
}

#[test]
fn a_route_to_itself_is_empty() {
    let s = system(2, 2, 2, 4);
    let r = s.route(PeId::new(1, 3, 2), PeId::new(1, 3, 2));
    assert_eq!(r.hops(), 0);
    assert_eq!(r.farthest_class(), None);
}

#[test]
fn same_cube_takes_the_shorter_way_round_the_ring() {
    let s = system(1, 1, 1, 8);
    let r = s.route(PeId::new(0, 0, 1), PeId::new(0, 0, 7));
    use LinkClass::IntraCube as I;
    assert_eq!(r.channels, vec![hop(I, pe(0, 0, 1), pe(0, 0, 0)), hop(I, pe(0, 0, 0), pe(0, 0, 7))]);
}

#[test]
fn same_cube_ties_go_forward() {
    let s = system(1, 1, 1, 4);
    let r = s.route(PeId::new(0, 0, 3), PeId::new(0, 0, 1));
    use LinkClass::IntraCube as I;
    assert_eq!(r.channels, vec![hop(I, pe(0, 0, 3), pe(0, 0, 0)), hop(I, pe(0, 0, 0), pe(0, 0, 1))]);
}

#[test]
fn the_mesh_is_crossed_x_first_then_y() {
    // 3x2 mesh: cube 0 (0,0) -> cube 5 (2,1) goes via cubes 1, 2, then 5.
    let s = system(1, 3, 2, 1);
    let r = s.route(PeId::new(0, 0, 0), PeId::new(0, 5, 0));
    use LinkClass::InterCube as C;
    assert_eq!(
        r.channels,
        vec![hop(C, pe(0, 0, 0), pe(0, 1, 0)), hop(C, pe(0, 1, 0), pe(0, 2, 0)), hop(C, pe(0, 2, 0), pe(0, 5, 0))]
    );
}

#[test]
fn leaving_a_cube_goes_through_its_pe_0() {
    let s = system(1, 2, 1, 4);
    let r = s.route(PeId::new(0, 0, 2), PeId::new(0, 1, 1));
    use LinkClass::{InterCube as C, IntraCube as I};
    assert_eq!(
        r.channels,
        vec![
            hop(I, pe(0, 0, 2), pe(0, 0, 3)),
            hop(I, pe(0, 0, 3), pe(0, 0, 0)),
            hop(C, pe(0, 0, 0), pe(0, 1, 0)),
            hop(I, pe(0, 1, 0), pe(0, 1, 1)),
        ]
    );
    assert_eq!(r.farthest_class(), Some(LinkClass::InterCube));
}

#[test]
fn leaving_a_sip_goes_through_cube_0_on_both_sides() {
    let s = system(2, 2, 1, 2);
    let r = s.route(PeId::new(0, 1, 1), PeId::new(1, 1, 1));
    use LinkClass::{InterCube as C, InterSip as U, IntraCube as I};
    assert_eq!(
        r.channels,
        vec![
            hop(I, pe(0, 1, 1), pe(0, 1, 0)),
            hop(C, pe(0, 1, 0), pe(0, 0, 0)),
            hop(U, pe(0, 0, 0), pe(1, 0, 0)),
            hop(C, pe(1, 0, 0), pe(1, 1, 0)),
            hop(I, pe(1, 1, 0), pe(1, 1, 1)),
        ]
    );
    assert_eq!(r.farthest_class(), Some(LinkClass::InterSip));
}

#[test]
fn a_sip_ring_takes_the_shorter_way() {
    let s = with_interconnect("ring", 5);
    let r = s.route(PeId::new(0, 0, 0), PeId::new(4, 0, 0));
    assert_eq!(r.channels, vec![hop(LinkClass::InterSip, pe(0, 0, 0), pe(4, 0, 0))]);
    assert_eq!(s.route(PeId::new(0, 0, 0), PeId::new(2, 0, 0)).count(LinkClass::InterSip), 2);
}

#[test]
fn a_sip_ring_tie_goes_forward() {
    let s = with_interconnect("ring", 4);
    let r = s.route(PeId::new(3, 0, 0), PeId::new(1, 0, 0));
    use LinkClass::InterSip as U;
    assert_eq!(r.channels, vec![hop(U, pe(3, 0, 0), pe(0, 0, 0)), hop(U, pe(0, 0, 0), pe(1, 0, 0))]);
}

#[test]
fn fully_connected_sips_are_one_hop_apart() {
    let s = with_interconnect("fully_connected", 6);
    let r = s.route(PeId::new(1, 0, 0), PeId::new(4, 0, 0));
    assert_eq!(r.channels, vec![hop(LinkClass::InterSip, pe(1, 0, 0), pe(4, 0, 0))]);
}

#[test]
fn switched_sips_go_through_the_switch() {
    let s = with_interconnect("switched", 6);
    let r = s.route(PeId::new(1, 0, 0), PeId::new(4, 0, 0));
    use LinkClass::InterSip as U;
    assert_eq!(r.channels, vec![hop(U, pe(1, 0, 0), Node::Switch), hop(U, Node::Switch, pe(4, 0, 0))]);
}

#[test]
fn try_route_refuses_a_pe_outside_the_system() {
    let s = system(1, 1, 1, 2);
    assert!(s.try_route(PeId::new(0, 0, 0), PeId::new(0, 0, 2)).is_none());
    assert!(s.try_route(PeId::new(1, 0, 0), PeId::new(0, 0, 0)).is_none());
}

#[test]
#[should_panic(expected = "outside the system")]
fn route_panics_on_a_pe_outside_the_system() {
    system(1, 1, 1, 2).route(PeId::new(0, 0, 0), PeId::new(0, 1, 0));
}

#[test]
fn the_builtin_system_crosses_at_most_the_documented_hops() {
    let s = System::from_spec(SystemSpec::default()).unwrap();
    // Farthest: pe 4 of the far corner cube of one SIP to the same PE two SIPs round the ring.
    let r = s.route(PeId::new(0, 15, 4), PeId::new(2, 15, 4));
    assert_eq!(r.count(LinkClass::IntraCube), 8);
    assert_eq!(r.count(LinkClass::InterCube), 12);
    assert_eq!(r.count(LinkClass::InterSip), 2);
}
