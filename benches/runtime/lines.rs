//! The lines `cargo bench --bench runtime` prints, one function per kind. The benchmark prints them,
//! and the README test (`cli/tests/cli/readme.rs`) formats the README's sample figures with them, so
//! the sample cannot drift from what the benchmark prints.

/// A label column wide enough for every kind of line.
const LABEL: usize = 28;

/// Messages through one queue: count, cost per message and rate; `streaming_target` adds the target
/// that the runtime's per-message overhead is held to.
pub fn messages(label: &str, messages: u64, ns_per_message: f64, m_per_s: f64, streaming_target: bool) -> String {
    let target = if streaming_target { "   (target: <= 50 ns streaming)" } else { "" };
    format!(
        "{label:<LABEL$} {messages:>10} messages  {ns_per_message:>8.1} ns/message  {m_per_s:>6.2} M messages/s{target}"
    )
}

/// The timing model's cost: timed over untimed cost per message, and the timed rate.
pub fn timed_vs_untimed(ratio: f64, timed_m_per_s: f64) -> String {
    format!(
        "{:<LABEL$} {ratio:.2}x per message   (target: <= 2x); timed {timed_m_per_s:.2} M messages/s on one core (target: >= 10)",
        "timed vs untimed"
    )
}

/// A plain in-place add's bandwidth: what a reduction can reach.
pub fn in_place_add(gbps: f64) -> String {
    format!("{:<LABEL$} {gbps:>8.2} GB/s of payload", "in-place f32 add")
}

/// The ring all-reduce's reduction bandwidth, `run` being `cold` or `warm, best of N`.
pub fn ring_all_reduce(gbps: f64, mib_per_pe: usize, run: &str, secs: f64, ratio_to_add: f64) -> String {
    format!(
        "{:<LABEL$} {gbps:>8.2} GB/s reduced ({mib_per_pe} MiB f32 per PE, 8 PEs, {run}: {secs:.3} s)  ratio to add: {ratio_to_add:.2} (target >= 0.5)",
        "ring all-reduce"
    )
}

/// A hierarchical all-reduce over many PEs: wall time, rounds and peak memory.
pub fn many_pes(pes: usize, threads: usize, secs: f64, rounds: u64, peak_rss_gib: f64) -> String {
    format!(
        "{:<LABEL$} {pes} PEs, {threads} thread(s): {secs:>7.2} s, {rounds} rounds, peak RSS {peak_rss_gib:.2} GiB   (target: <= 60 s, <= 16 GiB)",
        "hierarchical all-reduce"
    )
}

/// How much two threads speed the many-PE run up.
pub fn thread_speedup(ratio: f64) -> String {
    format!("{:<LABEL$} {ratio:.2}x   (target: >= 1.6x on 2 cores)", "2 threads vs 1")
}

/// The race detector's cost: the one-sided one-shot all-reduce with the detector on over off.
pub fn race_detector(ratio: f64, on_ms: f64, off_ms: f64) -> String {
    format!(
        "{:<LABEL$} {ratio:.2}x the run with it off (one-shot, 1 MiB per rank, built-in system: {on_ms:.2} ms vs {off_ms:.2} ms)   (target: <= 2x)",
        "race detector"
    )
}
