//! The term's body as the driver runs it ([`Running`]): started under the term the member
//! won, its tenure fed from the member's [`Tenure`] outputs, told to stop once through a token
//! of its own (the member says when: a shutdown, a preemption), its end reported; a body that
//! outlived its kill is waited for until it is gone ([`Body::gone`]). Between terms it answers
//! whether a term could start it now ([`Body::may_campaign`]).

use crate::elector::term::{Body, Tenure, Term, TermEnd, term_span};
use futures::future::BoxFuture;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

/// Where the body stands: each running future holds the body and gives it back at its end.
enum At<'a, B> {
    /// Not running.
    Idle(&'a mut B),
    /// Running its term.
    Running(BoxFuture<'a, (TermEnd, &'a mut B)>),
    /// It outlived its kill: waited for until it is gone.
    Stuck(BoxFuture<'a, &'a mut B>),
    /// Between two of the above, for an instant.
    Moving,
}

/// What the body came to.
pub(super) enum Gone {
    /// It ended so ([`TermEnd::Overran`]: killed, still there).
    Ended(TermEnd),
    /// The body that outlived its kill is gone at last.
    AtLast,
}

/// The body of the member's terms.
pub(super) struct Running<'a, B> {
    at: At<'a, B>,
    tenure: Option<watch::Sender<Tenure>>,
    stop: CancellationToken,
}

impl<'a, B: Body> Running<'a, B> {
    pub(super) fn new(body: &'a mut B) -> Self {
        Self {
            at: At::Idle(body),
            tenure: None,
            stop: CancellationToken::new(),
        }
    }

    /// Starts the body under `term`, for the member `identity`.
    pub(super) fn start(&mut self, term: Term, identity: &str) {
        let At::Idle(body) = std::mem::replace(&mut self.at, At::Moving) else {
            unreachable!("a body starts only once the last one is gone");
        };
        let (tx, rx) = watch::channel(Tenure::Held(term.deadline));
        self.tenure = Some(tx);
        self.stop = CancellationToken::new();
        let (stop, span) = (self.stop.clone(), term_span(identity, term.epoch));
        self.at = At::Running(Box::pin(
            async move {
                let end = body.run(&term, rx, &stop).await;
                (end, body)
            }
            .instrument(span),
        ));
    }

    /// The lease as the holder sees it now.
    pub(super) fn tenure(&self, tenure: Tenure) {
        if let Some(tx) = &self.tenure {
            // A send error only means the body no longer watches.
            let _ = tx.send(tenure);
        }
    }

    /// Tells the body to stop.
    pub(super) fn stop(&self) {
        self.stop.cancel();
    }

    /// Whether a term could start the body now: not while one runs or outlived its kill.
    pub(super) fn may_campaign(&mut self) -> bool {
        match &mut self.at {
            At::Idle(body) => body.may_campaign(),
            _ => false,
        }
    }

    /// Whether a body outlived its kill and is still there.
    pub(super) fn is_stuck(&self) -> bool {
        matches!(self.at, At::Stuck(_))
    }

    /// What the body comes to next (never, while none runs).
    pub(super) async fn gone(&mut self) -> Gone {
        match &mut self.at {
            At::Running(run) => {
                let (end, body) = run.await;
                self.tenure = None;
                self.at = match end {
                    TermEnd::Overran => At::Stuck(Box::pin(async move {
                        body.gone().await;
                        body
                    })),
                    _ => At::Idle(body),
                };
                Gone::Ended(end)
            }
            At::Stuck(gone) => {
                let body = gone.await;
                self.at = At::Idle(body);
                Gone::AtLast
            }
            At::Idle(_) | At::Moving => std::future::pending().await,
        }
    }
}
