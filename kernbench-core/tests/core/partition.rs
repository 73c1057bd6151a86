//! Top-level groups of hierarchical collectives, against a hand-written table and over every small
//! rank count and arity.

use kernbench_core::partition::{GroupSplit, Place, classify, groups};

/// `(n, arity, group sizes)`: balanced splits, and unbalanced ones (11 ranks in 4 groups, and the
/// singleton groups of N = 5).
const TABLE: &[(usize, usize, &[usize])] =
    &[(8, 2, &[4, 4]), (16, 4, &[4, 4, 4, 4]), (11, 4, &[3, 3, 3, 2]), (5, 4, &[2, 1, 1, 1])];

#[test]
fn groups_follow_the_table() {
    for &(n, arity, sizes) in TABLE {
        let got = groups(n, arity);
        assert_eq!(got.iter().map(|g| g.len()).collect::<Vec<_>>(), sizes, "n = {n}, arity {arity}");
        assert_eq!(got.first().map(|g| g.start), Some(0), "n = {n}, arity {arity}");
        assert_eq!(got.last().map(|g| g.end), Some(n), "n = {n}, arity {arity}");
    }
}

#[test]
fn every_site_is_classified_as_the_table_says() {
    for &(n, arity, sizes) in TABLE {
        let mut rank = 0;
        for (group, &size) in sizes.iter().enumerate() {
            for index_in_group in 0..size {
                let want = Place { group, index_in_group, representative: index_in_group == 0 };
                assert_eq!(classify(rank, n, arity), want, "rank {rank} of n = {n}, arity {arity}");
                rank += 1;
            }
        }
    }
}

#[test]
fn the_worked_example_has_representatives_0_3_6_9() {
    let reps: Vec<usize> = (0..11).filter(|&s| classify(s, 11, 4).representative).collect();
    assert_eq!(reps, [0, 3, 6, 9]);
    assert_eq!(GroupSplit::new(11, 4).largest(), 3);
}

#[test]
fn an_arity_above_the_site_count_gives_one_site_per_group_never_an_empty_group() {
    assert_eq!(groups(3, 8), [0..1, 1..2, 2..3]);
    let one = GroupSplit::new(1, 4);
    assert_eq!((one.len(), one.group(0)), (1, 0..1));
}

#[test]
fn arity_zero_or_one_gives_one_group_and_no_sites_give_none() {
    for arity in [0, 1] {
        let p = GroupSplit::new(7, arity);
        assert_eq!((p.len(), p.group(0)), (1, 0..7), "arity {arity}");
    }
    assert!(groups(0, 4).is_empty());
    assert!(GroupSplit::new(0, 4).is_empty());
    assert_eq!(GroupSplit::new(0, 4).largest(), 0);
}

/// Contiguous, covering, sizes within one of each other with the bigger first, `min(arity, n)` groups,
/// and `classify` agreeing with `groups` for every rank.
#[test]
fn every_small_partition_is_near_equal_contiguous_and_agrees_with_classify() {
    for n in 1..=40 {
        for arity in 0..=45 {
            let p = GroupSplit::new(n, arity);
            let gs = groups(n, arity);
            assert_eq!(gs.len(), arity.clamp(1, n), "n = {n}, arity {arity}");
            assert_eq!(p.len(), gs.len());
            let mut next = 0;
            for (g, range) in gs.iter().enumerate() {
                assert_eq!(range.start, next, "n = {n}, arity {arity}: group {g} is not contiguous");
                assert!(!range.is_empty(), "n = {n}, arity {arity}: group {g} is empty");
                assert!(range.len() <= gs[0].len() && gs[0].len() - range.len() <= 1, "n = {n}, arity {arity}");
                if g > 0 {
                    assert!(range.len() <= gs[g - 1].len(), "n = {n}, arity {arity}: a bigger group after a smaller");
                }
                for rank in range.clone() {
                    let s = p.classify(rank);
                    assert_eq!(
                        (s.group, s.index_in_group),
                        (g, rank - range.start),
                        "rank {rank}, n = {n}, arity {arity}"
                    );
                    assert_eq!(s.representative, rank == range.start);
                }
                next = range.end;
            }
            assert_eq!(next, n, "n = {n}, arity {arity}: the groups do not cover the ranks");
            assert_eq!(p.largest(), gs[0].len());
        }
    }
}

#[test]
#[should_panic(expected = "rank 5 does not exist: there are 5 ranks")]
fn classifying_a_site_past_the_end_panics_naming_it() {
    classify(5, 5, 2);
}
