/// Adds the west neighbour's tile to `acc`, unless it is empty.
#[allow(clippy::needless_question_mark)]
async fn add_from_west(
    tl: &Tl,
    mut acc: Tile,
) -> ::kernbench::__private::Result<Tile, ::kernbench::__private::KernelError> {
    let theirs = exchange(tl, acc.clone()).await?;
    let empty = |tile: &Tile| -> bool {
        return tile.is_empty();
    };
    if empty(&theirs) {
        return ::kernbench::__private::Result::Ok(acc);
    }
    let Some(op) = Some(tl.op()) else { return ::kernbench::__private::Result::Ok(acc) };
    tl.reduce(&mut acc, &theirs, op)?;
    ::kernbench::__private::Result::Ok(steps::finish_on(tl, acc, tl.size()).await?)
}
