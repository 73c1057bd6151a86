//! The order steps run in: each send paired with the receive that takes its message, and the cycle
//! of steps waiting on each other that would deadlock the executor.

use std::collections::BTreeMap;

use super::{ProgramError, StepAt, WaitingStep};
use crate::program::{Program, Step, StepKind};

/// Every step of a program numbered densely, rank by rank, thread block by thread block, so the
/// dependency graph can be held in flat vectors.
pub(super) struct Steps {
    /// Per rank, per thread block, the number of its first step.
    first: Vec<Vec<usize>>,
    /// Per number, where the step is.
    at: Vec<StepAt>,
}

impl Steps {
    pub(super) fn new(program: &Program) -> Steps {
        let mut first = Vec::with_capacity(program.ranks.len());
        let mut at = Vec::new();
        for (rank, rank_program) in program.ranks.iter().enumerate() {
            let mut firsts = Vec::with_capacity(rank_program.thread_blocks.len());
            for (tb, block) in rank_program.thread_blocks.iter().enumerate() {
                firsts.push(at.len());
                at.extend((0..block.steps.len()).map(|step| StepAt { rank, tb, step }));
            }
            first.push(firsts);
        }
        Steps { first, at }
    }

    fn number(&self, rank: usize, tb: usize, step: usize) -> usize {
        self.first[rank][tb] + step
    }

    fn step<'p>(&self, program: &'p Program, number: usize) -> &'p Step {
        let at = self.at[number];
        &program.ranks[at.rank].thread_blocks[at.tb].steps[at.step]
    }
}

/// Pairs the k-th send of each connection (sender, receiver, channel) with its k-th receive and
/// returns, per step number, the number of the send a receiving step takes its message from.
pub(super) fn pair_messages(program: &Program, steps: &Steps) -> Result<Vec<Option<usize>>, ProgramError> {
    // Keyed by (sender, receiver, channel); check_ranks made each side at most one tb.
    let mut sends: BTreeMap<(usize, usize, usize), Vec<usize>> = BTreeMap::new();
    let mut receives: BTreeMap<(usize, usize, usize), Vec<usize>> = BTreeMap::new();
    for (rank, rank_program) in program.ranks.iter().enumerate() {
        for (tb, block) in rank_program.thread_blocks.iter().enumerate() {
            let positions = |wanted: fn(StepKind) -> bool| {
                let kept = block.steps.iter().enumerate().filter(|(_, step)| wanted(step.kind));
                kept.map(|(step, _)| steps.number(rank, tb, step)).collect()
            };
            if let Some(peer) = block.send {
                sends.insert((rank, peer, block.channel), positions(StepKind::sends));
            }
            if let Some(peer) = block.recv {
                receives.insert((peer, rank, block.channel), positions(StepKind::receives));
            }
        }
    }
    let mut sent_by = vec![None; steps.at.len()];
    let none = Vec::new();
    let keys: std::collections::BTreeSet<_> = sends.keys().chain(receives.keys()).copied().collect();
    for key @ (from, to, channel) in keys {
        let (sent, received) = (sends.get(&key).unwrap_or(&none), receives.get(&key).unwrap_or(&none));
        for (message, (&send, &recv)) in sent.iter().zip(received).enumerate() {
            let (send_count, recv_count) = (steps.step(program, send).count, steps.step(program, recv).count);
            if send_count != recv_count {
                return Err(ProgramError::CountMismatch {
                    send: steps.at[send],
                    send_count,
                    recv: steps.at[recv],
                    recv_count,
                    channel,
                    message,
                });
            }
            sent_by[recv] = Some(send);
        }
        let (n_sent, n_received) = (sent.len(), received.len());
        if n_received > n_sent {
            let at = steps.at[received[n_sent]];
            return Err(ProgramError::UnmatchedReceive { at, from, channel, message: n_sent, sent: n_sent });
        }
        if n_sent > n_received {
            let at = steps.at[sent[n_received]];
            return Err(ProgramError::UnmatchedSend { at, to, channel, message: n_received, received: n_received });
        }
    }
    Ok(sent_by)
}

/// Looks for a cycle in the graph whose edges go from each step to what it waits for: the previous
/// step of its thread block, the first published step at or after its dependency (the executor's
/// flag is monotonic, so that is what ends the wait) and the send of the message it receives. Depth
/// first from the lowest step, so the cycle reported is always the same; O(steps).
pub(super) fn find_cycle(program: &Program, steps: &Steps, sent_by: &[Option<usize>]) -> Result<(), ProgramError> {
    let total = steps.at.len();
    // Per step, the first step at or after it in its thread block that publishes its completion.
    let mut published_from = vec![None; total];
    for (rank, rank_program) in program.ranks.iter().enumerate() {
        for (tb, block) in rank_program.thread_blocks.iter().enumerate() {
            let mut next = None;
            for (step, content) in block.steps.iter().enumerate().rev() {
                let number = steps.number(rank, tb, step);
                if content.has_dependents {
                    next = Some(number);
                }
                published_from[number] = next;
            }
        }
    }
    let waits_for = |number: usize| -> [Option<usize>; 3] {
        let at = steps.at[number];
        let previous = (at.step > 0).then(|| number - 1);
        let dependency = steps
            .step(program, number)
            .depends_on
            .and_then(|(tb, step)| published_from[steps.number(at.rank, tb, step)]);
        [previous, dependency, sent_by[number]]
    };

    #[derive(Clone, Copy, PartialEq)]
    enum Visit {
        New,
        OnPath,
        Done,
    }
    let mut visit = vec![Visit::New; total];
    let mut path: Vec<(usize, usize)> = Vec::new();
    for start in 0..total {
        if visit[start] != Visit::New {
            continue;
        }
        visit[start] = Visit::OnPath;
        path.push((start, 0));
        while let Some(&mut (node, ref mut edge)) = path.last_mut() {
            let targets = waits_for(node);
            let Some(&target) = targets.get(*edge) else {
                visit[node] = Visit::Done;
                path.pop();
                continue;
            };
            *edge += 1;
            let Some(target) = target else { continue };
            match visit[target] {
                Visit::New => {
                    visit[target] = Visit::OnPath;
                    path.push((target, 0));
                }
                Visit::OnPath => {
                    let from = path.iter().position(|&(n, _)| n == target).expect("a node on the path is in it");
                    let mut cycle: Vec<usize> = path[from..].iter().map(|&(n, _)| n).collect();
                    let lowest = (0..cycle.len()).min_by_key(|&i| cycle[i]).expect("a cycle has a node");
                    cycle.rotate_left(lowest);
                    let cycle = cycle
                        .into_iter()
                        .map(|n| WaitingStep { at: steps.at[n], kind: steps.step(program, n).kind })
                        .collect();
                    return Err(ProgramError::Deadlock { cycle });
                }
                Visit::Done => {}
            }
        }
    }
    Ok(())
}
