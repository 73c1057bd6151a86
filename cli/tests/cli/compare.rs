//! `bench --compare LOG` and `plot --compare LOG`: an nccl-tests log's measured times beside the
//! simulated ones, its sizes swept unless `--sizes` names others, its errors judged per size band, and
//! a log that does not fit the bench refused in one line.

use crate::{kernbench, scratch, text, write};

/// A made-up log of `all_reduce_perf -g 8` (8 ranks on one node): 1K, 2K (noisy) and 4K.
const H100X8: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/nccl-tests/h100x8-all_reduce.log");

/// A system of 8 SIPs, as many as the log has GPUs.
const SWITCHED: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../configs/systems/switched.json");

/// The lines `kernbench args` prints, once it has succeeded.
fn stdout_of(args: &[&str]) -> String {
    let out = kernbench(args);
    assert_eq!(out.status.code(), Some(0), "kernbench {args:?}: {}", text(&out.stderr));
    text(&out.stdout)
}

#[test]
fn bench_compare_sets_the_measured_time_and_error_beside_each_row_at_the_logs_sizes() {
    let stdout = stdout_of(&["bench", "all_reduce", "--system", SWITCHED, "--algos", "ring", "--compare", H100X8]);
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(
        lines[1].starts_with("# measured: ")
            && lines[1].ends_with("h100x8-all_reduce.log, 8 ranks on 1 node (NVIDIA H100 80GB HBM3)"),
        "{stdout}"
    );
    assert!(lines[2].starts_with("# made up for kernbench's tests"), "the log's citation: {stdout}");
    let header = lines.iter().position(|line| line.starts_with("#         size")).expect("a header");
    assert!(lines[header].ends_with("  sol   measured     error"), "{}", lines[header]);
    assert!(lines[header + 1].ends_with("(us)"), "{}", lines[header + 1]);
    let rows: Vec<&str> = lines[header + 2..].iter().take_while(|line| !line.starts_with('#')).copied().collect();
    let sizes: Vec<&str> = rows.iter().map(|row| row.split_whitespace().next().unwrap()).collect();
    assert_eq!(sizes, ["1024", "2048", "4096"], "the log's sizes: {stdout}");
    assert!(rows.iter().all(|row| row.len() == lines[header].len()), "columns line up:\n{stdout}");
    fn columns(row: &str) -> Vec<&str> {
        row.split_whitespace().rev().take(2).collect()
    }
    assert_eq!(columns(rows[1]), ["noisy", "24.50"], "out of place 24.5 us, in place 35: {}", rows[1]);
    let [error, measured] = columns(rows[0])[..] else { unreachable!() };
    assert_eq!(measured, "24.10");
    assert!(error.ends_with('%') && (error.starts_with('+') || error.starts_with('-')), "{error}");
    let bands: Vec<&str> = lines.iter().filter(|line| line.starts_with("# error, ")).copied().collect();
    assert_eq!(bands.len(), 3, "{stdout}");
    assert!(bands[0].starts_with("# error, small (<= 256 KiB): ring mean "), "{}", bands[0]);
    assert!(bands[0].ends_with(" over 2 sizes, 1 noisy"), "{}", bands[0]);
    assert_eq!(bands[1], "# error, mid (256 KiB to 64 MiB): ring no measured sizes");
    assert_eq!(bands[2], "# error, large (>= 64 MiB): ring no measured sizes");
}

#[test]
fn bench_compare_with_sizes_judges_only_the_sizes_the_log_has() {
    let args =
        ["bench", "all_reduce", "--system", SWITCHED, "--algos", "ring", "--sizes", "1K,8K", "--compare", H100X8];
    let stdout = stdout_of(&args);
    let rows: Vec<&str> = stdout.lines().filter(|line| !line.starts_with('#')).collect();
    assert_eq!(rows.len(), 2, "{stdout}");
    assert!(rows[1].trim_start().starts_with("8192 ") && rows[1].ends_with("   -         -"), "{}", rows[1]);
    assert!(stdout.contains("ring mean ") && stdout.contains(" over 1 size\n"), "{stdout}");

    let json = stdout_of(&[&args[..], &["--json"]].concat());
    let json: serde_json::Value = serde_json::from_str(&json).expect("--json prints JSON");
    let rows = json["rows"].as_array().unwrap();
    assert_eq!(rows[0]["measured_us"], 24.1);
    assert_eq!(rows[0]["noisy"], false);
    let error = rows[0]["error"].as_f64().unwrap();
    let simulated = rows[0]["time_ns"].as_f64().unwrap();
    assert!((error - (simulated - 24_100.0) / 24_100.0).abs() < 1e-12, "{error}");
    for key in ["measured_us", "error", "noisy"] {
        assert!(rows[1].get(key).is_none(), "no measurement at 8K, yet {key}: {}", rows[1]);
    }
}

#[test]
fn plot_compare_draws_the_measured_busbw_beside_the_simulated() {
    let svg = scratch("compare").join("busbw.svg");
    let args = ["plot", "all_reduce", "--system", SWITCHED, "--algos", "ring", "--compare", H100X8];
    let stdout = stdout_of(&[&args[..], &["--out", svg.to_str().unwrap()]].concat());
    assert!(stdout.contains("busbw of 1 series at 3 sizes, beside the measured busbw of "), "{stdout}");
    let svg = std::fs::read_to_string(&svg).unwrap();
    let doc = roxmltree::Document::parse(&svg).expect("the plot is well-formed XML");
    let texts: Vec<&str> =
        doc.descendants().filter(|n| n.has_tag_name("text")).filter_map(|n| n.text()).map(str::trim).collect();
    for name in ["ring", "measured (h100x8-all_reduce)"] {
        assert_eq!(texts.iter().filter(|t| **t == name).count(), 1, "{name} in the legend: {texts:?}");
    }
}

#[test]
fn a_log_that_cannot_be_read_or_does_not_fit_the_bench_is_one_line() {
    let dir = scratch("compare-bad");
    let cut = std::fs::read_to_string(H100X8).unwrap().replace("24.50    0.08    0.15    N/A", "24.50");
    let cut = write(&dir, "cut-all_reduce.log", &cut);
    let missing = dir.join("missing.log");
    let cases: &[(&[&str], &str)] = &[
        (
            &["bench", "all_reduce", "--compare", H100X8],
            "h100x8-all_reduce.log has 8 ranks on 1 node (NVIDIA H100 80GB HBM3); the system has 4 SIPs: give a \
             system of 8 SIPs (--system)",
        ),
        (
            &["plot", "all_gather", "--system", SWITCHED, "--compare", H100X8],
            "h100x8-all_reduce.log measured all_reduce (as its `# Collective test starting:` line says), not \
             all_gather",
        ),
        (&["bench", "all_reduce", "--compare", &cut], "cut-all_reduce.log:24: expected a row of 13 columns"),
        (&["bench", "all_reduce", "--compare", missing.to_str().unwrap()], "missing.log: No such file or directory"),
    ];
    for (args, want) in cases {
        let out = kernbench(args);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "kernbench {args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "kernbench {args:?}: not one line:\n{stderr}");
        assert!(stderr.contains(want), "kernbench {args:?}: expected `{want}` in\n{stderr}");
    }
}

#[test]
fn calibrate_fits_a_system_to_a_log_writes_it_and_prints_the_fit_beside_the_log() {
    let dir = scratch("calibrate-fixture");
    let out = dir.join("fitted.json");
    let out = out.to_str().unwrap();
    let stdout = stdout_of(&["calibrate", H100X8, "--system", SWITCHED, "--algos", "ring:lanes=2", "--out", out]);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines[0], "# kernbench calibrate: 1 log(s) on 8 SIPs x 2x2 cubes x 8 PEs", "{stdout}");
    // The log ran 8 GPUs from one thread (`nGpus 8`), so what it constrains is the launch of each
    // further GPU, not a thread's own; the switched system has no protocols, so its link latency.
    let fitted: Vec<&str> = lines.iter().filter_map(|l| l.strip_prefix("# fitted ")).collect();
    let knobs: Vec<&str> = fitted.iter().map(|l| l.split(':').next().unwrap()).collect();
    assert_eq!(knobs, ["call.launch_per_gpu_ns", "links.inter_sip.bandwidth_gbps", "links.inter_sip.latency_ns"]);
    let error = lines.iter().find(|l| l.starts_with("# mean squared log error: ")).expect("the objective");
    let figures: Vec<f64> = error.split([' ', ',']).filter_map(|w| w.parse().ok()).collect();
    assert!(figures[1] < figures[0], "the fit improves on the base: {error}");
    // The fitted system is a valid spec, and the table beside the log follows.
    let system = kernbench::System::from_file(std::path::Path::new(out)).unwrap();
    assert_eq!(system.sips(), 8);
    assert!(stdout.contains("# error, small (<= 256 KiB): ring:lanes=2 mean "), "{stdout}");
}
