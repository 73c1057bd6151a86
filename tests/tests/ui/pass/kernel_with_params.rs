//! A kernel with one parameter of every kind the registry can pass.
use kernbench::prelude::*;

/// Sends the input east `rounds` times.
///
/// Details that are not part of the summary.
#[ccl_kernel]
pub fn kernel(
    tl: &Tl,
    rounds: u32,
    scale: f64,
    label: String,
    verbose: bool,
    op: ReduceOp,
    dtype: kernbench::Dtype,
    mut offset: usize,
) {
    let x = tl.load(Input);
    for _ in 0..rounds {
        tl.send(E, &x);
        let y = tl.recv(W, x.len(), dtype);
        offset += y.len();
    }
    if verbose {
        println!("{label}: {scale} {op} {offset}");
    }
}

fn main() {
    let def = &kernel::KERNEL;
    assert_eq!(def.name, "kernel");
    assert_eq!(def.summary, "Sends the input east `rounds` times.");
    let names: Vec<_> = def.params.iter().map(|p| (p.name, p.ty)).collect();
    assert_eq!(
        names,
        [
            ("rounds", "u32"),
            ("scale", "f64"),
            ("label", "String"),
            ("verbose", "bool"),
            ("op", "ReduceOp"),
            ("dtype", "kernbench::Dtype"),
            ("offset", "usize"),
        ]
    );
    let json = serde_json::json!({
        "rounds": 2, "scale": 0.5, "label": "ring", "verbose": false, "op": "max", "dtype": "f16", "offset": 0
    });
    assert!(def.instantiate(json.as_object().unwrap()).is_ok());

    let args: kernel::Args = serde_json::from_value(json).unwrap();
    assert_eq!(
        (args.rounds, args.op, args.dtype),
        (2, ReduceOp::Max, Dtype::F16)
    );

    let missing = def
        .instantiate(serde_json::json!({ "rounds": 2 }).as_object().unwrap())
        .err()
        .unwrap();
    assert!(
        missing.to_string().contains("missing field `scale`"),
        "{missing}"
    );
}
