//! The `kernbench` binary and the library under `mpirun`: a run spread over the processes of an MPI job
//! prints what one process prints, and a kernel that fails or deadlocks ends every process with the
//! same error.
//!
//! They need the `mpi` feature and Open MPI (`mpirun`); without them each test says why on one line
//! and passes, unless `KERNBENCH_REQUIRE_MPI=1` (as CI sets), which makes that a failure.
//! `.ci/run` runs them as `cargo test -p kernbench-cli --features mpi --test mpi`.

use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// Whether MPI can be used here; if not, says why (and fails when `KERNBENCH_REQUIRE_MPI=1`).
fn mpi_here() -> bool {
    let missing = if !cfg!(feature = "mpi") {
        Some("this test binary was built without the `mpi` feature (cargo test --features mpi)".to_owned())
    } else {
        match Command::new("mpirun").arg("--version").output() {
            Ok(out) if out.status.success() => None,
            Ok(out) => Some(format!("`mpirun --version` failed: {}", String::from_utf8_lossy(&out.stderr).trim())),
            Err(e) => Some(format!(
                "no mpirun ({e}); install Open MPI: apt-get install libopenmpi-dev openmpi-bin libclang-dev"
            )),
        }
    };
    let Some(why) = missing else { return true };
    if std::env::var("KERNBENCH_REQUIRE_MPI").is_ok_and(|v| v == "1") {
        panic!("KERNBENCH_REQUIRE_MPI=1 but {why}");
    }
    eprintln!("skipped: {why}");
    false
}

/// `mpirun` on `processes` processes (more than cores allowed; as root too, as in a container).
fn mpirun(processes: usize, program: &str, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = Command::new("timeout");
    command
        .args(["120", "mpirun", "--oversubscribe", "--bind-to", "none", "-np", &processes.to_string(), program])
        .args(args)
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .env("OMPI_MCA_btl_vader_single_copy_mechanism", "none");
    for (k, v) in env {
        command.env(k, v);
    }
    command.output().expect("mpirun runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn bench_and_run_under_mpirun_print_what_one_process_prints() {
    if !mpi_here() {
        return;
    }
    let kernbench = env!("CARGO_BIN_EXE_kernbench");
    let commands: [&[&str]; 4] = [
        // The registry's choice: symmetric memory at 1 KiB (one_shot), rings above.
        &["bench", "all_reduce", "--sizes", "1K,1M"],
        &["bench", "all_to_all", "--algos", "all", "--sizes", "64K", "--system", "../configs/systems/switched.json"],
        &["run", "all", "--bytes", "4K"],
        // Each process books its own channels, a transfer passed on hop by hop.
        &["run", "all", "--bytes", "4K", "--placement", "divided"],
    ];
    for args in commands {
        let alone = Command::new(kernbench).args(args).output().unwrap();
        assert!(alone.status.success(), "{args:?}: {}", text(&alone.stderr));
        for processes in 1..=4 {
            let spread = mpirun(processes, kernbench, args, &[]);
            assert!(spread.status.success(), "{args:?} on {processes} processes: {}", text(&spread.stderr));
            assert_eq!(text(&spread.stdout), text(&alone.stdout), "{args:?} on {processes} processes");
        }
    }
}

#[cfg(feature = "mpi")]
#[path = "../../tests/tests/integration/faulty.rs"]
mod faulty;

#[test]
fn a_trace_written_under_mpirun_is_the_one_process_trace() {
    if !mpi_here() {
        return;
    }
    let kernbench = env!("CARGO_BIN_EXE_kernbench");
    let dir = tempfile::tempdir().unwrap();
    let trace = |name: &str| dir.path().join(name).to_str().unwrap().to_owned();
    let (alone, spread) = (trace("alone.json"), trace("spread.json"));
    let args = |out: &str| {
        vec!["trace".to_owned(), "all_reduce".into(), "--bytes".into(), "64K".into(), "--out".into(), out.to_owned()]
    };
    let one = Command::new(kernbench).args(args(&alone)).output().unwrap();
    assert!(one.status.success(), "{}", text(&one.stderr));
    let args = args(&spread);
    let job = mpirun(3, kernbench, &args.iter().map(String::as_str).collect::<Vec<_>>(), &[]);
    assert!(job.status.success(), "{}", text(&job.stderr));
    assert_eq!(std::fs::read(&spread).unwrap(), std::fs::read(&alone).unwrap(), "the traces differ");
}

#[test]
fn a_process_that_stops_answering_ends_the_job_with_a_named_timeout() {
    if !mpi_here() {
        return;
    }
    let me = std::env::current_exe().unwrap();
    let start = Instant::now();
    let args = ["mpi_child", "--exact", "--nocapture", "--test-threads", "1"];
    let env = [("KERNBENCH_MPI_CHILD", "stalls"), ("KERNBENCH_EXCHANGE_TIMEOUT", "1")];
    let out = mpirun(2, me.to_str().unwrap(), &args, &env);
    assert!(!out.status.success(), "the job ended well: {}", text(&out.stdout));
    let stderr = text(&out.stderr);
    assert!(stderr.contains("error: exchange timeout: process 0 of 2 waited"), "{stderr}");
    assert!(start.elapsed() < Duration::from_secs(15), "the job took {:?} to end", start.elapsed());
}

#[test]
fn a_bad_exchange_timeout_is_refused() {
    if !mpi_here() {
        return;
    }
    let out = mpirun(2, env!("CARGO_BIN_EXE_kernbench"), &["list"], &[("KERNBENCH_EXCHANGE_TIMEOUT", "soon")]);
    assert!(!out.status.success());
    let stderr = text(&out.stderr);
    let line =
        "kernbench: KERNBENCH_EXCHANGE_TIMEOUT is `soon`: expected a number of seconds above 0 and at most 86400";
    // mpirun ends the job when the first process exits with an error, so the other may not get to print.
    let said: Vec<&str> = stderr.lines().filter(|l| l.starts_with("kernbench: ")).collect();
    assert!(!said.is_empty() && said.iter().all(|l| *l == line), "{stderr}");
}

/// Run by the tests below in each process of an MPI job (`KERNBENCH_MPI_CHILD` names the case); a
/// plain test run passes it at once. Prints `process P: <how long> ms: <error>` on one line.
#[test]
fn mpi_child() {
    let Ok(case) = std::env::var("KERNBENCH_MPI_CHILD") else { return };
    #[cfg(feature = "mpi")]
    {
        use std::sync::Arc;

        use kernbench::prelude::*;
        use kernbench::sim::exchange::{Exchange, Mpi};
        use kernbench::sim::testing::MockRun;
        let mpi = Arc::new(Mpi::init().expect("MPI starts"));
        let system = kernbench::System::shape(4, 1, 1, 2).unwrap();
        if case == "stalls" && mpi.process() == 1 {
            // A process that stops answering: the others must not wait for it for ever.
            std::thread::sleep(Duration::from_secs(20));
        }
        let mock = match case.as_str() {
            // The last rank, in the last process.
            "fails" => MockRun::new(&system, "ring_1d", "all_pes", &faulty::fails_on_one_rank::KERNEL)
                .params(serde_json::json!({"fails": 7})),
            _ => MockRun::new(&system, "ring_1d", "all_pes", &faulty::waits_before_sending::KERNEL),
        };
        let start = Instant::now();
        let run = mock.inputs(|_, rank| Tile::filled(F32, 8, rank as f64)).spread_over(mpi.clone()).run();
        let took = start.elapsed().as_millis();
        let error = run.expect_err("the run fails").to_string().replace('\n', " | ");
        println!("process {}: {took} ms: {error}", mpi.process());
    }
    #[cfg(not(feature = "mpi"))]
    let _ = case;
}

/// The run [`a_run_placed_divided_under_mpirun_is_the_one_process_run`] compares: the hierarchical
/// all-to-all on the built-in system (routes of several channels, crossing from one process's SIPs
/// into another's, many waiting for a channel), spread over `job` if given and placed divided; a
/// digest of its outputs and times.
#[cfg(feature = "mpi")]
fn divided_run(job: Option<std::sync::Arc<dyn kernbench::sim::exchange::Exchange>>) -> u64 {
    use std::hash::{Hash, Hasher};

    use kernbench::prelude::*;
    use kernbench::sim::spread::Placement;
    use kernbench::sim::testing::MockRun;
    let registry = kernbench::algorithms::default_registry();
    let algorithm = registry.get("hierarchical_all_to_all_pes").expect("a shipped algorithm");
    let system = kernbench::System::builtin();
    let (topology, mapper) = (algorithm.topology.name(), algorithm.mapper.name());
    let mock = MockRun::new(&system, topology, mapper, algorithm.kernel)
        .params(serde_json::Value::Object(algorithm.params.clone()))
        .inputs(|_, rank| Tile::filled(F32, 96, (rank % 7) as f64))
        .collective(algorithm.collective)
        .placement(Placement::Divided);
    let report = match job {
        Some(job) => mock.spread_over(job).run(),
        None => mock.run(),
    }
    .expect("the ring all-reduce runs");
    let mut h = std::collections::hash_map::DefaultHasher::new();
    for pe in report.pes() {
        pe.output.to_bits_vec().hash(&mut h);
    }
    serde_json::to_string(report.time().expect("a timed run")).unwrap().hash(&mut h);
    h.finish()
}

/// Run by the test below in each process of an MPI job (when `KERNBENCH_MPI_DIVIDED` is set); a
/// plain test run passes it at once. Prints `process P: <digest>`.
#[test]
fn mpi_divided_child() {
    #[cfg(feature = "mpi")]
    if std::env::var_os("KERNBENCH_MPI_DIVIDED").is_some() {
        let mpi = std::sync::Arc::new(kernbench::sim::exchange::Mpi::init().expect("MPI starts"));
        let process = kernbench::sim::exchange::Exchange::process(&*mpi);
        println!("process {process}: {}", divided_run(Some(mpi)));
    }
}

#[test]
fn a_run_placed_divided_under_mpirun_is_the_one_process_run() {
    #[cfg(feature = "mpi")]
    if mpi_here() {
        let alone = divided_run(None).to_string();
        let me = std::env::current_exe().unwrap();
        for processes in [2, 3, 4] {
            let args = ["mpi_divided_child", "--exact", "--nocapture", "--test-threads", "1"];
            let out = mpirun(processes, me.to_str().unwrap(), &args, &[("KERNBENCH_MPI_DIVIDED", "1")]);
            assert!(out.status.success(), "{processes} processes: {}{}", text(&out.stdout), text(&out.stderr));
            let stdout = text(&out.stdout);
            let digests: Vec<&str> = stdout
                .lines()
                .filter_map(|l| l.split_once("process ").and_then(|(_, l)| l.split_once(": ")))
                .map(|(_, d)| d)
                .collect();
            assert_eq!(digests.len(), processes, "{stdout}");
            assert!(digests.iter().all(|&d| d == alone), "{processes} processes: {digests:?}, one process: {alone}");
        }
    }
    #[cfg(not(feature = "mpi"))]
    mpi_here();
}

/// Runs case `case` of [`mpi_child`] on 2 and on 4 processes: every process must end its run with the
/// same error, which `is_right`, within a second.
fn every_process_ends_with(case: &str, is_right: impl Fn(&str) -> bool) {
    for processes in [2, 4] {
        let lines = child_errors(case, processes);
        for (ms, error) in &lines {
            assert_eq!(error, &lines[0].1, "{processes} processes: {lines:?}");
            assert!(is_right(error), "{processes} processes: {error}");
            assert!(*ms < 1000, "{processes} processes: a process took {ms} ms to end");
        }
    }
}

/// Runs case `case` of [`mpi_child`] on `processes` processes; returns each process's error line and
/// how long its run took.
fn child_errors(case: &str, processes: usize) -> Vec<(u128, String)> {
    let me = std::env::current_exe().unwrap();
    let start = Instant::now();
    let out = mpirun(
        processes,
        me.to_str().unwrap(),
        &["mpi_child", "--exact", "--nocapture", "--test-threads", "1"],
        &[("KERNBENCH_MPI_CHILD", case)],
    );
    assert!(out.status.success(), "{case} on {processes}: {}{}", text(&out.stdout), text(&out.stderr));
    assert!(start.elapsed() < Duration::from_secs(60), "the job took {:?}", start.elapsed());
    let stdout = text(&out.stdout);
    let mut lines: Vec<(usize, u128, String)> = stdout
        .lines()
        // The test harness's own words may start the line.
        .filter_map(|l| l.find("process ").map(|at| &l[at + "process ".len()..]))
        .map(|l| {
            let (process, rest) = l.split_once(": ").unwrap();
            let (ms, error) = rest.split_once(" ms: ").unwrap();
            (process.parse().unwrap(), ms.parse().unwrap(), error.to_owned())
        })
        .collect();
    lines.sort();
    assert_eq!(lines.iter().map(|l| l.0).collect::<Vec<_>>(), (0..processes).collect::<Vec<_>>(), "{stdout}");
    lines.into_iter().map(|(_, ms, error)| (ms, error)).collect()
}

#[test]
fn a_kernel_failing_in_one_process_ends_every_process_with_its_error_within_a_second() {
    if mpi_here() {
        every_process_ends_with("fails", |e| e.contains("(sip 3, cube 0, pe 1)") && e.contains("invalid digit"));
    }
}

#[test]
fn a_deadlock_spanning_processes_ends_every_process_with_the_report_within_a_second() {
    if mpi_here() {
        every_process_ends_with("deadlock", |e| {
            e.starts_with("deadlock: no kernel can make progress; 0 of 8 finished, 8 blocked")
        });
    }
}
