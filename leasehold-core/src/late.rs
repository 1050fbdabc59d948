//! An acquire that got no answer in time: never sent again (a lease it took would only be
//! renewed for another `L`, and a member whose every answer comes late would hold the lease for
//! ever without leading), its answer awaited, a late success released at once, and the member
//! out of the election until what that request did is known, or until the lease it may have
//! taken has surely expired (its send + `L`). This module says what the late answer means
//! ([`answered`]), what the lease came to ([`Settled`]) and how long the member stays out after
//! ([`Settled::pause`]).

use crate::pace::Pace;
use crate::timing::{Moment, Timing};
use std::time::Duration;

/// What the late acquire's answer was, as the shell reads it off the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LateAnswer {
    /// It succeeded: the lease was taken.
    Taken,
    /// An error status that says the request was refused, not applied.
    Refused,
    /// Anything else (a transient status, no connection, no answer before the lease it may
    /// have taken would have expired): it may or may not have been applied.
    Unknown,
}

/// What became of the lease a late acquire may have taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settled {
    /// The acquire was refused: it took nothing.
    NotTaken,
    /// It had taken the lease, and the release that followed was confirmed.
    Released,
    /// Unknown (no answer before `sent + L`, an answer that may or may not mean it was
    /// applied, or a release that got no answer): the lease may be held until `sent + L`.
    MayHold,
}

/// What a late answer calls for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterLate {
    /// Release the lease at once (this member learnt of it too late to write its epoch before
    /// its own stop deadline): then [`released`].
    Release,
    /// Settled so.
    Settled(Settled),
}

/// What the late acquire's `answer` calls for.
pub fn answered(answer: LateAnswer) -> AfterLate {
    match answer {
        LateAnswer::Taken => AfterLate::Release,
        LateAnswer::Refused => AfterLate::Settled(Settled::NotTaken),
        LateAnswer::Unknown => AfterLate::Settled(Settled::MayHold),
    }
}

/// The release of a lease a late acquire took was confirmed, or not.
pub fn released(confirmed: bool) -> Settled {
    match confirmed {
        true => Settled::Released,
        false => Settled::MayHold,
    }
}

impl Settled {
    /// The pause before the next attempt, at `now`, after a late acquire sent at `sent`: a
    /// polling period after a refusal (`draw` jitters it; drawn only then), a full one (as
    /// after any release) after a late success was released, and otherwise what is left until
    /// the lease it may hold has expired.
    pub fn pause<I: Moment>(
        self,
        sent: I,
        now: I,
        timing: &Timing,
        draw: impl FnOnce() -> f64,
    ) -> Duration {
        match self {
            Self::NotTaken => Pace::new(timing).poll(draw()),
            Self::Released => Pace::new(timing).yield_for(),
            Self::MayHold => (sent + timing.duration).max(now) - now,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn a_late_success_is_released_and_the_member_stays_out_by_what_it_learnt() {
        assert_eq!(answered(LateAnswer::Taken), AfterLate::Release);
        assert_eq!(released(true), Settled::Released);
        assert_eq!(released(false), Settled::MayHold);
        assert_eq!(
            answered(LateAnswer::Refused),
            AfterLate::Settled(Settled::NotTaken)
        );
        assert_eq!(
            answered(LateAnswer::Unknown),
            AfterLate::Settled(Settled::MayHold)
        );
        let t = Timing::default();
        let sent = Instant::now();
        let now = sent + Duration::from_secs(5);
        let pace = Pace::new(&t);
        let mut drawn = false;
        let mut draw = || {
            drawn = true;
            0.0
        };
        assert_eq!(
            Settled::NotTaken.pause(sent, now, &t, &mut draw),
            pace.poll(0.0)
        );
        assert!(drawn);
        let never = || -> f64 { panic!("drawn only after a refusal") };
        assert_eq!(
            Settled::Released.pause(sent, now, &t, never),
            pace.yield_for()
        );
        assert_eq!(
            Settled::MayHold.pause(sent, now, &t, never),
            t.duration - Duration::from_secs(5)
        );
        let later = sent + t.duration + Duration::from_secs(1);
        assert_eq!(
            Settled::MayHold.pause(sent, later, &t, never),
            Duration::ZERO
        );
    }
}
