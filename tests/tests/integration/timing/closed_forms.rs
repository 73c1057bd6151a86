//! Contention-free closed forms: every algorithm that has one takes exactly its alpha-beta time on a
//! system where no two transfers share a channel.

use kernbench::KernelDef;
use serde_json::json;

use super::*;

/// A contention-free closed form: `kernel` over `topology` on the leaders of [`sips`]`(p, interconnect)`,
/// every rank holding `elements` f32 (output sized `output`), against `forms(p, bytes)` for `bytes`
/// of input a rank: the closed form and the nearby wrong ones.
struct ClosedForm {
    /// The algorithm, for messages.
    name: &'static str,
    kernel: &'static KernelDef,
    topology: &'static str,
    interconnect: &'static str,
    params: serde_json::Value,
    p: usize,
    elements: usize,
    output: usize,
    forms: fn(f64, f64) -> (f64, Vec<f64>),
}

/// Runs `case` and checks its completion time against its closed form, naming the case.
fn closed_form_case(case: &ClosedForm) {
    let system = sips(case.p, case.interconnect);
    assert_one_hop(&system, case.topology);
    let report = run_leaders(&system, case.topology, case.kernel, case.params.clone(), case.elements, case.output);
    let (want, wrong) = (case.forms)(case.p as f64, (case.elements * 4) as f64);
    assert_closed_form(&format!("{}, p = {}", case.name, case.p), completion(&report), want, &wrong);
}

/// Every algorithm with a closed form on a contention-free system, `n` elements a rank.
fn closed_forms() -> Vec<ClosedForm> {
    use kernbench::algorithms::*;
    let mut cases = Vec::new();
    for p in [4, 8] {
        // Ring all-reduce, one chunk: 2(p-1) steps of a message of N/p bytes.
        cases.push(ClosedForm {
            name: "ring all-reduce",
            kernel: &ring_allreduce::KERNEL,
            topology: "ring_1d",
            interconnect: "ring",
            params: json!({"chunks": 1}),
            p,
            elements: 1 << 16,
            output: 1 << 16,
            forms: |p, n| {
                let want = 2.0 * (p - 1.0) * (A + n / (p * B));
                (want, vec![2.0 * p * (A + n / (p * B)), 2.0 * (p - 1.0) * (A + n / B), 2.0 * (p - 1.0) * n / (p * B)])
            },
        });
        // Recursive doubling: log2(p) exchanges of all N bytes with a one-hop partner.
        cases.push(ClosedForm {
            name: "recursive doubling",
            kernel: &recursive_doubling_allreduce::KERNEL,
            topology: "hypercube",
            interconnect: "fully_connected",
            params: json!({}),
            p,
            elements: 1 << 16,
            output: 1 << 16,
            forms: |p, n| {
                let log = p.log2();
                (log * (A + n / B), vec![(p - 1.0) * (A + n / B), log * (A + n / (p * B)), (log + 1.0) * (A + n / B)])
            },
        });
    }
    // Rabenseifner: a reduce-scatter of log2(p) steps of N/2, N/4, ..., N/p, and an all-gather the same
    // back: 2 log2(p) a + 2 (p-1)/p N/b.
    cases.push(ClosedForm {
        name: "rabenseifner",
        kernel: &rabenseifner_allreduce::KERNEL,
        topology: "hypercube",
        interconnect: "fully_connected",
        params: json!({}),
        p: 8,
        elements: 1 << 16,
        output: 1 << 16,
        forms: |p, n| {
            let log = p.log2();
            let want = 2.0 * log * A + 2.0 * (p - 1.0) / p * n / B;
            (want, vec![2.0 * log * A + 2.0 * n / B, log * A + 2.0 * (p - 1.0) / p * n / B])
        },
    });
    // Ring all-gather: (p-1)(a + m/b) for m bytes contributed per rank.
    cases.push(ClosedForm {
        name: "ring all-gather",
        kernel: &ring_allgather::KERNEL,
        topology: "ring_1d",
        interconnect: "ring",
        params: json!({"chunks": 1}),
        p: 4,
        elements: 1 << 14,
        output: 4 << 14,
        forms: |p, m| ((p - 1.0) * (A + m / B), vec![p * (A + m / B), (p - 1.0) * (A + p * m / B)]),
    });
    // Recursive-doubling all-gather: step k sends 2^k blocks, log2(p) a + (p-1) m/b.
    cases.push(ClosedForm {
        name: "recursive-doubling all-gather",
        kernel: &recursive_doubling_allgather::KERNEL,
        topology: "hypercube",
        interconnect: "fully_connected",
        params: json!({}),
        p: 8,
        elements: 1 << 12,
        output: 8 << 12,
        forms: |p, m| {
            let log = p.log2();
            (log * A + (p - 1.0) * m / B, vec![log * (A + m / B), log * A + p * m / B])
        },
    });
    // Ring reduce-scatter: p-1 steps of N/p.
    cases.push(ClosedForm {
        name: "ring reduce-scatter",
        kernel: &ring_reduce_scatter::KERNEL,
        topology: "ring_1d",
        interconnect: "ring",
        params: json!({"chunks": 1}),
        p: 4,
        elements: 1 << 16,
        output: 1 << 14,
        forms: |p, n| {
            let step = A + n / (p * B);
            ((p - 1.0) * step, vec![p * step, 2.0 * (p - 1.0) * step])
        },
    });
    // Recursive-halving reduce-scatter: the message halves each step, log2(p) a + (p-1)/p N/b.
    cases.push(ClosedForm {
        name: "recursive-halving reduce-scatter",
        kernel: &recursive_halving_reduce_scatter::KERNEL,
        topology: "hypercube",
        interconnect: "fully_connected",
        params: json!({}),
        p: 8,
        elements: 1 << 16,
        output: 1 << 13,
        forms: |p, n| {
            let log = p.log2();
            (log * A + (p - 1.0) / p * n / B, vec![log * (A + n / B), log * A + n / B])
        },
    });
    // Binomial-tree broadcast from rank 0 over p = 2^d ranks: a rank passes the data on to every
    // `v + 2^k` above its highest bit, nearest first, injecting one message after another, so the rank
    // whose bits are all set gets it last, after d(o + L + N/b) = d(a + N/b).
    for p in [8, 16] {
        cases.push(ClosedForm {
            name: "tree broadcast",
            kernel: &tree_broadcast::KERNEL,
            topology: "circulant",
            interconnect: "fully_connected",
            params: json!({}),
            p,
            elements: 1 << 14,
            output: 1 << 14,
            forms: |p, n| {
                let d = p.log2();
                (d * (A + n / B), vec![d * (2.0 * O + L + n / B), (d + 1.0) * (A + n / B)])
            },
        });
    }
    // Tree all-reduce, one piece over a full tree of height h: h(a + N/b) up (children send at once),
    // h(2o + L + N/b) down (a parent injects to its children in turn).
    cases.push(ClosedForm {
        name: "tree all-reduce",
        kernel: &tree_allreduce::KERNEL,
        topology: "tree",
        interconnect: "fully_connected",
        params: json!({"chunks": 1}),
        p: 7,
        elements: 1 << 14,
        output: 1 << 14,
        forms: |p, n| {
            let (up, down) = (A + n / B, 2.0 * O + L + n / B);
            let h = (p + 1.0).log2() - 1.0;
            (h * up + h * down, vec![2.0 * h * up, 2.0 * h * down])
        },
    });
    // Pipelined ring broadcast, k = 8 chunks of N/k bytes down a chain of p ranks: the last chunk
    // reaches the end after (p-1)(o + L) + (p + k - 2) N/(k b), as long as a chunk's transfer covers an
    // injection and the credit's round trip (3 N/(k b) >= o + 2L) so neither stalls the pipe.
    cases.push(ClosedForm {
        name: "pipelined ring broadcast, k = 8",
        kernel: &ring_broadcast::KERNEL,
        topology: "ring_1d",
        interconnect: "ring",
        params: json!({"chunks": 8}),
        p: 4,
        elements: 1 << 16,
        output: 1 << 16,
        forms: |p, n| {
            let k = 8.0;
            let chunk = n / (k * B);
            assert!(3.0 * chunk >= O + 2.0 * L && chunk >= O, "a chunk covers an injection and a credit");
            let want = (p - 1.0) * (O + L) + (p + k - 2.0) * chunk;
            (want, vec![(p - 1.0) * (A + n / B), (p - 1.0) * (O + L) + (p + k - 1.0) * chunk])
        },
    });
    // One-shot all-reduce: every rank injects p - 1 copies back to back on separate channels; the last
    // one leaves after (p-1) o and arrives L + N/b later.
    cases.push(ClosedForm {
        name: "one-shot all-reduce",
        kernel: &one_shot_allreduce::KERNEL,
        topology: "full",
        interconnect: "fully_connected",
        params: json!({}),
        p: 4,
        elements: 1 << 14,
        output: 1 << 14,
        forms: |p, n| {
            let want = (p - 1.0) * O + L + n / B;
            (want, vec![(p - 1.0) * (A + n / B), A + n / B, (p - 1.0) * O + L + (p - 1.0) * n / B])
        },
    });
    // Pairwise all-to-all: p - 1 steps of one block.
    cases.push(ClosedForm {
        name: "pairwise all-to-all",
        kernel: &pairwise_alltoall::KERNEL,
        topology: "full",
        interconnect: "fully_connected",
        params: json!({}),
        p: 4,
        elements: 1 << 16,
        output: 1 << 16,
        forms: |p, n| {
            let step = A + n / (p * B);
            ((p - 1.0) * step, vec![p * step, (p - 1.0) * (A + n / B)])
        },
    });
    cases
}

#[test]
fn every_contention_free_algorithm_takes_its_closed_form() {
    let cases = closed_forms();
    assert_eq!(cases.len(), 15, "every case of the table");
    for case in &cases {
        closed_form_case(case);
    }
}
