//! One history played in the synchronous world ([`play`]), drawn or scripted, and the mutants
//! it runs with as the core member's switches ([`mutants`]).

use super::driver::Sim;
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
    let length = shape.length;
    let mut sim = Sim::new(shape, cast, dice);
    sim.mutants = mutants(mutant);
    sim.mutant = mutant;
    match script {
        Some(script) => sim.play_script(script),
        None => sim.play_drawn(),
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
        Some(Mutant::GuardSleeps) | None => {}
    }
    m
}
