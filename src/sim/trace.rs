//! What happened in a simulated history: one list of events, each at an instant of virtual
//! time. The checker reads it (never the elector's internal state), its hash tells whether two
//! runs of one seed were the same, and its readable form is what a failing seed prints.

use crate::store::{LeaseId, Op};
use std::cell::RefCell;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A member of the simulated group, by number (its identity is in [`What::Up`]).
pub type MemberId = usize;

/// One event of a history.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Event {
    /// Since the history began (virtual time).
    pub at: Duration,
    /// What happened.
    pub what: What,
}

/// What happened. `member` is always the member it happened to (or that did it).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[allow(missing_docs)] // each field is what its name says; the variant's line says the rest
pub enum What {
    /// A member's process started (again), as `identity`, with its `[election].priority`,
    /// `[lease].slots`, the wake-up URL it advertises (`None`: none), and whether it is a
    /// daemon whose children have a guard (`guarded`) or the library's, whose body is a task of
    /// its own.
    Up {
        member: MemberId,
        identity: String,
        priority: i64,
        slots: u32,
        url: Option<String>,
        guarded: bool,
    },
    /// Its process was killed (SIGKILL): its tasks and its body end at once.
    Crash { member: MemberId },
    /// It was asked to stop (SIGTERM).
    Stop { member: MemberId },
    /// Its elector returned (a stop, or a body that asked to end with its code).
    Exit { member: MemberId },
    /// Its process was frozen (SIGSTOP) alone, its children and their guards running on; or,
    /// with `machine`, its whole machine was paused (a paused VM, `docker pause`) ...
    Freeze { member: MemberId, machine: bool },
    /// ... and thawed (SIGCONT).
    Thaw { member: MemberId },
    /// A fault of `kind` began (`until` none: it is over at once).
    Fault {
        kind: &'static str,
        detail: String,
        until: Option<Duration>,
    },
    /// Member `by` created slot `slot`'s missing blob plainly while no record but its own was
    /// leased: the group's whole state in storage was gone, which is what a brand-new group
    /// looks like (docs/safety.md, "Recovery from anything": one leads at once). Legitimate only
    /// if `by` never saw its group led; the checker judges that.
    Erased { slot: u32, by: MemberId },
    /// The body of a term of `slot` started with `epoch`, under lease `lease`.
    BodyStart {
        member: MemberId,
        slot: u32,
        epoch: u64,
        lease: LeaseId,
    },
    /// That body is gone (`how`: stopped, killed, ended by itself, crashed with its member).
    BodyGone {
        member: MemberId,
        slot: u32,
        epoch: u64,
        how: &'static str,
    },
    /// That body survived its kill (a process stuck in the kernel): it lives on until its
    /// `BodyGone`, and its lease must not move before it has surely expired.
    BodyStuck {
        member: MemberId,
        slot: u32,
        epoch: u64,
    },
    /// The member is out of the election until `until` (a health cooldown, a crash-loop
    /// backoff).
    Standby { member: MemberId, until: Duration },
    /// A health step-down's standby ends at `until` after all: the elector counts it from the
    /// body's end, which came later than its stop (a body that takes its `G`, or outlives it).
    StandbyMoved { member: MemberId, until: Duration },
    /// The member's deploy is broken until `until`: its children fail at once.
    Broken { member: MemberId, until: Duration },
    /// The member gave up a term's lease without handing it to anyone (released it, or
    /// tried to).
    Released { member: MemberId },
    /// The member's handoff of `slot` to the member named `to` landed (Lease Blob `change`);
    /// `record`: whether `to`'s record was there then (the world's look at the store).
    HandedTo {
        member: MemberId,
        to: String,
        slot: u32,
        record: bool,
    },
    /// The member's wake-up to the member named `to` ended so (`accepted`, `too soon`,
    /// `refused`: another process answers at its URL, `unreachable`: nothing listens there,
    /// `timeout`); without a wake token (`token` false) it asked only whether a process
    /// listens there (a leader's probe before it steps down for a preferred member).
    Wake {
        member: MemberId,
        to: String,
        answer: &'static str,
        token: bool,
    },
    /// The body of a term of `slot` got its stop signal.
    BodyStopping {
        member: MemberId,
        slot: u32,
        epoch: u64,
    },
    /// The line as the world has it (the store's member records, in succession order), taken
    /// at a cause: what the checker judges a handover or a change of leader by.
    Line { records: Vec<InLine> },
    /// The store applied a request `op` of the member's, sent at `sent` and naming lease
    /// `lease`, successfully or not; for an epoch write, the `epoch` its blob records after it;
    /// `led`: whether that blob was leased or recorded a holder then.
    Applied {
        member: MemberId,
        op: Op,
        lease: Option<LeaseId>,
        sent: Duration,
        ok: bool,
        epoch: Option<u64>,
        led: bool,
    },
    /// The member heard the answer (`ok` or an error) to a request `op` it sent at `sent`,
    /// naming lease `lease`.
    Answered {
        member: MemberId,
        op: Op,
        lease: Option<LeaseId>,
        sent: Duration,
        ok: bool,
    },
    /// On a group whose lease lives on a replica set (docs/quorum.md): `what` (an
    /// [`What::Applied`] or [`What::Answered`]) happened on the store `replica` (0 the first
    /// account's, where the member records live; past the set's last, a store only a member
    /// of another set uses). A history on one account records none (its trace hash is what it
    /// was).
    OnReplica { replica: usize, what: Box<What> },
    /// Virtual time stood still: `events` events came at one instant, the last of them for
    /// `member` (none: the world's own), and the history was ended there (rule (j)).
    StoodStill {
        events: u64,
        member: Option<MemberId>,
    },
}

impl What {
    /// Whether the readable trace shows it (requests are in the hash, not on screen).
    pub fn is_notable(&self) -> bool {
        !matches!(
            self,
            What::Applied { .. }
                | What::Answered { .. }
                | What::Line { .. }
                | What::OnReplica { .. }
        )
    }
}

/// One member record in [`What::Line`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct InLine {
    /// The identity it names.
    pub identity: String,
    /// Its `[election].priority`.
    pub priority: i64,
    /// The member whose running process holds the record's lease; `None`: a record whose
    /// process is gone (a crashed member's, until its lease runs out).
    pub owner: Option<MemberId>,
    /// Whether it advertises a wake-up URL.
    pub advertised: bool,
    /// Whether it says the member stands by (a cooldown).
    pub standby: bool,
    /// When it was created, by the store's clock (whole seconds): its place among equals.
    pub joined: i64,
}

/// The events of one history, shared by everything that records into it (the store's network,
/// the members' bodies and observers, the director).
#[derive(Clone)]
pub(crate) struct Recorder {
    events: Arc<Mutex<Vec<Event>>>,
    start: tokio::time::Instant,
    /// The world's look at the line ([`Recorder::line`]), once the world has set it.
    line: Arc<std::sync::OnceLock<LineLook>>,
}

/// How the world reads the line for [`What::Line`].
pub(crate) type LineLook = Box<dyn Fn() -> Vec<InLine> + Send + Sync>;

impl Recorder {
    /// The events a trace has room for from the start: a drawn history of 10 minutes has
    /// about 4,200 on average, and a list that grew to it event by event was copied at each
    /// doubling on the way (a third of the time recording took).
    const ROOM: usize = 8192;

    pub fn new() -> Self {
        Self {
            events: Arc::new(Mutex::new(Vec::with_capacity(Self::ROOM))),
            start: tokio::time::Instant::now(),
            line: Arc::default(),
        }
    }

    /// From now on [`Recorder::line`] records what `look` sees.
    pub fn look_at_the_line_with(&self, look: LineLook) {
        let _ = self.line.set(look);
    }

    /// The line as the world has it now.
    pub fn look(&self) -> Vec<InLine> {
        self.line.get().map(|look| look()).unwrap_or_default()
    }

    /// Records the line as the world has it now.
    pub fn line(&self) {
        if let Some(look) = self.line.get() {
            let records = look();
            self.record(What::Line { records });
        }
    }

    /// Since the history began.
    pub fn now(&self) -> Duration {
        tokio::time::Instant::now().saturating_duration_since(self.start)
    }

    /// `at` (tokio's clock) as time since the history began.
    pub fn since_start(&self, at: tokio::time::Instant) -> Duration {
        at.saturating_duration_since(self.start)
    }

    /// The instant the history began.
    pub fn start(&self) -> tokio::time::Instant {
        self.start
    }

    pub fn record(&self, what: What) {
        self.record_at(self.now(), what);
    }

    /// Records `what` at `at` since the history began.
    fn record_at(&self, at: Duration, what: What) {
        self.events
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(Event { at, what });
    }

    /// The member whose body runs in `slot` now, and since when.
    pub fn holder(&self, slot: u32) -> Option<(MemberId, Duration)> {
        holder(&self.events.lock().unwrap_or_else(|e| e.into_inner()), slot)
    }

    /// The events so far, taken (not copied: a trace is thousands of events): what is
    /// recorded after this starts a new list.
    pub fn take_events(&self) -> Vec<Event> {
        std::mem::take(&mut *self.events.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

/// The events of one history recorded by its one owner on its thread, without a lock: the
/// synchronous engine's [`Recorder`], which records at the instants it is given (its virtual
/// time is its own queue's, not tokio's clock).
pub(crate) struct Trace {
    events: RefCell<Vec<Event>>,
    /// Each slot's last body start so far (its member, when), and whether that member's body
    /// went or stuck since: [`holder`] kept as the events come, for the director asks at each
    /// look, and a trace is thousands of events to scan back.
    starts: RefCell<Vec<Option<(MemberId, Duration, bool)>>>,
}

impl Trace {
    /// Its histories' traces are a little shorter than the tokio engine's (about 4,300 events
    /// on average): room for three quarters of the tokio engine's, which few outgrow (half of
    /// them outgrew half of it, each copied whole at the doubling).
    pub fn new() -> Self {
        Self {
            events: RefCell::new(Vec::with_capacity(Recorder::ROOM / 4 * 3)),
            starts: RefCell::default(),
        }
    }

    /// Records `what` at `at` since the history began.
    pub fn record_at(&self, at: Duration, what: What) {
        match &what {
            What::BodyStart { member, slot, .. } => {
                let mut starts = self.starts.borrow_mut();
                let slot = *slot as usize;
                if starts.len() <= slot {
                    starts.resize(slot + 1, None);
                }
                starts[slot] = Some((*member, at, false));
            }
            What::BodyGone { member, .. } | What::BodyStuck { member, .. } => {
                for (m, _, ended) in self.starts.borrow_mut().iter_mut().flatten() {
                    *ended |= m == member;
                }
            }
            _ => {}
        }
        self.events.borrow_mut().push(Event { at, what });
    }

    /// The member whose body runs in `slot` now, and since when (as [`holder`] finds it).
    pub fn holder(&self, slot: u32) -> Option<(MemberId, Duration)> {
        let starts = self.starts.borrow();
        let (member, at, ended) = (*starts.get(slot as usize)?)?;
        (!ended).then_some((member, at))
    }

    /// The events so far, taken.
    pub fn take_events(&self) -> Vec<Event> {
        self.starts.borrow_mut().clear();
        std::mem::take(&mut *self.events.borrow_mut())
    }
}

/// The member whose body runs in `slot` at the end of `events`, and since when.
fn holder(events: &[Event], slot: u32) -> Option<(MemberId, Duration)> {
    let mut ended: Vec<MemberId> = Vec::new();
    for e in events.iter().rev() {
        match &e.what {
            What::BodyGone { member, .. } | What::BodyStuck { member, .. } => ended.push(*member),
            What::BodyStart {
                member, slot: s, ..
            } if *s == slot => {
                return (!ended.contains(member)).then_some((*member, e.at));
            }
            _ => {}
        }
    }
    None
}

/// FNV-1a over the events' fields, as `Hash` feeds them: the same history gives the same hash
/// on every run and every machine of one byte order (it depends on nothing but the events, and
/// on no hasher of the standard library, whose algorithm may change).
pub fn hash(events: &[Event]) -> u64 {
    let mut h = Fnv::default();
    events.hash(&mut h);
    h.finish()
}

/// Folds one more history's hash into a run's.
pub fn combine(run: u64, history: u64) -> u64 {
    let mut h = Fnv(run);
    h.write_u64(history);
    h.finish()
}

/// The 64-bit FNV-1a hash (numbers folded a word at a time).
struct Fnv(u64);

impl Default for Fnv {
    fn default() -> Self {
        Self(0xcbf2_9ce4_8422_2325)
    }
}

impl Hasher for Fnv {
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 ^= u64::from(*b);
            self.0 = self.0.wrapping_mul(0x0100_0000_01b3);
        }
    }

    /// A whole word at a time (most fields are numbers: instants, ids, epochs, flags).
    fn write_u64(&mut self, n: u64) {
        self.0 ^= n;
        self.0 = self.0.wrapping_mul(0x0100_0000_01b3);
    }

    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }

    fn write_u32(&mut self, n: u32) {
        self.write_u64(u64::from(n));
    }

    fn write_u8(&mut self, n: u8) {
        self.write_u64(u64::from(n));
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// An instant of a history, for people: `123.456s`.
pub fn at(d: Duration) -> String {
    format!("{}.{:03}s", d.as_secs(), d.subsec_millis())
}

impl fmt::Display for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:>10}  ", at(self.at))?;
        match &self.what {
            What::Up {
                member,
                identity,
                priority,
                slots,
                url,
                guarded,
            } => write!(
                f,
                "m{member} up as {identity} (priority {priority}, slots {slots}{}{})",
                url.as_ref()
                    .map_or(String::new(), |url| format!(", at {url}")),
                if *guarded {
                    ""
                } else {
                    ", the library's: no guard"
                }
            ),
            What::Crash { member } => write!(f, "m{member} CRASHED (SIGKILL)"),
            What::Stop { member } => write!(f, "m{member} asked to stop (SIGTERM)"),
            What::Exit { member } => write!(f, "m{member} exited"),
            What::Freeze {
                member,
                machine: false,
            } => write!(f, "m{member} FROZEN (SIGSTOP of its process alone)"),
            What::Freeze {
                member,
                machine: true,
            } => write!(f, "m{member} PAUSED (its whole machine)"),
            What::Thaw { member } => write!(f, "m{member} thawed"),
            What::Fault {
                kind,
                detail,
                until,
            } => {
                write!(f, "FAULT {kind}: {detail}")?;
                match until {
                    Some(u) => write!(f, " (until {})", at(*u)),
                    None => Ok(()),
                }
            }
            What::Erased { slot, by } => write!(
                f,
                "ERASED: m{by} created slot {slot}'s blob plainly, no other member record leased (a brand-new group to whoever never saw it led)"
            ),
            What::BodyStart {
                member,
                slot,
                epoch,
                ..
            } => write!(f, "m{member} body START slot {slot} epoch {epoch}"),
            What::BodyGone {
                member,
                slot,
                epoch,
                how,
            } => write!(f, "m{member} body gone ({how}) slot {slot} epoch {epoch}"),
            What::BodyStuck {
                member,
                slot,
                epoch,
            } => write!(
                f,
                "m{member} body STUCK (survives its kill) slot {slot} epoch {epoch}"
            ),
            What::Standby { member, until } => {
                write!(f, "m{member} stands by until {}", at(*until))
            }
            What::StandbyMoved { member, until } => write!(
                f,
                "m{member} stands by until {} (counted from its body's end)",
                at(*until)
            ),
            What::Broken { member, until } => write!(
                f,
                "m{member}'s deploy BROKEN until {}: its children fail at once",
                at(*until)
            ),
            What::Released { member } => write!(f, "m{member} released its lease"),
            What::HandedTo {
                member,
                to,
                slot,
                record,
            } => {
                write!(f, "m{member} handed slot {slot} to {to}")?;
                match record {
                    true => Ok(()),
                    false => write!(f, " (its record is gone)"),
                }
            }
            What::Wake {
                member,
                to,
                answer,
                token,
            } => match token {
                true => write!(f, "m{member} woke {to}: {answer}"),
                false => write!(f, "m{member} probed {to}: {answer}"),
            },
            What::BodyStopping {
                member,
                slot,
                epoch,
            } => write!(f, "m{member} body told to stop, slot {slot} epoch {epoch}"),
            What::Line { records } => {
                write!(f, "line:")?;
                for r in records {
                    write!(f, " {}", r.identity)?;
                    match r.owner {
                        Some(m) => write!(f, "=m{m}")?,
                        None => write!(f, "=DEAD")?,
                    }
                    if r.priority != 0 {
                        write!(f, "(p{})", r.priority)?;
                    }
                    if r.advertised {
                        write!(f, "+url")?;
                    }
                    if r.standby {
                        write!(f, "+standby")?;
                    }
                }
                Ok(())
            }
            What::Applied {
                member,
                op,
                sent,
                ok,
                ..
            } => write!(
                f,
                "m{member} {} applied ({}, sent {})",
                op.as_str(),
                if *ok { "ok" } else { "refused" },
                at(*sent)
            ),
            What::Answered {
                member,
                op,
                sent,
                ok,
                ..
            } => write!(
                f,
                "m{member} {} answered ({}, sent {})",
                op.as_str(),
                if *ok { "ok" } else { "error" },
                at(*sent)
            ),
            What::StoodStill { events, member } => match member {
                Some(m) => write!(
                    f,
                    "TIME STOOD STILL: {events} events at one instant, for m{m}"
                ),
                None => write!(f, "TIME STOOD STILL: {events} events at one instant"),
            },
            What::OnReplica { replica, what } => {
                let inner = Event {
                    at: self.at,
                    what: (**what).clone(),
                }
                .to_string();
                let inner = inner.trim_start().split_once("  ").map_or("", |(_, w)| w);
                write!(f, "{inner} on replica {replica}")
            }
        }
    }
}
