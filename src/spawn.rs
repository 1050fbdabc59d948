//! Starting the elector's tasks. Every task the elector starts (the renew loop, the member
//! record keeper, a request left to finish in the background) goes through [`spawn`], so that
//! in the simulator (feature `test-util`) each task belongs to the member that started it: a
//! simulated freeze pauses all of a member's tasks at once, as SIGSTOP pauses a process, and a
//! simulated crash ends them all. Elsewhere it is `tokio::spawn`.

use std::future::Future;
use tokio::task::JoinHandle;

/// Starts `future` as a task of its own (of the current member, in the simulator).
pub(crate) fn spawn<F>(future: F) -> JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    #[cfg(any(test, feature = "test-util"))]
    if let Some(member) = crate::sim::gate::current() {
        return member.spawn(future);
    }
    tokio::spawn(future)
}
