//! [`check`] against the fixtures and against hand-made programs, one rule broken at a time.

use super::*;
use crate::collective::Collective;
use crate::program::{ChunkRef, Protocol, RankProgram, Step, ThreadBlock, msccl};

const RING_ALLREDUCE: &str = include_str!("../../../../tests/fixtures/msccl/ring_allreduce.xml");
const ALLTOALL_SCRATCH: &str = include_str!("../../../../tests/fixtures/msccl/alltoall_scratch.xml");
const TWO_RING_ALLREDUCE: &str = include_str!("../../../../tests/fixtures/msccl/two_ring_allreduce.xml");

fn fixture(text: &str) -> Program {
    msccl::from_xml_str(text).unwrap_or_else(|error| panic!("{error}"))
}

fn at(rank: usize, tb: usize, step: usize) -> StepAt {
    StepAt { rank, tb, step }
}

/// The error `check` gives for `program` after `edit`, with the parts its message must mention.
fn error_after(mut program: Program, edit: impl FnOnce(&mut Program), parts: &[&str]) -> ProgramError {
    edit(&mut program);
    let error = check(&program).expect_err("the edited program should be refused");
    let message = error.to_string();
    for part in parts {
        assert!(message.contains(part), "`{message}` does not mention `{part}`");
    }
    error
}

fn step(kind: StepKind, src: Option<usize>, dst: Option<usize>) -> Step {
    let chunk = |index: Option<usize>| index.map(|index| ChunkRef { buffer: Buffer::Input, index });
    Step { kind, src: chunk(src), dst: chunk(dst), count: 1, depends_on: None, has_dependents: false }
}

/// Two ranks, one thread block each, connected both ways, with the given steps.
fn pair(rank_0: Vec<Step>, rank_1: Vec<Step>) -> Program {
    let rank = |peer, steps| RankProgram {
        input_chunks: 2,
        output_chunks: 0,
        scratch_chunks: 0,
        thread_blocks: vec![ThreadBlock { send: Some(peer), recv: Some(peer), channel: 0, steps }],
    };
    Program {
        name: "pair".into(),
        collective: Collective::AllReduce,
        in_place: true,
        protocol: Protocol::Simple,
        chunks: 2,
        channels: 1,
        ranks: vec![rank(1, rank_0), rank(0, rank_1)],
    }
}

#[test]
fn buffer_larger_than_the_program_cuts() {
    let error = error_after(
        fixture(RING_ALLREDUCE),
        |p| p.ranks[3].output_chunks = 5,
        &["rank 3's output buffer (o_chunks) has 5 chunks, more than the program's 4 (nchunksperloop)"],
    );
    assert_eq!(error, ProgramError::BufferTooLarge { rank: 3, buffer: Buffer::Output, buffer_chunks: 5, chunks: 4 });
    let mut program = fixture(ALLTOALL_SCRATCH);
    program.ranks[0].scratch_chunks = 10;
    assert_eq!(check(&program), Ok(()), "scratch is the program's own, of any size");
}

#[test]
fn channel_out_of_range() {
    let error = error_after(
        fixture(TWO_RING_ALLREDUCE),
        |p| p.ranks[2].thread_blocks[1].channel = 2,
        &["rank 2 tb 1", "channel 2", "2 channels, 0..2"],
    );
    assert!(matches!(error, ProgramError::ChannelOutOfRange { .. }));
}

#[test]
fn shared_connection() {
    // Give rank 0's tb 1 (which sends to 2 on channel 1) tb 0's send connection.
    let error = error_after(
        fixture(TWO_RING_ALLREDUCE),
        |p| {
            let tb = &mut p.ranks[0].thread_blocks[1];
            (tb.send, tb.recv, tb.channel) = (Some(1), None, 0);
        },
        &["rank 0: tb 0 and tb 1 both send with peer 1 on channel 0", "one send thread block"],
    );
    assert_eq!(
        error,
        ProgramError::SharedConnection {
            rank: 0,
            first: 0,
            second: 1,
            connection: ConnectionKind::Send,
            peer: 1,
            channel: 0
        }
    );
}

#[test]
fn missing_chunks() {
    let error = error_after(
        fixture(RING_ALLREDUCE),
        |p| p.ranks[1].thread_blocks[0].steps[3].dst = None,
        &["rank 1 tb 0 step 3", "`rrcs` writes its dst chunks", "has no dst"],
    );
    assert!(matches!(error, ProgramError::MissingChunks { side: Side::Dst, .. }));
    // In XML: a reading step with srcoff="-1".
    let xml = RING_ALLREDUCE.replacen(r#"type="s" srcbuf="i" srcoff="3""#, r#"type="s" srcbuf="i" srcoff="-1""#, 1);
    let error = msccl::from_xml_str(&xml).unwrap_err();
    assert!(error.to_string().contains("rank 0 tb 0 step 0: step type `s` reads its src chunks"), "{error}");
}

#[test]
fn chunks_out_of_range_counts_the_end() {
    // Chunk 3 exists, but 3..5 runs past the 4 chunks: the check real readers leave out.
    let xml = RING_ALLREDUCE.replacen(r#"dstbuf="o" dstoff="1" cnt="1""#, r#"dstbuf="o" dstoff="3" cnt="2""#, 1);
    let error = msccl::from_xml_str(&xml).unwrap_err();
    assert_eq!(
        error,
        msccl::MscclError::Program(ProgramError::ChunksOutOfRange {
            at: at(0, 0, 6),
            side: Side::Dst,
            buffer: Buffer::Output,
            index: 3,
            count: 2,
            chunks: 4
        })
    );
    assert!(error.to_string().contains(
        "rank 0 tb 0 step 6: dst chunks 3..5 are out of range: rank 0's output buffer (o_chunks) has 4 chunks, 0..4"
    ));
}

#[test]
fn bad_dependencies() {
    let program = fixture(ALLTOALL_SCRATCH);
    let dep = |tb, step| move |p: &mut Program| p.ranks[1].thread_blocks[2].steps[1].depends_on = Some((tb, step));
    let error = error_after(program.clone(), dep(3, 0), &["rank 1 tb 2 step 1", "tb 3 step 0", "thread blocks 0..3"]);
    assert!(matches!(error, ProgramError::BadDependency { on_tb: 3, .. }));
    error_after(program.clone(), dep(0, 2), &["rank 1 tb 2 step 1", "tb 0 step 2", "tb 0 has steps 0..2"]);
    error_after(program, dep(2, 0), &["tb 2 step 0", "its own thread block"]);
}

#[test]
fn a_dependency_nothing_publishes_never_ends() {
    let xml = ALLTOALL_SCRATCH.replacen(
        r#"dstbuf="s" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="1""#,
        r#"dstbuf="s" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="0""#,
        1,
    );
    let error = msccl::from_xml_str(&xml).unwrap_err();
    assert_eq!(
        error,
        msccl::MscclError::Program(ProgramError::UnpublishedDependency { at: at(0, 2, 1), on_tb: 0, on_step: 1 })
    );
    assert!(error.to_string().contains("waits for rank 0 tb 0 step 1, which does not publish"), "{error}");
    // A later published step of the same thread block ends the wait: not an error.
    let mut program = fixture(ALLTOALL_SCRATCH);
    program.ranks[0].thread_blocks[0].steps[0].has_dependents = false;
    program.ranks[0].thread_blocks[2].steps[1].depends_on = Some((0, 0));
    assert_eq!(check(&program), Ok(()));
}

#[test]
fn dangling_nop() {
    let program = fixture(TWO_RING_ALLREDUCE);
    let error = error_after(
        program.clone(),
        |p| p.ranks[1].thread_blocks[2].steps[1].depends_on = None,
        &["rank 1 tb 2 step 0", "nop is not followed by a step with its own dependency"],
    );
    assert_eq!(error, ProgramError::DanglingNop { at: at(1, 2, 0) });
    error_after(
        program,
        |p| p.ranks[2].thread_blocks[2].steps.push(step(StepKind::Nop, None, None)),
        &["rank 2 tb 2 step 3", "nop"],
    );
}

#[test]
fn unmatched_receive_and_send() {
    let error = error_after(
        fixture(RING_ALLREDUCE),
        |p| p.ranks[0].thread_blocks[0].steps[5].kind = StepKind::Recv,
        &["rank 1 tb 0 step 6", "receives message 5 on the connection rank 0 -> rank 1 channel 0", "sends only 5"],
    );
    assert_eq!(error, ProgramError::UnmatchedReceive { at: at(1, 0, 6), from: 0, channel: 0, message: 5, sent: 5 });
    let error = error_after(
        fixture(RING_ALLREDUCE),
        |p| p.ranks[0].thread_blocks[0].steps[6].kind = StepKind::RecvCopySend,
        &["rank 0 tb 0 step 6", "sends message 6 on the connection rank 0 -> rank 1 channel 0", "receives only 6"],
    );
    assert!(matches!(error, ProgramError::UnmatchedSend { to: 1, .. }));
}

#[test]
fn paired_counts_differ() {
    let error = error_after(
        fixture(ALLTOALL_SCRATCH),
        |p| p.ranks[2].thread_blocks[0].steps[1].count = 2,
        &[
            "rank 1 tb 0 step 0 sends 1 chunks but rank 2 tb 0 step 1",
            "expects 2",
            "message 0 of rank 1 -> rank 2 channel 0",
        ],
    );
    assert!(matches!(error, ProgramError::CountMismatch { send_count: 1, recv_count: 2, .. }));
}

#[test]
fn receiving_before_sending_both_ways_deadlocks() {
    let program = pair(
        vec![step(StepKind::Recv, None, Some(1)), step(StepKind::Send, Some(0), None)],
        vec![step(StepKind::Recv, None, Some(0)), step(StepKind::Send, Some(1), None)],
    );
    let error = check(&program).unwrap_err();
    let cycle = |rank, step, kind| WaitingStep { at: at(rank, 0, step), kind };
    assert_eq!(
        error,
        ProgramError::Deadlock {
            cycle: vec![
                cycle(0, 0, StepKind::Recv),
                cycle(1, 1, StepKind::Send),
                cycle(1, 0, StepKind::Recv),
                cycle(0, 1, StepKind::Send),
            ]
        }
    );
    assert_eq!(
        error.to_string(),
        "deadlock: the steps wait on each other in a cycle: rank 0 tb 0 step 0 (r) waits for rank 1 tb 0 step 1 (s), \
         which waits for rank 1 tb 0 step 0 (r), which waits for rank 0 tb 0 step 1 (s), which waits for rank 0 tb 0 step 0 (r)"
    );
    // Sending first on one side breaks the cycle.
    let program = pair(
        vec![step(StepKind::Send, Some(0), None), step(StepKind::Recv, None, Some(1))],
        vec![step(StepKind::Recv, None, Some(0)), step(StepKind::Send, Some(1), None)],
    );
    assert_eq!(check(&program), Ok(()));
}

#[test]
fn a_dependency_cycle_between_thread_blocks_deadlocks() {
    // Rank 0's local tb waits for tb 0's receive, and tb 0's first send waits for the local tb:
    // tb 0 step 0 -> tb 2 step 2 -> tb 2 step 1 -> (dependency) tb 0 step 1 -> tb 0 step 0.
    let mut program = fixture(ALLTOALL_SCRATCH);
    program.ranks[0].thread_blocks[2].steps[2].has_dependents = true;
    program.ranks[0].thread_blocks[0].steps[0].depends_on = Some((2, 2));
    let error = check(&program).unwrap_err();
    assert!(matches!(error, ProgramError::Deadlock { .. }), "{error:?}");
    let message = error.to_string();
    assert!(
        message.starts_with(
            "deadlock: the steps wait on each other in a cycle: rank 0 tb 0 step 0 (s) waits for rank 0 tb 2 step 2 (cpy), which waits for rank 0 tb 2 step 1 (cpy)"
        ),
        "{message}"
    );
    assert!(message.ends_with("which waits for rank 0 tb 0 step 0 (s)"), "{message}");
}
