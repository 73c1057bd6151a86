//! Top-level groups of a hierarchical collective: how `n` ranks split into groups for an arity
//! ([`GroupSplit`]), and where one rank stands ([`Place`]). One rule, used by every algorithm and test
//! that needs it. Uses [`tile`](crate::tile)'s near-equal chunks.
//!
//! `n` ranks split into `min(arity, n)` contiguous groups (at least one) whose sizes differ by at most
//! one, bigger groups first: the near-equal split of [`chunk_range`](crate::tile::chunk_range). The
//! first rank of a group is its representative.
//!
//! ```text
//! n = 11, arity 4:   [0 1 2] [3 4 5] [6 7 8] [9 10]      representatives 0, 3, 6, 9
//! n = 5,  arity 4:   [0 1] [2] [3] [4]                   representatives 0, 2, 3, 4
//! ```

use std::ops::Range;

use crate::tile::chunk_start;

/// `n` ranks split into near-equal top-level groups for an arity.
///
/// # Examples
/// ```
/// use kernbench_core::partition::GroupSplit;
/// let p = GroupSplit::new(11, 4);
/// assert_eq!(p.len(), 4);
/// assert_eq!(p.groups().map(|g| g.len()).collect::<Vec<_>>(), [3, 3, 3, 2]);
/// assert_eq!(p.group(3), 9..11);
/// assert_eq!(p.largest(), 3);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GroupSplit {
    ranks: usize,
    groups: usize,
}

/// Where one rank stands in a [`GroupSplit`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Place {
    /// Its group.
    pub group: usize,
    /// Its position in the group (0 for the representative).
    pub index_in_group: usize,
    /// Whether it is its group's representative: the group's first rank.
    pub representative: bool,
}

/// The old name of [`GroupSplit`].
#[deprecated(note = "renamed to GroupSplit")]
pub type Partition = GroupSplit;

/// The old name of [`Place`].
#[deprecated(note = "renamed to Place")]
pub type Site = Place;

impl GroupSplit {
    /// `ranks` split into `min(arity, ranks)` groups; an arity of 0 or 1 gives one group, and no ranks
    /// give no groups.
    pub fn new(ranks: usize, arity: usize) -> GroupSplit {
        let groups = if ranks == 0 { 0 } else { arity.clamp(1, ranks) };
        GroupSplit { ranks, groups }
    }

    /// The number of ranks.
    pub fn ranks(&self) -> usize {
        self.ranks
    }

    /// The number of ranks, by its old name.
    #[deprecated(note = "renamed to ranks")]
    pub fn sites(&self) -> usize {
        self.ranks
    }

    /// The number of groups.
    pub fn len(&self) -> usize {
        self.groups
    }

    /// Whether there are no groups (no ranks).
    pub fn is_empty(&self) -> bool {
        self.groups == 0
    }

    /// The ranks of group `group`.
    ///
    /// # Panics
    /// When `group` is not below [`GroupSplit::len`].
    pub fn group(&self, group: usize) -> Range<usize> {
        assert!(group < self.groups, "group {group} does not exist: there are {} groups", self.groups);
        chunk_start(self.ranks, group, self.groups)..chunk_start(self.ranks, group + 1, self.groups)
    }

    /// Every group's ranks, in order.
    pub fn groups(&self) -> impl Iterator<Item = Range<usize>> + '_ {
        (0..self.groups).map(|g| self.group(g))
    }

    /// The size of the largest group (the first), 0 without ranks.
    pub fn largest(&self) -> usize {
        if self.is_empty() { 0 } else { self.group(0).len() }
    }

    /// Where `rank` stands: its group, its position there, and whether it represents the group.
    ///
    /// # Examples
    /// ```
    /// use kernbench_core::partition::{GroupSplit, Place};
    /// let p = GroupSplit::new(5, 4);
    /// assert_eq!(p.classify(1), Place { group: 0, index_in_group: 1, representative: false });
    /// assert_eq!(p.classify(2), Place { group: 1, index_in_group: 0, representative: true });
    /// ```
    ///
    /// # Panics
    /// When `rank` is not below [`GroupSplit::ranks`].
    pub fn classify(&self, rank: usize) -> Place {
        assert!(rank < self.ranks, "rank {rank} does not exist: there are {} ranks", self.ranks);
        let group = (0..self.groups)
            .find(|&g| rank < chunk_start(self.ranks, g + 1, self.groups))
            .expect("the last group ends at the last rank");
        let index_in_group = rank - chunk_start(self.ranks, group, self.groups);
        Place { group, index_in_group, representative: index_in_group == 0 }
    }
}

/// The top-level groups of `n` ranks for `arity`: see [`GroupSplit::new`].
///
/// # Examples
/// ```
/// use kernbench_core::partition::groups;
/// assert_eq!(groups(5, 4), [0..2, 2..3, 3..4, 4..5]);
/// assert_eq!(groups(3, 8), [0..1, 1..2, 2..3]);
/// ```
pub fn groups(n: usize, arity: usize) -> Vec<Range<usize>> {
    GroupSplit::new(n, arity).groups().collect()
}

/// Where `rank` of `n` stands among the groups for `arity`: see [`GroupSplit::classify`].
///
/// # Examples
/// ```
/// use kernbench_core::partition::classify;
/// let place = classify(10, 11, 4);
/// assert_eq!((place.group, place.index_in_group, place.representative), (3, 1, false));
/// ```
///
/// # Panics
/// When `rank >= n`.
pub fn classify(rank: usize, n: usize, arity: usize) -> Place {
    GroupSplit::new(n, arity).classify(rank)
}
