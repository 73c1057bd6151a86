//! Distributed tensors (distribute / gather for every split) and validators.

use std::collections::BTreeMap;

use kernbench_core::{
    DistTensor, DpPolicy, Dtype, InstallPlan, Layout, LayoutError, LayoutKind, PeId, Split, System, Tile,
    ValidationError, any, multi_pe_sip_local, replicated, single_shard, validator_by_name,
};

use crate::{assert_mentions, system};

/// One distinct tile per SIP: element `i` of SIP `s` is `1000 * s + i`.
fn rank_tiles(system: &System, dtype: Dtype, len: usize) -> Vec<Tile> {
    (0..system.sips())
        .map(|s| Tile::from_f64s(dtype, &(0..len).map(|i| (1000 * s + i) as f64).collect::<Vec<_>>()))
        .collect()
}

/// Distributes and gathers back every rank; checks the shards add up as the policy says.
fn round_trip(system: &System, rows: usize, cols: usize, policy: DpPolicy, dtype: Dtype) {
    let tiles = rank_tiles(system, dtype, rows * cols);
    let t = DistTensor::distribute(system, &tiles, rows, cols, policy).unwrap();
    assert_eq!(t.policy(), Some(policy));
    for (sip, tile) in (0u32..).zip(&tiles) {
        let back = t.gather_sip(sip).unwrap();
        assert!(back.bit_eq(tile), "{policy} {rows}x{cols}: SIP {sip} gathered {back:?}, expected {tile:?}");
    }
    let layout = t.layout();
    let copies = |split: Split, count: usize| match split {
        Split::Replicated => count,
        _ => 1,
    };
    let holders_per_level = |split: Split, count: usize| match split {
        Split::Leader => 1,
        _ => count,
    };
    let (cubes, pes) = (system.cubes_per_sip(), system.pes_per_cube());
    let expected_elements = rows * cols * copies(policy.cube, cubes) * copies(policy.pe, pes) * system.sips();
    assert_eq!(layout.shards.values().sum::<usize>(), expected_elements, "{policy}");
    let expected_holders = holders_per_level(policy.cube, cubes) * holders_per_level(policy.pe, pes) * system.sips();
    assert_eq!(layout.shards.len(), expected_holders, "{policy}");
}

fn every_policy() -> impl Iterator<Item = DpPolicy> {
    Split::ALL.into_iter().flat_map(|cube| Split::ALL.into_iter().map(move |pe| DpPolicy::new(cube, pe)))
}

macro_rules! round_trips {
    ($($test:ident: $cube:ident / $pe:ident;)*) => {$(
        #[test]
        fn $test() {
            let policy = DpPolicy::new(Split::$cube, Split::$pe);
            for (sips, w, h, pes) in [(2, 2, 1, 3), (1, 3, 2, 2), (3, 1, 1, 1)] {
                let system = system(sips, w, h, pes);
                for (rows, cols) in [(6, 12), (5, 7), (1, 1), (2, 0), (13, 1)] {
                    round_trip(&system, rows, cols, policy, Dtype::F32);
                }
            }
        }
    )*};
}

round_trips! {
    round_trip_leader_leader: Leader / Leader;
    round_trip_leader_row_wise: Leader / RowWise;
    round_trip_leader_column_wise: Leader / ColumnWise;
    round_trip_leader_replicated: Leader / Replicated;
    round_trip_row_wise_leader: RowWise / Leader;
    round_trip_row_wise_row_wise: RowWise / RowWise;
    round_trip_row_wise_column_wise: RowWise / ColumnWise;
    round_trip_row_wise_replicated: RowWise / Replicated;
    round_trip_column_wise_leader: ColumnWise / Leader;
    round_trip_column_wise_row_wise: ColumnWise / RowWise;
    round_trip_column_wise_column_wise: ColumnWise / ColumnWise;
    round_trip_column_wise_replicated: ColumnWise / Replicated;
    round_trip_replicated_leader: Replicated / Leader;
    round_trip_replicated_row_wise: Replicated / RowWise;
    round_trip_replicated_column_wise: Replicated / ColumnWise;
    round_trip_replicated_replicated: Replicated / Replicated;
}

#[test]
fn round_trip_keeps_every_dtype() {
    let system = system(2, 2, 1, 2);
    for dtype in Dtype::ALL {
        round_trip(&system, 4, 6, DpPolicy::new(Split::ColumnWise, Split::RowWise), dtype);
    }
}

#[test]
fn leader_leader_puts_the_rank_tensor_on_cube_0_pe_0() {
    let system = system(2, 2, 2, 4);
    let t = DistTensor::distribute(&system, &rank_tiles(&system, Dtype::F32, 12), 3, 4, DpPolicy::LEADER).unwrap();
    let layout = t.layout();
    assert_eq!(layout.shards, BTreeMap::from([(PeId::new(0, 0, 0), 12), (PeId::new(1, 0, 0), 12)]));
    assert_eq!(layout.kind(), LayoutKind::OnePe);
}

#[test]
fn column_wise_shards_are_made_contiguous() {
    // One SIP, 2 cubes, 1 PE each: cube 1 gets columns 2..4 of a 2x4 tensor.
    let system = system(1, 2, 1, 1);
    let tile = Tile::from_vec((0..8).map(|v| v as f32).collect());
    let policy = DpPolicy::new(Split::ColumnWise, Split::Leader);
    let t = DistTensor::distribute(&system, &[tile], 2, 4, policy).unwrap();
    assert_eq!(t.shard(PeId::new(0, 1, 0)).unwrap().to_vec::<f32>().unwrap(), vec![2.0, 3.0, 6.0, 7.0]);
    assert_eq!(t.layout().kind(), LayoutKind::MultiPe);
}

#[test]
fn row_wise_shards_share_the_rank_buffer() {
    let system = system(1, 1, 1, 2);
    let tile = Tile::from_vec((0..8).map(|v| v as f32).collect());
    let t = DistTensor::distribute(
        &system,
        std::slice::from_ref(&tile),
        4,
        2,
        DpPolicy::new(Split::Leader, Split::RowWise),
    )
    .unwrap();
    let shard = t.shard(PeId::new(0, 0, 1)).unwrap();
    assert!(shard.shares_buffer_with(&tile));
    assert_eq!(shard.to_vec::<f32>().unwrap(), vec![4.0, 5.0, 6.0, 7.0]);
}

#[test]
fn distribute_wants_one_tile_per_sip() {
    let system = system(3, 1, 1, 1);
    let err =
        DistTensor::distribute(&system, &rank_tiles(&system, Dtype::F32, 4)[..2], 2, 2, DpPolicy::LEADER).unwrap_err();
    assert_eq!(err, LayoutError::TileCount { expected: 3, got: 2 });
    assert_mentions(&err.to_string(), &["2 SIP tiles", "3 SIPs"]);
}

#[test]
fn distribute_wants_rows_times_cols_elements() {
    let system = system(2, 1, 1, 1);
    let mut tiles = rank_tiles(&system, Dtype::F32, 6);
    tiles[1] = Tile::zeros(Dtype::F32, 5);
    let err = DistTensor::distribute(&system, &tiles, 2, 3, DpPolicy::LEADER).unwrap_err();
    assert_eq!(err, LayoutError::TileLength { sip: 1, got: 5, rows: 2, cols: 3 });
    assert_mentions(&err.to_string(), &["SIP 1 holds 5 elements", "2 x 3 = 6"]);
}

#[test]
fn distribute_rejects_mixed_dtypes() {
    let system = system(2, 1, 1, 1);
    let tiles = [Tile::zeros(Dtype::F32, 4), Tile::zeros(Dtype::I32, 4)];
    let err = DistTensor::distribute(&system, &tiles, 2, 2, DpPolicy::LEADER).unwrap_err();
    assert!(matches!(err, LayoutError::DtypeMismatch { expected: Dtype::F32, got: Dtype::I32, .. }), "{err:?}");
    assert_mentions(&err.to_string(), &["the tile of SIP 1 holds i32", "expected f32"]);
}

#[test]
fn distribute_rejects_an_overflowing_shape() {
    let system = system(1, 1, 1, 1);
    let err =
        DistTensor::distribute(&system, &[Tile::zeros(Dtype::F32, 1)], usize::MAX, 2, DpPolicy::LEADER).unwrap_err();
    assert!(matches!(err, LayoutError::ShapeOverflow { .. }));
}

#[test]
fn gather_rejects_a_sip_the_tensor_does_not_span() {
    let system = system(2, 1, 1, 1);
    let t = DistTensor::distribute(&system, &rank_tiles(&system, Dtype::F32, 4), 2, 2, DpPolicy::LEADER).unwrap();
    assert_eq!(t.gather_sip(2).unwrap_err(), LayoutError::NoSuchSip { sip: 2, sips: 2 });
}

#[test]
fn gather_rejects_replicas_that_disagree() {
    let system = system(1, 1, 1, 3);
    let t = DistTensor::distribute(
        &system,
        &rank_tiles(&system, Dtype::F32, 4),
        2,
        2,
        DpPolicy::new(Split::Leader, Split::Replicated),
    )
    .unwrap();
    let mut shards = t.shards().clone();
    shards.insert(PeId::new(0, 0, 2), Tile::filled(Dtype::F32, 4, 9.0));
    let err = t.with_shards(shards).unwrap().gather_sip(0).unwrap_err();
    assert_eq!(err, LayoutError::ReplicaMismatch { pe: PeId::new(0, 0, 2), reference: PeId::new(0, 0, 0) });
}

#[test]
fn with_shards_keeps_the_policy_and_checks_positions() {
    let system = system(1, 2, 1, 2);
    let policy = DpPolicy::new(Split::RowWise, Split::ColumnWise);
    let t = DistTensor::distribute(&system, &rank_tiles(&system, Dtype::F32, 16), 4, 4, policy).unwrap();
    let doubled: BTreeMap<PeId, Tile> = t
        .shards()
        .iter()
        .map(|(&pe, s)| (pe, Tile::from_f64s(Dtype::F32, &s.to_f64_vec().iter().map(|v| v * 2.0).collect::<Vec<_>>())))
        .collect();
    let out = t.with_shards(doubled.clone()).unwrap();
    let expected: Vec<f64> = (0..16).map(|v| 2.0 * v as f64).collect();
    assert_eq!(out.gather_sip(0).unwrap().to_f64_vec(), expected);

    let mut missing = doubled.clone();
    missing.remove(&PeId::new(0, 1, 1));
    assert!(
        matches!(t.with_shards(missing).unwrap_err(), LayoutError::MissingShard { pe, .. } if pe == PeId::new(0, 1, 1))
    );
    let mut short = doubled.clone();
    short.insert(PeId::new(0, 0, 0), Tile::zeros(Dtype::F32, 3));
    assert_eq!(
        t.with_shards(short).unwrap_err(),
        LayoutError::ShardLength { pe: PeId::new(0, 0, 0), got: 3, expected: 4 }
    );
    let mut extra = doubled.clone();
    extra.insert(PeId::new(0, 5, 0), Tile::zeros(Dtype::F32, 1));
    assert!(matches!(t.with_shards(extra.clone()).unwrap_err(), LayoutError::UnexpectedShard { .. }));
    // A shard out of place is named before a missing one, whichever PE comes first; of several
    // missing, the first.
    extra.remove(&PeId::new(0, 0, 1));
    let err = t.with_shards(extra).unwrap_err();
    assert!(matches!(err, LayoutError::UnexpectedShard { pe, .. } if pe == PeId::new(0, 5, 0)), "{err:?}");
    let mut two_missing = doubled;
    two_missing.remove(&PeId::new(0, 0, 0));
    two_missing.remove(&PeId::new(0, 0, 1));
    let err = t.with_shards(two_missing).unwrap_err();
    assert!(matches!(err, LayoutError::MissingShard { pe, .. } if pe == PeId::new(0, 0, 0)), "{err:?}");
}

#[test]
fn from_shards_gathers_a_rank_in_pe_order() {
    let shards = BTreeMap::from([
        (PeId::new(0, 0, 1), Tile::from_vec(vec![3i32, 4])),
        (PeId::new(0, 0, 0), Tile::from_vec(vec![1i32, 2])),
        (PeId::new(1, 0, 0), Tile::from_vec(vec![5i32, 6, 7, 8])),
    ]);
    let t = DistTensor::from_shards(Dtype::I32, 2, 2, shards).unwrap();
    assert_eq!(t.policy(), None);
    assert_eq!(t.gather_sip(0).unwrap().to_vec::<i32>().unwrap(), vec![1, 2, 3, 4]);
    assert_eq!(t.gather_sip(1).unwrap().to_vec::<i32>().unwrap(), vec![5, 6, 7, 8]);
    assert_eq!(t.gather_sip(2).unwrap_err(), LayoutError::RankLength { sip: 2, got: 0, expected: 4 });
}

#[test]
fn from_shards_rejects_a_shard_of_another_dtype() {
    let shards = BTreeMap::from([(PeId::new(0, 0, 3), Tile::zeros(Dtype::F16, 2))]);
    let err = DistTensor::from_shards(Dtype::F32, 1, 2, shards).unwrap_err();
    assert_mentions(&err.to_string(), &["the shard on (sip 0, cube 0, pe 3) holds f16", "expected f32"]);
}

#[test]
fn policies_read_from_json() {
    for policy in every_policy() {
        let json = serde_json::to_string(&policy).unwrap();
        assert_eq!(serde_json::from_str::<DpPolicy>(&json).unwrap(), policy);
    }
    let err = serde_json::from_str::<DpPolicy>(r#"{"cube": "rows", "pe": "leader"}"#).unwrap_err();
    assert_mentions(&err.to_string(), &["unknown variant `rows`", "row_wise"]);
}

// --- validators ---

fn layout_of(system: &System, cols: usize, policy: DpPolicy) -> Layout {
    DistTensor::distribute(system, &rank_tiles(system, Dtype::F32, cols), 1, cols, policy).unwrap().layout()
}

const SPREAD: DpPolicy = DpPolicy::new(Split::ColumnWise, Split::ColumnWise);

#[test]
fn t5_multi_pe_sip_local_rejects_one_shard_per_rank_naming_the_pe() {
    let system = system(2, 2, 2, 4);
    let plan = InstallPlan::build(&system, "hierarchical_3level", "all_pes").unwrap();
    let err = multi_pe_sip_local(&plan, &layout_of(&system, 64, DpPolicy::LEADER)).unwrap_err();
    assert!(matches!(err, ValidationError::MissingShard { pe, .. } if pe == PeId::new(0, 0, 1)), "{err:?}");
    assert_mentions(&err.to_string(), &["multi_pe_sip_local", "(sip 0, cube 0, pe 1)", "holds no shard"]);
}

#[test]
fn multi_pe_sip_local_accepts_one_equal_shard_per_pe() {
    let system = system(2, 2, 2, 4);
    let plan = InstallPlan::build(&system, "hierarchical_3level", "all_pes").unwrap();
    assert_eq!(multi_pe_sip_local(&plan, &layout_of(&system, 64, SPREAD)), Ok(()));
}

#[test]
fn multi_pe_sip_local_rejects_unequal_shards() {
    let system = system(1, 1, 1, 4);
    let plan = InstallPlan::build(&system, "ring_1d", "all_pes").unwrap();
    let err = multi_pe_sip_local(&plan, &layout_of(&system, 6, SPREAD)).unwrap_err();
    assert!(matches!(err, ValidationError::UnequalShards { elements: 1, reference_elements: 2, .. }), "{err:?}");
    assert_mentions(&err.to_string(), &["(sip 0, cube 0, pe 2) holds 1 elements", "equal length"]);
}

#[test]
fn multi_pe_sip_local_rejects_a_shard_off_the_plan() {
    let system = system(1, 2, 1, 2);
    let plan = InstallPlan::build(&system, "ring_1d", "cube_leaders").unwrap();
    let err = multi_pe_sip_local(&plan, &layout_of(&system, 8, SPREAD)).unwrap_err();
    assert!(matches!(err, ValidationError::ShardOffParticipant { pe, .. } if pe == PeId::new(0, 0, 1)), "{err:?}");
    assert_mentions(&err.to_string(), &["does not take part", "cube_leaders"]);
}

#[test]
fn single_shard_accepts_the_leader_layout() {
    let system = system(4, 2, 2, 8);
    let plan = InstallPlan::build(&system, "ring_1d", "leader_only").unwrap();
    assert_eq!(single_shard(&plan, &layout_of(&system, 32, DpPolicy::LEADER)), Ok(()));
}

#[test]
fn single_shard_rejects_several_participants_per_sip() {
    let system = system(2, 2, 1, 1);
    let plan = InstallPlan::build(&system, "ring_1d", "cube_leaders").unwrap();
    let err = single_shard(&plan, &layout_of(&system, 4, DpPolicy::LEADER)).unwrap_err();
    assert!(matches!(err, ValidationError::NotOnePerSip { sip: 0, .. }), "{err:?}");
    assert_mentions(&err.to_string(), &["SIP 0 has 2 participating PEs", "leader_only"]);
}

#[test]
fn single_shard_rejects_a_partial_shard() {
    let system = system(2, 1, 1, 1);
    let plan = InstallPlan::build(&system, "ring_1d", "leader_only").unwrap();
    let mut layout = layout_of(&system, 8, DpPolicy::LEADER);
    layout.shards.insert(PeId::new(1, 0, 0), 4);
    let err = single_shard(&plan, &layout).unwrap_err();
    assert!(matches!(err, ValidationError::WrongLength { elements: 4, expected: 8, .. }), "{err:?}");
    assert_mentions(&err.to_string(), &["(sip 1, cube 0, pe 0) holds 4 elements", "whole SIP tensor"]);
}

#[test]
fn replicated_accepts_full_copies_and_rejects_a_split() {
    let system = system(2, 2, 1, 2);
    let plan = InstallPlan::build(&system, "hierarchical_3level", "all_pes").unwrap();
    let copies = layout_of(&system, 8, DpPolicy::new(Split::Replicated, Split::Replicated));
    assert_eq!(replicated(&plan, &copies), Ok(()));
    let err = replicated(&plan, &layout_of(&system, 8, SPREAD)).unwrap_err();
    assert!(matches!(err, ValidationError::WrongLength { expected: 8, .. }), "{err:?}");
}

#[test]
fn any_accepts_uneven_shards_on_the_participants() {
    let system = system(1, 1, 1, 4);
    let plan = InstallPlan::build(&system, "ring_1d", "all_pes").unwrap();
    assert_eq!(any(&plan, &layout_of(&system, 6, SPREAD)), Ok(()));
    let leader = layout_of(&system, 6, DpPolicy::LEADER);
    assert!(matches!(any(&plan, &leader), Err(ValidationError::MissingShard { .. })));
}

#[test]
fn unknown_validator_lists_the_known_ones() {
    let err = validator_by_name("single").unwrap_err();
    assert_mentions(&err.to_string(), &["unknown validator `single`", "single_shard", "multi_pe_sip_local"]);
}
