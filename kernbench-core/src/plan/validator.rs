//! Validators: whether a tensor's layout fits what an algorithm's kernel expects of its PEs.
//!
//! A kernel reads its PE's shard and nothing else, so a layout that puts data on a PE outside the plan,
//! or leaves a participant without data, would silently compute the wrong thing. Validators turn that
//! into an error before anything runs, naming the PE, what it holds and what was expected.

use crate::machine::PeId;
use crate::names::{Builtin, NamedItem, UnknownName, comma_list, listing, lookup};
use crate::plan::{InstallPlan, Layout};

/// A validator: `Ok` when `layout` fits `plan`.
///
/// # Errors
/// [`ValidationError`] naming the first PE that does not fit.
pub type ValidatorFn = fn(&InstallPlan, &Layout) -> Result<(), ValidationError>;

const TABLE: [Builtin<ValidatorFn>; 4] = [
    Builtin {
        item: NamedItem { name: "single_shard", summary: "one participant per SIP holding the whole SIP tensor" },
        function: single_shard,
    },
    Builtin {
        item: NamedItem {
            name: "multi_pe_sip_local",
            summary: "every participant holds one shard, all of equal length, none elsewhere",
        },
        function: multi_pe_sip_local,
    },
    Builtin {
        item: NamedItem { name: "replicated", summary: "every participant holds a full copy of the SIP tensor" },
        function: replicated,
    },
    Builtin {
        item: NamedItem { name: "any", summary: "shards exactly on the participants, of any length" },
        function: any,
    },
];

/// Every built-in validator, by name, for listings.
pub const VALIDATORS: &[NamedItem] = &listing(&TABLE);

/// The built-in validator called `name`.
///
/// # Errors
/// [`UnknownName`] listing the built-in validators.
pub fn validator_by_name(name: &str) -> Result<Builtin<ValidatorFn>, UnknownName> {
    lookup("validator", &TABLE, name)
}

/// A layout that does not fit a plan. These are the caller's fault: the tensor's [`DpPolicy`] does
/// not match the algorithm's mapper (pick another policy, or an algorithm for this layout).
///
/// [`DpPolicy`]: crate::plan::DpPolicy
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ValidationError {
    /// A SIP with no or several participants, for a validator that needs exactly one.
    #[error(
        "validator `{validator}`: SIP {sip} has {} participating PEs [{}]: expected exactly one (mapper leader_only)",
        participants.len(),
        comma_list(participants)
    )]
    NotOnePerSip {
        /// The validator.
        validator: &'static str,
        /// The SIP.
        sip: u32,
        /// Its participants.
        participants: Vec<PeId>,
    },
    /// A participant without a shard: its kernel would have no data.
    #[error("validator `{validator}`: {pe} takes part in the plan but holds no shard: expected {expected}")]
    MissingShard {
        /// The validator.
        validator: &'static str,
        /// The PE.
        pe: PeId,
        /// What it should hold.
        expected: &'static str,
    },
    /// A shard on a PE that does not take part: no kernel would read it.
    #[error(
        "validator `{validator}`: {pe} holds a shard of {elements} elements but does not take part in the plan \
         (mapper `{mapper}`): expected shards only on participating PEs"
    )]
    ShardOffParticipant {
        /// The validator.
        validator: &'static str,
        /// The PE.
        pe: PeId,
        /// Elements it holds.
        elements: usize,
        /// The plan's mapper.
        mapper: String,
    },
    /// A shard of the wrong size.
    #[error("validator `{validator}`: {pe} holds {elements} elements: expected {expected} ({what})")]
    WrongLength {
        /// The validator.
        validator: &'static str,
        /// The PE.
        pe: PeId,
        /// Elements it holds.
        elements: usize,
        /// Elements expected.
        expected: usize,
        /// What was expected: `the whole SIP tensor`.
        what: &'static str,
    },
    /// Shards of different lengths where every kernel sends the same length.
    #[error(
        "validator `{validator}`: {pe} holds {elements} elements but {reference} holds {reference_elements}: \
         expected shards of equal length"
    )]
    UnequalShards {
        /// The validator.
        validator: &'static str,
        /// The PE whose shard differs.
        pe: PeId,
        /// Elements it holds.
        elements: usize,
        /// The first participant.
        reference: PeId,
        /// Elements the first participant holds.
        reference_elements: usize,
    },
}

/// Checks that shards sit exactly on the participants, and returns `(pe, elements)` per participant.
/// A shard off the participants is named before a participant without one; of several, the first in
/// `PeId` order.
fn on_participants(
    validator: &'static str,
    expected: &'static str,
    plan: &InstallPlan,
    layout: &Layout,
) -> Result<Vec<(PeId, usize)>, ValidationError> {
    // The participants in `PeId` order, as a checked plan already lists them, and the shards (a map in
    // that order) are walked side by side: no set of a million participants.
    let mut participants: Vec<PeId> = plan.participants().map(|p| p.pe).collect();
    if !participants.is_sorted_by(|a, b| a < b) {
        participants.sort_unstable();
        participants.dedup();
    }
    let off = |(&pe, &elements): (&PeId, &usize)| ValidationError::ShardOffParticipant {
        validator,
        pe,
        elements,
        mapper: plan.mapper.clone(),
    };
    let mut shards = layout.shards.iter().peekable();
    let (mut held, mut missing) = (Vec::with_capacity(participants.len()), None);
    for pe in participants {
        if let Some(shard) = shards.next_if(|&(&at, _)| at < pe) {
            return Err(off(shard));
        }
        match shards.next_if(|&(&at, _)| at == pe) {
            Some((_, &elements)) => held.push((pe, elements)),
            None => {
                missing.get_or_insert(pe);
            }
        }
    }
    if let Some(shard) = shards.next() {
        return Err(off(shard));
    }
    match missing {
        Some(pe) => Err(ValidationError::MissingShard { validator, pe, expected }),
        None => Ok(held),
    }
}

fn whole_tensor(validator: &'static str, held: &[(PeId, usize)], layout: &Layout) -> Result<(), ValidationError> {
    let expected = layout.sip_elements();
    match held.iter().find(|&&(_, elements)| elements != expected) {
        Some(&(pe, elements)) => {
            Err(ValidationError::WrongLength { validator, pe, elements, expected, what: "the whole SIP tensor" })
        }
        None => Ok(()),
    }
}

/// Exactly one participating PE per SIP, holding the whole SIP tensor, and nothing elsewhere (the
/// layout of [`DpPolicy::LEADER`](crate::plan::DpPolicy::LEADER) with mapper `leader_only`).
///
/// # Errors
/// [`ValidationError::NotOnePerSip`], [`ValidationError::ShardOffParticipant`],
/// [`ValidationError::MissingShard`] or [`ValidationError::WrongLength`].
pub fn single_shard(plan: &InstallPlan, layout: &Layout) -> Result<(), ValidationError> {
    const NAME: &str = "single_shard";
    if let Some(sip) = plan.sips.iter().find(|s| s.pes.len() != 1) {
        return Err(ValidationError::NotOnePerSip {
            validator: NAME,
            sip: sip.sip,
            participants: sip.pes.iter().map(|p| p.pe).collect(),
        });
    }
    let held = on_participants(NAME, "the whole SIP tensor", plan, layout)?;
    whole_tensor(NAME, &held, layout)
}

/// Every participating PE holds one shard, all shards have the same length, and no shard lives on a
/// PE outside the plan: the layout of the hierarchical all-reduce, where every PE holds one tile.
///
/// # Errors
/// [`ValidationError::ShardOffParticipant`], [`ValidationError::MissingShard`] or
/// [`ValidationError::UnequalShards`].
///
/// # Examples
/// ```
/// use std::collections::BTreeMap;
/// use kernbench_core::{Dtype, InstallPlan, Layout, PeId, System, ValidationError, multi_pe_sip_local};
/// let system = System::shape(2, 1, 1, 4).unwrap();
/// let plan = InstallPlan::build(&system, "hierarchical_3level", "all_pes").unwrap();
/// // One shard per SIP, as leader_only would have it.
/// let shards = BTreeMap::from([(PeId::new(0, 0, 0), 64), (PeId::new(1, 0, 0), 64)]);
/// let layout = Layout { dtype: Dtype::F32, rows: 1, cols: 64, shards };
/// let err = multi_pe_sip_local(&plan, &layout).unwrap_err();
/// assert!(matches!(err, ValidationError::MissingShard { pe, .. } if pe == PeId::new(0, 0, 1)));
/// ```
pub fn multi_pe_sip_local(plan: &InstallPlan, layout: &Layout) -> Result<(), ValidationError> {
    const NAME: &str = "multi_pe_sip_local";
    let held = on_participants(NAME, "one shard per participating PE", plan, layout)?;
    let Some(&(reference, reference_elements)) = held.first() else {
        return Ok(());
    };
    match held.iter().find(|&&(_, elements)| elements != reference_elements) {
        Some(&(pe, elements)) => {
            Err(ValidationError::UnequalShards { validator: NAME, pe, elements, reference, reference_elements })
        }
        None => Ok(()),
    }
}

/// Every participating PE holds a full copy of its SIP's tensor, and nothing lives elsewhere.
///
/// # Errors
/// [`ValidationError::ShardOffParticipant`], [`ValidationError::MissingShard`] or
/// [`ValidationError::WrongLength`].
pub fn replicated(plan: &InstallPlan, layout: &Layout) -> Result<(), ValidationError> {
    const NAME: &str = "replicated";
    let held = on_participants(NAME, "a full copy of the SIP tensor", plan, layout)?;
    whole_tensor(NAME, &held, layout)
}

/// Shards sit exactly on the participants, whatever their lengths.
///
/// # Errors
/// [`ValidationError::ShardOffParticipant`] or [`ValidationError::MissingShard`].
pub fn any(plan: &InstallPlan, layout: &Layout) -> Result<(), ValidationError> {
    on_participants("any", "a shard", plan, layout).map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine::System;

    #[test]
    fn a_shard_off_the_participants_is_named_before_a_participant_without_one() {
        let system = System::shape(2, 1, 1, 4).unwrap();
        let plan = InstallPlan::build(&system, "ring_1d", "leader_only").unwrap();
        let layout = |shards: &[(PeId, usize)]| Layout {
            dtype: crate::Dtype::F32,
            rows: 1,
            cols: 8,
            shards: shards.iter().copied().collect(),
        };
        let (leader, other) = (PeId::new(0, 0, 0), PeId::new(1, 0, 0));
        let check = |shards: &[(PeId, usize)]| on_participants("test", "a shard", &plan, &layout(shards));
        assert_eq!(check(&[(leader, 8), (other, 8)]).unwrap(), [(leader, 8), (other, 8)]);
        // SIP 0's leader has no shard, and two PEs off the plan have one: the first of those is named.
        let err = check(&[(PeId::new(1, 0, 3), 8), (PeId::new(0, 0, 2), 8), (other, 8)]).unwrap_err();
        assert!(matches!(err, ValidationError::ShardOffParticipant { pe, .. } if pe == PeId::new(0, 0, 2)), "{err}");
        // After the last participant too.
        let err = check(&[(leader, 8), (other, 8), (PeId::new(1, 0, 1), 8)]).unwrap_err();
        assert!(matches!(err, ValidationError::ShardOffParticipant { pe, .. } if pe == PeId::new(1, 0, 1)), "{err}");
        // Of two participants without one, the first.
        let err = check(&[]).unwrap_err();
        assert!(matches!(err, ValidationError::MissingShard { pe, .. } if pe == leader), "{err}");
    }
}
