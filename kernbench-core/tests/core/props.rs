//! Properties over random shapes: every topology x mapper plan builds (or fails for the documented
//! reason), is connected and gives each neighbour the hops and link class the physical model implies;
//! every route chains from a to b with the hop counts that model implies.

use kernbench_core::{
    FULL_MAX_PARTICIPANTS, InstallPlan, LinkClass, MAPPERS, MeshSpec, Node, PeId, PlanError, SipInterconnect, System,
    SystemSpec, TOPOLOGIES, mapper_by_name,
};
use proptest::prelude::*;
use proptest::sample::Index;

use crate::connected;

fn shape() -> impl Strategy<Value = (usize, usize, usize, usize)> {
    (1..=8usize, 1..=5usize, 1..=5usize, 1..=9usize)
}

fn interconnect() -> impl Strategy<Value = SipInterconnect> {
    prop_oneof![Just(SipInterconnect::Ring), Just(SipInterconnect::FullyConnected), Just(SipInterconnect::Switched)]
}

fn build_system((sips, w, h, pes): (usize, usize, usize, usize), interconnect: SipInterconnect) -> System {
    let spec = SystemSpec {
        sips,
        mesh: MeshSpec { w, h },
        pes_per_cube: pes,
        sip_interconnect: interconnect,
        ..SystemSpec::default()
    };
    System::from_spec(spec).expect("generated shapes are valid")
}

/// Above this many participants `full` is skipped: its n² routes make the test slow, not more telling.
const FULL_TESTED_UP_TO: usize = 300;

/// Builds every topology x mapper plan on `system` and checks it, or checks that it fails as documented.
fn every_plan_is_sound(system: &System) -> Result<(), TestCaseError> {
    for topology in TOPOLOGIES {
        for mapper in MAPPERS {
            let participants = mapper_by_name(mapper.name).unwrap().participants(system).len();
            let context = format!("{} x {} on {}", topology.name, mapper.name, system.describe());
            let result = match (topology.name, mapper.name) {
                ("full", _) if participants > FULL_MAX_PARTICIPANTS => {
                    let err = InstallPlan::build(system, topology.name, mapper.name).unwrap_err();
                    prop_assert!(matches!(err, PlanError::Unsupported { .. }), "{}: {:?}", context, err);
                    continue;
                }
                ("full" | "multicast" | "multicast_nodes", _) if participants > FULL_TESTED_UP_TO => continue,
                // The generated systems' switches do not multicast: the plan says so by name.
                ("multicast" | "multicast_nodes", _) => {
                    let err = InstallPlan::build(system, topology.name, mapper.name).unwrap_err();
                    prop_assert!(matches!(err, PlanError::Multicast(_)), "{}: {:?}", context, err);
                    continue;
                }
                ("intercube", "all_pes") if system.pes_per_cube() > 1 => {
                    let err = InstallPlan::build(system, topology.name, mapper.name).unwrap_err();
                    prop_assert!(matches!(err, PlanError::Unsupported { .. }), "{}: {:?}", context, err);
                    continue;
                }
                _ => InstallPlan::build(system, topology.name, mapper.name),
            };
            let plan = result.map_err(|e| TestCaseError::fail(format!("{context}: {e}")))?;
            prop_assert_eq!(plan.len(), participants, "{}", context);
            prop_assert!(connected(&plan), "{} is not connected", context);
            for p in plan.participants() {
                for n in &p.neighbors {
                    let counts = model_counts(system, p.pe, n.peer);
                    let hops: usize = counts.iter().sum();
                    let farthest = LinkClass::ALL.into_iter().zip(counts).rev().find(|&(_, c)| c > 0).map(|(l, _)| l);
                    prop_assert_eq!(n.hops as usize, hops, "{}: {} -> {}", context, p.pe, n.peer);
                    prop_assert_eq!(Some(n.link), farthest, "{}: {} -> {}", context, p.pe, n.peer);
                }
            }
        }
    }
    Ok(())
}

fn ring_distance(n: u32, a: u32, b: u32) -> usize {
    let forward = (b + n - a) % n;
    forward.min(n - forward) as usize
}

fn mesh_distance(system: &System, a: u32, b: u32) -> usize {
    let (a, b) = (system.cube_coord(a), system.cube_coord(b));
    (a.x.abs_diff(b.x) + a.y.abs_diff(b.y)) as usize
}

/// The channels of each class, in [`LinkClass::ALL`]'s order, that the physical model says a message
/// from `a` to `b` crosses: the cube's ring the shorter way round, through PE 0 of the cube to leave it;
/// the SIP's mesh in Manhattan steps, through cube 0 to leave the SIP; and the SIP interconnect.
fn model_counts(system: &System, a: PeId, b: PeId) -> [usize; 4] {
    let pes = system.pes_per_cube() as u32;
    if (a.sip, a.cube) == (b.sip, b.cube) {
        return [ring_distance(pes, a.pe, b.pe), 0, 0, 0];
    }
    let intra = ring_distance(pes, a.pe, 0) + ring_distance(pes, 0, b.pe);
    if a.sip == b.sip {
        return [intra, mesh_distance(system, a.cube, b.cube), 0, 0];
    }
    let sip_hops = match system.interconnect() {
        SipInterconnect::Ring => ring_distance(system.sips() as u32, a.sip, b.sip),
        SipInterconnect::FullyConnected => 1,
        SipInterconnect::Switched => 2,
    };
    [intra, mesh_distance(system, a.cube, 0) + mesh_distance(system, 0, b.cube), sip_hops, 0]
}

/// The route from `a` to `b` chains from `a` to `b` and crosses as many channels of each class as
/// the model says.
fn route_is_sound(system: &System, a: PeId, b: PeId) -> Result<(), TestCaseError> {
    let route = system.route(a, b);
    if a == b {
        prop_assert_eq!(route.hops(), 0);
        return Ok(());
    }
    prop_assert_eq!(route.channels.first().map(|c| c.from), Some(Node::Pe(a)));
    prop_assert_eq!(route.channels.last().map(|c| c.to), Some(Node::Pe(b)));
    for pair in route.channels.windows(2) {
        prop_assert_eq!(pair[0].to, pair[1].from, "{} -> {}: {:?}", a, b, route.channels);
    }
    prop_assert!(route.channels.iter().all(|c| c.from != c.to));

    let [intra, inter_cube, inter_sip, _] = model_counts(system, a, b);
    prop_assert_eq!(route.count(LinkClass::IntraCube), intra, "{} -> {}", a, b);
    prop_assert_eq!(route.count(LinkClass::InterCube), inter_cube, "{} -> {}", a, b);
    prop_assert_eq!(route.count(LinkClass::InterSip), inter_sip, "{} -> {}", a, b);
    prop_assert_eq!(route.hops(), intra + inter_cube + inter_sip);
    prop_assert_eq!(system.route(b, a).hops(), route.hops(), "distances are symmetric");
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(40))]

    #[test]
    fn every_topology_and_mapper_builds_a_sound_connected_plan(shape in shape(), ic in interconnect()) {
        every_plan_is_sound(&build_system(shape, ic))?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn every_route_chains_from_a_to_b_with_the_expected_hops(
        shape in shape(), ic in interconnect(), a in any::<Index>(), b in any::<Index>()
    ) {
        let system = build_system(shape, ic);
        let pes: Vec<PeId> = system.all_pes().collect();
        route_is_sound(&system, *a.get(&pes), *b.get(&pes))?;
    }
}
