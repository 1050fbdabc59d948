//! The simulated body of a term: what the daemon's child would be, held to rule 1 by the same
//! [`Phase`] as the child supervisor and the library's task, with a life drawn from the seed
//! (how long it takes to stop, whether it ends by itself, fails its health checks or asks the
//! daemon to exit), and recorded: its start, and its end whenever it comes (a crash of its
//! member drops it at once, as the guard kills a child's group).

use super::dice::Dice;
use super::trace::{MemberId, Recorder, What};
use crate::clock;
use crate::elector::{Body, Phase, Tenure, Term, TermEnd};
use std::time::Duration;
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// How one body lives, drawn when it starts.
#[derive(Debug, Clone, Copy)]
struct Plan {
    /// How long it takes to stop once told to (`None`: it ignores the stop and is killed).
    stops_in: Option<Duration>,
    /// It ends by itself after this long, this way.
    ends: Option<(Duration, Ending)>,
    /// It survives its kill, for this long (a process stuck in the kernel).
    stuck: Option<Duration>,
}

#[derive(Debug, Clone, Copy)]
enum Ending {
    /// The child exits with `on_exit = "release"`.
    Released,
    /// Its health checks fail: it is stopped, and the member stands by for this long.
    Unhealthy(Duration),
    /// The child exits with `on_exit = "exit"`: the daemon hands over and exits.
    Exit,
}

/// How the bodies of a history live.
#[derive(Clone)]
pub(crate) enum Plans {
    /// Drawn from each member's stream of bodies: quick or slow to stop, ending by themselves
    /// now and then, surviving their kill now and then.
    Drawn,
    /// As a script says: each stops within `stops_in` of its stop signal, and ends by itself
    /// only when the script says so ([`Ends::end`]).
    Scripted { stops_in: Duration, ends: Ends },
}

/// One member's word to end its body: who, and the notice it waits on.
type EndWord = (MemberId, std::sync::Arc<tokio::sync::Notify>);

/// The script's word that a member's body ends by itself now.
#[derive(Clone, Default)]
pub(crate) struct Ends(std::sync::Arc<std::sync::Mutex<Vec<EndWord>>>);

impl Ends {
    fn of(&self, member: MemberId) -> std::sync::Arc<tokio::sync::Notify> {
        let mut ends = self.0.lock().unwrap_or_else(|e| e.into_inner());
        match ends.iter().find(|(m, _)| *m == member) {
            Some((_, n)) => n.clone(),
            None => {
                let n = std::sync::Arc::new(tokio::sync::Notify::new());
                ends.push((member, n.clone()));
                n
            }
        }
    }

    /// The body `member` runs now ends by itself (`on_exit = "release"`).
    pub fn end(&self, member: MemberId) {
        self.of(member).notify_one();
    }
}

/// The body of every term of one simulated member.
pub(crate) struct SimBody {
    member: MemberId,
    recorder: Recorder,
    /// `G`.
    grace: Duration,
    /// A body that survived its kill, and when it will be gone at last.
    stuck: Option<(Life, Instant)>,
    plans: Plans,
    /// Where drawn plans come from.
    dice: Dice,
}

impl SimBody {
    pub fn new(
        member: MemberId,
        recorder: Recorder,
        grace: Duration,
        plans: Plans,
        dice: Dice,
    ) -> Self {
        Self {
            member,
            recorder,
            grace,
            stuck: None,
            plans,
            dice,
        }
    }

    fn plan(&self) -> Plan {
        if let Plans::Scripted { stops_in, .. } = &self.plans {
            return Plan {
                stops_in: Some(*stops_in),
                ends: None,
                stuck: None,
            };
        }
        let dice = &self.dice;
        let stops_in = match dice.below(100) {
            0..80 => Some(Duration::from_millis(dice.u64(0, 500))),
            80..95 => Some(Duration::from_millis(
                dice.u64(500, self.grace.as_millis() as u64),
            )),
            _ => None,
        };
        let after = Duration::from_millis(dice.u64(500, 60_000));
        let ends = match dice.below(100) {
            0..70 => None,
            70..88 => Some((after, Ending::Released)),
            88..96 => Some((
                after,
                Ending::Unhealthy(Duration::from_secs(dice.u64(5, 30))),
            )),
            _ => Some((after, Ending::Exit)),
        };
        // If it comes to a kill: stuck for up to 40 s, gone before its lease expires or long
        // after.
        let stuck = (dice.below(100) < 30).then(|| Duration::from_millis(dice.u64(100, 40_000)));
        Plan {
            stops_in,
            ends,
            stuck,
        }
    }
}

/// The record of one body's life: its end is recorded when this is dropped, however that comes.
struct Life {
    recorder: Recorder,
    member: MemberId,
    slot: u32,
    epoch: u64,
    how: &'static str,
}

impl Drop for Life {
    fn drop(&mut self) {
        self.recorder.record(What::BodyGone {
            member: self.member,
            slot: self.slot,
            epoch: self.epoch,
            how: self.how,
        });
        self.recorder.line();
    }
}

impl Body for SimBody {
    const BODY: &'static str = "the simulated body";
    const ENDED: &'static str = "the simulated body ended";

    async fn run(
        &mut self,
        term: &Term,
        mut tenure: watch::Receiver<Tenure>,
        shutdown: &CancellationToken,
    ) -> TermEnd {
        let plan = self.plan();
        self.recorder.record(What::BodyStart {
            member: self.member,
            slot: term.slot,
            epoch: term.epoch,
            lease: term.lease,
        });
        self.recorder.line();
        let mut life = Life {
            recorder: self.recorder.clone(),
            member: self.member,
            slot: term.slot,
            epoch: term.epoch,
            how: "crashed with its member",
        };
        let started = clock::now();
        let mut ends_at = plan.ends.map(|(after, ending)| (started + after, ending));
        let scripted_end = match &self.plans {
            Plans::Scripted { ends, .. } => Some(ends.of(self.member)),
            Plans::Drawn => None,
        };
        let mut phase = Phase::Running;
        let mut stopping_since: Option<Instant> = None;
        let mut keeper_alive = true;
        loop {
            let now = clock::now();
            let held = *tenure.borrow();
            let step = phase.step(&held, now, shutdown.is_cancelled(), self.grace);
            if step.stop.is_some() {
                stopping_since = Some(now);
                self.recorder.record(What::BodyStopping {
                    member: self.member,
                    slot: term.slot,
                    epoch: term.epoch,
                });
                self.recorder.line();
            }
            if step.kill {
                if let Some(stuck) = plan.stuck {
                    self.recorder.record(What::BodyStuck {
                        member: self.member,
                        slot: term.slot,
                        epoch: term.epoch,
                    });
                    life.how = "gone at last after surviving its kill";
                    self.stuck = Some((life, now + stuck));
                    return TermEnd::Overran;
                }
                life.how = "killed";
                return phase.why().unwrap_or(TermEnd::Expired);
            }
            if let Some(since) = stopping_since {
                if plan.stops_in.is_some_and(|d| now >= since + d) {
                    life.how = "stopped";
                    return phase.why().unwrap_or(TermEnd::Shutdown);
                }
            } else if let Some((_, ending)) = ends_at.filter(|(at, _)| now >= *at) {
                match ending {
                    Ending::Released => {
                        life.how = "ended by itself";
                        return TermEnd::Released;
                    }
                    Ending::Exit => {
                        life.how = "ended by itself, asking to exit";
                        return TermEnd::Exit(0);
                    }
                    Ending::Unhealthy(cooldown) => {
                        // Stopped for failing its checks, as the supervisor stops it.
                        phase.stop(Some(TermEnd::Unhealthy { cooldown }), now);
                        stopping_since = Some(now);
                        self.recorder.record(What::Standby {
                            member: self.member,
                            until: self.recorder.now() + cooldown,
                        });
                        self.recorder.line();
                        continue;
                    }
                }
            }
            // The next instant anything is due.
            let mut next = match phase {
                Phase::Running => step.deadline.stop_at,
                _ => step.kill_at,
            };
            if let (Some(since), Some(d)) = (stopping_since, plan.stops_in) {
                next = next.min(since + d);
            }
            if let (None, Some((at, _))) = (stopping_since, ends_at) {
                next = next.min(at);
            }
            let told_to_end = async {
                match (&scripted_end, stopping_since) {
                    (Some(end), None) => end.notified().await,
                    _ => std::future::pending().await,
                }
            };
            tokio::select! {
                biased;
                changed = tenure.changed(), if keeper_alive => keeper_alive = changed.is_ok(),
                () = shutdown.cancelled(), if phase.is_running() => {}
                () = told_to_end => ends_at = Some((clock::now(), Ending::Released)),
                () = clock::sleep_until(next) => {}
            }
        }
    }

    const WAITS_PAST_ITS_LEASE: bool = true;

    /// Not while a body that survived its kill lives: as the daemon with a stuck group.
    fn may_campaign(&mut self) -> bool {
        if self
            .stuck
            .as_ref()
            .is_some_and(|(_, at)| clock::now() >= *at)
        {
            self.stuck = None;
        }
        self.stuck.is_none()
    }

    async fn gone(&mut self) {
        if let Some((_, at)) = &self.stuck {
            clock::sleep_until(*at).await;
            self.stuck = None;
        }
    }
}
