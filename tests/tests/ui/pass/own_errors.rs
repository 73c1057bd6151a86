//! `?` on a kernel's own `Result` (any error that implements `Display`) compiles, in kernels and
//! helpers, and in macro arguments; `tl` calls still take no `?` of the author's.
use kernbench::prelude::*;

#[ccl_kernel(helper)]
fn peer_after(tl: &Tl, offset: i64) -> Direction {
    Direction::peer(tl.rank() as i64 + offset)?
}

/// Sends to the peer `offset` places on, if the text is a number.
#[ccl_kernel]
pub fn kernel(tl: &Tl, offset: String) {
    let offset: i64 = offset.parse()?;
    if offset == 0 {
        Err::<(), _>("an offset of 0 sends to itself")?;
    }
    let x = tl.load(Input);
    tl.send(peer_after(tl, offset), &x);
    println!("{}", tl.recv_like(peer_after(tl, -offset), &x).len() + "1".parse::<usize>()?);
}

fn main() {
    assert_eq!(kernel::KERNEL.params[0].name, "offset");
}
