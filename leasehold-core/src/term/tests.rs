use super::*;
use std::time::Instant;

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

#[test]
fn rule_one_in_one_place() {
    let t = Timing::default(); // L 15 s, M 1 s, G 5 s
    let sent = Instant::now();
    let d = Deadline::from_sent(sent, &t);
    let at = |s: u64| sent + secs(s);
    let g = t.stop_timeout;
    let mut phase = Phase::Running;
    // Held, before the stop deadline: nothing.
    let why = Phase::stop_reason(&Tenure::Held(d), at(8), false);
    assert_eq!(phase.stop(why, at(8)), None);
    assert!(!phase.kill_due(&d, g, at(8)));
    // The stop deadline passes without a renew: stop, then kill G later or at the kill
    // deadline, whichever comes first.
    let why = Phase::stop_reason(&Tenure::Held(d), at(9), false);
    assert_eq!(phase.stop(why, at(9)), Some(TermEnd::Expired));
    assert_eq!(phase.stop(Some(TermEnd::Lost), at(9)), None, "stopped once");
    assert_eq!(phase.kill_at(&d, g), at(14));
    assert!(!phase.kill_due(&d, g, at(13)));
    assert!(phase.kill_due(&d, g, at(14)));
    assert_eq!(
        phase,
        Phase::Killed {
            why: TermEnd::Expired,
            at: at(14)
        }
    );
    assert!(!phase.kill_now(TermEnd::Shutdown, at(14)), "killed once");

    // A loss stops at once, and the kill comes G after it.
    let mut phase = Phase::Running;
    let why = Phase::stop_reason(&Tenure::Lost(d), at(4), false);
    assert_eq!(phase.stop(why, at(4)), Some(TermEnd::Lost));
    assert_eq!(phase.kill_at(&d, g), at(9));

    // Shutdown while held; a second request kills at once and keeps the first reason.
    let mut phase = Phase::Running;
    let why = Phase::stop_reason(&Tenure::Held(d), at(1), true);
    assert_eq!(phase.stop(why, at(1)), Some(TermEnd::Shutdown));
    assert!(phase.kill_now(TermEnd::Lost, at(2)));
    assert_eq!(phase.why(), Some(TermEnd::Shutdown));
}

#[test]
fn step_stops_then_kills_and_says_by_when() {
    let t = Timing::default();
    let sent = Instant::now();
    let d = Deadline::from_sent(sent, &t);
    let mut phase = Phase::Running;
    let first = phase.step(&Tenure::Held(d), sent + secs(2), true, t.stop_timeout);
    assert_eq!(first.stop, Some(TermEnd::Shutdown));
    assert_eq!(first.kill_at, sent + secs(7), "G after the stop");
    assert!(!first.kill);
    let second = phase.step(&Tenure::Held(d), sent + secs(7), true, t.stop_timeout);
    assert_eq!(second.stop, None, "stopped once");
    assert!(second.kill);
    assert!(phase.is_killed());
    assert_eq!(phase.stop_began(), Some(sent + secs(7)));
}

#[test]
fn the_lease_is_handed_over_only_when_held_and_given_up_by_choice() {
    let t = Timing::default();
    let d = Deadline::from_sent(Instant::now(), &t);
    let held = Tenure::Held(d);
    assert_eq!(
        give_up(TermEnd::Shutdown, &held),
        GiveUp::HandOver(Ending::Stop, d)
    );
    assert_eq!(
        give_up(TermEnd::Released, &held),
        GiveUp::HandOver(Ending::ByItself, d)
    );
    assert_eq!(
        give_up(TermEnd::CrashLoop { backoff: secs(3) }, &held),
        GiveUp::HandOver(Ending::StandAside(secs(3)), d)
    );
    // Involuntary ends release; a lease not held any more is not given (ours to give no more).
    assert_eq!(give_up(TermEnd::Expired, &held), GiveUp::Release);
    assert_eq!(give_up(TermEnd::Overran, &held), GiveUp::Release);
    assert_eq!(
        give_up(TermEnd::Shutdown, &Tenure::Expired(d)),
        GiveUp::Release
    );
    assert_eq!(give_up(TermEnd::Lost, &held), GiveUp::Nothing);
    assert_eq!(
        give_up(TermEnd::Shutdown, &Tenure::Lost(d)),
        GiveUp::Nothing
    );
}

#[test]
fn the_pause_after_a_term_is_the_one_its_end_calls_for() {
    let t = Timing::default();
    let sent = Instant::now();
    let d = Deadline::from_sent(sent, &t);
    let ended = sent + secs(20);
    let rest = |end, shutdown| rest(end, &Tenure::Held(d), ended, shutdown, &t);
    assert_eq!(rest(TermEnd::Shutdown, true), Rest::Done(None));
    assert_eq!(rest(TermEnd::Exit(3), false), Rest::Done(Some(3)));
    assert_eq!(rest(TermEnd::Overran, true), Rest::Done(None));
    assert_eq!(rest(TermEnd::Lost, false), Rest::Now);
    let longest_poll = crate::Pace::new(&t).yield_for();
    assert_eq!(rest(TermEnd::Released, false), Rest::Yield(longest_poll));
    assert_eq!(rest(TermEnd::Preempted, false), Rest::Yield(longest_poll));
    assert_eq!(rest(TermEnd::Overran, false), Rest::Yield(longest_poll));
    assert_eq!(
        rest(TermEnd::Unhealthy { cooldown: secs(30) }, false),
        Rest::Until {
            until: ended + secs(30),
            wakeable: false,
            why: TermEnd::Unhealthy { cooldown: secs(30) }
        }
    );
    assert_eq!(
        rest(TermEnd::CrashLoop { backoff: secs(4) }, false),
        Rest::Until {
            until: ended + secs(4),
            wakeable: false,
            why: TermEnd::CrashLoop { backoff: secs(4) }
        }
    );
    // Out until the last renewed lease has surely expired on the server: t_s + L.
    assert_eq!(
        rest(TermEnd::Expired, false),
        Rest::Until {
            until: sent + t.duration,
            wakeable: true,
            why: TermEnd::Expired
        }
    );
}

#[test]
fn only_a_shutdown_or_an_exit_ends_one_term_as_asked() {
    assert!(!TermEnd::Shutdown.cuts_one_term_short());
    assert!(!TermEnd::Exit(0).cuts_one_term_short());
    for end in [
        TermEnd::Released,
        TermEnd::Lost,
        TermEnd::Expired,
        TermEnd::Preempted,
        TermEnd::Overran,
        TermEnd::Unhealthy { cooldown: secs(1) },
    ] {
        assert!(end.cuts_one_term_short(), "{end:?}");
    }
}

/// One term, by rule 7's order: the lease is given up only after the body is gone and renewing
/// stopped; then the rest its end calls for, then the next campaign.
#[test]
fn a_term_gives_its_lease_up_only_after_its_body_is_gone_and_renewing_stopped() {
    let t = Timing::default();
    let sent = Instant::now();
    let d = Deadline::from_sent(sent, &t);
    let mut terms = Terms::new(t, false, Broken::default());
    assert_eq!(terms.step(false), Stage::Campaign);
    terms.won(sent, &Tenure::Held(d), false);
    assert_eq!(terms.step(false), Stage::Lead { unstarted: None });
    let ended = sent + secs(3);
    assert_eq!(terms.body_gone(TermEnd::Released, ended), TermEnd::Released);
    assert_eq!(terms.step(false), Stage::StopRenewing);
    terms.given_up();
    assert_eq!(
        terms.step(false),
        Stage::StopRenewing,
        "nothing given before renewing stopped"
    );
    terms.renewing_stopped(Tenure::Held(d));
    assert_eq!(
        terms.step(false),
        Stage::GiveUp(GiveUp::HandOver(Ending::ByItself, d))
    );
    terms.given_up();
    let longest_poll = crate::Pace::new(&t).yield_for();
    assert_eq!(terms.step(false), Stage::Rest(Rest::Yield(longest_poll)));
    terms.rested(None);
    assert_eq!(terms.step(false), Stage::Campaign);
}

/// A term won while shutting down (or past its stop deadline) gets no body.
#[test]
fn a_term_won_while_shutting_down_gets_no_body() {
    let t = Timing::default();
    let sent = Instant::now();
    let d = Deadline::from_sent(sent, &t);
    let mut terms = Terms::new(t, false, Broken::default());
    terms.won(sent, &Tenure::Held(d), true);
    assert_eq!(
        terms.step(true),
        Stage::Lead {
            unstarted: Some(TermEnd::Shutdown)
        }
    );
    terms.won(d.stop_at, &Tenure::Held(d), false);
    assert_eq!(
        terms.step(false),
        Stage::Lead {
            unstarted: Some(TermEnd::Expired)
        }
    );
    terms.body_gone(TermEnd::Shutdown, sent);
    terms.renewing_stopped(Tenure::Held(d));
    terms.given_up();
    assert_eq!(terms.step(true), Stage::Rest(Rest::Done(None)));
    terms.rested(Some(Done::Shutdown));
    assert_eq!(terms.step(true), Stage::Done(Done::Shutdown));
}

/// A body that outlived its kill is waited for before anything is given up; if it outlived
/// the lease too, nothing is given up at all.
#[test]
fn a_body_that_outlived_its_kill_is_waited_for_first() {
    let t = Timing::default();
    let sent = Instant::now();
    let d = Deadline::from_sent(sent, &t);
    for (gone, gives) in [(true, true), (false, false)] {
        let mut terms = Terms::new(t, false, Broken::default());
        terms.won(sent, &Tenure::Held(d), false);
        terms.body_gone(TermEnd::Overran, d.kill_at);
        terms.renewing_stopped(Tenure::Expired(d));
        assert_eq!(terms.step(false), Stage::Outlast);
        terms.outlasted(gone);
        match terms.step(false) {
            Stage::GiveUp(give) => {
                assert!(gives);
                assert_eq!(give, GiveUp::Release);
            }
            Stage::Rest(_) => assert!(!gives),
            other => panic!("{other:?}"),
        }
    }
    // The mutant release-the-stuck gives it up at once.
    let broken = Broken {
        release_the_stuck: true,
        ..Broken::default()
    };
    let mut terms = Terms::new(t, false, broken);
    terms.won(sent, &Tenure::Held(d), false);
    terms.body_gone(TermEnd::Overran, d.kill_at);
    terms.renewing_stopped(Tenure::Held(d));
    assert_eq!(terms.step(false), Stage::GiveUp(GiveUp::Release));
}

/// A one-term member stops after its term unless it ended as asked; a campaign that gave up
/// is no election; the mutant no-crash-backoff takes a crash loop for a release.
#[test]
fn one_term_and_the_campaign_s_end() {
    let t = Timing::default();
    let sent = Instant::now();
    let d = Deadline::from_sent(sent, &t);
    let mut terms = Terms::new(t, true, Broken::default());
    terms.won(sent, &Tenure::Held(d), false);
    terms.body_gone(TermEnd::Lost, sent);
    terms.renewing_stopped(Tenure::Lost(d));
    assert_eq!(terms.step(false), Stage::GiveUp(GiveUp::Nothing));
    terms.given_up();
    assert_eq!(
        terms.step(false),
        Stage::Done(Done::CutShort(TermEnd::Lost))
    );

    let mut terms = Terms::<Instant>::new(t, true, Broken::default());
    terms.not_won(false);
    assert_eq!(terms.step(false), Stage::Done(Done::NotElected));

    let broken = Broken {
        no_crash_backoff: true,
        ..Broken::default()
    };
    let mut terms = Terms::new(t, false, broken);
    terms.won(sent, &Tenure::Held(d), false);
    let backoff = TermEnd::CrashLoop { backoff: secs(9) };
    assert_eq!(terms.body_gone(backoff, sent), TermEnd::Released);
}
