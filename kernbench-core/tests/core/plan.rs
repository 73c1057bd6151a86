//! Install plans: the hierarchical topology with every PE taking part, routes in the tables, and what check_plan rejects.

use kernbench_core::Direction::{self, *};
use kernbench_core::{
    CheckedPlan, InstallPlan, LinkClass, NeighborTableEntry, PeId, PeInstall, PlanError, SipPlan, System, check_plan,
};

use crate::{assert_mentions, connected, system};

/// The hierarchical all-reduce's plan on 2 SIPs x 2x2 cubes x 4 PEs.
fn hierarchical_plan() -> (System, CheckedPlan) {
    let system = system(2, 2, 2, 4);
    let plan = InstallPlan::build(&system, "hierarchical_3level", "all_pes").unwrap();
    (system, plan)
}

fn directions(install: &PeInstall) -> Vec<Direction> {
    install.neighbors.iter().map(|n| n.direction).collect()
}

#[test]
fn hierarchical_every_pe_participates() {
    let (system, plan) = hierarchical_plan();
    let pes: Vec<PeId> = plan.participants().map(|p| p.pe).collect();
    assert_eq!(pes, system.all_pes().collect::<Vec<_>>());
    assert_eq!(plan.sips.len(), 2);
    assert!(plan.participants().enumerate().all(|(i, p)| p.rank == i));
}

#[test]
fn hierarchical_only_pe_0_of_each_cube_has_n_s() {
    let (_, plan) = hierarchical_plan();
    for p in plan.participants() {
        let has_ns = directions(p).iter().any(|d| matches!(d, N | S));
        assert_eq!(has_ns, p.pe.pe == 0, "{}", p.pe);
    }
}

#[test]
fn hierarchical_only_cube_0_pe_0_has_sip_links() {
    let (_, plan) = hierarchical_plan();
    for p in plan.participants() {
        let has_sip = directions(p).iter().any(|d| matches!(d, SipNext | SipPrev));
        assert_eq!(has_sip, p.pe.cube == 0 && p.pe.pe == 0, "{}", p.pe);
    }
}

#[test]
fn hierarchical_other_pes_have_only_e_w() {
    let (_, plan) = hierarchical_plan();
    for p in plan.participants().filter(|p| p.pe.pe != 0) {
        let mut d = directions(p);
        d.sort();
        assert_eq!(d, vec![E, W], "{}", p.pe);
    }
}

#[test]
fn hierarchical_leader_links_reach_the_right_peers_over_the_right_classes() {
    let (_, plan) = hierarchical_plan();
    let leader = plan.find(PeId::new(1, 0, 0)).unwrap();
    let entry = |d: Direction| *leader.neighbors.iter().find(|n| n.direction == d).unwrap();
    assert_eq!(
        entry(E),
        NeighborTableEntry { direction: E, peer: PeId::new(1, 0, 1), link: LinkClass::IntraCube, hops: 1 }
    );
    assert_eq!(
        entry(N),
        NeighborTableEntry { direction: N, peer: PeId::new(1, 1, 0), link: LinkClass::InterCube, hops: 1 }
    );
    // The cube ring of 4 leaders goes 0 -> 1 -> 2 -> 3: S of cube 0 is cube 3, at mesh (1, 1): 2 hops.
    assert_eq!(
        entry(S),
        NeighborTableEntry { direction: S, peer: PeId::new(1, 3, 0), link: LinkClass::InterCube, hops: 2 }
    );
    assert_eq!(entry(SipNext).peer, PeId::new(0, 0, 0));
    assert_eq!(entry(SipNext).link, LinkClass::InterSip);
}

#[test]
fn hierarchical_plan_is_connected() {
    assert!(connected(&hierarchical_plan().1));
}

#[test]
fn neighbour_tables_carry_the_route_of_each_link() {
    let system = system(3, 2, 3, 3);
    for topology in ["ring_1d", "tree", "hypercube", "mesh_2d"] {
        let plan = InstallPlan::build(&system, topology, "cube_leaders").unwrap();
        for p in plan.participants() {
            for n in &p.neighbors {
                let route = system.route(p.pe, n.peer);
                assert_eq!(n.hops as usize, route.hops());
                assert_eq!(Some(n.link), route.farthest_class());
            }
        }
    }
}

#[test]
fn leader_only_ring_links_leaders_over_ucie() {
    let system = system(4, 2, 2, 8);
    let plan = InstallPlan::build(&system, "ring_1d", "leader_only").unwrap();
    assert_eq!(plan.len(), 4);
    let p = plan.find(PeId::new(3, 0, 0)).unwrap();
    assert_eq!(
        p.neighbors[0],
        NeighborTableEntry { direction: E, peer: PeId::new(0, 0, 0), link: LinkClass::InterSip, hops: 1 }
    );
}

#[test]
fn arrival_names_the_receivers_direction() {
    let system = system(2, 1, 1, 1);
    let plan = InstallPlan::build(&system, "ring_1d", "all_pes").unwrap();
    assert_eq!(plan.arrival(PeId::new(0, 0, 0), E), Some((PeId::new(1, 0, 0), W)));
    assert_eq!(plan.arrival(PeId::new(0, 0, 0), W), Some((PeId::new(1, 0, 0), E)));
    assert_eq!(plan.arrival(PeId::new(0, 0, 0), N), None);
}

#[test]
fn build_rejects_unknown_names_listing_the_known_ones() {
    let system = system(1, 1, 1, 1);
    let err = InstallPlan::build(&system, "torus", "all_pes").unwrap_err();
    assert!(matches!(err, PlanError::UnknownName(_)));
    assert_mentions(&err.to_string(), &["unknown topology `torus`", "ring_1d"]);
    let err = InstallPlan::build(&system, "ring_1d", "every_pe").unwrap_err();
    assert_mentions(&err.to_string(), &["unknown mapper `every_pe`", "all_pes", "leader_only", "cube_leaders"]);
}

// --- check_plan on hand-broken plans ---

fn entry(direction: Direction, peer: PeId) -> NeighborTableEntry {
    NeighborTableEntry { direction, peer, link: LinkClass::IntraCube, hops: 1 }
}

/// A plan of one SIP whose PEs `0..n` of cube 0 have the given tables.
fn plan_of(tables: Vec<Vec<NeighborTableEntry>>) -> InstallPlan {
    let pes = tables
        .into_iter()
        .enumerate()
        .map(|(rank, neighbors)| PeInstall { pe: PeId::new(0, 0, rank as u32), rank, neighbors })
        .collect();
    InstallPlan { topology: "hand".into(), mapper: "hand".into(), sips: vec![SipPlan { sip: 0, pes }] }
}

fn pe(i: u32) -> PeId {
    PeId::new(0, 0, i)
}

#[test]
fn check_plan_accepts_a_symmetric_pair() {
    let plan = plan_of(vec![vec![entry(E, pe(1))], vec![entry(W, pe(0))]]);
    assert_eq!(check_plan(&plan, &system(1, 1, 1, 4)), Ok(()));
}

#[test]
fn check_plan_rejects_a_link_listed_from_one_end() {
    let plan = plan_of(vec![vec![entry(E, pe(1))], vec![]]);
    let err = check_plan(&plan, &system(1, 1, 1, 4)).unwrap_err();
    assert_eq!(err, PlanError::Asymmetric { pe: pe(0), direction: E, peer: pe(1), back: vec![] });
    assert_mentions(&err.to_string(), &["(sip 0, cube 0, pe 0) lists (sip 0, cube 0, pe 1) as E", "pairs with E"]);
}

#[test]
fn check_plan_rejects_directions_that_do_not_pair() {
    let plan = plan_of(vec![vec![entry(E, pe(1))], vec![entry(N, pe(0))]]);
    let err = check_plan(&plan, &system(1, 1, 1, 4)).unwrap_err();
    assert!(matches!(err, PlanError::Asymmetric { ref back, .. } if back == &[N]), "{err:?}");
}

#[test]
fn check_plan_rejects_a_direction_listed_twice() {
    let plan = plan_of(vec![vec![entry(E, pe(1)), entry(E, pe(2))], vec![entry(W, pe(0))], vec![entry(W, pe(0))]]);
    let err = check_plan(&plan, &system(1, 1, 1, 4)).unwrap_err();
    assert_eq!(err, PlanError::DuplicateDirection { pe: pe(0), direction: E, first: pe(1), second: pe(2) });
}

#[test]
fn check_plan_rejects_a_self_link() {
    let plan = plan_of(vec![vec![entry(E, pe(0)), entry(W, pe(0))]]);
    let err = check_plan(&plan, &system(1, 1, 1, 4)).unwrap_err();
    assert_eq!(err, PlanError::SelfLink { pe: pe(0), direction: E });
}

#[test]
fn check_plan_rejects_a_peer_that_does_not_participate() {
    let plan = plan_of(vec![vec![entry(E, pe(3))]]);
    let err = check_plan(&plan, &system(1, 1, 1, 4)).unwrap_err();
    assert_eq!(err, PlanError::PeerNotParticipant { pe: pe(0), direction: E, peer: pe(3) });
    assert_mentions(&err.to_string(), &["does not take part"]);
}

#[test]
fn check_plan_rejects_a_peer_outside_the_system() {
    let plan = plan_of(vec![vec![entry(E, pe(9))]]);
    let err = check_plan(&plan, &system(1, 1, 1, 4)).unwrap_err();
    assert!(matches!(err, PlanError::PeerNotInSystem { peer, .. } if peer == pe(9)), "{err:?}");
}

#[test]
fn check_plan_rejects_an_ambiguous_pair() {
    let plan = plan_of(vec![vec![entry(Peer(1), pe(1))], vec![entry(Peer(0), pe(0)), entry(Peer(7), pe(0))]]);
    let err = check_plan(&plan, &system(1, 1, 1, 4)).unwrap_err();
    assert!(matches!(err, PlanError::AmbiguousPair { ref candidates, .. } if candidates.len() == 2), "{err:?}");
}

#[test]
fn check_plan_rejects_ranks_out_of_order() {
    let mut plan = plan_of(vec![vec![], vec![]]);
    plan.sips[0].pes[1].rank = 5;
    let err = check_plan(&plan, &system(1, 1, 1, 4)).unwrap_err();
    assert_eq!(err, PlanError::RankOrder { pe: pe(1), rank: 5, expected: 1 });
}

#[test]
fn check_plan_rejects_a_pe_under_another_sip() {
    let mut plan = plan_of(vec![vec![]]);
    plan.sips[0].sip = 1;
    let err = check_plan(&plan, &system(2, 1, 1, 4)).unwrap_err();
    assert_eq!(err, PlanError::WrongSip { pe: pe(0), sip: 1 });
}

#[test]
fn check_plan_rejects_a_plan_without_participants() {
    let plan = InstallPlan { topology: "t".into(), mapper: "m".into(), sips: vec![] };
    assert_eq!(check_plan(&plan, &system(1, 1, 1, 1)), Err(PlanError::NoParticipants));
}

#[test]
fn from_topology_rejects_a_peer_rank_past_the_end() {
    let system = system(1, 1, 1, 2);
    let topo = kernbench_core::Topology { participants: vec![pe(0), pe(1)], neighbors: vec![vec![(E, 2)], vec![]] };
    let err = InstallPlan::from_topology(&system, &topo, "bad", "m").unwrap_err();
    assert_eq!(err, PlanError::BadPeerRank { pe: pe(0), direction: E, rank: 2, len: 2 });
}
