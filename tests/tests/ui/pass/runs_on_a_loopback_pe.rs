//! What the expansion produces runs: a ring all-reduce on a PE whose east neighbour is itself, driven
//! by a minimal backend, gives the sum of every trip around the ring; an error from a `tl` call ends
//! the kernel at that call and comes out of its future.
use std::collections::VecDeque;
use std::task::{Context, Poll, Waker};

use kernbench::prelude::*;
use kernbench::tl::{Backend, TlContext, Work, enter};

#[ccl_kernel(helper)]
fn exchange(tl: &Tl, mine: &Tile) -> Tile {
    tl.send(E, mine);
    tl.recv(W, mine.len(), mine.dtype())
}

/// Ring all-reduce, one chunk at a time.
#[ccl_kernel]
fn ring_allreduce(tl: &Tl, chunks: usize) {
    let mut acc = tl.load(Input);
    let mut travelling = acc.clone();
    for _ in 1..tl.size() {
        let mut parts = Vec::new();
        for c in 0..chunks {
            parts.push(exchange(tl, &tl.chunk(&travelling, c, chunks)));
        }
        travelling = tl.concat(&parts);
        tl.reduce(&mut acc, &travelling, tl.op());
    }
    tl.store(Output, &acc);
}

#[ccl_kernel]
fn bad_axis(tl: &Tl, axis: usize) {
    let x = tl.load(Input);
    let _ = tl.program_id(axis);
    tl.store(Output, &x);
}

/// One PE whose E and W are the same queue (a minimal `Backend`: it follows that trait's methods).
#[derive(Default)]
struct Loopback {
    queue: VecDeque<Tile>,
    input: Option<Tile>,
    output: Option<Tile>,
}

impl Backend for Loopback {
    fn poll_send(
        &mut self,
        _: Direction,
        _: usize,
        tile: &Tile,
        _: &mut Context<'_>,
    ) -> Poll<Result<(), KernelError>> {
        self.queue.push_back(tile.clone());
        Poll::Ready(Ok(()))
    }
    fn poll_recv(
        &mut self,
        _: Direction,
        _: usize,
        _: usize,
        _: Dtype,
        _: &mut Context<'_>,
    ) -> Poll<Result<Tile, KernelError>> {
        self.queue
            .pop_front()
            .map_or(Poll::Pending, |tile| Poll::Ready(Ok(tile)))
    }
    fn poll_barrier(&mut self, _: Group, _: &mut Context<'_>) -> Poll<Result<(), KernelError>> {
        Poll::Ready(Ok(()))
    }
    fn poll_barrier_team(&mut self, _: &Team, _: &mut Context<'_>) -> Poll<Result<(), KernelError>> {
        Poll::Ready(Ok(()))
    }
    fn has(&self, direction: Direction) -> bool {
        matches!(direction, E | W)
    }
    fn load(&mut self, _: Buffer) -> Result<Tile, KernelError> {
        Ok(self.input.clone().expect("an input"))
    }
    fn store(&mut self, _: Buffer, _: Option<usize>, tile: &Tile) -> Result<(), KernelError> {
        self.output = Some(tile.clone());
        Ok(())
    }
    fn charge(&mut self, _: Work) {}
    fn set_phase(&mut self, _: u8) {}
    fn note(&mut self, _: &str, _: String) {}
}

/// Runs `def` with JSON `params` on a loopback PE of a ring of `size`; returns the result and output.
fn run(
    def: &kernbench::KernelDef,
    params: serde_json::Value,
    size: usize,
) -> (Result<(), KernelError>, Option<Tile>) {
    let launch = def.instantiate(params.as_object().unwrap()).unwrap();
    let tl = Tl::new(TlContext {
        pe: PeId::new(0, 0, 0),
        extents: [1, 1, 1],
        rank: 0,
        size,
        op: ReduceOp::Sum,
        root: 0,
        counts: None,
        generation: 0,
        lane: 0,
        lanes: 1,
        queue_depth: 4,
    });
    let mut backend = Loopback {
        input: Some(Tile::from_vec(vec![1.0f32, 2.0, 3.0, 4.0, 5.0])),
        ..Loopback::default()
    };
    let mut kernel = launch.launch(tl);
    let mut cx = Context::from_waker(Waker::noop());
    let result = match enter(&mut backend, || kernel.as_mut().poll(&mut cx)) {
        Poll::Ready(result) => result,
        Poll::Pending => panic!("a loopback PE never waits"),
    };
    assert!(backend.queue.is_empty(), "every message was received");
    (result, backend.output)
}

fn main() {
    let (result, output) = run(
        &ring_allreduce::KERNEL,
        serde_json::json!({ "chunks": 2 }),
        3,
    );
    result.unwrap();
    assert_eq!(
        output.unwrap().to_vec::<f32>().unwrap(),
        [3.0, 6.0, 9.0, 12.0, 15.0]
    );

    let (result, output) = run(&bad_axis::KERNEL, serde_json::json!({ "axis": 7 }), 1);
    assert!(
        matches!(result, Err(KernelError::BadAxis { axis: 7, .. })),
        "{result:?}"
    );
    assert!(output.is_none(), "the kernel stopped at the failing call");
}
