/// Forwards `rounds` tiles to the east, each shaped like the input.
#[allow(clippy::needless_question_mark)]
pub fn forward<'__ccl_borrows>(
    tl: &'__ccl_borrows Tl,
    rounds: String,
) -> impl ::core::future::Future<
    Output = ::kernbench_core::__private::Result<
        (),
        ::kernbench_core::__private::KernelError,
    >,
> + '__ccl_borrows {
    async move {
        let rounds: usize = ::kernbench_core::__private::kernel_result(
            tl,
            rounds.parse(),
        )?;
        let mut x = tl.load(Input)?;
        let mut left = rounds;
        while left > 0 {
            ::kernbench_core::__private::count_loop()?;
            tl.send(
                    ::kernbench_core::__private::kernel_result(
                        tl,
                        Direction::peer(tl.rank() + 1),
                    )?,
                    &x,
                )
                .await?;
            x = tl.recv_like(W, &x).await?;
            left -= 1;
        }
        loop {
            ::kernbench_core::__private::count_loop()?;
            if tl.has(E) {
                break;
            }
        }
        tl.store(Output, &x)?;
        #[allow(unreachable_code, clippy::needless_return)]
        return ::kernbench_core::__private::Result::Ok(());
    }
}
/// The registry entry (`KERNEL`) and arguments (`Args`) of the kernel `forward`.
pub mod forward {
    #[allow(unused_imports)]
    use super::*;
    /// The parameters of the kernel `forward`, decoded from the registry's JSON parameters.
    #[derive(
        ::kernbench_core::__private::Debug,
        ::kernbench_core::__private::Clone,
        ::kernbench_core::__private::serde::Deserialize,
    )]
    #[serde(deny_unknown_fields, crate = "::kernbench_core::__private::serde")]
    pub struct Args {
        /// The `rounds` parameter.
        pub rounds: String,
    }
    /// The kernel `forward`, registered as `forward`.
    pub static KERNEL: ::kernbench_core::__private::KernelDef = ::kernbench_core::__private::KernelDef {
        name: "forward",
        params: &[
            ::kernbench_core::__private::ParamDef {
                name: "rounds",
                ty: "String",
                default: ::kernbench_core::__private::Option::None,
            },
        ],
        summary: "Forwards `rounds` tiles to the east, each shaped like the input.",
        instantiate,
    };
    fn instantiate(
        params: &::kernbench_core::__private::serde_json::Map<
            ::kernbench_core::__private::String,
            ::kernbench_core::__private::serde_json::Value,
        >,
    ) -> ::kernbench_core::__private::Result<
        ::kernbench_core::__private::Arc<dyn ::kernbench_core::__private::Launch>,
        ::kernbench_core::__private::ArgsError,
    > {
        let value = ::kernbench_core::__private::serde_json::Value::Object(
            ::kernbench_core::__private::Clone::clone(params),
        );
        match ::kernbench_core::__private::serde_json::from_value::<Args>(value) {
            ::kernbench_core::__private::Result::Ok(args) => {
                ::kernbench_core::__private::Result::Ok(
                    ::kernbench_core::__private::Arc::new(Instance(args)),
                )
            }
            ::kernbench_core::__private::Result::Err(error) => {
                ::kernbench_core::__private::Result::Err(
                    ::kernbench_core::__private::ArgsError::new(
                        KERNEL.name,
                        KERNEL.params,
                        error,
                    ),
                )
            }
        }
    }
    struct Instance(Args);
    impl ::kernbench_core::__private::Launch for Instance {
        fn launch(
            &self,
            tl: ::kernbench_core::__private::Tl,
        ) -> ::kernbench_core::__private::KernelFuture {
            let Args { rounds } = ::kernbench_core::__private::Clone::clone(&self.0);
            ::kernbench_core::__private::Box::pin(async move {
                super::forward(&tl, rounds).await
            })
        }
    }
}
