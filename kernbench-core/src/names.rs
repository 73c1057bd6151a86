//! Named tables of built-in topologies, mappers and validators, and the error for a name none of them has.
//!
//! Each table pairs a [`NamedItem`] (what `kernbench list` prints) with the function it names, so the
//! listing and the lookup can never disagree.

use std::fmt;

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
#[error("unknown {kind} `{name}`: expected one of {}", self.known.join(", "))]
pub struct UnknownName {
    /// What was looked up: `topology`, `mapper` or `validator`.
    pub kind: &'static str,
    /// The name asked for.
    pub name: String,
    /// The names that exist.
    pub known: Vec<&'static str>,
}

/// The listing half of a `(NamedItem, F)` table, computed at compile time.
pub(crate) const fn listing<F: Copy, const N: usize>(table: &[(NamedItem, F); N]) -> [NamedItem; N] {
    let mut out = [NamedItem { name: "", summary: "" }; N];
    let mut i = 0;
    while i < N {
        out[i] = table[i].0;
        i += 1;
    }
    out
}

/// The function called `name` in `table`.
pub(crate) fn lookup<F: Copy>(kind: &'static str, table: &[(NamedItem, F)], name: &str) -> Result<F, UnknownName> {
    table.iter().find(|(item, _)| item.name == name).map(|&(_, f)| f).ok_or_else(|| UnknownName {
        kind,
        name: name.to_owned(),
        known: table.iter().map(|(item, _)| item.name).collect(),
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
