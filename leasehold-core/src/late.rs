//! An acquire that got no answer in time: never sent again (a lease it took would only be
//! renewed for another `L`, and a member whose every answer comes late would hold the lease for
//! ever without leading), its answer awaited, a late success released at once, and the member
//! out of the election until what that request did is known, or until the lease it may have
//! taken has surely expired (its send + `L`). This module says what the late answer means
//! ([`answered`], [`LateAnswer::of`]), what the lease came to ([`Settled`]), how long the member
//! stays out after ([`Settled::pause`]), and carries one late acquire to its end over the
//! exchange ([`Settling`]).

use crate::exchange::{Answer, Send, Tag, Tags, Waiting};
use crate::failure::{Failure, StoreFailure};
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

impl LateAnswer {
    /// What a late `answer` means: an error the service answered with a status that is not
    /// transient says the request was refused, not applied; any other error says nothing.
    pub fn of<E: StoreFailure>(answer: &Result<(), E>) -> Self {
        match answer {
            Ok(()) => Self::Taken,
            Err(e) if e.service_answered() && e.failure() != Failure::Transient => Self::Refused,
            Err(_) => Self::Unknown,
        }
    }
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

/// The release a late success calls for, cut at `limit`: then its answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Release<I> {
    /// No answer by then is no confirmation.
    pub limit: I,
}

/// What the settling of a late acquire says, for the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Said<E> {
    /// No answer to the late acquire within the lease duration.
    NoAnswer,
    /// The late acquire was refused (`true`), or may have been applied (`false`), `late` after
    /// its send, so.
    Failed {
        /// Refused.
        refused: bool,
        /// How long after its send the answer came.
        late: Duration,
        /// The answer.
        error: E,
    },
    /// The late acquire had taken the lease, `late` after its send: released at once.
    Releasing {
        /// How long after its send the answer came.
        late: Duration,
    },
    /// The release got no confirmation (`None`: no answer in time): the lease expires
    /// unrenewed within `left`.
    Unreleased {
        /// The release's error.
        error: Option<E>,
        /// Until the lease the late acquire may have taken expires.
        left: Duration,
    },
}

/// What the shell does for the settling.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Output<I, E> {
    /// Send the release.
    Send(Send<Release<I>>),
    /// The late acquire's answer is no longer wanted: a lease it took has expired.
    Forget(Tag),
    /// Log this.
    Say(Said<E>),
    /// The late acquire is settled so.
    Settled(Settled),
}

/// What the shell reports to the settling.
#[derive(Debug, Clone)]
pub enum Input<I, E> {
    /// The answer to the late acquire, or to the release.
    Answer(Answer<I, Result<(), E>>),
    /// The instant [`Settling::awaits`] named came.
    Timer,
}

/// Where a settling stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage<I> {
    /// Awaiting the late acquire's answer, sent under this tag.
    Answer(Tag),
    /// Awaiting the release's answer, sent under this tag, until this instant.
    Releasing(Tag, I),
    Over,
}

/// One late acquire, from its missed answer to what became of the lease it may have taken:
/// its answer awaited until the lease it may have taken has surely expired (`sent + L`), a
/// success released at once (this member learnt of its lease too late to write its epoch
/// before its own stop deadline), the release cut at the request timeout.
#[derive(Debug, Clone)]
pub struct Settling<I> {
    sent: I,
    timing: Timing,
    stage: Stage<I>,
}

impl<I: Moment> Settling<I> {
    /// The settling of the acquire sent at `sent` under `acquire`, which got no answer in
    /// time.
    pub fn begin(acquire: Tag, sent: I, timing: &Timing) -> Self {
        Self {
            sent,
            timing: *timing,
            stage: Stage::Answer(acquire),
        }
    }

    /// Its timer, as [`Settling::awaits`] names it (without the answer awaited).
    pub fn until(&self) -> Option<I> {
        match self.stage {
            Stage::Answer(_) => Some(self.sent + self.timing.duration),
            Stage::Releasing(_, limit) => Some(limit),
            Stage::Over => None,
        }
    }

    /// What it waits for: the answer awaited, until the lease expired or the release's limit.
    pub fn awaits(&self) -> Waiting<I> {
        match self.stage {
            Stage::Answer(tag) => Waiting {
                answers: vec![tag],
                until: Some(self.sent + self.timing.duration),
            },
            Stage::Releasing(tag, limit) => Waiting {
                answers: vec![tag],
                until: Some(limit),
            },
            Stage::Over => Waiting::default(),
        }
    }

    /// The one transition: `input` came at `now`. A request goes out under a tag of `tags`
    /// (the member's).
    pub fn handle<E: StoreFailure>(
        &mut self,
        now: I,
        input: Input<I, E>,
        tags: &mut Tags,
    ) -> Vec<Output<I, E>> {
        let late = now.max(self.sent) - self.sent;
        match (self.stage, input) {
            (Stage::Answer(tag), Input::Timer) => {
                self.stage = Stage::Over;
                vec![
                    Output::Forget(tag),
                    Output::Say(Said::NoAnswer),
                    Output::Settled(Settled::MayHold),
                ]
            }
            (Stage::Answer(tag), Input::Answer(a)) if a.tag == tag => {
                match (answered(LateAnswer::of(&a.answer)), a.answer) {
                    (AfterLate::Release, _) => self.release(now, late, tags),
                    (AfterLate::Settled(settled), Err(error)) => {
                        self.stage = Stage::Over;
                        let refused = settled == Settled::NotTaken;
                        let said = Said::Failed {
                            refused,
                            late,
                            error,
                        };
                        vec![Output::Say(said), Output::Settled(settled)]
                    }
                    (AfterLate::Settled(settled), Ok(())) => {
                        self.stage = Stage::Over;
                        vec![Output::Settled(settled)]
                    }
                }
            }
            (Stage::Releasing(tag, _), Input::Timer) => self.unreleased(now, Some(tag), None),
            (Stage::Releasing(tag, _), Input::Answer(a)) if a.tag == tag => match a.answer {
                Ok(()) => {
                    self.stage = Stage::Over;
                    vec![Output::Settled(released(true))]
                }
                Err(error) => self.unreleased(now, None, Some(error)),
            },
            // An answer no longer awaited, or anything once over: nothing.
            _ => Vec::new(),
        }
    }

    /// A late success: the release goes out at once.
    fn release<E>(&mut self, now: I, late: Duration, tags: &mut Tags) -> Vec<Output<I, E>> {
        let tag = tags.fresh();
        let limit = now + self.timing.request_timeout();
        self.stage = Stage::Releasing(tag, limit);
        let release = Send {
            tag,
            request: Release { limit },
        };
        vec![Output::Say(Said::Releasing { late }), Output::Send(release)]
    }

    /// The release got no confirmation: the lease may be held until it expires unrenewed.
    fn unreleased<E>(
        &mut self,
        now: I,
        forget: Option<Tag>,
        error: Option<E>,
    ) -> Vec<Output<I, E>> {
        self.stage = Stage::Over;
        let expiry = self.sent + self.timing.duration;
        let left = expiry.max(now) - now;
        let mut outputs: Vec<_> = forget.map(Output::Forget).into_iter().collect();
        outputs.push(Output::Say(Said::Unreleased { error, left }));
        outputs.push(Output::Settled(released(false)));
        outputs
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

    /// A store error of a kind, answered by the service or not.
    #[derive(Debug, Clone, PartialEq, Eq)]
    struct Fails(Failure, bool);

    impl StoreFailure for Fails {
        fn failure(&self) -> Failure {
            self.0
        }
        fn service_answered(&self) -> bool {
            self.1
        }
    }

    fn answer(tag: Tag, sent: Instant, answer: Result<(), Fails>) -> Input<Instant, Fails> {
        Input::Answer(Answer { tag, sent, answer })
    }

    /// A late success is released at once, cut at the request timeout; a confirmed release
    /// settles it, one without an answer leaves the lease to expire.
    #[test]
    fn a_late_success_is_released_and_settled_by_the_release() {
        let (t, sent) = (Timing::default(), Instant::now());
        let mut tags = Tags::default();
        let acquire = tags.fresh();
        let now = sent + Duration::from_secs(7);
        for confirmed in [true, false] {
            let mut s = Settling::begin(acquire, sent, &t);
            assert_eq!(s.awaits().until, Some(sent + t.duration));
            let out = s.handle(now, answer(acquire, sent, Ok(())), &mut tags);
            let [Output::Say(Said::Releasing { late }), Output::Send(release)] = &out[..] else {
                panic!("{out:?}")
            };
            assert_eq!(*late, Duration::from_secs(7));
            assert_eq!(release.request.limit, now + t.request_timeout());
            assert_eq!(s.awaits().answers, [release.tag]);
            let end = match confirmed {
                true => s.handle(now, answer(release.tag, now, Ok(())), &mut tags),
                false => s.handle(release.request.limit, Input::Timer, &mut tags),
            };
            let expected = if confirmed {
                Settled::Released
            } else {
                Settled::MayHold
            };
            assert_eq!(end.last(), Some(&Output::Settled(expected)), "{end:?}");
            assert_eq!(s.awaits(), Waiting::default(), "over");
        }
    }

    /// A refusal the service answered took nothing; an error on the way says nothing; no
    /// answer within the lease duration leaves the lease to expire, and forgets the acquire.
    #[test]
    fn a_late_refusal_settles_at_once_and_silence_waits_out_the_lease() {
        let (t, sent) = (Timing::default(), Instant::now());
        let mut tags = Tags::default();
        let acquire = tags.fresh();
        let cases = [
            (Fails(Failure::Held, true), Settled::NotTaken),
            (Fails(Failure::Transient, true), Settled::MayHold),
            (Fails(Failure::Held, false), Settled::MayHold),
        ];
        for (error, expected) in cases {
            let mut s = Settling::begin(acquire, sent, &t);
            let out = s.handle(sent, answer(acquire, sent, Err(error.clone())), &mut tags);
            assert_eq!(out.last(), Some(&Output::Settled(expected)), "{error:?}");
        }
        let mut s = Settling::<Instant>::begin(acquire, sent, &t);
        let out = s.handle::<Fails>(sent + t.duration, Input::Timer, &mut tags);
        assert_eq!(
            out,
            [
                Output::Forget(acquire),
                Output::Say(Said::NoAnswer),
                Output::Settled(Settled::MayHold)
            ]
        );
    }
}
