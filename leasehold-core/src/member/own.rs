//! This member's own record ([`Own`]: what it publishes, whether the record says it, since
//! when it is a member), and the record keeper's questions answered from it and the line
//! ([`OnTheLine`]).

use super::kinds::Publish;
use crate::line::{Line, Place, Record, SlotBlob, Standing};
use crate::record::{self, Facts};
use crate::timing::Moment;
use std::time::Duration;

/// This member's own record: what it publishes, whether the record says it, and when the
/// record was created (its membership is counted from then).
#[derive(Debug, Clone)]
pub struct Own<I, P> {
    /// What the record is to say.
    pub published: P,
    /// Whether the record says it.
    pub written: bool,
    /// When the record was created (answered), for its `settled` mark.
    pub created: Option<I>,
}

impl<I, P> Own<I, P> {
    /// A member that has not joined yet, to publish `published`.
    pub fn new(published: P) -> Self {
        Self {
            published,
            written: false,
            created: None,
        }
    }
}

/// The line and this member's record at one instant, as the record keeper reads and changes
/// them ([`record::Grounds`]).
pub struct OnTheLine<'a, I, R: Record, S, P> {
    /// The line of succession.
    pub line: &'a mut Line<I, R, S>,
    /// This member's record.
    pub own: &'a mut Own<I, P>,
    /// The lease clock's now.
    pub now: I,
    /// The wall clock's now.
    pub wall: R::Wall,
    /// `[election].preempt_after`: a record says it is settled that long after its creation.
    pub settle_after: Option<Duration>,
    /// The shell's uniform draws in `[0, 1)`.
    pub draw: &'a mut dyn FnMut() -> f64,
}

impl<I, R, S, P> record::Grounds<I, P> for OnTheLine<'_, I, R, S, P>
where
    I: Moment,
    R: Record,
    S: SlotBlob<Wall = R::Wall>,
    P: Publish,
{
    fn facts(&self) -> Facts<I> {
        let joined = self.line.standing == Standing::Joined;
        let unsettled = joined && self.own.published.settled().is_none();
        Facts {
            joined,
            written: self.own.written,
            listed: self.line.listed,
            leading: self.line.leading,
            // A member that polls lists as often as the leader (the keeper says why); a leader
            // does not poll (its place in line is not asked).
            polls: joined
                && !self.line.leading
                && self.line.place(self.now, self.wall) == Place::Poll,
            slotted: self.line.slots > 1,
            terms_begun: self.line.terms_begun,
            // `preempt_after` after its creation, while it does not say so yet.
            settle_at: (self.settle_after)
                .and_then(|after| self.own.created.filter(|_| unsettled).map(|c| c + after)),
        }
    }

    fn draw(&mut self) -> f64 {
        (self.draw)()
    }

    fn published(&self) -> P {
        self.own.published.clone()
    }

    fn joining(&mut self) -> P {
        self.own.published.set_settled(None);
        self.own.created = None;
        self.own.published.clone()
    }

    fn created(&mut self, now: I) {
        self.own.created = Some(now);
    }

    /// From now on a leader of lower priority may hand over to this member
    /// (docs/preferred.md).
    fn settle(&mut self, now: I) {
        if let Some(created) = self.own.created {
            let settled = now.max(created) - created;
            self.own.published.set_settled(Some(settled));
            self.own.written = false;
        }
    }

    fn wrote(&mut self, record: &P) {
        self.own.written = self.own.published == *record;
    }

    fn held(&mut self) {
        self.line.own_record_held();
    }

    fn stand(&mut self, standing: Standing) -> bool {
        let changed = self.line.standing != standing;
        self.line.standing = standing;
        changed
    }
}
