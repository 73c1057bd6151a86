/// Ring all-reduce, pipelined in `chunks` chunks.
///
/// Every rank adds its neighbours' data as it travels once around the ring.
#[allow(clippy::needless_question_mark)]
pub fn ring_allreduce<'__ccl_borrows>(
    tl: &'__ccl_borrows Tl,
    chunks: usize,
    op: ReduceOp,
) -> impl ::core::future::Future<
    Output = ::kernbench::__private::Result<(), ::kernbench::__private::KernelError>,
> + '__ccl_borrows {
    async move {
        let n = tl.size();
        if n == 1 {
            let x = tl.load(Input)?;
            tl.store(Output, &x)?;
            return ::kernbench::__private::Result::Ok(());
        }
        let mut acc = tl.load(Input)?;
        let mut travelling = acc.clone();
        for _ in 1..n {
            ::kernbench::__private::count_loop()?;
            let mut parts = Vec::new();
            for c in 0..chunks {
                ::kernbench::__private::count_loop()?;
                tl.send(E, &tl.chunk(&travelling, c, chunks)?).await?;
                let len = chunk_range(acc.len(), c, chunks)
                    .map(|range| range.len())
                    .unwrap_or(0);
                parts.push(tl.recv(W, len, acc.dtype()).await?);
            }
            travelling = tl.concat(&parts)?;
            tl.reduce(&mut acc, &travelling, op)?;
        }
        assert_eq!(
            acc.len(), tl.load(Input) ? .len(), "the result has the input's length"
        );
        tl.store(Output, &acc)?;
        #[allow(unreachable_code, clippy::needless_return)]
        return ::kernbench::__private::Result::Ok(());
    }
}
/// The registry entry (`KERNEL`) and arguments (`Args`) of the kernel `ring_allreduce`.
pub mod ring_allreduce {
    #[allow(unused_imports)]
    use super::*;
    /// The parameters of the kernel `ring_allreduce`, decoded from the registry's JSON parameters.
    #[derive(
        ::kernbench::__private::Debug,
        ::kernbench::__private::Clone,
        ::kernbench::__private::serde::Deserialize,
    )]
    #[serde(deny_unknown_fields, crate = "::kernbench::__private::serde")]
    pub struct Args {
        /// The `chunks` parameter.
        pub chunks: usize,
        /// The `op` parameter.
        pub op: ReduceOp,
    }
    /// The kernel `ring_allreduce`, registered as `ring`.
    pub static KERNEL: ::kernbench::__private::KernelDef = ::kernbench::__private::KernelDef {
        name: "ring",
        params: &[
            ::kernbench::__private::ParamDef {
                name: "chunks",
                ty: "usize",
                default: ::kernbench::__private::Option::None,
            },
            ::kernbench::__private::ParamDef {
                name: "op",
                ty: "ReduceOp",
                default: ::kernbench::__private::Option::None,
            },
        ],
        summary: "Ring all-reduce, pipelined in `chunks` chunks.",
        instantiate,
    };
    fn instantiate(
        params: &::kernbench::__private::serde_json::Map<
            ::kernbench::__private::String,
            ::kernbench::__private::serde_json::Value,
        >,
    ) -> ::kernbench::__private::Result<
        ::kernbench::__private::Arc<dyn ::kernbench::__private::Launch>,
        ::kernbench::__private::ArgsError,
    > {
        let value = ::kernbench::__private::serde_json::Value::Object(
            ::kernbench::__private::Clone::clone(params),
        );
        match ::kernbench::__private::serde_json::from_value::<Args>(value) {
            ::kernbench::__private::Result::Ok(args) => {
                ::kernbench::__private::Result::Ok(
                    ::kernbench::__private::Arc::new(Instance(args)),
                )
            }
            ::kernbench::__private::Result::Err(error) => {
                ::kernbench::__private::Result::Err(
                    ::kernbench::__private::ArgsError::new(
                        KERNEL.name,
                        KERNEL.params,
                        error,
                    ),
                )
            }
        }
    }
    struct Instance(Args);
    impl ::kernbench::__private::Launch for Instance {
        fn launch(
            &self,
            tl: ::kernbench::__private::Tl,
        ) -> ::kernbench::__private::KernelFuture {
            let Args { chunks, op } = ::kernbench::__private::Clone::clone(&self.0);
            ::kernbench::__private::Box::pin(async move {
                super::ring_allreduce(&tl, chunks, op).await
            })
        }
    }
}
