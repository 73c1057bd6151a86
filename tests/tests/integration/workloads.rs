//! Workloads: the shipped examples in both forms, every way a graph is refused, Chakra traces read back
//! as what was written, schedules against closed forms, and damaged files that fail in one line.

use std::path::{Path, PathBuf};

use kernbench::Collective;
use kernbench::workload::{
    ChakraError, LoadError, Node, NodeKind, PointToPoint, Ranks, ScheduleError, Work, Workload, WorkloadError,
};
use proptest::prelude::*;

use crate::mutate::{mutated, one_line_within};

fn workloads_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs/workloads")
}

/// Asserts that `path` holds `want`, or writes it there under `KERNBENCH_BLESS`.
fn assert_shipped(path: &Path, want: &[u8]) {
    if std::env::var_os("KERNBENCH_BLESS").is_some() {
        std::fs::write(path, want).unwrap();
        return;
    }
    let got = std::fs::read(path)
        .unwrap_or_else(|e| panic!("cannot read {} ({e}); make it with KERNBENCH_BLESS=1", path.display()));
    assert!(got == want, "{} is not what its generator makes; regenerate it with KERNBENCH_BLESS=1", path.display());
}

fn node(id: u64, kind: NodeKind, deps: &[u64]) -> Node {
    Node { id, name: format!("n{id}"), kind, data_deps: deps.to_vec(), ctrl_deps: vec![] }
}

fn compute_us(ranks: Ranks, us: f64) -> NodeKind {
    NodeKind::Compute { ranks, work: Work::DurationNs(us * 1e3) }
}

fn collective(collective: Collective, bytes: u64, ranks: Ranks, stream: u32) -> NodeKind {
    NodeKind::Collective { collective, bytes, ranks, comm: 0, stream }
}

fn transfer(from: u32, to: u32, bytes: u64, tag: u32) -> PointToPoint {
    PointToPoint { from, to, bytes, tag }
}

/// `phases` backward phases of `compute_ns` on every rank, one after another, and after phase `i` an
/// all-reduce of bucket `i`, every bucket on one stream.
fn bucketed_step(phases: u64) -> Workload {
    let mut nodes = Vec::new();
    for i in 0..phases {
        let previous: &[u64] = if i == 0 { &[] } else { &[2 * i - 2] };
        nodes.push(node(2 * i, compute_us(Ranks::All, 1.0), previous));
        nodes.push(node(2 * i + 1, collective(Collective::AllReduce, 25 << 20, Ranks::All, 0), &[2 * i]));
    }
    Workload::new(8, nodes).unwrap()
}

/// The step time of [`bucketed_step`] with phases of `compute_ns` and all-reduces of `comm_ns`.
fn bucketed_step_time(phases: u64, compute_ns: f64, comm_ns: f64) -> f64 {
    let step = bucketed_step(phases);
    let time = |node: &Node, _: f64| if node.fixed_duration_ns().is_some() { compute_ns } else { comm_ns };
    step.schedule(time).unwrap().step_ns()
}

#[test]
fn buckets_that_take_less_than_a_phase_hide_behind_compute_but_the_last() {
    // Each bucket ends before the next phase does: the step is every phase and the last bucket.
    assert_eq!(bucketed_step_time(8, 1000.0, 400.0), 8.0 * 1000.0 + 400.0);
    assert_eq!(bucketed_step_time(8, 1000.0, 1000.0), 8.0 * 1000.0 + 1000.0);
}

#[test]
fn buckets_that_take_longer_than_a_phase_queue_on_their_stream() {
    // Communication-bound: the first phase, then the buckets back to back.
    assert_eq!(bucketed_step_time(8, 1000.0, 1500.0), 1000.0 + 8.0 * 1500.0);
}

#[test]
fn calls_on_other_streams_overlap_and_calls_on_one_stream_do_not() {
    let step = |stream_of_second| {
        let nodes = vec![
            node(0, collective(Collective::AllGather, 1 << 20, Ranks::All, 0), &[]),
            node(1, collective(Collective::AllGather, 1 << 20, Ranks::All, stream_of_second), &[]),
        ];
        Workload::new(4, nodes).unwrap().schedule(|_, _| 10.0).unwrap().step_ns()
    };
    assert_eq!(step(0), 20.0);
    assert_eq!(step(1), 10.0);
}

#[test]
fn compute_on_one_rank_waits_for_that_rank_only() {
    let nodes = vec![
        node(0, compute_us(Ranks::List(vec![0]), 1.0), &[]),
        node(1, compute_us(Ranks::List(vec![1]), 1.0), &[]),
        node(2, compute_us(Ranks::List(vec![0, 1]), 1.0), &[]),
    ];
    let schedule = Workload::new(2, nodes).unwrap().schedule(|node, _| node.fixed_duration_ns().unwrap()).unwrap();
    let times: Vec<(f64, f64)> = schedule.nodes().iter().map(|t| (t.start_ns, t.end_ns)).collect();
    assert_eq!(times, [(0.0, 1000.0), (0.0, 1000.0), (1000.0, 2000.0)]);
}

#[test]
fn a_send_and_its_receive_start_when_both_are_ready_and_end_together() {
    let nodes = vec![
        node(0, compute_us(Ranks::List(vec![1]), 3.0), &[]),
        node(1, NodeKind::Send(transfer(0, 1, 1 << 20, 0)), &[]),
        node(2, NodeKind::Recv(transfer(0, 1, 1 << 20, 0)), &[0]),
    ];
    let step = Workload::new(2, nodes).unwrap();
    let mut asked = Vec::new();
    let schedule = step
        .schedule(|node, start| {
            asked.push((node.id, start));
            node.fixed_duration_ns().unwrap_or(500.0)
        })
        .unwrap();
    assert_eq!(asked, [(0, 0.0), (1, 3000.0)], "the transfer is timed once, with its send");
    assert_eq!(schedule.node(1), schedule.node(2).map(|t| kernbench::workload::Timed { id: 1, ..*t }).as_ref());
    assert_eq!(schedule.step_ns(), 3500.0);
    assert_eq!(schedule.calls().iter().map(|t| t.id).collect::<Vec<_>>(), [1]);
}

#[test]
fn a_duration_that_is_not_a_time_is_an_error_naming_the_node() {
    let step = bucketed_step(1);
    let err = step.schedule(|node, _| if node.id == 1 { f64::NAN } else { 1.0 }).unwrap_err();
    assert!(matches!(&err, ScheduleError::BadDuration { node, .. } if node.id == 1), "{err}");
    assert!(err.to_string().contains("node 1 `n1`"), "{err}");
}

/// Asserts that `json` is refused with the error `matches` picks, and that its message has `words`.
fn assert_invalid(json: &str, matches: impl Fn(&WorkloadError) -> bool, words: &[&str]) {
    let err = Workload::from_json_str(json).unwrap_err();
    let LoadError::Invalid { source, .. } = &err else { panic!("{json}: expected an invalid graph, got: {err}") };
    assert!(matches(source), "{json}: unexpected error: {source:?}");
    let message = err.to_string();
    for word in words {
        assert!(message.contains(word), "`{message}` does not say `{word}`");
    }
}

const ONE_PHASE: &str = r#""compute": {"duration_us": 1}"#;

#[test]
fn an_unknown_dependency_is_named_with_the_node_that_waits_for_it() {
    let json = format!(r#"{{"ranks": 2, "nodes": [{{"id": 0, "name": "a", {ONE_PHASE}, "ctrl_deps": [9]}}]}}"#);
    assert_invalid(
        &json,
        |e| matches!(e, WorkloadError::UnknownDependency { dependency: 9, .. }),
        &["node 0 `a`", "9"],
    );
}

#[test]
fn a_duplicate_id_names_both_nodes() {
    let json = format!(
        r#"{{"ranks": 2, "nodes": [{{"id": 3, "name": "a", {ONE_PHASE}}}, {{"id": 3, "name": "b", {ONE_PHASE}}}]}}"#
    );
    assert_invalid(&json, |e| matches!(e, WorkloadError::DuplicateId { id: 3, .. }), &["3", "`a`", "`b`"]);
}

#[test]
fn a_cycle_names_every_node_on_it() {
    let json = format!(
        r#"{{"ranks": 2, "nodes": [{{"id": 0, "name": "free", {ONE_PHASE}}},
            {{"id": 1, "name": "x", {ONE_PHASE}, "deps": [0, 2]}}, {{"id": 2, "name": "y", {ONE_PHASE}, "deps": [1]}}]}}"#
    );
    assert_invalid(
        &json,
        |e| matches!(e, WorkloadError::Cycle { nodes } if nodes.iter().map(|n| n.id).collect::<Vec<_>>() == [1, 2]),
        &["node 1 `x` waits for node 2 `y` waits for node 1 `x`"],
    );
}

#[test]
fn a_receive_that_waits_for_its_own_send_is_a_cycle() {
    let json = r#"{"ranks": 2, "nodes": [{"id": 0, "name": "s", "send": {"from": 0, "to": 1, "bytes": 8}},
        {"id": 1, "name": "r", "recv": {"from": 0, "to": 1, "bytes": 8}, "deps": [0]}]}"#;
    assert_invalid(json, |e| matches!(e, WorkloadError::Cycle { .. }), &["`s`", "`r`"]);
}

#[test]
fn a_rank_out_of_range_names_the_rank_and_the_valid_ones() {
    let cases = [
        r#"{"id": 0, "name": "a", "compute": {"ranks": [1, 4], "duration_us": 1}}"#,
        r#"{"id": 0, "name": "a", "all_gather": {"bytes": 1, "ranks": 4}}"#,
        r#"{"id": 0, "name": "a", "send": {"from": 0, "to": 4, "bytes": 1}}"#,
    ];
    for case in cases {
        let json = format!(r#"{{"ranks": 4, "nodes": [{case}]}}"#);
        assert_invalid(
            &json,
            |e| matches!(e, WorkloadError::RankOutOfRange { rank: 4, ranks: 4, .. }),
            &["rank 4", "0..4"],
        );
    }
}

#[test]
fn a_compute_node_needs_exactly_one_of_duration_and_flops() {
    let json = |body: &str| format!(r#"{{"ranks": 1, "nodes": [{{"id": 0, "name": "a", "compute": {{{body}}}}}]}}"#);
    assert_invalid(&json(""), |e| matches!(e, WorkloadError::NoComputeTime { .. }), &["no duration and no flops"]);
    assert_invalid(
        &json(r#""duration_us": 1, "flops": 1e9"#),
        |e| matches!(e, WorkloadError::TwoComputeTimes { .. }),
        &["both"],
    );
}

#[test]
fn a_negative_duration_or_flops_is_refused() {
    for (body, what) in [(r#""duration_us": -1"#, "duration"), (r#""flops": -5"#, "flops")] {
        let json = format!(r#"{{"ranks": 1, "nodes": [{{"id": 0, "name": "a", "compute": {{{body}}}}}]}}"#);
        assert_invalid(&json, |e| matches!(e, WorkloadError::BadComputeTime { .. }), &[what, "at least 0"]);
    }
    // JSON has no infinity: only a graph built in code can hold one.
    let err = Workload::new(1, vec![node(0, compute_us(Ranks::All, f64::INFINITY), &[])]).unwrap_err();
    assert!(matches!(err, WorkloadError::BadComputeTime { what: "duration", .. }), "{err}");
}

#[test]
fn a_send_without_a_receive_and_a_receive_without_a_send_are_refused() {
    let send = r#"{"id": 0, "name": "s", "send": {"from": 0, "to": 1, "bytes": 8, "tag": 3}}"#;
    let recv = r#"{"id": 1, "name": "r", "recv": {"from": 0, "to": 1, "bytes": 8, "tag": 4}}"#;
    assert_invalid(
        &format!(r#"{{"ranks": 2, "nodes": [{send}]}}"#),
        |e| matches!(e, WorkloadError::UnmatchedSend { from: 0, to: 1, tag: 3, .. }),
        &["node 0 `s`", "tag 3"],
    );
    assert_invalid(
        &format!(r#"{{"ranks": 2, "nodes": [{send}, {recv}]}}"#),
        |e| matches!(e, WorkloadError::UnmatchedSend { tag: 3, .. }),
        &["tag 3"],
    );
    assert_invalid(
        &format!(r#"{{"ranks": 2, "nodes": [{recv}]}}"#),
        |e| matches!(e, WorkloadError::UnmatchedRecv { tag: 4, .. }),
        &["node 1 `r`", "tag 4"],
    );
}

#[test]
fn a_send_and_its_receive_must_agree_on_size_and_name_two_ranks() {
    assert_invalid(
        r#"{"ranks": 2, "nodes": [{"id": 0, "name": "s", "send": {"from": 0, "to": 1, "bytes": 8}},
            {"id": 1, "name": "r", "recv": {"from": 0, "to": 1, "bytes": 16}}]}"#,
        |e| matches!(e, WorkloadError::TransferSizeMismatch { send_bytes: 8, recv_bytes: 16, .. }),
        &["8 bytes", "16"],
    );
    assert_invalid(
        r#"{"ranks": 2, "nodes": [{"id": 0, "name": "s", "send": {"from": 1, "to": 1, "bytes": 8}}]}"#,
        |e| matches!(e, WorkloadError::SendToSelf { rank: 1, .. }),
        &["itself"],
    );
}

#[test]
fn no_ranks_too_many_ranks_or_no_members_are_refused() {
    assert_invalid(r#"{"ranks": 0, "nodes": []}"#, |e| matches!(e, WorkloadError::NoRanks), &["at least 1 rank"]);
    assert_invalid(
        r#"{"ranks": 4000000000, "nodes": []}"#,
        |e| matches!(e, WorkloadError::TooManyRanks { .. }),
        &["at most 1048576 ranks"],
    );
    assert_invalid(
        r#"{"ranks": 2, "nodes": [{"id": 0, "name": "a", "all_reduce": {"bytes": 8, "ranks": []}}]}"#,
        |e| matches!(e, WorkloadError::NoMembers { .. }),
        &["empty list of ranks"],
    );
}

#[test]
fn text_that_is_not_the_json_form_says_which_node_and_what_would_be_valid() {
    let cases = [
        (r#"{"id": 0, "all_reduc": {"bytes": 8}}"#, "unknown key `all_reduc`"),
        (r#"{"id": 0, "all_reduce": {"bytes": "25Q"}}"#, "bad size `25Q`"),
        (r#"{"id": 0, "all_reduce": {"size": 8}}"#, "unknown field `size`"),
        (r#"{"id": 0, "compute": {"duration_us": 1}, "dep": [1]}"#, "exactly one of"),
        (r#"{"id": 0, "compute": {"duration_us": 1}, "dep": [1]}"#, "it has `compute`, `dep`"),
        (r#"{"id": 0}"#, "it has none"),
        (r#"{"name": "x", "compute": {"duration_us": 1}}"#, "no `id`"),
        (r#"{"id": 0, "compute": {"ranks": "some", "duration_us": 1}}"#, "\"all\", a rank or a list"),
    ];
    for (node, words) in cases {
        let err = Workload::from_json_str(&format!(r#"{{"ranks": 2, "nodes": [{node}]}}"#)).unwrap_err();
        assert!(matches!(err, LoadError::Json { .. }), "{node}: {err}");
        assert!(err.to_string().contains(words), "`{err}` does not say `{words}`");
    }
}

#[test]
fn rank_lists_are_written_one_way() {
    let json = r#"{"ranks": 2, "nodes": [{"id": 0, "all_reduce": {"bytes": 8, "ranks": [1, 0, 1]}},
        {"id": 1, "compute": {"ranks": 1, "flops": 1e9}}]}"#;
    let step = Workload::from_json_str(json).unwrap();
    assert!(matches!(&step.nodes()[0].kind, NodeKind::Collective { ranks: Ranks::All, .. }));
    assert!(
        matches!(&step.nodes()[1].kind, NodeKind::Compute { ranks: Ranks::List(r), work: Work::Flops(_) } if r == &[1])
    );
}

/// A workload with every kind of node, sub-communicators, streams, flops and a pipeline transfer.
fn every_kind() -> Workload {
    let json = r#"{"ranks": 4, "nodes": [
        {"id": 0, "name": "forward", "compute": {"flops": 2e12}},
        {"id": 1, "name": "tp gather", "all_gather": {"bytes": "4M", "ranks": [0, 1], "stream": 1}, "deps": [0]},
        {"id": 2, "name": "tp gather", "all_gather": {"bytes": "4M", "ranks": [2, 3], "stream": 1}, "deps": [0]},
        {"id": 3, "name": "experts", "all_to_all": {"bytes": 3000}, "ctrl_deps": [1, 2]},
        {"id": 4, "name": "stage 0 out", "send": {"from": 1, "to": 3, "bytes": "1M", "tag": 7}, "deps": [0]},
        {"id": 5, "name": "stage 1 in", "recv": {"from": 1, "to": 3, "bytes": "1M", "tag": 7}, "deps": [0]},
        {"id": 6, "name": "rank 3 only", "compute": {"ranks": [3], "duration_us": 12}, "deps": [5]},
        {"id": 7, "name": "grads", "reduce_scatter": {"bytes": "8M"}, "deps": [3]},
        {"id": 8, "name": "root", "broadcast": {"bytes": 64, "ranks": [0, 2]}, "deps": [0]},
        {"id": 9, "name": "sum", "reduce": {"bytes": 64}, "deps": [7]},
        {"id": 10, "name": "dp", "allreduce": {"bytes": "1G"}, "deps": [9]}
    ]}"#;
    Workload::from_json_str(json).unwrap()
}

#[test]
fn the_json_form_reads_back_as_what_it_wrote() {
    let step = every_kind();
    assert_eq!(Workload::from_json_str(&step.to_json()).unwrap(), step);
}

#[test]
fn chakra_traces_read_back_as_the_workload_written() {
    let step = every_kind();
    let traces = step.to_chakra().unwrap();
    assert_eq!(traces.len(), 4);
    assert_eq!(Workload::from_chakra_bytes(&traces).unwrap(), step);
}

#[test]
fn chakra_cannot_hold_a_collective_it_lacks_a_fraction_of_a_microsecond_or_another_ranks_dependency() {
    let not_representable = |kind, words: &str| {
        let err = Workload::new(2, vec![node(0, kind, &[])]).unwrap().to_chakra().unwrap_err();
        assert!(matches!(err, ChakraError::NotRepresentable { id: 0, .. }), "{err}");
        assert!(err.to_string().contains(words), "`{err}` does not say `{words}`");
    };
    not_representable(collective(Collective::AllToAllV, 8, Ranks::All, 0), "no collective type for all_to_all_v");
    not_representable(compute_us(Ranks::All, 0.5), "whole number of microseconds");
    not_representable(collective(Collective::AllReduce, u64::MAX, Ranks::All, 0), "more than an int64_val holds");
    let on = |rank| compute_us(Ranks::List(vec![rank]), 1.0);
    let err = Workload::new(2, vec![node(0, on(0), &[]), node(1, on(1), &[0])]).unwrap().to_chakra().unwrap_err();
    assert!(matches!(err, ChakraError::CrossRankDependency { id: 1, dependency: 0, .. }), "{err}");
}

#[test]
fn chakra_traces_written_to_a_directory_read_back_by_directory_prefix_or_file() {
    let dir = std::env::temp_dir().join(format!("kernbench-workloads-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let step = every_kind();
    let paths = step.write_chakra(&dir, "step").unwrap();
    assert_eq!(paths[3], dir.join("step.3.et"));
    for path in [dir.clone(), dir.join("step"), dir.join("step.2.et")] {
        assert_eq!(Workload::from_file(&path).unwrap(), step, "{}", path.display());
    }
    std::fs::write(dir.join("other.0.et"), b"").unwrap();
    let err = Workload::from_file(&dir).unwrap_err();
    assert!(
        matches!(&err, LoadError::Chakra(ChakraError::TraceSets { found, .. }) if found == &["other", "step"]),
        "{err}"
    );
    let err = Workload::from_file(dir.join("other")).unwrap_err();
    assert!(matches!(&err, LoadError::Chakra(ChakraError::Empty { .. })), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(matches!(Workload::from_file(&dir), Err(LoadError::NotFound { .. })));
}

#[test]
fn the_data_parallel_example_is_in_the_form_the_writer_gives() {
    let path = workloads_dir().join("data-parallel.json");
    let step = Workload::from_file(&path).unwrap();
    assert_eq!(step.to_json(), std::fs::read_to_string(&path).unwrap());
    assert_eq!((step.ranks(), step.nodes().len()), (8, 16));
}

#[test]
fn the_data_parallel_chakra_traces_are_the_writers() {
    let step = Workload::from_file(workloads_dir().join("data-parallel.json")).unwrap();
    let dir = workloads_dir().join("data-parallel-chakra");
    for (rank, bytes) in step.to_chakra().unwrap().iter().enumerate() {
        assert_shipped(&dir.join(format!("data-parallel.{rank}.et")), bytes);
    }
}

#[test]
fn the_data_parallel_chakra_traces_read_as_the_json() {
    let json = Workload::from_file(workloads_dir().join("data-parallel.json")).unwrap();
    assert_eq!(Workload::from_file(workloads_dir().join("data-parallel-chakra")).unwrap(), json);
}

/// Ranks of the 64-GPU step: tensor-parallel groups of 8 neighbours, 2 pipeline stages of 32, expert
/// all-to-all over everyone, and data-parallel groups of the ranks at one place in their group.
const RANKS: u32 = 64;
const BLOCKS: u64 = 40;

/// A step of 64 GPUs with 1,000 calls: 40 blocks of a forward phase, 8 tensor-parallel all-gathers,
/// an expert all-to-all, an expert phase, 8 pipeline transfers and 8 data-parallel all-reduces.
fn mixed_step() -> Workload {
    let mut nodes = Vec::new();
    let mut add = |name: String, kind: NodeKind, deps: Vec<u64>| {
        let id = nodes.len() as u64;
        nodes.push(Node { id, name, kind, data_deps: deps, ctrl_deps: vec![] });
        id
    };
    let group = |first: u32, step: u32| Ranks::List((0..8).map(|i| first + i * step).collect());
    let mut previous = Vec::new();
    for b in 0..BLOCKS {
        let forward =
            add(format!("block {b} forward"), compute_us(Ranks::All, 200.0 + 10.0 * (b % 7) as f64), previous);
        let gathers: Vec<u64> = (0..8)
            .map(|g| {
                let kind = collective(Collective::AllGather, 4 << 20, group(8 * g, 1), 1);
                add(format!("block {b} tp gather {g}"), kind, vec![forward])
            })
            .collect();
        let experts =
            add(format!("block {b} experts"), collective(Collective::AllToAll, 2 << 20, Ranks::All, 2), gathers);
        let expert_phase = NodeKind::Compute { ranks: Ranks::All, work: Work::Flops(1e12 + 1e11 * (b % 3) as f64) };
        let expert_phase = add(format!("block {b} expert phase"), expert_phase, vec![experts]);
        for i in 0..8 {
            let ends = transfer(4 * i, 4 * i + RANKS / 2, 1 << 20, b as u32);
            add(format!("block {b} stage out {i}"), NodeKind::Send(ends), vec![expert_phase]);
            add(format!("block {b} stage in {i}"), NodeKind::Recv(ends), vec![expert_phase]);
        }
        for k in 0..8 {
            add(
                format!("block {b} dp reduce {k}"),
                collective(Collective::AllReduce, 16 << 20, group(k, 8), 0),
                vec![expert_phase],
            );
        }
        previous = vec![expert_phase];
    }
    Workload::new(RANKS, nodes).unwrap()
}

#[test]
fn the_1000_call_example_is_the_generators() {
    let step = mixed_step();
    let calls =
        step.nodes().iter().filter(|n| matches!(n.kind, NodeKind::Collective { .. } | NodeKind::Send(_))).count();
    assert_eq!((step.ranks(), calls), (64, 1000));
    let path = workloads_dir().join("step-1000-calls-64-gpus.json");
    assert_shipped(&path, step.to_json().as_bytes());
    assert_eq!(Workload::from_file(&path).unwrap(), step);
}

#[test]
fn the_1000_call_example_schedules_every_call() {
    let step = mixed_step();
    // 1 PFLOP/s compute, and calls of 1 ns a KiB.
    let time = |node: &Node, _: f64| match node.kind {
        NodeKind::Compute { work: Work::Flops(flops), .. } => flops / 1e6,
        NodeKind::Compute { work: Work::DurationNs(ns), .. } => ns,
        NodeKind::Collective { bytes, .. } | NodeKind::Send(PointToPoint { bytes, .. }) => (bytes >> 10) as f64,
        NodeKind::Recv(_) => unreachable!("a transfer is timed with its send"),
    };
    let schedule = step.schedule(time).unwrap();
    assert_eq!(schedule.calls().len(), 1000);
    assert!(schedule.calls().windows(2).all(|pair| pair[0].start_ns <= pair[1].start_ns));
    assert!(schedule.step_ns() > 0.0);
}

/// The longest error message a user should read on one line (a cycle of every node of the data-parallel
/// step is the longest).
const MAX_MESSAGE: usize = 1000;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    #[test]
    fn a_mutated_json_workload_reads_or_fails_in_one_short_line(
        text in mutated(include_str!("../../../configs/workloads/data-parallel.json"))
    ) {
        match Workload::from_json_str(&text) {
            Ok(step) => {
                prop_assert_eq!(Workload::from_json_str(&step.to_json()).ok(), Some(step.clone()));
                let schedule = step.schedule(|node, _| node.fixed_duration_ns().unwrap_or(1.0));
                prop_assert!(schedule.is_ok());
            }
            Err(e) => one_line_within(&e.to_string(), MAX_MESSAGE)?,
        }
    }

    #[test]
    fn a_damaged_chakra_trace_reads_or_fails_in_one_short_line(
        cut in 0usize..1000,
        flips in proptest::collection::vec((0usize..1000, any::<u8>()), 0..4),
    ) {
        let mut traces = every_kind().to_chakra().unwrap();
        let trace = &mut traces[cut % 4];
        for (at, byte) in flips {
            let at = at % trace.len();
            trace[at] ^= byte;
        }
        trace.truncate(trace.len() - cut % 8);
        if let Err(e) = Workload::from_chakra_bytes(&traces) {
            one_line_within(&e.to_string(), MAX_MESSAGE)?;
        }
    }
}

// Steps run on the simulator.

fn shipped_system(name: &str) -> kernbench::System {
    let path = format!("{}/../configs/systems/{name}.json", env!("CARGO_MANIFEST_DIR"));
    kernbench::System::from_file(std::path::Path::new(&path)).unwrap()
}

fn shipped_workload(name: &str) -> Workload {
    Workload::from_file(format!("{}/../configs/workloads/{name}", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

/// 8 backward phases of `phase_us`, bucket i (25 MiB) all-reduced after phase i, on one stream.
fn data_parallel(phase_us: f64) -> Workload {
    let mut nodes = Vec::new();
    for i in 0..8u64 {
        let deps = if i == 0 { String::new() } else { format!(r#", "deps": [{}]"#, 2 * (i - 1)) };
        nodes.push(format!(
            r#"{{"id": {}, "name": "backward {i}", "compute": {{"duration_us": {phase_us}}}{deps}}}"#,
            2 * i
        ));
        nodes.push(format!(
            r#"{{"id": {}, "name": "bucket {i}", "all_reduce": {{"bytes": "25M"}}, "deps": [{}]}}"#,
            2 * i + 1,
            2 * i
        ));
    }
    Workload::from_json_str(&format!(r#"{{"ranks": 8, "nodes": [{}]}}"#, nodes.join(",\n"))).unwrap()
}

fn run_on(workload: &Workload, system: &kernbench::System) -> kernbench::workload::Step {
    workload.run(system, &kernbench::algorithms::default_registry(), None).unwrap()
}

#[test]
fn a_data_parallel_step_takes_its_phases_and_the_last_bucket_or_its_buckets_back_to_back() {
    let system = shipped_system("dgx-h100");
    // Compute-bound: each bucket is done before the next phase ends, so the step is the phases and the
    // last bucket.
    let d = 1000.0;
    let step = run_on(&data_parallel(d), &system);
    let bucket = step.nodes[1].alone_ns.unwrap();
    assert!(bucket <= d * 1e3, "a bucket takes {bucket} ns, more than a phase");
    let closed = 8.0 * d * 1e3 + bucket;
    assert!((step.step_ns - closed).abs() <= 0.01 * closed, "{} ns, closed form {closed} ns", step.step_ns);
    // Communication-bound: the buckets queue on their stream behind the first phase.
    let d = 20.0;
    let step = run_on(&data_parallel(d), &system);
    let closed = d * 1e3 + 8.0 * bucket;
    assert!(bucket > d * 1e3);
    assert!((step.step_ns - closed).abs() <= 0.01 * closed, "{} ns, closed form {closed} ns", step.step_ns);
    // The shipped example of each case is the same step.
    assert_eq!(run_on(&shipped_workload("data-parallel-short-phases.json"), &system), step);
    assert_eq!(run_on(&shipped_workload("data-parallel.json"), &system).step_ns, 8e6 + bucket);
    assert!(
        step.nodes.iter().all(|n| n.slowdown().is_none_or(|s| (s - 1.0).abs() < 1e-9)),
        "nothing shares a bucket's links"
    );
}

#[test]
fn the_chakra_step_takes_the_time_of_the_same_step_in_json() {
    let system = shipped_system("dgx-h100");
    let json = run_on(&shipped_workload("data-parallel.json"), &system);
    let chakra = run_on(&shipped_workload("data-parallel-chakra"), &system);
    assert_eq!(chakra.step_ns, json.step_ns);
    assert_eq!(chakra, json);
}

#[test]
fn two_all_reduces_of_two_communicators_share_ring16_and_each_take_about_twice_as_long() {
    let step = run_on(&shipped_workload("shared-links-ring16.json"), &shipped_system("ring16"));
    assert_eq!(step.rounds, 2, "scheduled alone, then with the times together");
    for node in &step.nodes {
        let slowdown = node.slowdown().unwrap();
        assert!((1.9..=2.01).contains(&slowdown), "{}: {slowdown}", node.name);
        assert!(!node.unshared);
    }
}

#[test]
fn the_thousand_call_step_runs_on_64_gpus() {
    let started = std::time::Instant::now();
    let path = format!("{}/../configs/workloads/8x-dgx-h100-ndr.json", env!("CARGO_MANIFEST_DIR"));
    let system = kernbench::System::from_file(std::path::Path::new(&path)).unwrap();
    let workload = shipped_workload("step-1000-calls-64-gpus.json");
    let step = workload.run(&system, &kernbench::algorithms::default_registry(), Some(989_000.0)).unwrap();
    // A guard against a hang, not a timing: the benchmark figure is in the README.
    assert!(started.elapsed() < std::time::Duration::from_secs(120));
    let calls = step.nodes.iter().filter(|n| n.kind != "compute").count();
    assert_eq!(calls, 1000);
    assert!(step.nodes.iter().filter(|n| n.kind != "compute").all(|n| n.algorithm.is_some() && n.took_ns() > 0.0));
    let last = step.nodes.iter().map(|n| n.end_ns).fold(0.0, f64::max);
    assert_eq!(step.step_ns, last);
}

#[test]
fn a_step_that_cannot_run_says_why() {
    use kernbench::workload::StepError;
    let system = kernbench::System::shape(4, 1, 1, 1).unwrap();
    let registry = kernbench::algorithms::default_registry();
    let unordered = Workload::from_json_str(
        r#"{"ranks": 4, "nodes": [
            {"id": 0, "name": "a", "all_reduce": {"bytes": "1M"}},
            {"id": 1, "name": "b", "all_reduce": {"bytes": "1M", "stream": 1}}]}"#,
    )
    .unwrap();
    let error = unordered.run(&system, &registry, None).unwrap_err();
    assert!(matches!(error, StepError::UnorderedStreams { .. }), "{error}");
    assert!(
        error.to_string().contains("calls `a` and `b` run on one communicator (all 4 ranks) from streams 0 and 1"),
        "{error}"
    );
    // Ordered, they run one after the other.
    let ordered = unordered.nodes().to_vec();
    let mut ordered = ordered;
    ordered[1].ctrl_deps.push(0);
    let step = Workload::new(4, ordered).unwrap().run(&system, &registry, None).unwrap();
    assert_eq!(step.nodes[1].start_ns, step.nodes[0].end_ns);
    let flops =
        Workload::from_json_str(r#"{"ranks": 4, "nodes": [{"id": 0, "name": "mlp", "compute": {"flops": 1e12}}]}"#)
            .unwrap();
    let error = flops.run(&system, &registry, None).unwrap_err();
    assert!(matches!(error, StepError::NoGpuRate { .. }), "{error}");
    assert_eq!(flops.run(&system, &registry, Some(1000.0)).unwrap().step_ns, 1e9);
    let wide =
        Workload::from_json_str(r#"{"ranks": 8, "nodes": [{"id": 0, "name": "x", "all_reduce": {"bytes": "1M"}}]}"#)
            .unwrap();
    let error = wide.run(&system, &registry, None).unwrap_err();
    assert!(matches!(error, StepError::TooFewGpus { ranks: 8, gpus: 4, .. }), "{error}");
}

#[test]
fn a_step_traces_one_track_per_node() {
    let step = run_on(&shipped_workload("data-parallel.json"), &shipped_system("dgx-h100"));
    let trace = step.trace();
    let events = trace["traceEvents"].as_array().unwrap();
    let tracks: std::collections::BTreeSet<u64> = events.iter().map(|e| e["tid"].as_u64().unwrap()).collect();
    assert_eq!(tracks.len(), step.nodes.len());
    let spans = events.iter().filter(|e| e["ph"] == "X").count();
    assert_eq!(spans, step.nodes.len());
}

#[test]
fn calls_that_overlap_but_cannot_run_together_are_timed_alone_and_marked() {
    // The registry's all-to-all at 16 MiB is one-sided: its symmetric heap would be shared.
    let step = Workload::from_json_str(
        r#"{"ranks": 16, "nodes": [
            {"id": 0, "name": "gradients", "all_reduce": {"bytes": "64M"}},
            {"id": 1, "name": "experts", "all_to_all": {"bytes": "16M", "comm": 1}}]}"#,
    )
    .unwrap();
    let ran = run_on(&step, &shipped_system("ring16"));
    assert!(ran.nodes.iter().all(|n| n.unshared && n.took_ns() == n.alone_ns.unwrap()), "{ran}");
    assert!(ran.to_string().contains("alone*"));
}
