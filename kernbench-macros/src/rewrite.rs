//! The body rewrite: from the plain function the author wrote to the body of an `async fn` returning
//! `Result<R, KernelError>`.
//!
//! Only what must change is touched: tl steps, the author's own `?`, loop bodies (which get the
//! watchdog's check), `return`s and the tail. Closures, async blocks and nested items are left as
//! written (the checks have made sure that they hold no tl steps); so are loops in them, which the
//! watchdog therefore does not see.

use proc_macro2::{Span, TokenStream};
use syn::spanned::Spanned;
use syn::visit_mut::{self, VisitMut};
use syn::{Block, Expr, ExprAwait, ExprMacro, ExprTry, Item, Macro, Stmt, Token, parse_quote_spanned};

use crate::model::{Kernel, StepKind, TlHandle, macro_args};

/// Rewrites the kernel's body in place.
pub(crate) fn body(kernel: &mut Kernel) {
    let returns_value = kernel.returns_value();
    let private = kernel.private();
    let mut steps = Steps { tl: &kernel.tl, private: &private, changed: false };
    steps.visit_block_mut(&mut kernel.item.block);
    wrap_tail(&private, &mut kernel.item.block, returns_value);
}

/// Awaits tl steps and wraps `return` values in `Ok`.
struct Steps<'a> {
    tl: &'a TlHandle,
    /// `<crate>::__private`.
    private: &'a TokenStream,
    /// Whether anything was rewritten since the flag was last cleared (for macro arguments).
    changed: bool,
}

impl VisitMut for Steps<'_> {
    fn visit_expr_mut(&mut self, expr: &mut Expr) {
        // Closures and async blocks hold no steps (checked), and their `return`s are their own.
        if matches!(expr, Expr::Closure(_) | Expr::Async(_)) {
            return;
        }
        // Arguments first, so nested steps are completed where they stand:
        // Input:  tl.send(E, &tl.load(Input))
        // Output: tl.send(E, &tl.load(Input)?).await?
        // The author's own `?`, told from those the rewrite adds to the steps below it.
        let authors_try = matches!(expr, Expr::Try(_));
        visit_mut::visit_expr_mut(self, expr);
        if let Some(kind) = self.tl.step_kind(expr) {
            complete_step(self.tl, kind, expr);
            self.changed = true;
        } else if let (true, Expr::Try(question)) = (authors_try, &mut *expr) {
            // The author's `?` on a `Result` of their own: its error becomes the PE's `KernelError::Kernel`.
            // Input:  parse(&text)?
            // Output: <crate>::__private::kernel_result(tl, parse(&text))?
            let (private, tl, span) = (self.private, &self.tl.0, question.question_token.span);
            let inner = std::mem::replace(&mut *question.expr, Expr::Verbatim(TokenStream::new()));
            *question.expr = parse_quote_spanned!(span=> #private::kernel_result(#tl, #inner));
            self.changed = true;
        } else if let Some(body) = loop_body(expr) {
            // The watchdog's check, so that a loop that never reaches a step still ends.
            // Input:  for c in 0..n { ... }
            // Output: for c in 0..n { <crate>::__private::count_loop()?; ... }
            let (private, span) = (self.private, body.brace_token.span.open());
            body.stmts.insert(0, parse_quote_spanned!(span=> #private::count_loop()?;));
            self.changed = true;
        } else if let Expr::Return(ret) = expr {
            // Input:  return acc;      return;
            // Output: return Ok(acc);  return Ok(());
            let span = ret.return_token.span;
            ret.expr = Some(Box::new(match ret.expr.take() {
                Some(value) => ok(self.private, *value, span),
                None => ok(self.private, parse_quote_spanned!(span=> ()), span),
            }));
            self.changed = true;
        }
    }

    /// Nested items have their own scope and their own `return`s.
    fn visit_item_mut(&mut self, _: &mut Item) {}

    fn visit_macro_mut(&mut self, mac: &mut Macro) {
        // Input:  assert_eq!(tl.recv(W, 4, F32).len(), 4);
        // Output: assert_eq!(tl.recv(W, 4, F32).await?.len(), 4);
        // Macros whose arguments are not expressions are left alone (the checks reject `tl.` in them).
        let Some(mut args) = macro_args(mac) else {
            return;
        };
        let outer = std::mem::replace(&mut self.changed, false);
        args.iter_mut().for_each(|arg| self.visit_expr_mut(arg));
        if self.changed {
            mac.tokens = quote::ToTokens::into_token_stream(args);
        }
        self.changed |= outer;
    }
}

/// Input:  tl.send(E, &x)         intra_cube_ring(tl, acc)          tl.load(Input)   tl.size()
/// Output: tl.send(E, &x).await?  intra_cube_ring(tl, acc).await?   tl.load(Input)?  tl.size()
///
/// What is added carries the span of the method or function name, so "not a future" points there.
fn complete_step(tl: &TlHandle, kind: StepKind, expr: &mut Expr) {
    let span = tl.step_span(expr);
    let step = std::mem::replace(expr, Expr::Verbatim(proc_macro2::TokenStream::new()));
    let step = match kind {
        StepKind::Infallible => {
            *expr = step;
            return;
        }
        StepKind::Fallible => step,
        StepKind::Waits => Expr::Await(ExprAwait {
            attrs: Vec::new(),
            base: Box::new(step),
            dot_token: Token![.](span),
            await_token: Token![await](span),
        }),
    };
    *expr = Expr::Try(ExprTry { attrs: Vec::new(), expr: Box::new(step), question_token: Token![?](span) });
}

/// The body of a `loop`, `while` or `for`.
fn loop_body(expr: &mut Expr) -> Option<&mut Block> {
    match expr {
        Expr::Loop(l) => Some(&mut l.body),
        Expr::While(w) => Some(&mut w.body),
        Expr::ForLoop(f) => Some(&mut f.body),
        _ => None,
    }
}

/// `<crate>::__private::Result::Ok(value)`, at `span`.
fn ok(private: &TokenStream, value: Expr, span: Span) -> Expr {
    parse_quote_spanned!(span=> #private::Result::Ok(#value))
}

/// Makes the block's value the function's `Ok` value.
///
/// Input:  { ...; acc }       (returns a value)
/// Output: { ...; Ok(acc) }
///
/// Input:  { ...; tl.store(Output, &acc) }        (returns nothing)
/// Output: { ...; tl.store(Output, &acc)?; return Ok(()); }
///
/// A block ending in `return` is left as it is: it never reaches its end.
fn wrap_tail(private: &TokenStream, block: &mut Block, returns_value: bool) {
    let span = block.brace_token.span.close();
    // A braced macro ending the block (`m! { .. }`) is its tail expression too.
    if let Some(last) = block.stmts.last_mut() {
        if let Stmt::Macro(tail) = last {
            if tail.semi_token.is_none() {
                let attrs = std::mem::take(&mut tail.attrs);
                let mac = tail.mac.clone();
                *last = Stmt::Expr(Expr::Macro(ExprMacro { attrs, mac }), None);
            }
        }
    }
    match block.stmts.last_mut() {
        Some(Stmt::Expr(Expr::Return(_), _)) => {}
        Some(Stmt::Expr(tail, None)) if returns_value => {
            let value = std::mem::replace(tail, Expr::Verbatim(proc_macro2::TokenStream::new()));
            let span = value.span();
            *tail = ok(private, value, span);
        }
        // Without a tail the body diverges, or the type error is the author's, as in a plain fn.
        _ if returns_value => {}
        last => {
            // A block-like tail (`if`, `for`, `match`...) is already a statement; others need their `;`.
            if let Some(Stmt::Expr(tail, semi @ None)) = last {
                if !is_block_like(tail) {
                    *semi = Some(Token![;](span));
                }
            }
            // A statement that allows itself to be unreachable: after a diverging tail (`panic!()`) rustc
            // would otherwise warn about code the author never wrote.
            let generated = Span::mixed_site();
            let done = ok(private, parse_quote_spanned!(generated=> ()), generated);
            block.stmts.push(parse_quote_spanned!(generated=>
                #[allow(unreachable_code, clippy::needless_return)]
                return #done;
            ));
        }
    }
}

/// Expressions that can stand as statements without a `;`.
fn is_block_like(expr: &Expr) -> bool {
    matches!(
        expr,
        Expr::Block(_)
            | Expr::Const(_)
            | Expr::ForLoop(_)
            | Expr::If(_)
            | Expr::Loop(_)
            | Expr::Match(_)
            | Expr::TryBlock(_)
            | Expr::Unsafe(_)
            | Expr::While(_)
    )
}
