//! Whole-member scenarios of what a shell lives through around its member: a refusal of the
//! credentials before storage ever accepted them and after (in this member, or in an earlier
//! one of the process).

use super::lifetime::{Fails, Out, Run, Store, acquire, settings};
use super::*;
use crate::failure::Failure;

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
