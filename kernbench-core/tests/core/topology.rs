//! Each topology's shape on small participant sets, hand-checked, and its plan symmetric.

use std::collections::BTreeSet;

use kernbench_core::Direction::{self, *};
use kernbench_core::{
    InstallPlan, MAPPERS, PeId, PlanError, System, TOPOLOGIES, Topology, TopologyFn, cube_leaders, double_binary_tree,
    full, hierarchical_3level, hypercube, intercube, mesh_2d, mesh_2d_grid, ring_1d, topology_by_name, tree,
};

use crate::{assert_mentions, flat, links, system};

/// The topology over `n` flat ranks, with its plan built and checked (symmetry included).
fn over(topology: TopologyFn, name: &str, n: usize) -> Topology {
    let (system, pes) = flat(n);
    let topo = topology(&system, &pes).unwrap();
    InstallPlan::from_topology(&system, &topo, name, "all_pes").unwrap_or_else(|e| panic!("{name} n={n}: {e}"));
    topo
}

fn set(items: &[(Direction, usize)]) -> BTreeSet<(Direction, usize)> {
    items.iter().copied().collect()
}

#[test]
fn ring_of_4_links_e_forward_and_w_back() {
    let t = over(ring_1d, "ring_1d", 4);
    assert_eq!(links(&t, 0), set(&[(E, 1), (W, 3)]));
    assert_eq!(links(&t, 1), set(&[(E, 2), (W, 0)]));
    assert_eq!(links(&t, 3), set(&[(E, 0), (W, 2)]));
}

#[test]
fn ring_of_2_links_both_directions_to_the_other_rank() {
    let t = over(ring_1d, "ring_1d", 2);
    assert_eq!(links(&t, 0), set(&[(E, 1), (W, 1)]));
    assert_eq!(links(&t, 1), set(&[(E, 0), (W, 0)]));
}

#[test]
fn ring_of_1_has_no_links() {
    assert!(over(ring_1d, "ring_1d", 1).neighbors[0].is_empty());
}

#[test]
fn mesh_grid_is_as_square_as_n_allows() {
    assert_eq!(mesh_2d_grid(1), (1, 1));
    assert_eq!(mesh_2d_grid(4), (2, 2));
    assert_eq!(mesh_2d_grid(6), (2, 3));
    assert_eq!(mesh_2d_grid(8), (2, 4));
    assert_eq!(mesh_2d_grid(12), (3, 4));
    assert_eq!(mesh_2d_grid(13), (1, 13));
}

#[test]
fn mesh_of_6_is_2_rows_of_3() {
    let t = over(mesh_2d, "mesh_2d", 6);
    // Rows {0,1,2} and {3,4,5} are rings of 3; columns {0,3}, {1,4}, {2,5} rings of 2.
    assert_eq!(links(&t, 0), set(&[(E, 1), (W, 2), (N, 3), (S, 3)]));
    assert_eq!(links(&t, 4), set(&[(E, 5), (W, 3), (N, 1), (S, 1)]));
    assert_eq!(links(&t, 5), set(&[(E, 3), (W, 4), (N, 2), (S, 2)]));
}

#[test]
fn mesh_of_a_prime_is_one_ring_without_n_s() {
    let t = over(mesh_2d, "mesh_2d", 5);
    assert_eq!(links(&t, 0), set(&[(E, 1), (W, 4)]));
    assert!(t.neighbors.iter().flatten().all(|(d, _)| matches!(d, E | W)));
}

#[test]
fn mesh_of_9_is_3x3_tori() {
    let t = over(mesh_2d, "mesh_2d", 9);
    assert_eq!(links(&t, 4), set(&[(E, 5), (W, 3), (N, 7), (S, 1)]));
    assert_eq!(links(&t, 8), set(&[(E, 6), (W, 7), (N, 2), (S, 5)]));
}

#[test]
fn tree_of_6_is_a_heap() {
    let t = over(tree, "tree", 6);
    assert_eq!(links(&t, 0), set(&[(Child(0, 0), 1), (Child(0, 1), 2)]));
    assert_eq!(links(&t, 1), set(&[(Parent(0), 0), (Child(0, 0), 3), (Child(0, 1), 4)]));
    assert_eq!(links(&t, 2), set(&[(Parent(0), 0), (Child(0, 0), 5)]));
    assert_eq!(links(&t, 5), set(&[(Parent(0), 2)]));
}

#[test]
fn tree_of_1_has_no_links() {
    assert!(over(tree, "tree", 1).neighbors[0].is_empty());
}

#[test]
fn double_binary_tree_of_6_mirrors_tree_1() {
    let t = over(double_binary_tree, "double_binary_tree", 6);
    // Tree 1: heap over positions 5-r: root rank 5, its children ranks 4 and 3, then 2, 1 under 4, 0 under 3.
    let tree1 = |r: usize| -> BTreeSet<(Direction, usize)> {
        links(&t, r).into_iter().filter(|(d, _)| matches!(d, Parent(1) | Child(1, _))).collect()
    };
    assert_eq!(tree1(5), set(&[(Child(1, 0), 4), (Child(1, 1), 3)]));
    assert_eq!(tree1(4), set(&[(Parent(1), 5), (Child(1, 0), 2), (Child(1, 1), 1)]));
    assert_eq!(tree1(3), set(&[(Parent(1), 5), (Child(1, 0), 0)]));
    assert_eq!(tree1(0), set(&[(Parent(1), 3)]));
}

#[test]
fn double_binary_tree_makes_each_rank_interior_in_at_most_one_tree() {
    for n in 1..40 {
        let t = over(double_binary_tree, "double_binary_tree", n);
        for r in 0..n {
            let interior = |tree: u8| t.neighbors[r].iter().any(|(d, _)| matches!(d, Child(x, _) if *x == tree));
            assert!(!(interior(0) && interior(1)), "n={n}: rank {r} is interior in both trees");
        }
    }
}

#[test]
fn double_binary_tree_of_2_names_no_peer_twice_within_a_tree() {
    let t = over(double_binary_tree, "double_binary_tree", 2);
    assert_eq!(links(&t, 0), set(&[(Child(0, 0), 1), (Parent(1), 1)]));
    assert_eq!(links(&t, 1), set(&[(Parent(0), 0), (Child(1, 0), 0)]));
}

#[test]
fn hypercube_of_8_links_across_each_dimension() {
    let t = over(hypercube, "hypercube", 8);
    assert_eq!(links(&t, 5), set(&[(Dim(0), 4), (Dim(1), 7), (Dim(2), 1)]));
    assert_eq!(links(&t, 0), set(&[(Dim(0), 1), (Dim(1), 2), (Dim(2), 4)]));
}

#[test]
fn hypercube_of_5_folds_the_extra_rank_into_rank_0() {
    let t = over(hypercube, "hypercube", 5);
    assert_eq!(links(&t, 0), set(&[(Dim(0), 1), (Dim(1), 2), (Dim(2), 4)]));
    assert_eq!(links(&t, 3), set(&[(Dim(0), 2), (Dim(1), 1)]));
    assert_eq!(links(&t, 4), set(&[(Dim(2), 0)]));
}

#[test]
fn hypercube_of_6_folds_ranks_4_and_5() {
    let t = over(hypercube, "hypercube", 6);
    assert_eq!(links(&t, 1), set(&[(Dim(0), 0), (Dim(1), 3), (Dim(2), 5)]));
    assert_eq!(links(&t, 5), set(&[(Dim(2), 1)]));
    assert_eq!(links(&t, 2), set(&[(Dim(0), 3), (Dim(1), 0)]));
}

#[test]
fn hypercube_of_1_has_no_links() {
    assert!(over(hypercube, "hypercube", 1).neighbors[0].is_empty());
}

#[test]
fn full_of_4_peers_every_other_rank() {
    let t = over(full, "full", 4);
    assert_eq!(links(&t, 2), set(&[(Peer(0), 0), (Peer(1), 1), (Peer(3), 3)]));
}

#[test]
fn full_refuses_more_participants_than_its_limit() {
    let (system, pes) = flat(kernbench_core::FULL_MAX_PARTICIPANTS + 1);
    let err = full(&system, &pes).unwrap_err();
    assert!(matches!(err, PlanError::Unsupported { topology: "full", .. }), "{err:?}");
    assert_mentions(&err.to_string(), &["1025 participants", "at most 1024"]);
}

#[test]
fn hypercube_refuses_more_participants_than_its_limit() {
    let (system, pes) = flat(kernbench_core::HYPERCUBE_MAX_PARTICIPANTS + 1);
    let err = hypercube(&system, &pes).unwrap_err();
    assert!(matches!(err, PlanError::Unsupported { topology: "hypercube", .. }), "{err:?}");
    assert_mentions(&err.to_string(), &["524289 participants", "19 per rank", "at most 524288"]);
}

#[test]
fn topologies_sort_their_participants() {
    let (system, mut pes) = flat(4);
    pes.reverse();
    let t = ring_1d(&system, &pes).unwrap();
    assert!(t.participants.windows(2).all(|w| w[0] < w[1]));
    assert_eq!(t.rank_of(PeId::new(0, 0, 3)), Some(3));
}

#[test]
fn every_topology_rejects_an_empty_participant_list() {
    let system = system(1, 1, 1, 2);
    for item in TOPOLOGIES {
        let err = (topology_by_name(item.name).unwrap().function)(&system, &[]).unwrap_err();
        assert_eq!(err, PlanError::NoParticipants, "{}", item.name);
    }
}

#[test]
fn every_topology_rejects_a_repeated_participant() {
    let system = system(1, 1, 1, 2);
    let pes = [PeId::new(0, 0, 0), PeId::new(0, 0, 0)];
    for item in TOPOLOGIES {
        let err = (topology_by_name(item.name).unwrap().function)(&system, &pes).unwrap_err();
        assert_eq!(err, PlanError::DuplicateParticipant { pe: PeId::new(0, 0, 0) }, "{}", item.name);
    }
}

#[test]
fn every_topology_rejects_a_pe_outside_the_system() {
    let system = system(1, 1, 1, 2);
    for item in TOPOLOGIES {
        let err = (topology_by_name(item.name).unwrap().function)(&system, &[PeId::new(0, 0, 5)]).unwrap_err();
        assert!(matches!(err, PlanError::NotInSystem { .. }), "{}: {err:?}", item.name);
        assert_mentions(&err.to_string(), &["(sip 0, cube 0, pe 5)", "1 SIPs x 1x1 cubes x 2 PEs"]);
    }
}

#[test]
fn unknown_topology_lists_the_known_ones() {
    let err = topology_by_name("ring").unwrap_err();
    assert_mentions(&err.to_string(), &["unknown topology `ring`", "ring_1d", "hierarchical_3level", "intercube"]);
}

#[test]
fn listings_name_every_builtin_with_a_summary() {
    assert_eq!(TOPOLOGIES.len(), 11);
    assert_eq!(MAPPERS.len(), 3);
    for item in TOPOLOGIES.iter().chain(MAPPERS).chain(kernbench_core::VALIDATORS) {
        assert!(!item.summary.is_empty(), "{} has no summary", item.name);
    }
    for item in TOPOLOGIES {
        assert!(topology_by_name(item.name).is_ok(), "{}", item.name);
    }
}

#[test]
fn intercube_links_cube_leaders_to_mesh_neighbours_on_a_wide_mesh() {
    // 2 SIPs x 3x2 cubes: cube 4 sits at (1, 1).
    let system = system(2, 3, 2, 4);
    let t = intercube(&system, &cube_leaders(&system)).unwrap();
    let rank = |sip, cube| t.rank_of(PeId::new(sip, cube, 0)).unwrap();
    assert_eq!(links(&t, rank(0, 4)), set(&[(W, rank(0, 3)), (E, rank(0, 5)), (S, rank(0, 1))]));
    assert_eq!(
        links(&t, rank(1, 0)),
        set(&[(E, rank(1, 1)), (N, rank(1, 3)), (SipNext, rank(0, 0)), (SipPrev, rank(0, 0))])
    );
    InstallPlan::from_topology(&system, &t, "intercube", "cube_leaders").unwrap();
}

#[test]
fn intercube_refuses_two_participants_in_a_cube() {
    let system = system(1, 2, 1, 2);
    let pes: Vec<PeId> = system.all_pes().collect();
    let err = intercube(&system, &pes).unwrap_err();
    assert!(matches!(err, PlanError::Unsupported { topology: "intercube", .. }), "{err:?}");
    assert_mentions(&err.to_string(), &["cube 0 of SIP 0 has 2 participants", "(sip 0, cube 0, pe 1)"]);
}

#[test]
fn intercube_refuses_a_sip_without_a_participant_in_cube_0() {
    let system = system(2, 2, 1, 1);
    let pes = [PeId::new(0, 0, 0), PeId::new(1, 1, 0)];
    let err = intercube(&system, &pes).unwrap_err();
    assert_mentions(&err.to_string(), &["SIP 1 has no participant in cube 0"]);
}

#[test]
fn intercube_refuses_a_cube_cut_off_from_cube_0() {
    let system = system(1, 3, 1, 1);
    let pes = [PeId::new(0, 0, 0), PeId::new(0, 2, 0)];
    let err = intercube(&system, &pes).unwrap_err();
    assert_mentions(&err.to_string(), &["(sip 0, cube 2, pe 0) cannot be reached from cube 0"]);
}

#[test]
fn hierarchical_on_a_sparse_set_rings_what_participates() {
    let system = system(2, 2, 1, 4);
    let pes = [PeId::new(0, 0, 1), PeId::new(0, 0, 3), PeId::new(0, 1, 2), PeId::new(1, 1, 0)];
    let t = hierarchical_3level(&system, &pes).unwrap();
    // Cube leaders of SIP 0: ranks 0 and 2; SIP leaders: ranks 0 and 3.
    assert_eq!(links(&t, 0), set(&[(E, 1), (W, 1), (N, 2), (S, 2), (SipNext, 3), (SipPrev, 3)]));
    assert_eq!(links(&t, 1), set(&[(E, 0), (W, 0)]));
    assert_eq!(links(&t, 2), set(&[(N, 0), (S, 0)]));
    assert_eq!(links(&t, 3), set(&[(SipNext, 0), (SipPrev, 0)]));
    InstallPlan::from_topology(&system, &t, "hierarchical_3level", "custom").unwrap();
}

#[test]
fn single_sip_single_cube_single_pe_is_a_valid_shape_for_every_topology() {
    // Behind a switch that multicasts, so that the `multicast` topology plans too.
    let spec = r#"{"sips": 1, "mesh": {"w": 1, "h": 1}, "pes_per_cube": 1, "sip_interconnect": "switched",
                   "switch": {"multicast": true, "reduce_gbps": 100}}"#;
    let system = System::from_json_str(spec).unwrap();
    for item in TOPOLOGIES {
        for mapper in MAPPERS {
            let plan = InstallPlan::build(&system, item.name, mapper.name).unwrap();
            assert_eq!(plan.len(), 1);
            assert!(plan.sips[0].pes[0].neighbors.is_empty(), "{} x {}", item.name, mapper.name);
        }
    }
}
