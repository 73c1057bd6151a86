//! Flat against hierarchical all-to-all: messages, bytes, rounds and simulated time for 8 to 64 sites
//! and blocks of 16 B to 64 KiB.
//!
//! ```text
//! cargo run --release --example all_to_all_compare
//! ```
//!
//! A flat (pairwise) all-to-all of `N` sites sends `N (N - 1)` messages of one block. The hierarchical
//! one with `A` groups sends `2 (N - A) + A (A - 1)`: each member's row up, padded sub-matrices among
//! the representatives, each member's column down. Fewer, larger messages, but more bytes, since rows
//! and columns pass through the representatives, and a representative holds much more at its peak.
//! Which wins in time depends on the per-message costs (injection, latency) against the bandwidth the
//! extra bytes take: the first table has one site per SIP, the second every PE of 4 SIPs grouped by SIP.

use kernbench::System;
use kernbench::algorithms::hierarchical_all_to_all;
use kernbench::prelude::*;
use kernbench::sim::RunReport;
use kernbench::sim::testing::MockRun;
use serde_json::json;

/// One run of the kernel on `mapper`'s PEs of `system` with rows of `n` blocks of `block_bytes`.
fn run(
    system: &System,
    mapper: &str,
    n: usize,
    block_bytes: usize,
    params: serde_json::Value,
) -> Result<RunReport, Box<dyn std::error::Error>> {
    let len = n * block_bytes / F32.size();
    let report = MockRun::new(system, "full", mapper, &hierarchical_all_to_all::KERNEL)
        .params(params)
        .inputs(|_, rank| Tile::filled(F32, len, rank as f64))
        .outputs(|_, _, input| Tile::zeros(F32, input.len()))
        .run()?;
    Ok(report)
}

/// Bytes in binary units: 16 B, 1 KiB, 1.5 MiB.
fn human(bytes: u64) -> String {
    let units = ["B", "KiB", "MiB", "GiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < units.len() {
        value /= 1024.0;
        unit += 1;
    }
    if value.fract() == 0.0 { format!("{value} {}", units[unit]) } else { format!("{value:.1} {}", units[unit]) }
}

fn header() {
    println!(
        "{:>3} {:>7} {:<13} {:>8} {:>10} {:>8} {:>10} {:>6} {:>11} {:>10}",
        "N", "block", "path", "messages", "bytes", "max sent", "mean msg", "rounds", "time (us)", "rep peak"
    );
}

fn row(n: usize, block: usize, label: &str, report: &RunReport) {
    let totals = report.totals();
    let max_sent = report.pes().iter().map(|p| p.figures.messages_sent).max().unwrap_or(0);
    let mean = totals.bytes_sent.checked_div(totals.messages_sent).unwrap_or(0);
    let time = report.completion_ns().map_or_else(|| "-".to_owned(), |ns| format!("{:.2}", ns / 1e3));
    let peak = report
        .pes()
        .iter()
        .filter_map(|p| p.notes.get("peak_bytes")?.parse::<u64>().ok())
        .max()
        .map_or_else(|| "-".to_owned(), human);
    println!(
        "{n:>3} {:>7} {label:<13} {:>8} {:>10} {max_sent:>8} {:>10} {:>6} {time:>11} {peak:>10}",
        human(block as u64),
        totals.messages_sent,
        human(totals.bytes_sent),
        human(mean),
        report.rounds(),
    );
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    kernbench::sim::keep_freed_memory();
    const BLOCKS: [usize; 3] = [16, 1 << 10, 64 << 10];

    println!("One site per SIP (leader_only on N SIPs of one PE):");
    header();
    for n in [8, 16, 32, 64] {
        let system = System::shape(n, 1, 1, 1)?;
        for block in BLOCKS {
            // flat_below above N forces the flat path; 0 forces the hierarchical one.
            for (label, arity, flat_below) in [("flat", 1, n + 1), ("hier arity 4", 4, 0), ("hier arity 8", 8, 0)] {
                let params = json!({"arity": arity, "flat_below": flat_below});
                row(n, block, label, &run(&system, "leader_only", n, block, params)?);
            }
        }
    }

    println!("\nEvery PE of 4 SIPs (all_pes; arity 0 groups by SIP):");
    header();
    for n in [8, 16, 32, 64] {
        let system = System::shape(4, 1, 1, n / 4)?;
        for block in BLOCKS {
            for (label, arity, flat_below) in [("flat", 1, n + 1), ("hier per SIP", 0, 0)] {
                let params = json!({"arity": arity, "flat_below": flat_below});
                row(n, block, label, &run(&system, "all_pes", n, block, params)?);
            }
        }
    }
    Ok(())
}
