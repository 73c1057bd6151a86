/// Each lane sends its index east.
#[allow(clippy::needless_question_mark)]
pub fn lane_marks<'__ccl_borrows>(
    tl: &'__ccl_borrows Tl,
    lanes: usize,
) -> impl ::core::future::Future<
    Output = ::kernbench::__private::Result<(), ::kernbench::__private::KernelError>,
> + '__ccl_borrows {
    async move {
        let _ = &lanes;
        tl.send(E, &Tile::filled(F32, 1, tl.lane() as f64)).await?;
        #[allow(unreachable_code, clippy::needless_return)]
        return ::kernbench::__private::Result::Ok(());
    }
}
/// The registry entry (`KERNEL`) and arguments (`Args`) of the kernel `lane_marks`.
pub mod lane_marks {
    #[allow(unused_imports)]
    use super::*;
    /// The parameters of the kernel `lane_marks`, decoded from the registry's JSON parameters.
    #[derive(
        ::kernbench::__private::Debug,
        ::kernbench::__private::Clone,
        ::kernbench::__private::serde::Deserialize,
    )]
    #[serde(deny_unknown_fields, crate = "::kernbench::__private::serde")]
    pub struct Args {
        /// The `lanes` parameter.
        #[serde(default = "default_lanes")]
        pub lanes: usize,
    }
    fn default_lanes() -> usize {
        2
    }
    /// The kernel `lane_marks`, registered as `lane_marks`.
    pub static KERNEL: ::kernbench::__private::KernelDef = ::kernbench::__private::KernelDef {
        name: "lane_marks",
        params: &[
            ::kernbench::__private::ParamDef {
                name: "lanes",
                ty: "usize",
                default: ::kernbench::__private::Option::Some("2"),
            },
        ],
        summary: "Each lane sends its index east.",
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
            let Args { lanes } = ::kernbench::__private::Clone::clone(&self.0);
            ::kernbench::__private::Box::pin(async move {
                super::lane_marks(&tl, lanes).await
            })
        }
        #[allow(unused_variables)]
        fn lanes(&self, _rank: usize, _size: usize) -> usize {
            let Args { lanes } = ::kernbench::__private::Clone::clone(&self.0);
            let lanes: usize = lanes;
            lanes
        }
    }
}
