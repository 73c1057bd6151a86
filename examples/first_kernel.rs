//! A first kernel, end to end: write it as a plain function, find it the way the registry does, bind
//! its parameters from JSON, and run it on every PE of a simulated machine.
//!
//! ```text
//! cargo run --example first_kernel
//! ```

use kernbench::prelude::*;
use kernbench::sim::testing::MockRun;
use kernbench::{ParamDef, System};

/// Ring all-reduce: every rank adds its neighbours' data as it travels once around the ring.
///
/// Each step sends what arrived last to the east neighbour, `chunks` pieces at a time, and receives
/// the west neighbour's in its place; after `size - 1` steps every rank has seen every input.
#[ccl_kernel]
pub fn ring_allreduce(tl: &Tl, chunks: usize) {
    let n = tl.size();
    let mut acc = tl.load(Input);
    let mut travelling = acc.clone();
    for _ in 1..n {
        let mut parts = Vec::new();
        for c in 0..chunks {
            let part = tl.chunk(&travelling, c, chunks);
            tl.send(E, &part);
            parts.push(tl.recv(W, part.len(), part.dtype()));
        }
        travelling = tl.concat(&parts);
        tl.reduce(&mut acc, &travelling, tl.op());
    }
    tl.finish(&mut acc, tl.op(), n);
    tl.store(Output, &acc);
}

// What `#[ccl_kernel]` made of it (abridged; every path is really `::kernbench::__private::...`):
//
//     pub async fn ring_allreduce(tl: &Tl, chunks: usize) -> Result<(), KernelError> {
//         let n = tl.size();                              // never waits, never fails
//         let mut acc = tl.load(Input)?;                  // can fail: `?`
//         let mut travelling = acc.clone();
//         for _ in 1..n {
//             count_loop()?;                              // the watchdog's check, in every loop
//             let mut parts = Vec::new();
//             for c in 0..chunks {
//                 count_loop()?;
//                 let part = tl.chunk(&travelling, c, chunks)?;
//                 tl.send(E, &part).await?;               // can wait: `.await?`
//                 parts.push(tl.recv(W, part.len(), part.dtype()).await?);
//             }
//             travelling = tl.concat(&parts)?;
//             tl.reduce(&mut acc, &travelling, tl.op())?;
//         }
//         tl.finish(&mut acc, tl.op(), n);
//         tl.store(Output, &acc)?;
//         Ok(())
//     }
//
//     pub mod ring_allreduce {
//         #[derive(Debug, Clone, serde::Deserialize)]
//         #[serde(deny_unknown_fields)]
//         pub struct Args { pub chunks: usize }
//
//         pub static KERNEL: KernelDef = KernelDef {
//             name: "ring_allreduce",
//             params: &[ParamDef { name: "chunks", ty: "usize", default: None }],
//             summary: "Ring all-reduce: every rank adds its neighbours' data as it travels once around the ring.",
//             instantiate,    // JSON -> Args -> an Arc<dyn Launch> whose `launch(tl)` calls the fn above
//         };
//         ...
//     }

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // The registry knows a kernel by its `KernelDef`: a name, typed parameters and a summary.
    let def = &ring_allreduce::KERNEL;
    println!("kernel `{}`: {}", def.name, def.summary);
    for param in def.params {
        println!("  {}: {}", param.name, param.ty);
    }
    assert_eq!(def.name, "ring_allreduce");
    assert_eq!(def.params, [ParamDef { name: "chunks", ty: "usize", default: None }]);

    // The registry's JSON parameters (an algorithm entry's `"params"`) bind the kernel's arguments.
    let params = serde_json::json!({ "chunks": 4 });
    def.instantiate(params.as_object().expect("a JSON object"))?;

    // A missing or unknown parameter is an `ArgsError` that names the kernel and what it takes.
    let missing = def.instantiate(&serde_json::Map::new()).err().expect("`chunks` is required");
    println!("{missing}");
    assert!(missing.to_string().contains("missing field `chunks`"));
    let typo = serde_json::json!({ "chunks": 4, "chunk": 2 });
    let unknown = def.instantiate(typo.as_object().expect("a JSON object")).err().expect("`chunk` is unknown");
    println!("{unknown}");
    assert!(unknown.to_string().contains("unknown field `chunk`"));

    // Run it: one coroutine per PE of the ring of SIP leaders on the built-in system (4 SIPs),
    // each PE's input filled with its rank + 1, so every output must hold 1 + 2 + 3 + 4 = 10.
    let system = System::builtin();
    let report = MockRun::new(&system, "ring_1d", "leader_only", def)
        .params(params)
        .inputs(|_pe, rank| Tile::filled(F32, 1024, (rank + 1) as f64))
        .run()?;
    for pe in report.pes() {
        assert_eq!(pe.output, Tile::filled(F32, 1024, 10.0), "{} is wrong", pe.pe);
    }
    let totals = report.totals();
    println!(
        "ran on {} PEs: every output holds 10 ({} messages, {} bytes)",
        report.pes().len(),
        totals.messages_sent,
        totals.bytes_sent
    );
    Ok(())
}
