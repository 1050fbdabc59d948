//! The lookout's order: when it lists or looks, whom it probes, what each answer means.

use super::*;
use crate::testing::{Rec, record};
use std::time::Instant;

const S: Duration = Duration::from_secs(1);
const AFTER: Duration = Duration::from_secs(30);

type Look = Lookout<Instant, Rec>;

/// A live member of priority `priority`, its record `age` s old, settled (a member for
/// `preempt_after`) or not, advertising `url`.
fn member(id: &str, priority: i64, age: u64, settled: bool, url: Option<&str>) -> Rec {
    Rec {
        age: Duration::from_secs(age),
        settled: settled.then_some(AFTER),
        advertise: url.map(str::to_owned),
        ..record(id, priority, 0, true)
    }
}

fn lookout(listing: Listing) -> Look {
    Lookout::new(&Timing::default(), Some(AFTER), 0, "me", listing)
}

/// Steps with a draw of 0 (the longest cadence), counting the draws taken.
fn step(
    l: &mut Look,
    now: Instant,
    event: Event<Instant, Rec>,
    draws: &mut u32,
) -> Vec<Action<Instant>> {
    l.step(now, 0, event, &mut || {
        *draws += 1;
        0.0
    })
}

fn start(line: Vec<Rec>, listed: Option<Instant>) -> Event<Instant, Rec> {
    Event::Start { line, listed }
}

#[test]
fn off_it_sleeps_for_ever() {
    let mut l = Look::new(&Timing::default(), None, 0, "me", Listing::Own);
    let now = Instant::now();
    assert_eq!(
        step(&mut l, now, start(vec![], None), &mut 0),
        [Action::Sleep(None)]
    );
}

/// A leader whose line was never listed lists at once; a settled member of higher priority
/// without a URL is handed the lease at once.
#[test]
fn a_settled_member_without_a_url_is_handed_over_to_after_the_listing() {
    let (mut l, now, mut draws) = (lookout(Listing::Own), Instant::now(), 0);
    let limit = now + Timing::default().request_timeout();
    assert_eq!(
        step(&mut l, now, start(vec![], None), &mut draws),
        [Action::List { limit }]
    );
    let line = vec![member("high", 5, 100, true, None)];
    let answered = now + S;
    let actions = step(&mut l, answered, Event::Listed(Some(line)), &mut draws);
    let [Action::Preempt(p)] = actions.as_slice() else {
        panic!("{actions:?}")
    };
    assert_eq!((p.to.as_str(), p.priority, p.ours), ("high", 5, 0));
    assert_eq!(draws, 0, "no listing is set after stepping down");
}

/// A line listed before the term tells of members already known: the first listing comes at
/// the cadence, drawn once; waking, it lists.
#[test]
fn a_line_listed_before_puts_the_first_listing_off_to_the_cadence() {
    let (mut l, now, mut draws) = (lookout(Listing::Own), Instant::now(), 0);
    let actions = step(
        &mut l,
        now,
        start(vec![member("low", -1, 100, true, None)], Some(now)),
        &mut draws,
    );
    assert_eq!(actions, [Action::Sleep(Some(now + AFTER / 2))]);
    assert_eq!(draws, 1);
    let woke = now + AFTER / 2;
    let limit = woke + Timing::default().request_timeout();
    assert_eq!(
        step(&mut l, woke, Event::Woke, &mut draws),
        [Action::List { limit }]
    );
}

/// A due member with a URL is probed first: one that does not answer is passed over, the line
/// shows who is pending, and the next listing is set; one that answers is handed the lease.
#[test]
fn a_due_member_with_a_url_must_answer_its_probe() {
    for answered in [false, true] {
        let (mut l, now, mut draws) = (lookout(Listing::Own), Instant::now(), 0);
        step(&mut l, now, start(vec![], None), &mut draws);
        let line = vec![
            member("high", 5, 100, true, Some("http://high")),
            member("later", 3, 10, false, None),
        ];
        let actions = step(&mut l, now, Event::Listed(Some(line)), &mut draws);
        let probe = Action::Probe {
            to: "high".into(),
            url: "http://high".into(),
        };
        assert_eq!(actions, [probe]);
        let after = now + S;
        let actions = step(&mut l, after, Event::Probed(answered), &mut draws);
        if answered {
            assert!(matches!(actions.as_slice(), [Action::Preempt(p)] if p.to == "high"));
            continue;
        }
        // "later" (10 s old of 30) is eligible 20 s after the listing, 19 s after the probe.
        let pending = Some(("later".to_owned(), Duration::from_secs(19)));
        let next = now + Duration::from_secs(20) - Pace::SERVICE_CLOCK;
        assert_eq!(
            actions,
            [
                Action::PassOver("high".into()),
                Action::Pending(pending),
                Action::Sleep(Some(next.min(after + AFTER / 2)))
            ]
        );
        assert_eq!(draws, 1);
    }
}

/// A failed listing is skipped: the next one comes at the cadence, and nothing is shown.
#[test]
fn a_failed_listing_waits_for_the_next() {
    let (mut l, now, mut draws) = (lookout(Listing::Own), Instant::now(), 0);
    step(&mut l, now, start(vec![], None), &mut draws);
    let answered = now + 2 * S;
    let actions = step(&mut l, answered, Event::Listed(None), &mut draws);
    assert_eq!(actions, [Action::Sleep(Some(answered + AFTER / 2))]);
    assert_eq!(draws, 1);
}

/// A leader that borrows its listings lists nothing: it judges each listing of the record
/// keeper once, looking every [`Pace::BORROWED_LISTING_LOOK`], and draws nothing.
#[test]
fn a_borrowing_leader_judges_each_listing_once() {
    let (mut l, now, mut draws) = (lookout(Listing::Borrowed), Instant::now(), 0);
    let waiting = vec![member("high", 5, 10, false, None)];
    let look = |at: Instant| [Action::Sleep(Some(at + Pace::BORROWED_LISTING_LOOK))];
    let actions = step(&mut l, now, start(waiting, Some(now)), &mut draws);
    assert_eq!(actions, look(now));
    let woke = now + Pace::BORROWED_LISTING_LOOK;
    assert_eq!(step(&mut l, woke, Event::Woke, &mut draws), [Action::Look]);
    // The same listing, now settled in memory: not judged again.
    let settled = vec![member("high", 5, 40, true, None)];
    let same = Event::Looked {
        line: settled.clone(),
        listed: Some(now),
    };
    assert_eq!(step(&mut l, woke, same, &mut draws), look(woke));
    assert_eq!(step(&mut l, woke, Event::Woke, &mut draws), [Action::Look]);
    let fresh = Event::Looked {
        line: settled,
        listed: Some(woke),
    };
    let actions = step(&mut l, woke, fresh, &mut draws);
    assert!(
        matches!(actions.as_slice(), [Action::Preempt(p)] if p.to == "high"),
        "{actions:?}"
    );
    assert_eq!(draws, 0);
}
