//! Teams: strided and 2-D splits, a SIP's and a node's ranks give NVSHMEM's members and team ranks;
//! a team barrier holds only its members and orders their accesses for the race detector; a
//! multicast object over a team reduces over its members only; bad splits and non-members are
//! refused by name. Each timed scenario takes the same simulated time with and without data.

use kernbench::prelude::*;
use kernbench::sim::testing::{MockError, MockRun};
use kernbench::sim::{RunError, RunReport};
use kernbench::symmetric::{Team, TeamSplitError};
use kernbench::{Op, System};
use serde_json::json;

/// `sips` SIPs of one cube of `pes` PEs each, behind a switch that multicasts and reduces, as
/// nodes of `sips_per_node` SIPs.
fn switched(sips: usize, pes: usize, sips_per_node: usize) -> &'static System {
    let spec = json!({
        "sips": sips, "mesh": {"w": 1, "h": 1}, "pes_per_cube": pes, "sip_interconnect": "switched",
        "switch": {"multicast": true, "reduce_gbps": 100},
        "nodes": {"sips_per_node": sips_per_node}
    });
    Box::leak(Box::new(System::from_json_str(&spec.to_string()).unwrap_or_else(|e| panic!("{e}: {spec}"))))
}

/// `kernel` over every pair of `mapper`'s ranks (`full`), rank `r`'s input eight `r + 1`s.
fn run_full(system: &'static System, mapper: &'static str, kernel: &'static kernbench::KernelDef) -> MockRun<'static> {
    MockRun::new(system, "full", mapper, kernel).inputs(|_, rank| Tile::filled(F32, 8, (rank + 1) as f64))
}

/// Runs `run` with data and timing-only: the simulated times must be the same bits.
fn same_time_without_data(run: impl Fn() -> MockRun<'static>) -> RunReport {
    let with_data = run().run().unwrap();
    let without = run().timing_only(true).run().unwrap();
    let (a, b) = (with_data.completion_ns().unwrap(), without.completion_ns().unwrap());
    assert_eq!(a.to_bits(), b.to_bits(), "timing-only {b} ns differs from {a} ns");
    with_data
}

fn kernel_error(result: Result<RunReport, MockError>) -> KernelError {
    match result {
        Err(MockError::Run(RunError::Kernel(e))) => e,
        other => panic!("expected a kernel error, got {other:?}"),
    }
}

/// `(team rank, members)` as the kernel notes it.
fn described(team: Option<&Team>) -> String {
    team.map_or_else(|| "none".to_owned(), |t| format!("{} {:?}", t.rank(), t.members()))
}

// --- splits ---

/// Notes every team of this rank: a strided split, the 2-D split by `x_size`, its SIP's and node's.
#[ccl_kernel]
fn notes_teams(tl: &Tl, start: usize, stride: usize, size: usize, x_size: usize) {
    let world = tl.team_world();
    tl.note("world", described(Some(&world)));
    let strided = tl.team_split_strided(start, stride, size);
    tl.note("strided", described(strided.as_ref()));
    let (x, y) = tl.team_split_2d(x_size);
    tl.note("x", described(Some(&x)));
    tl.note("y", described(Some(&y)));
    tl.note("sip", described(Some(&tl.team_sip())));
    tl.note("node", described(Some(&tl.team_node())));
}

/// What NVSHMEM's splits give rank `rank` of `n`: written out by their definitions, apart from
/// [`Team`]'s code.
fn nvshmem_teams(rank: usize, n: usize, (start, stride, size): (usize, usize, usize), x_size: usize) -> [String; 4] {
    let show = |members: Vec<usize>| match members.iter().position(|&m| m == rank) {
        Some(i) => format!("{i} {members:?}"),
        None => "none".to_owned(),
    };
    let world = show((0..n).collect());
    let strided = show((0..size).map(|k| start + k * stride).collect());
    let x = show((0..n).filter(|m| m / x_size == rank / x_size).collect());
    let y = show((0..n).filter(|m| m % x_size == rank % x_size).collect());
    [world, strided, x, y]
}

#[test]
fn strided_and_2d_splits_give_nvshmem_s_members_and_ranks_and_sip_and_node_teams_their_ranks() {
    // 2 nodes of 2 SIPs of 2 PEs: 8 ranks, in SIP-major order.
    let system = switched(4, 2, 2);
    for (split, x_size) in [((1, 3, 3), 3), ((0, 2, 4), 4), ((5, 1, 1), 8), ((2, 1, 6), 5)] {
        let (start, stride, size) = split;
        let params = json!({"start": start, "stride": stride, "size": size, "x_size": x_size});
        let report = MockRun::new(system, "full", "all_pes", &notes_teams::KERNEL).params(params).run().unwrap();
        let n = report.pes().len();
        assert_eq!(n, 8);
        for (rank, pe) in report.pes().iter().enumerate() {
            let [world, strided, x, y] = nvshmem_teams(rank, n, split, x_size);
            let note = |key: &str| pe.notes.get(key).cloned().unwrap_or_default();
            assert_eq!(note("world"), world, "rank {rank}");
            assert_eq!(note("strided"), strided, "rank {rank} of {split:?}");
            assert_eq!((note("x"), note("y")), (x, y), "rank {rank} of 2-D by {x_size}");
            let on = |same: &dyn Fn(PeId) -> bool| {
                let members: Vec<usize> = (0..n).filter(|&m| same(report.pes()[m].pe)).collect();
                let i = members.iter().position(|&m| m == rank).unwrap();
                format!("{i} {members:?}")
            };
            assert_eq!(note("sip"), on(&|other| other.sip == pe.pe.sip), "rank {rank} on {}", pe.pe);
            assert_eq!(note("node"), on(&|other| other.sip / 2 == pe.pe.sip / 2), "rank {rank} on {}", pe.pe);
        }
    }
}

#[test]
fn on_a_system_of_one_node_the_node_team_is_every_rank() {
    let system = switched(2, 2, 2);
    let params = json!({"start": 0, "stride": 1, "size": 4, "x_size": 2});
    let report = MockRun::new(system, "full", "all_pes", &notes_teams::KERNEL).params(params).run().unwrap();
    for (rank, pe) in report.pes().iter().enumerate() {
        assert_eq!(pe.notes["node"], format!("{rank} [0, 1, 2, 3]"));
    }
}

/// Splits by the parameters; the error is the test's.
#[ccl_kernel]
fn splits(tl: &Tl, start: usize, stride: usize, size: usize, x_size: usize) {
    let _ = tl.team_split_strided(start, stride, size);
    let _ = tl.team_split_2d(x_size);
}

#[test]
fn bad_splits_are_named_errors_saying_what_would_be_valid() {
    let system = switched(4, 1, 4);
    let split = |start: usize, stride: usize, size: usize, x_size: usize| {
        let params = json!({"start": start, "stride": stride, "size": size, "x_size": x_size});
        kernel_error(MockRun::new(system, "full", "leader_only", &splits::KERNEL).params(params).run())
    };
    let error = split(0, 0, 2, 1);
    assert!(
        matches!(
            &error,
            KernelError::BadTeamSplit {
                op: Op::TeamSplit,
                source: TeamSplitError::ZeroStride { start: 0, size: 2 },
                ..
            }
        ),
        "{error:?}"
    );
    assert!(error.to_string().contains("expected stride >= 1 (or size 1)"), "{error}");
    let error = split(1, 2, 3, 1);
    assert!(
        matches!(
            &error,
            KernelError::BadTeamSplit { source: TeamSplitError::PastTheRun { last: Some(5), world: 4, .. }, .. }
        ),
        "{error:?}"
    );
    assert!(error.to_string().contains("expected start + (size - 1) * stride < 4"), "{error}");
    let error = split(usize::MAX, 2, 2, 1);
    assert!(matches!(&error, KernelError::BadTeamSplit { source: TeamSplitError::PastTheRun { last: None, .. }, .. }));
    let error = split(0, 1, 0, 1);
    assert!(matches!(&error, KernelError::BadTeamSplit { source: TeamSplitError::Empty { .. }, .. }), "{error:?}");
    let error = split(0, 1, 4, 0);
    assert!(matches!(&error, KernelError::BadTeamSplit { source: TeamSplitError::ZeroXSize { world: 4 }, .. }));
    assert!(error.to_string().contains("expected x_size in 1..=4"), "{error}");
}

/// Rank 2 barriers over a team it was handed but is not in (ranks 0 and 1's).
#[ccl_kernel]
fn barriers_over_another_team(tl: &Tl) {
    let (x, _) = tl.team_split_2d(2);
    let theirs = Team::of(vec![0, 1], 0).ok_or("rank 0 is in [0, 1]")?;
    let team = if tl.rank() == 2 { theirs } else { x };
    tl.barrier_team(&team);
}

#[test]
fn a_team_barrier_by_a_non_member_is_a_named_error() {
    let error = kernel_error(run_full(switched(4, 1, 4), "leader_only", &barriers_over_another_team::KERNEL).run());
    let KernelError::NotInTeam { rank, op, team, .. } = &error else { panic!("{error:?}") };
    assert_eq!((*rank, *op, team.members()), (2, Op::BarrierTeam, &[0, 1][..]));
    assert!(error.to_string().contains("which is not a member of the team of ranks [0, 1]"), "{error}");
}

/// A team rank past the team: `team.global` fails the kernel with its message.
#[ccl_kernel]
fn puts_past_the_team(tl: &Tl) {
    let (x, _) = tl.team_split_2d(2);
    let data = tl.symmetric("data", F32, 8);
    tl.put(x.global(2)?, &data, 0, &tl.load(Input));
}

#[test]
fn a_team_rank_past_the_team_is_a_named_error() {
    let error = kernel_error(run_full(switched(4, 1, 4), "leader_only", &puts_past_the_team::KERNEL).run());
    assert!(
        error.to_string().contains("team rank 2 of a team of 2 members (ranks [0, 1]): expected a team rank in 0..2"),
        "{error}"
    );
}

// --- team barriers ---

/// Rank 0 reduces a long tile `delay` times, then every rank barriers: over its row of 2 (`team`)
/// or over everyone.
#[ccl_kernel]
fn waits_for_a_slow_rank_0(tl: &Tl, team: bool, delay: usize) {
    let (x, _) = tl.team_split_2d(2);
    if tl.rank() == 0 {
        let mut acc = Tile::zeros(F32, 1 << 16);
        for _ in 0..delay {
            tl.reduce(&mut acc, &Tile::zeros(F32, 1 << 16), ReduceOp::Sum);
        }
    }
    if team {
        tl.barrier_team(&x);
    } else {
        tl.barrier();
    }
}

/// Each rank's finish time, in rank order.
fn finish_times(report: &RunReport) -> Vec<f64> {
    report.time().unwrap().pes.iter().map(|p| p.finish_ns).collect()
}

#[test]
fn a_team_barrier_holds_its_members_and_no_one_else() {
    let system = switched(4, 1, 4);
    let run = |team: bool, delay: usize| {
        same_time_without_data(move || {
            run_full(system, "leader_only", &waits_for_a_slow_rank_0::KERNEL)
                .params(json!({"team": team, "delay": delay}))
        })
    };
    let fast = finish_times(&run(true, 0));
    let team = finish_times(&run(true, 20));
    let all = finish_times(&run(false, 20));
    // Rank 0's delay holds its team mate...
    assert!(team[1] > fast[1] && team[1] >= team[0] - 1.0, "{team:?} against {fast:?}");
    // ...but not the other team, which finishes as if rank 0 were fast...
    assert_eq!((team[2].to_bits(), team[3].to_bits()), (fast[2].to_bits(), fast[3].to_bits()), "{team:?} / {fast:?}");
    assert!(team[2] < team[1], "{team:?}");
    // ...where a barrier over everyone holds every rank.
    assert!(all.iter().all(|&t| t >= team[1] - 1.0), "{all:?} against {team:?}");
}

/// In each row of 2, member 0 puts into member 1's buffer; member 1 reads it after a barrier over
/// the row (`barrier`), or after a message sent after the put (which does not order a put).
#[ccl_kernel]
fn reads_a_put_after(tl: &Tl, barrier: bool) {
    let (x, _) = tl.team_split_2d(2);
    let inbox = tl.symmetric("inbox", F32, 8);
    let mate = if x.rank() == 0 { x.global(1)? } else { x.global(0)? };
    if x.rank() == 0 {
        tl.put(mate, &inbox, 0, &tl.load(Input));
        if !barrier {
            tl.send(Direction::Peer(mate as u32), &Tile::zeros(F32, 1));
        }
    }
    if barrier {
        tl.barrier_team(&x);
    } else if x.rank() == 1 {
        let _ = tl.recv(Direction::Peer(mate as u32), 1, F32);
    }
    if x.rank() == 1 {
        tl.store(Output, &tl.read(&inbox, 0, 8)); // reads the put
    }
}

#[test]
fn a_team_barrier_orders_a_put_before_a_member_s_read_and_a_message_does_not() {
    let system = switched(4, 1, 4);
    let run =
        |barrier: bool| run_full(system, "leader_only", &reads_a_put_after::KERNEL).params(json!({"barrier": barrier}));
    let report = same_time_without_data(|| run(true));
    for (rank, pe) in report.pes().iter().enumerate().filter(|(rank, _)| rank % 2 == 1) {
        assert_eq!(pe.output, Tile::filled(F32, 8, rank as f64), "rank {rank} holds its mate's input");
    }
    let KernelError::Race(race) = kernel_error(run(false).run()) else { panic!("expected a race") };
    assert_eq!((race.first.op, race.second.op, race.buffer), (Op::Put, Op::Read, "inbox"), "{race}");
}

// --- multicast over a team ---

/// Every rank publishes its input into a multicast object over its team (`node`: its node's ranks;
/// otherwise its row of 2) and stores the switch's sum of the team's copies; rank `reducer` of each
/// team also adds its input into every member's copy of a second object with `multimem_red`.
#[ccl_kernel]
fn sums_over_a_team(tl: &Tl, node: bool) {
    let team = if node { tl.team_node() } else { tl.team_split_2d(2).0 };
    let input = tl.multicast_team(&team, "input", F32, 8);
    tl.write(&input.buffer, 0, &tl.load(Input));
    let added = tl.multicast_team(&team, "added", F32, 8);
    tl.write(&added.buffer, 0, &Tile::zeros(F32, 8));
    tl.barrier_team(&team);
    if team.rank() == 0 {
        tl.multimem_red(&added, 0, &tl.load(Input), ReduceOp::Sum);
    }
    let sum = tl.multimem_ld_reduce(&input, 0, 8, ReduceOp::Sum);
    tl.barrier_team(&team);
    let first = tl.read(&added.buffer, 0, 8);
    tl.store(Output, &tl.concat(&[sum, first]));
}

#[test]
fn multicast_over_a_node_s_or_a_row_s_ranks_reduces_only_over_them() {
    // 2 nodes of 2 SIPs; rank r's input is r + 1. Nodes and rows are both [0, 1] and [2, 3] here,
    // so a system of 4 SIPs in one node tells rows from the whole run.
    for (system, node, teams) in
        [(switched(4, 1, 2), true, [[0, 1], [2, 3]]), (switched(4, 1, 4), false, [[0, 1], [2, 3]])]
    {
        let report = same_time_without_data(|| {
            run_full(system, "leader_only", &sums_over_a_team::KERNEL)
                .params(json!({"node": node}))
                .outputs(|_, _, _| Tile::zeros(F32, 16))
        });
        for team in teams {
            let sum: f64 = team.iter().map(|&r| (r + 1) as f64).sum();
            let first = (team[0] + 1) as f64;
            let expected = Tile::concat(&[Tile::filled(F32, 8, sum), Tile::filled(F32, 8, first)]).unwrap();
            for rank in team {
                assert_eq!(report.pes()[rank].output, expected, "rank {rank} of team {team:?} (node: {node})");
            }
        }
    }
}

/// A multicast object over every rank.
#[ccl_kernel]
fn multicasts_over_every_rank(tl: &Tl) {
    let _ = tl.multicast("all", F32, 8);
}

#[test]
fn a_multicast_across_nodes_is_refused_by_name_where_a_node_s_team_is_not() {
    let error = kernel_error(run_full(switched(4, 1, 2), "leader_only", &multicasts_over_every_rank::KERNEL).run());
    assert!(matches!(&error, KernelError::NoMulticast { op: Op::Multicast, .. }), "{error:?}");
}
