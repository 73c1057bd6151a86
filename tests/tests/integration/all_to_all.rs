//! The hierarchical all-to-all: the transpose identity on both paths over small rank counts and
//! arities, PE-level groups of a multi-SIP system, the generations its phases use, mixed collectives
//! on one communicator, bad input, and the representatives' peak memory against its formula.

use kernbench::algorithms::hierarchical_all_to_all;
use kernbench::partition::GroupSplit;
use kernbench::postcondition::{CallFacts, check};
use kernbench::prelude::*;
use kernbench::samples::{EVERY_PE, sample_tensor};
use kernbench::sim::testing::{MockError, MockRun};
use kernbench::sim::{Call, RunError, RunReport};
use kernbench::{CallOptions, Collective, CommError, Communicator, DpPolicy, System, SystemSpec, mapper_by_name};
use serde_json::json;

/// Rank counts per arity: splits into equal groups and unequal ones, around powers of two.
const ARITY_2: [usize; 10] = [2, 3, 4, 5, 6, 7, 8, 9, 11, 15];
const ARITY_4: [usize; 8] = [5, 6, 7, 9, 10, 11, 13, 15];

/// Element `e` of the block rank `i` sends to rank `j`: names both ranks, exact in i64 and f32.
fn encode(i: usize, j: usize, e: usize) -> f64 {
    ((i * 1000 + j) * 100 + e) as f64
}

/// `n` ranks as `n` SIPs of one PE each.
fn one_pe_sips(n: usize) -> System {
    System::shape(n, 1, 1, 1).expect("a valid shape")
}

/// The kernel's parameters that force one path: flat_below 0 never falls back, flat_below n + 1 always.
fn forced(arity: usize, n: usize, hierarchical: bool) -> serde_json::Value {
    json!({"arity": arity, "flat_below": if hierarchical { 0 } else { n + 1 }})
}

/// Runs the kernel on `mapper`'s PEs of `system` with every rank `i` sending `encode(i, j, e)` for
/// `e < block` to every rank `j`, checks that every rank `j` received `encode(i, j, e)` from every `i`
/// (the transpose), and returns the report.
fn transpose(system: &System, mapper: &str, params: serde_json::Value, block: usize, dtype: Dtype) -> RunReport {
    let n = mapper_by_name(mapper).expect("a built-in mapper").participants(system).len();
    let row = |i: usize| -> Vec<f64> { (0..n).flat_map(|j| (0..block).map(move |e| encode(i, j, e))).collect() };
    let what = format!("{n} ranks ({mapper} on {}), {params}, blocks of {block} {dtype}", system.describe());
    let report = MockRun::new(system, "full", mapper, &hierarchical_all_to_all::KERNEL)
        .params(params.clone())
        .inputs(|_, rank| Tile::from_f64s(dtype, &row(rank)))
        .outputs(|_, _, input| Tile::zeros(dtype, input.len()))
        .run()
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    for (j, rank) in report.pes().iter().enumerate() {
        let got = rank.output.to_f64_vec();
        let want: Vec<f64> = (0..n).flat_map(|i| (0..block).map(move |e| encode(i, j, e))).collect();
        if let Some(k) = (0..want.len()).find(|&k| got.get(k) != Some(&want[k])) {
            panic!("{what}: rank {j} element {k} (from rank {}) holds {:?}, want {}", k / block, got.get(k), want[k]);
        }
    }
    report
}

/// Asserts that every one of the `n` ranks recorded `path`.
fn assert_path(report: &RunReport, path: &str, n: usize, what: &str) {
    assert_eq!(report.note("path"), [(path, n)].into(), "{what}: the ranks' paths");
}

/// The transpose identity for every rank count of `counts`, on the forced path.
fn transposes(arity: usize, counts: &[usize], hierarchical: bool) {
    let path = if hierarchical { "hierarchical" } else { "flat" };
    for &n in counts {
        for (block, dtype) in [(1, F32), (3, I64)] {
            let report = transpose(&one_pe_sips(n), "leader_only", forced(arity, n, hierarchical), block, dtype);
            assert_path(&report, path, n, &format!("arity {arity}, {n} ranks, block {block}"));
        }
    }
}

#[test]
fn arity_2_transposes_on_the_hierarchical_path() {
    transposes(2, &ARITY_2, true);
}

#[test]
fn arity_2_transposes_on_the_flat_path() {
    transposes(2, &ARITY_2, false);
}

#[test]
fn arity_4_transposes_on_the_hierarchical_path() {
    transposes(4, &ARITY_4, true);
}

#[test]
fn arity_4_transposes_on_the_flat_path() {
    transposes(4, &ARITY_4, false);
}

#[test]
fn arity_1_or_a_single_site_runs_the_flat_path_whatever_the_threshold() {
    for n in [1, 2, 7] {
        assert_path(&transpose(&one_pe_sips(n), "leader_only", forced(1, n, true), 2, I64), "flat", n, "arity 1");
    }
    assert_path(&transpose(&one_pe_sips(1), "leader_only", forced(4, 1, true), 2, I64), "flat", 1, "one rank");
}

#[test]
fn the_threshold_switches_paths_at_flat_below() {
    for (n, path) in [(7, "flat"), (8, "hierarchical"), (9, "hierarchical")] {
        let params = json!({"arity": 4, "flat_below": 8});
        assert_path(&transpose(&one_pe_sips(n), "leader_only", params, 2, I64), path, n, &format!("{n} ranks"));
    }
}

/// Runs the hierarchical path on `n` ranks with rows of `len` elements of `dtype` (any length: blocks
/// are the near-equal split) and checks the all-to-all postcondition.
fn holds_for_rows_of(n: usize, arity: usize, len: usize, dtype: Dtype) {
    let system = one_pe_sips(n);
    let inputs: Vec<Tile> = (0..n)
        .map(|i| Tile::from_f64s(dtype, &(0..len).map(|e| ((i * 100 + e) % 251) as f64).collect::<Vec<_>>()))
        .collect();
    let before: Vec<Tile> =
        (0..n).map(|r| Tile::zeros(dtype, n * kernbench::chunk_range(len, r, n).unwrap().len())).collect();
    let what = format!("{n} ranks, arity {arity}, rows of {len} {dtype}");
    let report = MockRun::new(&system, "full", "leader_only", &hierarchical_all_to_all::KERNEL)
        .params(forced(arity, n, true))
        .inputs(|_, rank| inputs[rank].clone())
        .outputs(|_, rank, _| before[rank].clone())
        .run()
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    let outputs: Vec<Tile> = report.pes().iter().map(|p| p.output.clone()).collect();
    let facts = CallFacts { collective: Collective::AllToAll, op: ReduceOp::Sum, root: 0, counts: None };
    let verdict = check(&facts, &inputs, &before, &outputs).unwrap();
    assert!(verdict.held, "{what}: {verdict}");
    assert_path(&report, "hierarchical", n, &what);
}

#[test]
fn blocks_that_differ_in_length_cross_the_padding_intact() {
    // 2n + 3 elements: the first three blocks of every row are one element longer, so the padded
    // phase-2 messages carry blocks of two lengths.
    for (n, arity) in [(5, 2), (7, 2), (11, 4), (13, 4)] {
        holds_for_rows_of(n, arity, 2 * n + 3, I32);
    }
}

#[test]
fn holds_for_every_dtype_and_for_empty_and_short_rows() {
    for dtype in Dtype::ALL {
        holds_for_rows_of(11, 4, 33, dtype);
    }
    for len in [0, 1, 3, 37] {
        holds_for_rows_of(5, 4, len, I32);
        holds_for_rows_of(9, 2, len, I32);
    }
}

#[test]
fn pe_level_groups_of_a_multi_sip_system_are_its_sips() {
    // 3 SIPs of 2 cubes of 2 PEs: 12 ranks, one group per SIP, represented by the SIP leader.
    let system = System::shape(3, 2, 1, 2).unwrap();
    for arity in [3, 0] {
        for block in [1, 4] {
            let report = transpose(&system, "all_pes", json!({"arity": arity, "flat_below": 0}), block, I64);
            assert_path(&report, "hierarchical", 12, &format!("arity {arity}"));
            let representatives: Vec<PeId> =
                report.pes().iter().filter(|p| p.notes.contains_key("peak_bytes")).map(|p| p.pe).collect();
            assert_eq!(representatives, [0, 1, 2].map(|sip| PeId::new(sip, 0, 0)), "arity {arity}");
        }
    }
}

#[test]
fn a_single_sip_is_one_group_so_arity_0_runs_flat() {
    let report =
        transpose(&System::shape(1, 2, 1, 3).unwrap(), "all_pes", json!({"arity": 0, "flat_below": 0}), 2, I64);
    assert_path(&report, "flat", 6, "one SIP");
}

#[test]
fn the_communicator_picks_the_pe_level_algorithm_for_a_multi_pe_tensor() {
    let system = System::shape(3, 2, 1, 2).unwrap();
    let n = system.total_pes();
    let tensor = sample_tensor(&system, (4 * n * n * 4) as u64, F32, ReduceOp::Sum, EVERY_PE).unwrap();
    let mut comm = Communicator::new(system);
    let (_, report) = comm.all_to_all(&tensor).unwrap();
    assert_eq!(report.algorithm, "hierarchical_all_to_all_pes", "{}", report.reason);
    assert!(report.postcondition.held, "{report}");
    assert_path(&report.run, "hierarchical", n, "12 PEs of 3 SIPs");
}

#[test]
fn queues_of_one_slot_do_not_deadlock() {
    for n in [6, 11] {
        let spec = SystemSpec { sips: n, ipcq_depth: 1, ..SystemSpec::default() };
        let system = System::from_spec(spec).unwrap();
        let report = transpose(&system, "leader_only", forced(4, n, true), 2, I64);
        assert_path(&report, "hierarchical", n, "depth 1");
    }
}

#[test]
fn runs_twice_with_identical_reports_on_any_thread_count() {
    let system = one_pe_sips(11);
    let run = |threads| {
        MockRun::new(&system, "full", "leader_only", &hierarchical_all_to_all::KERNEL)
            .params(forced(4, 11, true))
            .inputs(|_, rank| Tile::filled(F32, 33, rank as f64 + 0.5))
            .outputs(|_, _, input| Tile::zeros(F32, input.len()))
            .threads(threads)
            .parallel_min_ready(1)
            .run()
            .unwrap()
    };
    assert_eq!(run(1), run(3));
}

/// Rank `from` sends rank `to` a stray copy of its input in phase `stray_phase`, then every rank runs
/// the hierarchical all-to-all (arity 2, never flat). The receive that meets the stray message fails,
/// naming the generation it expected: the generation of its phase.
#[ccl_kernel]
fn stray_then_all_to_all(tl: &Tl, from: usize, to: usize, stray_phase: u8) {
    if tl.rank() == from {
        tl.phase(stray_phase);
        let stray = tl.load(Input);
        tl.send(Direction::Peer(to as u32), &stray);
    }
    hierarchical_all_to_all(tl, 2, 0);
}

/// The generation a receive expected when it met a stray message, on 6 ranks (groups 0..3 and 3..6,
/// representatives 0 and 3) in call `call`.
fn expected_generation(call: u64, from: usize, to: usize, stray_phase: u8) -> (PeId, u64, u64) {
    let system = one_pe_sips(6);
    let result = MockRun::new(&system, "full", "leader_only", &stray_then_all_to_all::KERNEL)
        .params(json!({"from": from, "to": to, "stray_phase": stray_phase}))
        .inputs(|_, rank| Tile::filled(I64, 12, rank as f64))
        .outputs(|_, _, input| Tile::zeros(I64, input.len()))
        .call(Call { generation: call, ..Call::default() })
        .run();
    match result {
        Err(MockError::Run(RunError::Kernel(KernelError::GenerationMismatch { pe, expected, got, .. }))) => {
            (pe, expected, got)
        }
        other => panic!("expected a generation mismatch, got {other:?}"),
    }
}

#[test]
fn call_k_gathers_in_generation_3k_minus_2_exchanges_in_3k_minus_1_and_scatters_in_3k() {
    let k = 5;
    // Member 1's row reaches representative 0 in phase 1: the stray of phase 3 is refused there.
    assert_eq!(expected_generation(k, 1, 0, 3), (PeId::new(0, 0, 0), 3 * k - 2, 3 * k));
    // Representative 3's blocks reach representative 0 in phase 2.
    assert_eq!(expected_generation(k, 3, 0, 1), (PeId::new(0, 0, 0), 3 * k - 1, 3 * k - 2));
    // Representative 0's column reaches member 1 in phase 3.
    assert_eq!(expected_generation(k, 0, 1, 1), (PeId::new(1, 0, 0), 3 * k, 3 * k - 2));
}

/// One named all-to-all call through `comm`.
fn all_to_all_named(
    comm: &mut Communicator,
    tensor: &kernbench::DistTensor,
    algorithm: &str,
    generation: Option<u64>,
) -> Result<kernbench::CallReport, CommError> {
    let options = CallOptions { algorithm: Some(algorithm.to_owned()), generation, counts: None };
    comm.call(Collective::AllToAll, tensor, ReduceOp::Sum, 0, &options).map(|(_, report)| report)
}

#[test]
fn all_gather_all_to_all_all_reduce_all_to_all_on_one_communicator_then_a_reused_generation_fails() {
    // 9 ranks: the registry's hierarchical_all_to_all (arity 4, flat below 8) takes its hierarchical path.
    let system = one_pe_sips(9);
    let mut comm = Communicator::new(system.clone());
    let tensor = sample_tensor(&system, 9 * 4 * 4, F32, ReduceOp::Sum, DpPolicy::LEADER).unwrap();
    let (_, gathered) = comm.all_gather(&tensor).unwrap();
    let first = all_to_all_named(&mut comm, &tensor, "hierarchical_all_to_all", None).unwrap();
    let mut reduced = tensor.clone();
    let summed = comm.all_reduce(&mut reduced, ReduceOp::Sum).unwrap();
    let second = all_to_all_named(&mut comm, &tensor, "hierarchical_all_to_all", None).unwrap();
    assert_eq!([gathered.generation, first.generation, summed.generation, second.generation], [1, 2, 3, 4]);
    for report in [&gathered, &first, &summed, &second] {
        assert!(report.postcondition.held, "{report}");
    }
    for report in [&first, &second] {
        assert_path(&report.run, "hierarchical", 9, "the registry's hierarchical_all_to_all");
    }
    let err = all_to_all_named(&mut comm, &tensor, "hierarchical_all_to_all", Some(4)).unwrap_err();
    assert!(matches!(err, CommError::Generation { given: 4, last: 4 }), "{err}");
    assert!(err.to_string().contains("generation 4 is not valid: expected a generation after 4"), "{err}");
    let err = all_to_all_named(&mut comm, &tensor, "hierarchical_all_to_all", Some(0)).unwrap_err();
    assert!(matches!(err, CommError::Generation { given: 0, .. }), "{err}");
    // A later generation, skipping some, is fine: its phases use 3g-2..=3g.
    let later = all_to_all_named(&mut comm, &tensor, "hierarchical_all_to_all", Some(10)).unwrap();
    assert!(later.postcondition.held && later.generation == 10, "{later}");
}

#[test]
fn a_contribution_that_is_not_n_blocks_is_an_error_naming_the_rank_and_lengths() {
    let system = one_pe_sips(9);
    let tensor = sample_tensor(&system, 10 * 4, F32, ReduceOp::Sum, DpPolicy::LEADER).unwrap();
    let mut comm = Communicator::new(system);
    let err = all_to_all_named(&mut comm, &tensor, "hierarchical_all_to_all", None).unwrap_err();
    assert!(matches!(err, CommError::Inputs { collective: Collective::AllToAll, .. }), "{err}");
    let message = err.to_string();
    assert!(message.contains("rank 0 (sip 0, cube 0, pe 0) contributes 10 elements"), "{message}");
    assert!(message.contains("expected a multiple of 9"), "{message}");
}

/// The peak bytes the module docs give for the representative of `group`: `g L + (A - 1) G² Bmax +
/// max(G Bmax, N b_h)` elements, written out here from the block lengths.
fn peak_formula(n: usize, arity: usize, len: usize, element: usize, group: usize) -> usize {
    let groups = GroupSplit::new(n, arity);
    let block = |d: usize| len / n + usize::from(d < len % n);
    let (g, big, count, first) = (groups.group(group).len(), groups.largest(), groups.len(), groups.group(group).start);
    let bmax = block(0);
    element * (g * len + (count - 1) * big * big * bmax + (big * bmax).max(n * block(first)))
}

/// Every representative's recorded peak, by group.
fn recorded_peaks(report: &RunReport, groups: GroupSplit) -> Vec<usize> {
    groups
        .groups()
        .map(|g| {
            let rank = &report.pes()[g.start];
            rank.notes.get("peak_bytes").expect("representatives record their peak").parse().unwrap()
        })
        .collect()
}

#[test]
fn representatives_record_the_peak_bytes_of_the_formula() {
    for (n, arity, len) in [(8, 2, 8), (11, 4, 22), (11, 4, 25), (15, 2, 45), (5, 4, 5), (13, 4, 29), (16, 4, 64)] {
        let system = one_pe_sips(n);
        let report = MockRun::new(&system, "full", "leader_only", &hierarchical_all_to_all::KERNEL)
            .params(forced(arity, n, true))
            .inputs(|_, rank| Tile::filled(I64, len, rank as f64))
            .outputs(|_, rank, _| Tile::zeros(I64, n * kernbench::chunk_range(len, rank, n).unwrap().len()))
            .run()
            .unwrap();
        let groups = GroupSplit::new(n, arity);
        let want: Vec<usize> = (0..groups.len()).map(|g| peak_formula(n, arity, len, 8, g)).collect();
        assert_eq!(recorded_peaks(&report, groups), want, "{n} ranks, arity {arity}, rows of {len}");
        let recorders = report.pes().iter().filter(|p| p.notes.contains_key("peak_bytes")).count();
        assert_eq!(recorders, groups.len(), "only representatives record a peak");
    }
}

#[test]
fn with_equal_blocks_the_peak_is_g_plus_1_rows_and_a_minus_1_padded_squares() {
    // N = 11, arity 4, blocks of 2 i64 (B = 16 bytes): ((g + 1) N + (A - 1) G²) B.
    let report = transpose(&one_pe_sips(11), "leader_only", forced(4, 11, true), 2, I64);
    let b = 16;
    assert_eq!(recorded_peaks(&report, GroupSplit::new(11, 4)), [71 * b, 71 * b, 71 * b, 60 * b]);
}

#[test]
fn hierarchy_sends_2_n_minus_a_plus_a_a_minus_1_messages_where_flat_sends_n_n_minus_1() {
    for (n, arity) in [(8, 2), (11, 4), (16, 4), (15, 2), (32, 4)] {
        let count = |hierarchical| {
            let report = transpose(&one_pe_sips(n), "leader_only", forced(arity, n, hierarchical), 2, I64);
            let most = report.pes().iter().map(|p| p.figures.messages_sent).max().unwrap();
            (report.totals().messages_sent, most)
        };
        let groups = GroupSplit::new(n, arity);
        let a = groups.len() as u64;
        let (n, big) = (n as u64, groups.largest() as u64);
        // The busiest sender is a representative of a largest group: its phase-2 and phase-3 messages.
        assert_eq!(count(true), (2 * (n - a) + a * (a - 1), (a - 1) + (big - 1)), "{n} ranks, arity {arity}");
        assert_eq!(count(false), (n * (n - 1), n - 1), "{n} ranks, flat");
    }
}
