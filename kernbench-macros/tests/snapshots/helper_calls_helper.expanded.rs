/// Adds the west neighbour's tile to `acc`, unless it is empty.
#[allow(clippy::needless_question_mark)]
fn add_from_west<'__ccl_borrows>(
    tl: &'__ccl_borrows Tl,
    mut acc: Tile,
) -> impl ::core::future::Future<
    Output = ::kernbench::__private::Result<Tile, ::kernbench::__private::KernelError>,
> + '__ccl_borrows {
    async move {
        let theirs = exchange(tl, acc.clone()).await?;
        let empty = |tile: &Tile| -> bool {
            return tile.is_empty();
        };
        if empty(&theirs) {
            return ::kernbench::__private::Result::Ok(acc);
        }
        let Some(op) = Some(tl.op()) else {
            return ::kernbench::__private::Result::Ok(acc)
        };
        tl.reduce(&mut acc, &theirs, op)?;
        ::kernbench::__private::Result::Ok(steps::finish_on(tl, acc, tl.size()).await?)
    }
}
