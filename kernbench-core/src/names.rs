//! Named tables of built-in topologies, mappers and validators, and the error for a name none of them has.
//!
//! Each table is a list of [`Builtin`]s: a [`NamedItem`] (what `kernbench list` prints) with what it
//! names (a function, or for a mapper its function and layout), so the listing and the lookup can
//! never disagree. A registry resolves each name
//! once into its `Builtin` and keeps that. Shared by every concept module; uses only `quote`.

use std::fmt;

use crate::quote::Quoted;

/// A built-in item's name and its one-line summary, for listings.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct NamedItem {
    /// The name used in `ccl.json` and on the command line.
    pub name: &'static str,
    /// What it does, in one line.
    pub summary: &'static str,
}

/// A name that no built-in item of its kind has.
///
/// # Examples
/// ```
/// use kernbench_core::topology_by_name;
/// let err = topology_by_name("ring1d").unwrap_err();
/// assert!(err.to_string().contains("unknown topology `ring1d`"));
/// assert!(err.to_string().contains("ring_1d"));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown {kind} `{}`: expected one of {}", Quoted(name), self.known.join(", "))]
pub struct UnknownName {
    /// What was looked up: `topology`, `mapper` or `validator`.
    pub kind: &'static str,
    /// The name asked for.
    pub name: String,
    /// The names that exist.
    pub known: Vec<&'static str>,
}

/// A built-in topology, mapper or validator: its name and summary with what it names (a topology's or
/// validator's function, a mapper's [`Mapper`](crate::plan::Mapper)), so what holds one never looks
/// the name up again.
#[derive(Clone, Copy)]
pub struct Builtin<F> {
    /// Its name and summary.
    pub item: NamedItem,
    /// What it does.
    pub function: F,
}

impl<F> Builtin<F> {
    /// The name used in `ccl.json` and on the command line.
    pub fn name(&self) -> &'static str {
        self.item.name
    }
}

impl<F> fmt::Debug for Builtin<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.item.name)
    }
}

/// Its name, padded as asked.
impl<F> fmt::Display for Builtin<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.item.name)
    }
}

impl<F> PartialEq for Builtin<F> {
    fn eq(&self, other: &Self) -> bool {
        self.item == other.item
    }
}

impl<F> Eq for Builtin<F> {}

/// The listing half of a table, computed at compile time.
pub(crate) const fn listing<F: Copy, const N: usize>(table: &[Builtin<F>; N]) -> [NamedItem; N] {
    let mut out = [NamedItem { name: "", summary: "" }; N];
    let mut i = 0;
    while i < N {
        out[i] = table[i].item;
        i += 1;
    }
    out
}

/// The built-in called `name` in `table`.
pub(crate) fn lookup<F: Copy>(kind: &'static str, table: &[Builtin<F>], name: &str) -> Result<Builtin<F>, UnknownName> {
    table.iter().find(|b| b.item.name == name).copied().ok_or_else(|| UnknownName {
        kind,
        name: name.to_owned(),
        known: table.iter().map(|b| b.item.name).collect(),
    })
}

impl fmt::Display for NamedItem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:<20} {}", self.name, self.summary)
    }
}

/// `items` as one comma-separated list, for error messages.
pub(crate) fn comma_list<T: fmt::Display>(items: &[T]) -> String {
    items.iter().map(T::to_string).collect::<Vec<_>>().join(", ")
}
