//! Runs spread over processes ([`kernbench::sim::exchange`]): the processes here are threads joined by
//! the in-memory exchange, which hands over the same bytes as MPI does (`cli/tests/mpi.rs` runs the
//! binary under `mpirun`). Every process must return the single-process run's report, bit for bit, or
//! its error, word for word.

use std::sync::Arc;

use kernbench::sim::Timing;
use kernbench::sim::exchange::{Exchange, InMemory};
use kernbench::sim::testing::MockRun;
use kernbench::{System, Tile};

fn shipped(name: &str) -> System {
    match name {
        "builtin" => System::builtin(),
        file => System::from_file(std::path::Path::new(&format!(
            "{}/../configs/systems/{file}.json",
            env!("CARGO_MANIFEST_DIR")
        )))
        .unwrap(),
    }
}

/// What a run gave one process: its report with its times as JSON (equal text is equal bits: serde_json
/// writes each f64 as its shortest round-trip text), or its error as it reads.
type Seen = Result<(kernbench::sim::RunReport, String), String>;

/// Runs `make` in each of `processes` threads, each with its endpoint of one in-memory exchange.
fn spread(processes: usize, make: impl Fn(Option<Arc<dyn Exchange>>) -> Seen + Sync) -> Vec<Seen> {
    let group = InMemory::group(processes);
    std::thread::scope(|s| {
        let runs: Vec<_> =
            group.into_iter().map(|e| s.spawn(|| make(Some(Arc::new(e) as Arc<dyn Exchange>)))).collect();
        runs.into_iter().map(|r| r.join().expect("a process panicked")).collect()
    })
}

fn seen(run: Result<kernbench::sim::RunReport, kernbench::sim::testing::MockError>) -> Seen {
    run.map(|r| {
        let time = serde_json::to_string(r.time().expect("timed")).unwrap();
        (r, time)
    })
    .map_err(|e| e.to_string())
}

#[test]
fn every_shipped_algorithm_spread_over_one_to_four_processes_is_identical_bit_for_bit() {
    let registry = kernbench::algorithms::default_registry();
    let timing = Timing { trace: true, ..Timing::default() };
    let (mut compared, mut one_process_only) = (0, Vec::new());
    for system_name in ["builtin", "ring16", "switched"] {
        let system = shipped(system_name);
        for algorithm in registry.algorithms() {
            let (topology, mapper) = (algorithm.topology.name(), algorithm.mapper.name());
            let Ok(plan) = kernbench::InstallPlan::build(&system, topology, mapper) else { continue };
            let ranks = plan.len();
            let run = |exchange: Option<Arc<dyn Exchange>>| {
                let mut mock = MockRun::new(&system, topology, mapper, algorithm.kernel)
                    .params(serde_json::Value::Object(algorithm.params.clone()))
                    .inputs(|_, rank| {
                        let values: Vec<f32> = (0..96).map(|i| ((rank * 5 + i * 3) % 7) as f32 - 3.0).collect();
                        Tile::from_vec(values)
                    })
                    .outputs(|_, rank, input| {
                        kernbench::postcondition::starting_output(algorithm.collective, input, rank, ranks)
                    })
                    .timing(Some(timing.clone()));
                if let Some(exchange) = exchange {
                    mock = mock.exchange(exchange);
                }
                seen(mock.run())
            };
            let alone = run(None);
            let alone = alone.unwrap_or_else(|e| panic!("{} on {system_name}: {e}", algorithm.name));
            for processes in 1..=4.min(system.sips()) {
                let got = spread(processes, run);
                let uses_symmetric_memory =
                    got.iter().any(|g| g.as_ref().is_err_and(|e| e.contains("has no symmetric memory")));
                if uses_symmetric_memory && processes > 1 {
                    // Every process ends with the same error.
                    assert!(
                        got.iter().all(|g| g == &got[0]),
                        "{} on {system_name}: processes disagree",
                        algorithm.name
                    );
                    one_process_only.push(format!("{} on {system_name}", algorithm.name));
                    continue;
                }
                for (process, g) in got.iter().enumerate() {
                    let (report, time) = g.as_ref().unwrap_or_else(|e| {
                        panic!("{} on {system_name}, process {process} of {processes}: {e}", algorithm.name)
                    });
                    let at = format!("{} on {system_name}, process {process} of {processes}", algorithm.name);
                    assert!(report == &alone.0, "{at}: outputs, figures or rounds differ from one process");
                    assert!(time == &alone.1, "{at}: times or trace differ from one process");
                }
                compared += 1;
            }
        }
    }
    eprintln!("one process only (symmetric memory): {one_process_only:?}");
    assert!(compared >= 150, "only {compared} spread runs compared");
}
