//! Top-level groups of a hierarchical collective: how `n` sites (ranks, or PEs) split into groups for
//! an arity, and where one site stands. One rule, used by every algorithm and test that needs it.
//!
//! `n` sites split into `min(arity, n)` contiguous groups (at least one) whose sizes differ by at most
//! one, bigger groups first: the near-equal split of [`chunk_range`](crate::tile::chunk_range). The first site
//! of a group is its representative.
//!
//! ```text
//! n = 11, arity 4:   [0 1 2] [3 4 5] [6 7 8] [9 10]      representatives 0, 3, 6, 9
//! n = 5,  arity 4:   [0 1] [2] [3] [4]                   representatives 0, 2, 3, 4
//! ```

use std::ops::Range;

use crate::tile::chunk_start;

/// `n` sites split into top-level groups for an arity.
///
/// # Examples
/// ```
/// use kernbench_core::partition::Partition;
/// let p = Partition::new(11, 4);
/// assert_eq!(p.len(), 4);
/// assert_eq!(p.groups().map(|g| g.len()).collect::<Vec<_>>(), [3, 3, 3, 2]);
/// assert_eq!(p.group(3), 9..11);
/// assert_eq!(p.largest(), 3);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Partition {
    sites: usize,
    groups: usize,
}

/// Where one site stands in a [`Partition`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Site {
    /// Its group.
    pub group: usize,
    /// Its position in the group (0 for the representative).
    pub index_in_group: usize,
    /// Whether it is its group's representative: the group's first site.
    pub representative: bool,
}

impl Partition {
    /// `sites` split into `min(arity, sites)` groups; an arity of 0 or 1 gives one group, and no sites
    /// give no groups.
    pub fn new(sites: usize, arity: usize) -> Partition {
        let groups = if sites == 0 { 0 } else { arity.clamp(1, sites) };
        Partition { sites, groups }
    }

    /// The number of sites.
    pub fn sites(&self) -> usize {
        self.sites
    }

    /// The number of groups.
    pub fn len(&self) -> usize {
        self.groups
    }

    /// Whether there are no groups (no sites).
    pub fn is_empty(&self) -> bool {
        self.groups == 0
    }

    /// The sites of group `group`.
    ///
    /// # Panics
    /// When `group` is not below [`Partition::len`].
    pub fn group(&self, group: usize) -> Range<usize> {
        assert!(group < self.groups, "group {group} does not exist: there are {} groups", self.groups);
        chunk_start(self.sites, group, self.groups)..chunk_start(self.sites, group + 1, self.groups)
    }

    /// Every group's sites, in order.
    pub fn groups(&self) -> impl Iterator<Item = Range<usize>> + '_ {
        (0..self.groups).map(|g| self.group(g))
    }

    /// The size of the largest group (the first), 0 without sites.
    pub fn largest(&self) -> usize {
        if self.is_empty() { 0 } else { self.group(0).len() }
    }

    /// Where `site` stands: its group, its position there, and whether it represents the group.
    ///
    /// # Examples
    /// ```
    /// use kernbench_core::partition::{Partition, Site};
    /// let p = Partition::new(5, 4);
    /// assert_eq!(p.classify(1), Site { group: 0, index_in_group: 1, representative: false });
    /// assert_eq!(p.classify(2), Site { group: 1, index_in_group: 0, representative: true });
    /// ```
    ///
    /// # Panics
    /// When `site` is not below [`Partition::sites`].
    pub fn classify(&self, site: usize) -> Site {
        assert!(site < self.sites, "site {site} does not exist: there are {} sites", self.sites);
        let group = (0..self.groups)
            .find(|&g| site < chunk_start(self.sites, g + 1, self.groups))
            .expect("the last group ends at the last site");
        let index_in_group = site - chunk_start(self.sites, group, self.groups);
        Site { group, index_in_group, representative: index_in_group == 0 }
    }
}

/// The top-level groups of `n` sites for `arity`: see [`Partition::new`].
///
/// # Examples
/// ```
/// use kernbench_core::partition::groups;
/// assert_eq!(groups(5, 4), [0..2, 2..3, 3..4, 4..5]);
/// assert_eq!(groups(3, 8), [0..1, 1..2, 2..3]);
/// ```
pub fn groups(n: usize, arity: usize) -> Vec<Range<usize>> {
    Partition::new(n, arity).groups().collect()
}

/// Where `site` of `n` stands among the groups for `arity`: see [`Partition::classify`].
///
/// # Examples
/// ```
/// use kernbench_core::partition::classify;
/// let site = classify(10, 11, 4);
/// assert_eq!((site.group, site.index_in_group, site.representative), (3, 1, false));
/// ```
///
/// # Panics
/// When `site >= n`.
pub fn classify(site: usize, n: usize, arity: usize) -> Site {
    Partition::new(n, arity).classify(site)
}
