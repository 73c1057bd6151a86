//! Per-pair element counts of an uneven exchange: who sends how many elements to whom in an
//! all-to-all-v or a group of sends and receives. Uses nothing of ours, so the collectives' postconditions
//! and the kernels' `tl` read the same table.
//!
//! Rank `r`'s input holds what it sends, to rank 0 first, then rank 1, and so on; its output holds
//! what it receives, from rank 0 first. An input may hold more than its rank sends: the rest is not sent.

use std::fmt;

/// One point-to-point transfer of a group of sends and receives: `from` sends `count` elements to `to`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Transfer {
    /// The sending rank.
    pub from: usize,
    /// The receiving rank.
    pub to: usize,
    /// How many elements.
    pub count: usize,
}

/// Why counts were refused: each names the rank or pair at fault and what would be valid.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CountsError {
    /// Not one row of counts per rank.
    #[error("row {row} of the counts has {got} counts for {ranks} ranks: expected one count per rank")]
    RowLength {
        /// The row (the sending rank).
        row: usize,
        /// Counts in it.
        got: usize,
        /// The ranks (rows).
        ranks: usize,
    },
    /// Counts for another number of ranks than the call has.
    #[error("the counts are for {counts} ranks but the call has {ranks}: expected a {ranks} x {ranks} table")]
    Ranks {
        /// Ranks the counts are for.
        counts: usize,
        /// Ranks of the call.
        ranks: usize,
    },
    /// A transfer from or to a rank the call does not have.
    #[error("transfer {index} ({from} -> {to}) names rank {rank}, which is not in the run: expected 0..{ranks}")]
    RankOutOfRange {
        /// The transfer's place in the list.
        index: usize,
        /// Its sender.
        from: usize,
        /// Its receiver.
        to: usize,
        /// The rank out of range.
        rank: usize,
        /// The ranks.
        ranks: usize,
    },
    /// Two transfers of one pair: each pair sends at most once in a group.
    #[error("transfers {first} and {second} both send from rank {from} to rank {to}: expected each pair at most once")]
    DuplicatePair {
        /// The earlier transfer's place.
        first: usize,
        /// The later one's.
        second: usize,
        /// The sender.
        from: usize,
        /// The receiver.
        to: usize,
    },
    /// A rank sends more than its input holds.
    #[error("rank {rank} sends {sends} elements but its input holds {holds}: expected at most {holds}")]
    TooMany {
        /// The rank.
        rank: usize,
        /// What its counts send.
        sends: usize,
        /// Its input's length.
        holds: usize,
    },
    /// A total that does not fit in memory's address space.
    #[error("rank {rank}'s counts add up past {}: expected totals a buffer can hold", usize::MAX)]
    Overflow {
        /// The rank whose total overflows.
        rank: usize,
    },
}

/// The elements each rank sends to each rank, with the offsets they start at in the sender's input and
/// in the receiver's output.
///
/// # Examples
/// ```
/// use kernbench_core::counts::Counts;
/// let counts = Counts::new(vec![vec![1, 0, 2], vec![3, 1, 0], vec![0, 4, 1]]).unwrap();
/// assert_eq!(counts.count(1, 0), 3);
/// assert_eq!((counts.sent_by(0), counts.received_by(1)), (3, 5));
/// // Rank 2's output: 2 elements from rank 0, none from rank 1, then 1 from itself.
/// assert_eq!((counts.recv_offset(2, 0), counts.recv_offset(2, 2)), (0, 2));
/// assert_eq!(counts.send_offset(0, 2), 1);
/// ```
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Counts {
    ranks: usize,
    /// Row-major: `counts[from * ranks + to]`.
    counts: Vec<usize>,
    /// Where `from`'s elements for `to` start in `from`'s input, at `[from * ranks + to]`.
    send_offsets: Vec<usize>,
    /// Where `to`'s elements from `from` start in `to`'s output, at `[to * ranks + from]`.
    recv_offsets: Vec<usize>,
}

impl Counts {
    /// Counts from one row per sending rank, each with one count per receiving rank.
    ///
    /// # Errors
    /// [`CountsError::RowLength`] for a row of another length than the number of rows,
    /// [`CountsError::Overflow`] for totals past `usize::MAX`.
    pub fn new(rows: Vec<Vec<usize>>) -> Result<Counts, CountsError> {
        let ranks = rows.len();
        if let Some((row, r)) = rows.iter().enumerate().find(|(_, r)| r.len() != ranks) {
            return Err(CountsError::RowLength { row, got: r.len(), ranks });
        }
        Counts::from_flat(ranks, rows.into_iter().flatten().collect())
    }

    /// The counts of a group of point-to-point `transfers` among `ranks` ranks; pairs not listed send
    /// nothing.
    ///
    /// # Errors
    /// [`CountsError::RankOutOfRange`] for a transfer naming a rank outside `0..ranks`,
    /// [`CountsError::DuplicatePair`] for a pair listed twice, [`CountsError::Overflow`].
    ///
    /// # Examples
    /// ```
    /// use kernbench_core::counts::{Counts, Transfer};
    /// let counts = Counts::from_transfers(4, &[Transfer { from: 0, to: 3, count: 8 }]).unwrap();
    /// assert_eq!((counts.count(0, 3), counts.sent_by(1)), (8, 0));
    /// let err = Counts::from_transfers(4, &[Transfer { from: 0, to: 4, count: 8 }]).unwrap_err();
    /// assert_eq!(err.to_string(), "transfer 0 (0 -> 4) names rank 4, which is not in the run: expected 0..4");
    /// ```
    pub fn from_transfers(ranks: usize, transfers: &[Transfer]) -> Result<Counts, CountsError> {
        let mut flat = vec![0; ranks * ranks];
        let mut listed: Vec<Option<usize>> = vec![None; ranks * ranks];
        for (index, &Transfer { from, to, count }) in transfers.iter().enumerate() {
            if let Some(rank) = [from, to].into_iter().find(|&r| r >= ranks) {
                return Err(CountsError::RankOutOfRange { index, from, to, rank, ranks });
            }
            if let Some(first) = listed[from * ranks + to].replace(index) {
                return Err(CountsError::DuplicatePair { first, second: index, from, to });
            }
            flat[from * ranks + to] = count;
        }
        Counts::from_flat(ranks, flat)
    }

    /// nccl-tests' `sendrecv` pattern: each rank sends `count` elements to rank + 1 and receives as
    /// many from rank - 1, around the ranks.
    ///
    /// # Examples
    /// ```
    /// use kernbench_core::counts::Counts;
    /// let shift = Counts::shift(3, 5);
    /// assert_eq!((shift.count(2, 0), shift.count(0, 1), shift.count(1, 0)), (5, 5, 0));
    /// ```
    pub fn shift(ranks: usize, count: usize) -> Counts {
        let mut flat = vec![0; ranks * ranks];
        for from in 0..ranks {
            flat[from * ranks + (from + 1) % ranks] = count;
        }
        Counts::from_flat(ranks, flat).expect("each rank sends `count` once, which fits")
    }

    /// Uneven counts drawn from `seed`: each rank sends `per_rank` elements in all, split over the ranks
    /// by random weights, and (from 3 ranks on) sends nothing to at least one rank other than itself.
    /// The same seed gives the same counts.
    ///
    /// # Examples
    /// ```
    /// use kernbench_core::counts::Counts;
    /// let counts = Counts::seeded(8, 1000, 7);
    /// assert!((0..8).all(|r| counts.sent_by(r) == 1000));
    /// assert!((0..8).all(|r| (0..8).any(|j| j != r && counts.count(r, j) == 0)));
    /// assert_eq!(counts, Counts::seeded(8, 1000, 7));
    /// assert_ne!(counts, Counts::seeded(8, 1000, 8));
    /// ```
    pub fn seeded(ranks: usize, per_rank: usize, seed: u64) -> Counts {
        let mut state = seed;
        let mut flat = Vec::with_capacity(ranks * ranks);
        for from in 0..ranks {
            let mut weights: Vec<u64> = (0..ranks).map(|_| 1 + splitmix(&mut state) % 16).collect();
            // About one pair in four sends nothing, and one fixed pair per row always, as MoE routing
            // leaves experts idle.
            for w in weights.iter_mut() {
                if splitmix(&mut state) % 4 == 0 {
                    *w = 0;
                }
            }
            if ranks >= 3 {
                let skip = 1 + (splitmix(&mut state) as usize) % (ranks - 1);
                weights[(from + skip) % ranks] = 0;
            }
            if weights.iter().all(|&w| w == 0) {
                weights[from] = 1;
            }
            flat.extend(split(per_rank, &weights));
        }
        Counts::from_flat(ranks, flat).expect("each row adds up to `per_rank`")
    }

    fn from_flat(ranks: usize, counts: Vec<usize>) -> Result<Counts, CountsError> {
        let mut send_offsets = vec![0; ranks * ranks];
        let mut recv_offsets = vec![0; ranks * ranks];
        for from in 0..ranks {
            let mut at = 0usize;
            for to in 0..ranks {
                send_offsets[from * ranks + to] = at;
                at = at.checked_add(counts[from * ranks + to]).ok_or(CountsError::Overflow { rank: from })?;
            }
        }
        for to in 0..ranks {
            let mut at = 0usize;
            for from in 0..ranks {
                recv_offsets[to * ranks + from] = at;
                at = at.checked_add(counts[from * ranks + to]).ok_or(CountsError::Overflow { rank: to })?;
            }
        }
        Ok(Counts { ranks, counts, send_offsets, recv_offsets })
    }

    /// The number of ranks.
    pub fn ranks(&self) -> usize {
        self.ranks
    }

    /// The elements `from` sends to `to`.
    ///
    /// # Panics
    /// When either is not a rank.
    pub fn count(&self, from: usize, to: usize) -> usize {
        assert!(from < self.ranks && to < self.ranks, "({from}, {to}) is not a pair of ranks 0..{}", self.ranks);
        self.counts[from * self.ranks + to]
    }

    /// Where `from`'s elements for `to` start in `from`'s input.
    ///
    /// # Panics
    /// When either is not a rank.
    pub fn send_offset(&self, from: usize, to: usize) -> usize {
        assert!(from < self.ranks && to < self.ranks, "({from}, {to}) is not a pair of ranks 0..{}", self.ranks);
        self.send_offsets[from * self.ranks + to]
    }

    /// Where `to`'s elements from `from` start in `to`'s output.
    ///
    /// # Panics
    /// When either is not a rank.
    pub fn recv_offset(&self, to: usize, from: usize) -> usize {
        assert!(from < self.ranks && to < self.ranks, "({from}, {to}) is not a pair of ranks 0..{}", self.ranks);
        self.recv_offsets[to * self.ranks + from]
    }

    /// The elements `rank` sends in all.
    pub fn sent_by(&self, rank: usize) -> usize {
        self.counts[rank * self.ranks..(rank + 1) * self.ranks].iter().sum()
    }

    /// The elements `rank` receives in all: the length of its output.
    pub fn received_by(&self, rank: usize) -> usize {
        (0..self.ranks).map(|from| self.counts[from * self.ranks + rank]).sum()
    }

    /// The most any rank receives.
    pub fn most_received(&self) -> usize {
        (0..self.ranks).map(|r| self.received_by(r)).max().unwrap_or(0)
    }

    /// Checks the counts against a call's inputs: one row per input, and no rank sending more than its
    /// input holds.
    ///
    /// # Errors
    /// [`CountsError::Ranks`] or [`CountsError::TooMany`].
    pub fn fit(&self, input_lengths: &[usize]) -> Result<(), CountsError> {
        if input_lengths.len() != self.ranks {
            return Err(CountsError::Ranks { counts: self.ranks, ranks: input_lengths.len() });
        }
        match input_lengths.iter().enumerate().find(|&(rank, &holds)| self.sent_by(rank) > holds) {
            Some((rank, &holds)) => Err(CountsError::TooMany { rank, sends: self.sent_by(rank), holds }),
            None => Ok(()),
        }
    }
}

impl fmt::Debug for Counts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let rows: Vec<&[usize]> = self.counts.chunks(self.ranks.max(1)).collect();
        f.debug_tuple("Counts").field(&rows).finish()
    }
}

/// SplitMix64's next value.
fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// `total` split in proportion to `weights` (not all zero): whole shares rounded down, the rest one
/// each to the weighted entries in order, so the parts add up to `total` and a zero weight gets zero.
fn split(total: usize, weights: &[u64]) -> Vec<usize> {
    let sum: u128 = weights.iter().map(|&w| u128::from(w)).sum();
    let mut parts: Vec<usize> = weights.iter().map(|&w| (total as u128 * u128::from(w) / sum) as usize).collect();
    let mut rest = total - parts.iter().sum::<usize>();
    let weighted: Vec<usize> = (0..weights.len()).filter(|&j| weights[j] > 0).collect();
    for &j in weighted.iter().cycle() {
        if rest == 0 {
            break;
        }
        parts[j] += 1;
        rest -= 1;
    }
    parts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeded_rows_add_up_whatever_the_size() {
        for (ranks, per_rank) in [(1, 5), (2, 0), (3, 1), (8, 7), (64, 1 << 20)] {
            let counts = Counts::seeded(ranks, per_rank, 42);
            for r in 0..ranks {
                assert_eq!(counts.sent_by(r), per_rank, "{ranks} ranks, rank {r}");
            }
        }
    }

    #[test]
    fn offsets_are_running_totals() {
        let counts = Counts::seeded(8, 100, 3);
        for r in 0..8 {
            let mut at = 0;
            for j in 0..8 {
                assert_eq!(counts.recv_offset(r, j), at);
                at += counts.count(j, r);
            }
            assert_eq!(at, counts.received_by(r));
        }
    }

    #[test]
    fn bad_counts_are_named() {
        let err = Counts::new(vec![vec![1, 2], vec![3]]).unwrap_err();
        assert_eq!(err.to_string(), "row 1 of the counts has 1 counts for 2 ranks: expected one count per rank");
        let twice = [Transfer { from: 1, to: 0, count: 2 }, Transfer { from: 1, to: 0, count: 3 }];
        let err = Counts::from_transfers(2, &twice).unwrap_err();
        assert!(err.to_string().contains("transfers 0 and 1 both send from rank 1 to rank 0"), "{err}");
        let err = Counts::new(vec![vec![usize::MAX, 1], vec![0, 0]]).unwrap_err();
        assert_eq!(err, CountsError::Overflow { rank: 0 });
        let counts = Counts::shift(2, 4);
        assert_eq!(counts.fit(&[4, 3]), Err(CountsError::TooMany { rank: 1, sends: 4, holds: 3 }));
        assert_eq!(counts.fit(&[4, 4, 4]), Err(CountsError::Ranks { counts: 2, ranks: 3 }));
        assert_eq!(counts.fit(&[4, 9]), Ok(()));
    }
}
