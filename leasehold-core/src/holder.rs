//! The holder: a member that won the group's lease keeps it by renewing it every `R`, retries a
//! renew that storage failed until the stop deadline (docs/safety.md, rule 3), and knows at
//! once when storage says the lease is someone else's (rule 2). What it keeps is a
//! [`Tenure`]: the deadlines of the body that runs while the lease is held.
//!
//! The group's lease is a set of replica leases, one per storage account; today a group has
//! one. The holder counts a replica while its lease was won or renewed by a request whose
//! success it heard, is not passed, and storage has not refused since; its deadline is the
//! k-th latest of the counted replicas' deadlines, `k` a majority, so that the body stops before
//! a majority of the leases can have run out.
//!
//! Nothing here sends a request or keeps time. The holder speaks the member's exchange
//! ([`crate::exchange`]): the shell asks [`Holder::poll_request`] what to send (a renew under its
//! tag), carries it out, reports the answer under that tag with the instant its request was sent
//! ([`Holder::handle_answer`]), and wakes it at [`Holder::poll_timeout`] ([`Holder::waiting`]
//! says both at once).

use crate::backoff::Backoff;
use crate::exchange::{self, Send, Tag, Tags, Waiting};
use crate::pace::Pace;
use crate::timing::{Deadline, Moment, Timing};
use std::time::Duration;

/// What the holder knows about the lease, as the body's supervisor sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tenure<I> {
    /// The lease is held; the body may run until the deadline's `stop_at`.
    Held(Deadline<I>),
    /// Storage said the lease is not this member's any more (rule 2): stop the body at once.
    Lost(Deadline<I>),
    /// No renew succeeded before `stop_at` (rule 3): stop the body now, kill it by `kill_at`.
    Expired(Deadline<I>),
}

impl<I: Copy> Tenure<I> {
    /// The deadlines it carries.
    pub fn deadline(&self) -> Deadline<I> {
        match *self {
            Self::Held(d) | Self::Lost(d) | Self::Expired(d) => d,
        }
    }

    /// Whether the lease is held.
    pub fn is_held(&self) -> bool {
        matches!(self, Self::Held(_))
    }
}

/// What storage answered a renew.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reply {
    /// The lease was renewed.
    Renewed,
    /// The lease is not this member's (another lease id, no lease, or `missing`: no blob).
    Refused {
        /// The blob is gone (deleted).
        missing: bool,
    },
    /// No answer that says either (a timeout, a 5xx, a broken connection): retried.
    Failed,
}

/// A renew to send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Renew<I> {
    /// Which replica's lease.
    pub replica: usize,
    /// When its answer stops being waited for (rule 4: never past the stop deadline).
    pub limit: I,
}

/// What an answer changed, for the shell's log and metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Note<I> {
    /// A renew succeeded: the new deadline, how long it took, whether that was slow, and how
    /// many attempts failed before it.
    Renewed {
        /// The deadline it gives.
        deadline: Deadline<I>,
        /// From its send to its answer.
        took: Duration,
        /// It took longer than [`Pace::slow_renew`].
        slow: bool,
        /// Attempts that failed before it, since the last success.
        failures: u32,
    },
    /// A renew failed; the next attempt comes after a pause.
    Retrying {
        /// Attempts failed since the last success.
        failures: u32,
        /// Time left before the stop deadline.
        left: Duration,
    },
    /// Storage said the lease is lost.
    Lost {
        /// The blob is gone.
        missing: bool,
    },
    /// No renew succeeded before the stop deadline.
    Expired {
        /// Attempts failed since the last success.
        failures: u32,
    },
}

/// Deliberately broken rules, for the simulator to show its checker catches each
/// (docs/testing.md, "The simulator"). All off in production.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Mutants {
    /// Count a renewed lease's deadline from its answer instead of its send.
    pub deadline_from_answer: bool,
    /// `minority-leads`: hold on `k - 1` replicas instead of a majority.
    pub minority_leads: bool,
    /// `deadline-from-latest`: the group's deadline is the latest of the replicas' that count
    /// instead of the k-th latest.
    pub deadline_from_latest: bool,
    /// `count-unknown-outcome`: a renew whose outcome is unknown is taken for a success.
    pub count_unknown_outcome: bool,
}

/// Where one replica's renewal stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Renewal<I> {
    /// The next renew is due at this instant.
    Due(I),
    /// The renew sent under this tag is on its way.
    InFlight(Tag),
    /// Refused: this replica counts no more in this term.
    Refused,
}

/// One replica's lease, as its holder keeps it.
#[derive(Debug, Clone)]
struct Replica<I> {
    deadline: Deadline<I>,
    renewal: Renewal<I>,
    /// The pauses of its retries; a fresh run after each success.
    retry: Backoff,
    /// Attempts failed since the last success.
    failures: u32,
}

/// A member's hold on the group's lease for one term.
#[derive(Debug, Clone)]
pub struct Holder<I> {
    timing: Timing,
    replicas: Vec<Replica<I>>,
    mutants: Mutants,
    /// Set once the lease is lost or expired.
    end: Option<Tenure<I>>,
    /// The tags its renews go out under.
    tags: Tags,
}

impl<I: Moment> Holder<I> {
    /// A hold on `replicas` leases (1 today), each won by a request sent at `sent`.
    pub fn new(timing: &Timing, sent: I, replicas: usize, mutants: Mutants) -> Self {
        let deadline = Deadline::from_sent(sent, timing);
        let fresh = || Backoff::new(Pace::RENEW_RETRY_LEAST, Pace::RENEW_RETRY_LONGEST);
        Self {
            timing: *timing,
            replicas: (0..replicas.max(1))
                .map(|_| Replica {
                    deadline,
                    renewal: Renewal::Due(sent + timing.renew_interval),
                    retry: fresh(),
                    failures: 0,
                })
                .collect(),
            mutants,
            end: None,
            tags: Tags::default(),
        }
    }

    /// A hold on the replicas' leases as an attempt on a majority won them, one a place in the
    /// set's order: `Some` for a lease held that counts, renewed from its own send; `None` for
    /// one not held, which counts for nobody in this term. An empty list is the one account's
    /// lease, won by a request sent at `sent`.
    pub fn with_leases(
        timing: &Timing,
        sent: I,
        leases: &[Option<Deadline<I>>],
        mutants: Mutants,
    ) -> Self {
        let mut holder = Self::new(timing, sent, leases.len(), mutants);
        let earliest = leases.iter().flatten().min_by_key(|d| d.sent).copied();
        for (r, lease) in holder.replicas.iter_mut().zip(leases) {
            match lease {
                Some(deadline) => {
                    r.deadline = *deadline;
                    r.renewal = Renewal::Due(deadline.sent + timing.renew_interval);
                }
                None => {
                    r.deadline = earliest.unwrap_or(r.deadline);
                    r.renewal = Renewal::Refused;
                }
            }
        }
        holder
    }

    /// How many replicas must count for the lease to be held: a majority.
    pub fn majority(&self) -> usize {
        let k = self.replicas.len() / 2 + 1;
        (k - usize::from(self.mutants.minority_leads)).max(1)
    }

    /// Whether the lease on `replica` counts: won with the term or since, and not refused.
    pub fn holds(&self, replica: usize) -> bool {
        (self.replicas.get(replica)).is_some_and(|r| r.renewal != Renewal::Refused)
    }

    /// A replica not held was won back with the term's epoch written there, its lease's
    /// `deadline` counted from its acquire's send (docs/quorum.md, the rule *Renewing*): it
    /// counts from now on, renewed `R` after that send like the others. False (and nothing
    /// changes) once the term's lease is lost or expired, or for a replica held already.
    pub fn join(&mut self, replica: usize, deadline: Deadline<I>) -> bool {
        if self.end.is_some() || self.holds(replica) {
            return false;
        }
        let Some(r) = self.replicas.get_mut(replica) else {
            return false;
        };
        *r = Replica {
            deadline,
            renewal: Renewal::Due(deadline.sent + self.timing.renew_interval),
            retry: Backoff::new(Pace::RENEW_RETRY_LEAST, Pace::RENEW_RETRY_LONGEST),
            failures: 0,
        };
        true
    }

    /// The lease as it stands: the k-th latest deadline of the replicas that count, or how the
    /// term ended.
    pub fn tenure(&self) -> Tenure<I> {
        self.end.unwrap_or(Tenure::Held(self.deadline()))
    }

    /// The group's deadline: the k-th latest of the replicas' that still count (refused ones
    /// count for nobody), `k` a majority.
    fn deadline(&self) -> Deadline<I> {
        let counted = (self.replicas.iter())
            .filter(|r| r.renewal != Renewal::Refused)
            .map(|r| r.deadline);
        let k = match self.mutants.deadline_from_latest {
            true => 1,
            false => self.majority(),
        };
        crate::quorum::kth_latest(counted, k).unwrap_or_else(|| {
            // Fewer than a majority count: the earliest deadline of all bounds the body.
            (self.replicas.iter())
                .map(|r| r.deadline)
                .min_by_key(|d| d.sent)
                .expect("a hold has at least one replica")
        })
    }

    /// The renew to send now under its tag, if one is due. A renew due at or past the stop
    /// deadline is not sent: the term has expired (rule 3).
    pub fn poll_request(&mut self, now: I) -> Option<Send<Renew<I>>> {
        if self.end.is_some() {
            return None;
        }
        let stop_at = self.deadline().stop_at;
        if now >= stop_at {
            self.end = Some(Tenure::Expired(self.deadline()));
            return None;
        }
        let timeout = Pace::new(&self.timing).request_timeout();
        for (replica, r) in self.replicas.iter_mut().enumerate() {
            if let Renewal::Due(at) = r.renewal
                && now >= at
            {
                let tag = self.tags.fresh();
                r.renewal = Renewal::InFlight(tag);
                let limit = (now + timeout).min(stop_at);
                return Some(Send {
                    tag,
                    request: Renew { replica, limit },
                });
            }
        }
        None
    }

    /// When to ask [`Holder::poll_request`] again, unless an answer comes first: the next renew
    /// due, or none while every renew is on its way.
    pub fn poll_timeout(&self) -> Option<I> {
        if self.end.is_some() {
            return None;
        }
        self.replicas
            .iter()
            .filter_map(|r| match r.renewal {
                Renewal::Due(at) => Some(at),
                _ => None,
            })
            .min()
    }

    /// What ends the holder's wait: the answers to the renews on their way, or the next renew
    /// due.
    pub fn waiting(&self) -> Waiting<I> {
        let answers = (self.replicas.iter())
            .filter_map(|r| match r.renewal {
                Renewal::InFlight(tag) if self.end.is_none() => Some(tag),
                _ => None,
            })
            .collect();
        Waiting {
            answers,
            until: self.poll_timeout(),
        }
    }

    /// The answer to a renew, heard at `now`; its deadline counts from the instant the renew was
    /// sent (rule 2). `None` for an answer no longer awaited (the term is over). `draw` is the
    /// shell's uniform draw in `[0, 1)`, taken only if a retry's pause needs it.
    pub fn handle_answer(
        &mut self,
        now: I,
        answer: exchange::Answer<I, Reply>,
        draw: impl FnOnce() -> f64,
    ) -> Option<Note<I>> {
        if self.end.is_some() {
            return None;
        }
        let replica =
            (self.replicas.iter()).position(|r| r.renewal == Renewal::InFlight(answer.tag))?;
        let (sent, reply) = (answer.sent, answer.answer);
        let pace = Pace::new(&self.timing);
        let before = self.deadline();
        let r = &mut self.replicas[replica];
        let reply = match reply {
            Reply::Failed if self.mutants.count_unknown_outcome => Reply::Renewed,
            reply => reply,
        };
        match reply {
            Reply::Renewed => {
                let counted_from = if self.mutants.deadline_from_answer {
                    now
                } else {
                    sent
                };
                let deadline = Deadline::from_sent(counted_from, &self.timing);
                let failures = std::mem::take(&mut r.failures);
                r.deadline = deadline;
                r.renewal = Renewal::Due(deadline.sent + self.timing.renew_interval);
                r.retry = Backoff::new(Pace::RENEW_RETRY_LEAST, Pace::RENEW_RETRY_LONGEST);
                let took = now - sent;
                Some(Note::Renewed {
                    deadline: self.deadline(),
                    took,
                    slow: took > pace.slow_renew(),
                    failures,
                })
            }
            Reply::Refused { missing } => {
                r.renewal = Renewal::Refused;
                let counting = self
                    .replicas
                    .iter()
                    .filter(|r| r.renewal != Renewal::Refused)
                    .count();
                if counting < self.majority() {
                    self.end = Some(Tenure::Lost(before));
                }
                Some(Note::Lost { missing })
            }
            Reply::Failed => {
                r.failures += 1;
                let failures = r.failures;
                let left = before.stop_at - now;
                if left.is_zero() {
                    self.end = Some(Tenure::Expired(before));
                    return Some(Note::Expired { failures });
                }
                let pause = r.retry.next_pause(draw()).min(left);
                r.renewal = Renewal::Due(now + pause);
                Some(Note::Retrying { failures, left })
            }
        }
    }

    /// What to say when the body stopped at the stop deadline while renews were still on
    /// their way (their limit was that very deadline, rule 4): no renew succeeded in time, each
    /// unanswered one counted as failed. `None` when the holder said how its tenure ended
    /// already (an answer at the deadline, or a renew due past it).
    pub fn expiry(&self) -> Option<Note<I>> {
        if self.end.is_some() {
            return None;
        }
        let failures = (self.replicas.iter())
            .map(|r| r.failures + u32::from(matches!(r.renewal, Renewal::InFlight(_))))
            .max()
            .unwrap_or(0);
        Some(Note::Expired { failures })
    }

    /// Attempts failed since the last success, on the replica that failed most.
    pub fn failures(&self) -> u32 {
        self.replicas.iter().map(|r| r.failures).max().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    fn secs(s: f64) -> Duration {
        Duration::from_secs_f64(s)
    }

    /// A hold with the default timing on `replicas` leases won now: the timing, the instant
    /// the lease was won, and the holder.
    fn hold(replicas: usize, mutants: Mutants) -> (Timing, Instant, Holder<Instant>) {
        let (t, start) = (Timing::default(), Instant::now());
        (t, start, Holder::new(&t, start, replicas, mutants))
    }

    /// `reply` to the renew `send`, which went out at `sent`.
    fn reply(
        send: &Send<Renew<Instant>>,
        sent: Instant,
        reply: Reply,
    ) -> exchange::Answer<Instant, Reply> {
        exchange::Answer {
            tag: send.tag,
            sent,
            answer: reply,
        }
    }

    /// Renews every `R` from the last success's send; a failed renew is retried after a pause
    /// until the stop deadline; a renew never waits past the stop deadline (rule 4).
    #[test]
    fn renews_every_r_and_retries_until_the_stop_deadline() {
        let (t, start, mut h) = hold(1, Mutants::default());
        assert_eq!(h.poll_request(start), None);
        assert_eq!(h.poll_timeout(), Some(start + secs(4.0)));
        let at = start + secs(4.0);
        let renew = h.poll_request(at).expect("due");
        assert_eq!(renew.request.limit, at + secs(4.0));
        assert_eq!(h.poll_timeout(), None, "in flight");
        assert_eq!(h.waiting().answers, [renew.tag], "its answer is awaited");
        let answer = reply(&renew, at, Reply::Renewed);
        let note = h.handle_answer(at + secs(0.5), answer.clone(), || unreachable!());
        assert!(matches!(
            note,
            Some(Note::Renewed {
                slow: false,
                failures: 0,
                ..
            })
        ));
        assert_eq!(h.tenure(), Tenure::Held(Deadline::from_sent(at, &t)));
        assert_eq!(h.handle_answer(at, answer, || 0.0), None, "answered once");
        // Failures from here on: retried until the stop deadline, at 4 + 9 = 13 s.
        let mut now = at + secs(4.0);
        let mut tries = 0;
        while let Some(r) = h.poll_request(now) {
            assert!(r.request.limit <= at + secs(9.0));
            tries += 1;
            h.handle_answer(r.request.limit, reply(&r, now, Reply::Failed), || 0.5);
            match h.poll_timeout() {
                Some(next) => now = next,
                None => break,
            }
        }
        assert!(tries >= 2, "{tries}");
        assert_eq!(h.tenure(), Tenure::Expired(Deadline::from_sent(at, &t)));
        assert_eq!(h.poll_timeout(), None);
    }

    /// A body stopped at the stop deadline while the renew cut at that deadline was still on
    /// its way: the holder says no renew succeeded, that renew counted failed; once it has
    /// said how the tenure ended, it says nothing more.
    #[test]
    fn an_expiry_before_the_last_renew_is_answered_counts_it_failed() {
        let (_, start, mut h) = hold(1, Mutants::default());
        let renew = h.poll_request(start + secs(4.0)).expect("due");
        assert_eq!(renew.request.limit, start + secs(8.0));
        assert_eq!(h.expiry(), Some(Note::Expired { failures: 1 }));
        let failed = reply(&renew, start + secs(4.0), Reply::Failed);
        let said = h.handle_answer(start + secs(9.0), failed, || unreachable!());
        assert_eq!(said, Some(Note::Expired { failures: 1 }));
        assert_eq!(h.expiry(), None, "said once");
    }

    #[test]
    fn a_refusal_loses_the_lease_at_once_with_the_deadline_it_had() {
        let (t, start, mut h) = hold(1, Mutants::default());
        let at = start + secs(4.0);
        let renew = h.poll_request(at).expect("due");
        let refused = reply(&renew, at, Reply::Refused { missing: true });
        let note = h.handle_answer(at, refused, || 0.0);
        assert_eq!(note, Some(Note::Lost { missing: true }));
        assert_eq!(h.tenure(), Tenure::Lost(Deadline::from_sent(start, &t)));
    }

    /// With three replicas, the deadline is the second latest; one refusal keeps the lease,
    /// two lose it.
    #[test]
    fn three_replicas_hold_on_a_majority() {
        let (_, start, mut h) = hold(3, Mutants::default());
        let at = start + secs(4.0);
        let sent: Vec<_> = (0..3).map(|_| h.poll_request(at).unwrap()).collect();
        assert_eq!(
            sent.iter().map(|r| r.request.replica).collect::<Vec<_>>(),
            [0, 1, 2]
        );
        let refused = Reply::Refused { missing: false };
        h.handle_answer(at, reply(&sent[0], at, Reply::Renewed), || 0.0);
        assert_eq!(h.tenure().deadline().sent, start, "one of three renewed");
        h.handle_answer(at, reply(&sent[1], at, refused), || 0.0);
        assert!(h.tenure().is_held());
        h.handle_answer(at, reply(&sent[2], at, Reply::Renewed), || 0.0);
        assert_eq!(h.tenure().deadline().sent, at, "two of three renewed");
        let next = h.poll_timeout().unwrap();
        let renew = h.poll_request(next).unwrap();
        assert_eq!(renew.request.replica, 0);
        h.handle_answer(next, reply(&renew, next, refused), || 0.0);
        assert!(matches!(h.tenure(), Tenure::Lost(_)));
    }

    /// The quorum's mutants of the term (docs/quorum.md): one of three renewed is enough for
    /// `deadline-from-latest`; `minority-leads` holds on one of three; `count-unknown-outcome`
    /// takes a renew without an answer for a success.
    #[test]
    fn the_quorum_s_mutants_break_what_they_say() {
        let at = |start: Instant| start + secs(4.0);
        let latest = Mutants {
            deadline_from_latest: true,
            ..Mutants::default()
        };
        let (_, start, mut h) = hold(3, latest);
        let renew = h.poll_request(at(start)).unwrap();
        h.handle_answer(at(start), reply(&renew, at(start), Reply::Renewed), || 0.0);
        assert_eq!(h.tenure().deadline().sent, at(start), "the latest of three");

        let minority = Mutants {
            minority_leads: true,
            ..Mutants::default()
        };
        let (_, start, mut h) = hold(3, minority);
        assert_eq!(h.majority(), 1);
        let refused = Reply::Refused { missing: false };
        let sent: Vec<_> = (0..2).map(|_| h.poll_request(at(start)).unwrap()).collect();
        h.handle_answer(at(start), reply(&sent[0], at(start), refused), || 0.0);
        h.handle_answer(at(start), reply(&sent[1], at(start), refused), || 0.0);
        assert!(h.tenure().is_held(), "held on one of three");

        let unknown = Mutants {
            count_unknown_outcome: true,
            ..Mutants::default()
        };
        let (_, start, mut h) = hold(1, unknown);
        let renew = h.poll_request(at(start)).unwrap();
        h.handle_answer(
            at(start) + secs(4.0),
            reply(&renew, at(start), Reply::Failed),
            || 0.0,
        );
        assert_eq!(
            h.tenure().deadline().sent,
            at(start),
            "a failure taken for a renew"
        );
    }

    /// A replica not held joins with its own deadline, is renewed `R` after its acquire's
    /// send, and counts toward the majority from then on; one held, or a lost lease, takes
    /// no join.
    #[test]
    fn a_replica_won_back_joins_and_counts() {
        let t = Timing::default();
        let start = Instant::now();
        let d = Deadline::from_sent(start, &t);
        let mut h = Holder::with_leases(&t, start, &[Some(d), None, Some(d)], Mutants::default());
        assert!(!h.holds(1) && h.holds(0));
        let at = start + secs(6.0);
        let won_back = Deadline::from_sent(at, &t);
        assert!(!h.join(0, won_back), "held already");
        assert!(h.join(1, won_back));
        assert!(h.holds(1));
        assert_eq!(h.poll_timeout(), Some(start + t.renew_interval));
        // Renewed at 4 s on 0 and 2; 0 refused: 1 and 2 still hold the majority.
        let sent: Vec<_> = (0..2)
            .map(|_| h.poll_request(start + secs(4.0)).unwrap())
            .collect();
        assert_eq!(
            sent.iter().map(|r| r.request.replica).collect::<Vec<_>>(),
            [0, 2]
        );
        let refused = Reply::Refused { missing: false };
        let four = start + secs(4.0);
        h.handle_answer(at, reply(&sent[0], four, refused), || 0.0);
        h.handle_answer(at, reply(&sent[1], four, Reply::Renewed), || 0.0);
        assert!(h.tenure().is_held(), "1 and 2 count");
        assert_eq!(h.tenure().deadline(), Deadline::from_sent(four, &t));
        let renew = h.poll_request(at + t.renew_interval).unwrap();
        assert_eq!(renew.request.replica, 1, "renewed from its acquire's send");
        let next = h.poll_request(at + t.renew_interval).unwrap();
        assert_eq!(next.request.replica, 2);
        h.handle_answer(at, reply(&next, at, refused), || 0.0);
        assert!(matches!(h.tenure(), Tenure::Lost(_)));
        assert!(!h.join(0, won_back), "the lease is lost");
    }

    #[test]
    fn the_mutant_counts_the_deadline_from_the_answer() {
        let mutants = Mutants {
            deadline_from_answer: true,
            ..Mutants::default()
        };
        let (_, start, mut h) = hold(1, mutants);
        let at = start + secs(4.0);
        let renew = h.poll_request(at).unwrap();
        h.handle_answer(at + secs(2.0), reply(&renew, at, Reply::Renewed), || 0.0);
        assert_eq!(h.tenure().deadline().sent, at + secs(2.0));
    }
}
