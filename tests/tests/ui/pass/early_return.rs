//! `return;` in a kernel and `return value;` in a helper; closures and nested functions keep their own
//! `return`s.
use kernbench::prelude::*;

#[ccl_kernel(helper)]
fn first_nonempty(tl: &Tl, tiles: Vec<Tile>) -> Option<Tile> {
    fn len_of(tile: &Tile) -> usize {
        return tile.len();
    }
    let empty = |tile: &Tile| -> bool {
        return len_of(tile) == 0;
    };
    for tile in tiles {
        if !empty(&tile) {
            return Some(tile);
        }
    }
    tl.barrier();
    None
}

#[ccl_kernel]
fn kernel(tl: &Tl) {
    let x = tl.load(Input);
    if tl.size() == 1 {
        tl.store(Output, &x);
        return;
    }
    let Some(tile) = first_nonempty(tl, vec![x]) else {
        return;
    };
    tl.send(E, &tile);
}

#[ccl_kernel]
fn diverges(tl: &Tl) {
    tl.barrier();
    panic!("a kernel may end by diverging");
}

fn main() {
    let _ = (&kernel::KERNEL, &diverges::KERNEL);
}
