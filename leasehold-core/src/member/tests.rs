//! The record keeper's questions, answered from a member's facts.

use super::*;
use crate::record::Grounds;
use crate::testing::{L, line_of};
use std::time::{Duration, Instant};

/// A record that says only how long its member has been one.
#[derive(Debug, Clone, PartialEq)]
struct Says(Option<Duration>);

impl Publish for Says {
    fn settled(&self) -> Option<Duration> {
        self.0
    }
    fn set_settled(&mut self, settled: Option<Duration>) {
        self.0 = settled;
    }
}

fn on_the_line<'a>(
    line: &'a mut L,
    own: &'a mut Own<Instant, Says>,
    now: Instant,
    draw: &'a mut dyn FnMut() -> f64,
) -> OnTheLine<'a, Instant, crate::testing::Rec, crate::testing::Slot, Says> {
    OnTheLine {
        line,
        own,
        now,
        wall: 100,
        settle_after: Some(Duration::from_secs(30)),
        draw,
    }
}

/// A join forgets how long the member was one; the record is settled `preempt_after` after
/// its creation, and says so only once written again.
#[test]
fn a_record_settles_after_its_creation_and_is_written_again() {
    let t0 = Instant::now();
    let mut line = line_of("b", 5, t0);
    let mut own = Own::new(Says(Some(Duration::from_secs(9))));
    own.written = true;
    let mut draws = 0;
    let mut draw = || {
        draws += 1;
        0.25
    };
    let mut g = on_the_line(&mut line, &mut own, t0, &mut draw);
    assert_eq!(g.joining(), Says(None), "a join starts a new membership");
    assert_eq!(g.facts().settle_at, None, "not created yet");
    g.created(t0);
    assert_eq!(g.facts().settle_at, Some(t0 + Duration::from_secs(30)));
    g.wrote(&Says(None));
    assert!(g.facts().written);
    g.settle(t0 + Duration::from_secs(31));
    assert_eq!(g.published(), Says(Some(Duration::from_secs(31))));
    assert!(!g.facts().written, "the record does not say it yet");
    assert_eq!(g.facts().settle_at, None, "settled once");
    g.wrote(&Says(Some(Duration::from_secs(31))));
    assert!(g.facts().written);
    assert_eq!(g.draw(), 0.25);
    assert_eq!(draws, 1, "each draw is the shell's");
}

/// The member's standing changes once; a member first in line that does not lead polls, one
/// further back does not.
#[test]
fn the_keeper_sees_the_standing_and_the_place() {
    let t0 = Instant::now();
    let mut draw = || 0.5;
    for (me, polls) in [("a", true), ("c", false)] {
        let mut line = line_of(me, 5, t0);
        let mut own = Own::new(Says(None));
        let mut g = on_the_line(&mut line, &mut own, t0, &mut draw);
        assert!(g.facts().joined);
        assert_eq!(g.facts().polls, polls, "{me}");
        assert!(g.stand(Standing::Joining));
        assert!(!g.stand(Standing::Joining), "no change the second time");
        assert!(!g.facts().joined && !g.facts().polls);
    }
}
