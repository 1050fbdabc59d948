//! Whole-member scenarios of what a shell lives through around its member: a refusal of the
//! credentials before storage ever accepted them and after (in this member, or in an earlier
//! one of the process); what the member says for the shell to log and show (its rest's end,
//! a shutdown while it follows, a reserved epoch's write, a release not confirmed).

use super::lifetime::{Fails, Out, Req, Run, Store, acquire, settings};
use super::*;
use crate::exchange::Send;
use crate::failure::Failure;
use crate::term::TermEnd;

fn ended(o: &Out) -> bool {
    matches!(o, Output::End(_))
}

/// It follows a leader it read.
fn following(o: &Out) -> bool {
    matches!(
        o,
        Output::Say(Say::Campaign(crate::campaign::Say::Candidate(
            crate::candidate::Note::Following
        )))
    )
}

/// Storage refuses the credentials before it ever accepted them: the member ends with the
/// refusal (exit 3), after it left the line.
#[test]
fn a_refusal_before_any_acceptance_ends_the_member() {
    let (mut run, mut store) = (Run::new(), Store::of("a"));
    store.refuses = true;
    run.step(Input::Start);
    assert!(run.until(&mut store, ended), "{:#?}", run.said);
    assert!(
        matches!(
            run.said.last(),
            Some(Output::End(Err(Fails(Failure::Denied))))
        ),
        "{:#?}",
        run.said.last()
    );
    assert_eq!(run.sent(acquire), 1, "not retried");
}

/// Storage accepted the credentials in an earlier member of the process (a session before a
/// SIGTSTP): a refusal now is a rotated key or an expired SAS, retried as any fault, and the
/// member leads once storage accepts them again.
#[test]
fn a_refusal_after_an_earlier_session_was_accepted_is_retried() {
    let mut run = Run::of(Settings {
        authorized: true,
        ..settings()
    });
    let mut store = Store::of("a");
    store.refuses = true;
    run.step(Input::Start);
    let t = run.now + Duration::from_secs(30);
    while run.now < t {
        assert!(run.until(&mut store, |o| matches!(o, Output::Send(_))));
    }
    assert!(!run.said.iter().any(ended), "{:#?}", run.said);
    assert!(run.sent(acquire) > 1, "retried");
    store.refuses = false;
    assert!(run.until(&mut store, |o| matches!(o, Output::StartBody(_))));
    assert!(run.m.known().authorized);
}

/// A member whose acquire storage accepted knows it: what its shell hands the next member
/// of the process.
#[test]
fn an_accepted_acquire_proves_the_credentials() {
    let (run, _store) = super::lifetime::leading();
    assert!(run.m.known().authorized);
    let fresh = Run::new();
    assert!(!fresh.m.known().authorized, "not before");
}

/// A rest that kept the member out of the election (a health step-down's cooldown) ends with
/// the member saying so, once, before its campaign's first request; a yield after a release
/// says nothing, and neither does a rest that a shutdown ends.
#[test]
fn the_end_of_a_rest_is_said_before_the_campaign_goes_on() {
    let rested = |o: &Out| matches!(o, Output::Rested);
    let cooldown = Duration::from_secs(600);
    let (mut run, mut store) = super::lifetime::leading();
    super::lifetime::ended(&mut run, &mut store, TermEnd::Unhealthy { cooldown });
    let rest = run.said.len();
    assert!(run.until(&mut store, |o| matches!(o, Output::AskBody)));
    let after = &run.said[rest..];
    assert_eq!(after.iter().filter(|o| rested(o)).count(), 1, "{after:#?}");
    let at = after.iter().position(rested).unwrap();
    let campaign = |o: &Out| {
        matches!(
            o,
            Output::Send(Send {
                request: Req::Campaign(_),
                ..
            })
        )
    };
    assert!(!after[..at].iter().any(campaign), "{after:#?}");
    assert!(run.now >= run.t0 + cooldown, "after the cooldown");

    let (mut run, mut store) = super::lifetime::leading();
    super::lifetime::ended(&mut run, &mut store, TermEnd::Released);
    assert!(run.until(&mut store, |o| matches!(o, Output::AskBody)));
    assert!(!run.said.iter().any(rested), "a yield is no rest");

    let (mut run, mut store) = super::lifetime::leading();
    super::lifetime::ended(&mut run, &mut store, TermEnd::Unhealthy { cooldown });
    run.step(Input::Shutdown);
    assert!(run.until(&mut store, ended));
    assert!(!run.said.iter().any(rested), "shut down while resting");
}

/// A member that follows is stopped by a shutdown as a follower, and says so; a leader's
/// shutdown does not say it.
#[test]
fn a_shutdown_while_following_is_said() {
    let stopped = |o: &Out| matches!(o, Output::Say(Say::StoppedFollowing));
    let mut store = Store::of("a");
    store
        .records
        .insert(0, crate::testing::record("z", 0, 0, true));
    (store.blob.leased, store.blob.named, store.held) = (true, Some("z".into()), true);
    let mut run = Run::new();
    run.step(Input::Start);
    assert!(run.until(&mut store, following), "{:#?}", run.said);
    run.step(Input::Shutdown);
    assert!(run.until(&mut store, ended), "{:#?}", run.said);
    assert_eq!(run.said.iter().filter(|o| stopped(o)).count(), 1);

    let (mut run, mut store) = super::lifetime::leading();
    run.step(Input::Shutdown);
    run.step(Input::BodyGone(TermEnd::Shutdown));
    assert!(run.until(&mut store, ended), "{:#?}", run.said);
    assert!(!run.said.iter().any(stopped), "it led");
}

/// The write of the epoch a handoff reserved is said with its answer, written or not; a
/// term's release storage did not confirm is said with its error.
#[test]
fn a_reserved_write_and_an_unconfirmed_release_are_said() {
    for fails in [false, true] {
        let (mut run, mut store) = (Run::new(), Store::of("a"));
        store.fails = fails;
        store
            .records
            .insert(0, crate::testing::record("z", 0, 0, true));
        (store.blob.leased, store.blob.named, store.held) = (true, Some("z".into()), true);
        run.step(Input::Start);
        assert!(run.until(&mut store, following), "{:#?}", run.said);
        store.held = false;
        run.step(Input::Wake {
            token_matches: true,
            handoff: Some("90 e0".into()),
        });
        assert!(run.until(&mut store, super::lifetime::body_started));
        let said: Vec<_> = (run.said.iter())
            .filter_map(|o| match o {
                Output::Say(Say::Reserved { epoch, failed }) => Some((*epoch, failed.clone())),
                _ => None,
            })
            .collect();
        let failed = fails.then_some(Fails(Failure::Transient));
        assert_eq!(said, [(90, failed)], "{fails}");
    }
    // A lone leader's release at shutdown that storage does not confirm.
    let (mut run, mut store) = super::lifetime::leading();
    store.fails = true;
    run.step(Input::Shutdown);
    run.step(Input::BodyGone(TermEnd::Shutdown));
    assert!(run.until(&mut store, ended), "{:#?}", run.said);
    let unreleased = |o: &Out| matches!(o, Output::Say(Say::Unreleased(Fails(Failure::Transient))));
    assert_eq!(run.said.iter().filter(|o| unreleased(o)).count(), 1);
}
