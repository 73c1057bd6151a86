//! The binary as a process: an output is written whole or not at all, a failed write or a panic is one
//! line with its exit code, and Ctrl-C or a kill keeps what finished.

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};

use super::{SMALL, files_in, kernbench, scratch, text, write};

fn spawn(args: &[&str]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_kernbench"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary starts")
}

/// The lines `child` prints up to and including its first table row (a line that is not a `#`
/// comment), so that it is known to be in the middle of its sweep.
fn lines_to_first_row(stdout: &mut BufReader<std::process::ChildStdout>) -> Vec<String> {
    let mut lines = Vec::new();
    loop {
        let mut line = String::new();
        assert!(stdout.read_line(&mut line).unwrap() > 0, "the sweep ended before its first row: {lines:?}");
        let row = !line.starts_with('#');
        lines.push(line);
        if row {
            return lines;
        }
    }
}

#[test]
fn an_output_that_cannot_be_written_fails_before_the_sweep_starts() {
    for args in [
        &["tune", "all", "--sizes", "1K..16M", "--out", "/nonexistent/dir/r.json"][..],
        &["plot", "all_reduce", "--sizes", "1K..16M", "--out", "/nonexistent/dir/p.svg"],
    ] {
        let out = kernbench(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out.stderr));
        assert!(out.stdout.is_empty(), "{args:?} ran before failing: {}", text(&out.stdout));
    }
}

#[test]
fn killing_tune_mid_run_leaves_its_outputs_as_they_were() {
    let dir = scratch("killed");
    for name in files_in(&dir) {
        std::fs::remove_file(dir.join(name)).unwrap();
    }
    let registry = write(&dir, "registry.json", "known contents\n");
    let rules = dir.join("rules.csv");
    let mut child =
        spawn(&["tune", "all", "--sizes", "1K..1M", "--out", &registry, "--rules-csv", rules.to_str().unwrap()]);
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    lines_to_first_row(&mut stdout);
    child.kill().unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), None, "tune finished before it was killed");
    assert_eq!(std::fs::read_to_string(&registry).unwrap(), "known contents\n");
    assert_eq!(files_in(&dir), ["registry.json"], "a killed tune left files behind");
}

#[test]
fn an_output_is_replaced_whole_and_no_temporary_file_is_left() {
    let dir = scratch("replaced");
    let svg = write(&dir, "busbw.svg", "old contents\n");
    let out = kernbench(&["plot", "all_reduce", "--system", SMALL, "--sizes", "1K", "--out", &svg]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let new = std::fs::read_to_string(&svg).unwrap();
    assert!(new.starts_with("<svg") && new.trim_end().ends_with("</svg>"), "{new}");
    assert_eq!(files_in(&dir), ["busbw.svg"]);
}

#[cfg(target_os = "linux")]
#[test]
fn a_failed_write_to_stdout_is_one_line_and_exit_code_2() {
    for args in
        [&["--help"][..], &["--version"], &["list"], &["bench", "all_reduce", "--system", SMALL, "--sizes", "1K"]]
    {
        let full = std::fs::OpenOptions::new().write(true).open("/dev/full").unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_kernbench")).args(args).stdout(full).output().unwrap();
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "kernbench {args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "kernbench {args:?}: {stderr}");
        assert!(stderr.starts_with("kernbench: cannot write to standard output: "), "kernbench {args:?}: {stderr}");
    }
}

#[test]
fn a_panic_is_one_line_that_names_a_bug_and_exit_code_101() {
    let panic = |backtrace: Option<&str>| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_kernbench"));
        command
            .arg("list")
            .env("KERNBENCH_TEST_PANIC", "1")
            .env_remove("RUST_BACKTRACE")
            .env_remove("RUST_LIB_BACKTRACE");
        if let Some(value) = backtrace {
            command.env("RUST_BACKTRACE", value);
        }
        command.output().unwrap()
    };
    let out = panic(None);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(101), "{stderr}");
    assert!(out.stdout.is_empty());
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.starts_with("kernbench: internal error: KERNBENCH_TEST_PANIC is set at "), "{stderr}");
    assert!(stderr.contains("main.rs:"), "{stderr}");
    assert!(stderr.trim_end().ends_with("; this is a bug, please report it"), "{stderr}");

    let out = panic(Some("1"));
    assert_eq!(out.status.code(), Some(101));
    assert!(text(&out.stderr).lines().count() > 1, "RUST_BACKTRACE=1 prints a backtrace: {}", text(&out.stderr));
}

/// Sends SIGINT (Ctrl-C) to `child`.
fn interrupt(child: &Child) {
    let pid = libc::pid_t::try_from(child.id()).unwrap();
    // SAFETY: kill takes any pid and signal number and only sends the signal.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGINT) }, 0);
}

#[test]
fn ctrl_c_during_bench_prints_the_rows_that_finished_and_exits_130() {
    let mut child = spawn(&["bench", "all_reduce", "--algos", "all", "--sizes", "1K..16M"]);
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let before = lines_to_first_row(&mut stdout);
    interrupt(&child);
    let mut rest = String::new();
    stdout.read_to_string(&mut rest).unwrap();
    let mut stderr = String::new();
    child.stderr.take().unwrap().read_to_string(&mut stderr).unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130), "{stderr}");
    let stdout = before.concat() + &rest;
    let rows = stdout.lines().filter(|l| !l.starts_with('#')).count();
    // `all` is every all-reduce algorithm that plans on the built-in system (NVLS needs a switch).
    let system = kernbench::System::builtin();
    let algorithms = kernbench::algorithms::default_registry()
        .algorithms()
        .filter(|a| a.collective == kernbench::Collective::AllReduce && a.plan(&system).is_ok())
        .count();
    let points = algorithms * 15;
    assert!((1..points).contains(&rows), "{stdout}");
    assert!(
        stdout.contains("# wrong elements: 0\n# average busbw (GB/s): "),
        "the footer of the rows that ran: {stdout}"
    );
    assert_eq!(stderr, format!("kernbench: interrupted after {rows} of {points} points\n"));
}

#[test]
fn ctrl_c_during_tune_writes_nothing_and_exits_130() {
    let dir = scratch("interrupted");
    for name in files_in(&dir) {
        std::fs::remove_file(dir.join(name)).unwrap();
    }
    let registry = dir.join("registry.json");
    let mut child = spawn(&["tune", "all", "--sizes", "1K..16M", "--out", registry.to_str().unwrap()]);
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    lines_to_first_row(&mut stdout);
    interrupt(&child);
    let mut stderr = String::new();
    child.stderr.take().unwrap().read_to_string(&mut stderr).unwrap();
    assert_eq!(child.wait().unwrap().code(), Some(130), "{stderr}");
    assert!(stderr.starts_with("kernbench: interrupted after "), "{stderr}");
    assert_eq!(files_in(&dir), Vec::<String>::new(), "an interrupted tune wrote files");
}
