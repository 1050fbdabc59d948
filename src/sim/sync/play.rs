//! One history played in the synchronous world ([`play`]), drawn or scripted, and the mutants
//! it runs with as the core member's switches ([`mutants`]).

use super::driver::Sim;
use super::state::Replicas;
use crate::mutant::Mutant;
use crate::sim::dice::{Dice, Stream};
use crate::sim::director::draw_cast;
use crate::sim::schedule::Schedule;
use crate::sim::trace::Event;
use crate::sim::world::{Cast, Shape};
use leasehold_core::member::Mutants;

/// Plays the history of `shape` with `mutant` switched on, drawn or as `script` says: its
/// trace, and the group's slots.
pub(crate) fn play(
    shape: Shape,
    mutant: Option<Mutant>,
    script: Option<&Schedule>,
) -> (Vec<Event>, u32) {
    let dice = Dice::new(shape.seed, Stream::Director);
    let cast = match script {
        Some(s) => Cast {
            slots: s.slots,
            members: s.cast(),
            plans: s.plans(),
            ppm: 0,
            brand_new: false,
        },
        None => draw_cast(&dice, shape.seed, shape.members),
    };
    let mut cast = cast;
    if shape.replicas > 1 {
        // A set leads one slot (`check` refuses slots with replicas), its blobs there before
        // its first member, stamped.
        (cast.slots, cast.brand_new) = (1, false);
    }
    // The stamps of blobs created on a replica draw their ids from the thread's source.
    fastrand::seed(shape.seed);
    let length = shape.length;
    let (n, members) = (shape.replicas, shape.members);
    let mut sim = Sim::new(shape, cast, dice);
    if n > 1 {
        let calm_from = sim.t0 + length - sim.shape.final_calm;
        let replicas = Replicas::new(sim.shape.seed, n, members, &sim.store, calm_from);
        sim.replicas = Some(Box::new(replicas));
    }
    sim.mutants = mutants(mutant);
    sim.mutant = mutant;
    match script {
        Some(script) => sim.play_script(script),
        None => {
            sim.play_drawn();
            sim.regions_begin();
        }
    }
    sim.run_until(length);
    (sim.recorder.take_events(), sim.slots)
}

/// `mutant` as the core member's switches (docs/testing.md, "The simulator"); the guard's
/// (`guard-sleeps`) is the world's, which its guards' rules read.
pub(super) fn mutants(mutant: Option<Mutant>) -> Mutants {
    let mut m = Mutants::default();
    match mutant {
        Some(Mutant::DeadlineFromAnswer) => {
            m.campaign.attempt.deadline_from_answer = true;
            m.leading.holder.deadline_from_answer = true;
        }
        Some(Mutant::StartBeforeEpoch) => m.campaign.attempt.start_before_epoch = true,
        Some(Mutant::LeadOnTheReservation) => m.campaign.attempt.lead_on_the_reservation = true,
        Some(Mutant::TrustTheNotice) => m.campaign.trust_the_notice = true,
        Some(Mutant::WatcherStays) => m.campaign.watcher_stays = true,
        Some(Mutant::ChangeBeforeGone) => m.leading.preparation.change_before_gone = true,
        Some(Mutant::HopWaitsOutRefusal) => m.leading.handoff.hop_waits_out_refusal = true,
        Some(Mutant::ReleaseTheStuck) => m.terms.release_the_stuck = true,
        Some(Mutant::NoCrashBackoff) => m.terms.no_crash_backoff = true,
        Some(Mutant::SlotRefillLate) => m.refill_late = true,
        Some(Mutant::CreateUnmarked) => m.create_unmarked = true,
        Some(Mutant::BrandNewSlotDelayed) => m.brand_new_slot_delayed = true,
        Some(Mutant::MinorityLeads) => {
            m.campaign.quorum.minority_leads = true;
            m.leading.holder.minority_leads = true;
        }
        Some(Mutant::DeadlineFromLatest) => {
            m.campaign.quorum.deadline_from_latest = true;
            m.leading.holder.deadline_from_latest = true;
        }
        Some(Mutant::EpochFromOne) => m.campaign.quorum.epoch_from_one = true,
        Some(Mutant::NoReplicaLockDelay) => m.campaign.quorum.no_replica_lock_delay = true,
        Some(Mutant::CountUnknownOutcome) => {
            m.campaign.quorum.count_unknown_outcome = true;
            m.leading.holder.count_unknown_outcome = true;
        }
        Some(Mutant::GuardSleeps) | None => {}
    }
    m
}
