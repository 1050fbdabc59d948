//! What a role and the shell that drives it say to each other, whatever the role: the role
//! sends requests, each under a [`Tag`] of its own, and is told their answers by tag with the
//! instant each request was sent ([`Answer`]); it says what ends its wait ([`Waiting`]: the
//! answers it awaits, the one instant it would be woken at); it keeps an answer that came
//! before it was awaited until it is ([`Inbox`]). The shell carries the requests out in any
//! order and reports what comes back as it comes; it decides nothing.
//!
//! Every role speaks it: the campaign ([`crate::campaign`]), the record keeper
//! ([`crate::record`]), a leader's term ([`crate::leading`]: the holder, the lookout, the
//! handoff and its confirmation) and a late acquire's settling ([`crate::late`]), so that one
//! member can drive them all over one exchange.

/// Which request an answer belongs to: unique among the requests of one member's role.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Tag(u64);

/// Hands out tags, each once.
#[derive(Debug, Clone, Default)]
pub struct Tags {
    next: u64,
}

impl Tags {
    /// A tag not handed out before.
    pub fn fresh(&mut self) -> Tag {
        self.next += 1;
        Tag(self.next)
    }
}

/// What a member keeps by tag for the requests on their way (a handful at a time), in tag
/// order: a list, as a map of a few entries searched and shifted in place costs less than a
/// tree's nodes, and a member asks for one at every answer.
#[derive(Debug, Clone)]
pub(crate) struct ByTag<V> {
    entries: Vec<(Tag, V)>,
}

impl<V> Default for ByTag<V> {
    fn default() -> Self {
        Self {
            entries: Vec::new(),
        }
    }
}

impl<V> ByTag<V> {
    /// Where `tag` is, or would go.
    fn find(&self, tag: Tag) -> Result<usize, usize> {
        // Tags are handed out in order, so a new one goes last: look from the end.
        match self.entries.last() {
            Some((last, _)) if *last < tag => Err(self.entries.len()),
            _ => self.entries.binary_search_by_key(&tag, |(t, _)| *t),
        }
    }

    /// Keeps `value` under `tag` (replacing what was there).
    pub(crate) fn insert(&mut self, tag: Tag, value: V) {
        match self.find(tag) {
            Ok(at) => self.entries[at].1 = value,
            Err(at) => self.entries.insert(at, (tag, value)),
        }
    }

    /// Takes what `tag` keeps.
    pub(crate) fn remove(&mut self, tag: &Tag) -> Option<V> {
        let at = self.find(*tag).ok()?;
        Some(self.entries.remove(at).1)
    }

    /// What `tag` keeps, to change.
    pub(crate) fn get_mut(&mut self, tag: &Tag) -> Option<&mut V> {
        let at = self.find(*tag).ok()?;
        Some(&mut self.entries[at].1)
    }

    /// Every entry, in tag order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&Tag, &V)> {
        self.entries.iter().map(|(t, v)| (t, v))
    }

    /// Every tag, in order.
    pub(crate) fn keys(&self) -> impl Iterator<Item = &Tag> {
        self.entries.iter().map(|(t, _)| t)
    }
}

/// A request to send, under its tag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Send<R> {
    /// What its answer will come back with.
    pub tag: Tag,
    /// The request.
    pub request: R,
}

/// The answer to the request sent under `tag` at `sent`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer<I, A> {
    /// The request's tag.
    pub tag: Tag,
    /// When the request was sent: what a lease it took is counted from (rule 2 of
    /// docs/safety.md).
    pub sent: I,
    /// What came back.
    pub answer: A,
}

/// What ends a role's wait, besides the events of its own domain: an answer to one of
/// `answers`, or the instant `until`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Waiting<I> {
    /// The requests whose answers it awaits now: only these need be reported now (an answer
    /// to another is kept until asked for, [`Inbox`]).
    pub answers: Vec<Tag>,
    /// The instant it is woken at, if no answer came first (one timer at a time).
    pub until: Option<I>,
}

impl<I> Default for Waiting<I> {
    fn default() -> Self {
        Self {
            answers: Vec::new(),
            until: None,
        }
    }
}

/// The requests on their way whose answers a role still wants, and the answers that came
/// before they were awaited. An answer to a request it no longer wants is dropped.
#[derive(Debug, Clone)]
pub struct Inbox<I, A> {
    /// Sent, not answered, still wanted.
    open: Vec<Tag>,
    /// Answered before awaited.
    kept: Vec<Answer<I, A>>,
}

impl<I, A> Default for Inbox<I, A> {
    fn default() -> Self {
        Self {
            open: Vec::new(),
            kept: Vec::new(),
        }
    }
}

impl<I, A> Inbox<I, A> {
    /// `tag` was sent: its answer is wanted.
    pub fn sent(&mut self, tag: Tag) {
        self.open.push(tag);
    }

    /// An answer came: `Some` if its request is still wanted (then it is no longer open).
    pub fn came(&mut self, answer: Answer<I, A>) -> Option<Answer<I, A>> {
        let at = self.open.iter().position(|t| *t == answer.tag)?;
        self.open.remove(at);
        Some(answer)
    }

    /// Keeps `answer` until [`Inbox::take`] asks for its tag.
    pub fn keep(&mut self, answer: Answer<I, A>) {
        self.kept.push(answer);
    }

    /// The answer to `tag`, if it came and was kept.
    pub fn take(&mut self, tag: Tag) -> Option<Answer<I, A>> {
        let at = self.kept.iter().position(|a| a.tag == tag)?;
        Some(self.kept.remove(at))
    }

    /// The requests still open (sent, unanswered) and no longer wanted: forgotten, their
    /// answers dropped when they come.
    pub fn forget_all(&mut self) -> Vec<Tag> {
        self.kept.clear();
        std::mem::take(&mut self.open)
    }

    /// `tag` is no longer wanted (its answer is someone else's now).
    pub fn forget(&mut self, tag: Tag) {
        self.open.retain(|t| *t != tag);
        self.kept.retain(|a| a.tag != tag);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An answer awaited later is kept until asked; one no longer wanted is dropped.
    #[test]
    fn answers_are_kept_until_asked_and_dropped_once_forgotten() {
        let mut tags = Tags::default();
        let (a, b) = (tags.fresh(), tags.fresh());
        assert_ne!(a, b);
        let mut inbox = Inbox::<u32, &str>::default();
        inbox.sent(a);
        inbox.sent(b);
        let early = inbox.came(Answer {
            tag: b,
            sent: 1,
            answer: "b",
        });
        inbox.keep(early.expect("b is wanted"));
        assert_eq!(inbox.take(a), None, "a has not come");
        assert_eq!(inbox.take(b).map(|x| x.answer), Some("b"));
        assert_eq!(inbox.forget_all(), [a]);
        let late = Answer {
            tag: a,
            sent: 1,
            answer: "a",
        };
        assert_eq!(inbox.came(late), None, "a was forgotten");
    }
}
