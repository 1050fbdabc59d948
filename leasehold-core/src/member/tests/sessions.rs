//! Whole-member scenarios of what a shell lives through around its member: a refusal of the
//! credentials before storage ever accepted them and after (in this member, or in an earlier
//! one of the process); what the member says for the shell to show (its rest's end).

use super::lifetime::{Fails, Out, Req, Run, Store, acquire, settings};
use super::*;
use crate::exchange::Send;
use crate::failure::Failure;
use crate::term::TermEnd;

fn ended(o: &Out) -> bool {
    matches!(o, Output::End(_))
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
