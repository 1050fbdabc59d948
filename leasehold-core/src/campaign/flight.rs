//! The campaign's requests in flight ([`InFlight`]): each sent under a tag of its own, its
//! answer kept until what awaits it asks for it. The candidate's own requests and its rounds'
//! go out through it alike: one campaign is one exchange.

use super::messages::{Output, Reply, Request};
use crate::exchange::{Answer, Inbox, Send, Tag, Tags};

/// The tags given out and the answers not yet awaited.
#[derive(Debug)]
pub(super) struct InFlight<I, V, E> {
    /// Where each request's tag comes from: no two requests of a campaign share one.
    tags: Tags,
    /// The requests whose answers are still wanted, and those that came before they were
    /// awaited.
    inbox: Inbox<I, Reply<V, E>>,
}

impl<I, V, E> Default for InFlight<I, V, E> {
    fn default() -> Self {
        Self {
            tags: Tags::default(),
            inbox: Inbox::default(),
        }
    }
}

impl<I, V, E> InFlight<I, V, E> {
    /// Sends `request` under a new tag.
    pub(super) fn send<K>(
        &mut self,
        request: Request<I, K>,
        out: &mut Vec<Output<I, K, E>>,
    ) -> Tag {
        let tag = self.tags.fresh();
        self.inbox.sent(tag);
        out.push(Output::Send(Send { tag, request }));
        tag
    }

    /// `answer` came: it, if its request's answer is still wanted.
    pub(super) fn came(
        &mut self,
        answer: Answer<I, Reply<V, E>>,
    ) -> Option<Answer<I, Reply<V, E>>> {
        self.inbox.came(answer)
    }

    /// Keeps `answer`, which came before it was awaited.
    pub(super) fn keep(&mut self, answer: Answer<I, Reply<V, E>>) {
        self.inbox.keep(answer);
    }

    /// The answer under `tag`, if it came already.
    pub(super) fn take(&mut self, tag: Tag) -> Option<Answer<I, Reply<V, E>>> {
        self.inbox.take(tag)
    }

    /// The answer under `tag` is no longer wanted.
    pub(super) fn forget(&mut self, tag: Tag) {
        self.inbox.forget(tag);
    }

    /// No answer still on its way is wanted: what went beside an acquire, or was sent without
    /// being waited for, goes on alone.
    pub(super) fn forget_all<K>(&mut self, out: &mut Vec<Output<I, K, E>>) {
        for tag in self.inbox.forget_all() {
            out.push(Output::Forget(tag));
        }
    }
}
