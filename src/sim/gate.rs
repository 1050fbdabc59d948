//! A simulated process: every task a member's elector starts belongs to that member (its
//! driver runs in one), so that one switch freezes them all, as SIGSTOP stops a process, and
//! one call ends them all, as SIGKILL does.
//!
//! A frozen member's tasks are not polled: their timers fire, and the tasks take the time up
//! when they are thawed, as a stopped process finds its clock moved on. Requests already on the
//! wire are not the member's (the store applies them in tasks of its own), so they still land.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use tokio::task::{AbortHandle, JoinHandle};

tokio::task_local! {
    /// The member whose task is being polled.
    static MEMBER: Arc<Gate>;
}

/// One simulated process: its tasks, frozen or killed together.
#[derive(Default)]
pub(crate) struct Gate {
    frozen: AtomicBool,
    killed: AtomicBool,
    /// The tasks that were polled while frozen: woken again at the thaw.
    parked: Mutex<Vec<Waker>>,
    /// Every task it started, to end at a kill.
    tasks: Mutex<Vec<AbortHandle>>,
}

impl Gate {
    /// Starts `future` as a task of this member.
    pub fn spawn<F>(self: &Arc<Self>, future: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        use tracing::Instrument;
        // In the span of its member, as its logs would be in its own process.
        let gated = Gated {
            gate: self.clone(),
            inner: Box::pin(future.in_current_span()),
        };
        let handle = tokio::spawn(MEMBER.scope(self.clone(), gated));
        let mut tasks = self.tasks.lock().unwrap_or_else(|e| e.into_inner());
        tasks.retain(|t| !t.is_finished());
        tasks.push(handle.abort_handle());
        if self.killed.load(Ordering::SeqCst) {
            handle.abort();
        }
        handle
    }

    /// SIGSTOP: none of its tasks runs until [`Gate::thaw`].
    pub fn freeze(&self) {
        self.frozen.store(true, Ordering::SeqCst);
    }

    /// SIGCONT.
    pub fn thaw(&self) {
        self.frozen.store(false, Ordering::SeqCst);
        let parked = std::mem::take(&mut *self.parked.lock().unwrap_or_else(|e| e.into_inner()));
        for waker in parked {
            waker.wake();
        }
    }

    pub fn is_frozen(&self) -> bool {
        self.frozen.load(Ordering::SeqCst)
    }

    /// SIGKILL: every task of it ends (is dropped) at its next poll, frozen or not.
    pub fn kill(&self) {
        self.killed.store(true, Ordering::SeqCst);
        let tasks = std::mem::take(&mut *self.tasks.lock().unwrap_or_else(|e| e.into_inner()));
        for task in tasks {
            task.abort();
        }
        self.thaw();
    }
}

/// A member's task: polled only while its member is not frozen.
struct Gated<F: Future> {
    gate: Arc<Gate>,
    inner: Pin<Box<F>>,
}

impl<F: Future> Future for Gated<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        if self.gate.is_frozen() {
            let mut parked = self.gate.parked.lock().unwrap_or_else(|e| e.into_inner());
            parked.push(cx.waker().clone());
            return Poll::Pending;
        }
        self.inner.as_mut().poll(cx)
    }
}
