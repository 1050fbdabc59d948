//! Preemption on paused time: instances of one group on the in-memory store.

use crate::elector::testing::{Instance, Lives, joined, stop_all, timing};
use crate::store::memory::{MemoryStore, Op};
use leasehold_core::Pace;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::{Instant, sleep};

const AFTER: Duration = Duration::from_secs(30);

fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(s)
}

fn start(store: &Arc<MemoryStore>, id: &str, lives: &Lives, priority: i64) -> Instance {
    Instance::start_with(store, id, lives, None, |e| {
        e.with_priority(priority).with_preempt_after(Some(AFTER))
    })
}

/// A group on a store of its own: `a` (priority 0) leads and `b` (priority 0) follows,
/// settled.
async fn group() -> (Arc<MemoryStore>, Lives, Instance, Instance) {
    let store = Arc::new(MemoryStore::default());
    let lives = Lives::default();
    let a = start(&store, "a", &lives, 0);
    lives.nth(1).await;
    let b = start(&store, "b", &lives, 0);
    joined(&store, "b").await;
    sleep(secs(40.0)).await;
    (store, lives, a, b)
}

/// The preferred member `p` joins; the leader hands over to it `preempt_after` after its
/// record was created (not before), within a probe and p's poll: the task stops at once.
#[tokio::test(start_paused = true)]
async fn the_preferred_member_leads_once_a_member_for_preempt_after() {
    let (store, lives, a, b) = group().await;
    let asked = Instant::now();
    let p = start(&store, "p", &lives, 10);
    joined(&store, "p").await;
    let created = Instant::now();
    sleep(AFTER - secs(0.1)).await;
    assert_eq!(lives.all().len(), 1, "no preemption before preempt_after");
    let next = lives.nth(2).await;
    assert_eq!(next.identity, "p");
    let took = next.start - created;
    // The leader sees the mark within a probe; without wake-ups, p finds the handoff at
    // its next poll.
    let bound = AFTER + Pace::PROBE + timing().longest_poll() + secs(0.1);
    println!(
        "p led {took:?} after its record was created ({:?} after it started; bound {bound:?})",
        next.start - asked
    );
    assert!(took >= AFTER && took <= bound, "{took:?}");
    assert_eq!(store.calls(Op::Change).len(), 1, "one handoff");
    // a is an ordinary follower now: no preemption back, nothing more for a while.
    sleep(AFTER * 3).await;
    assert_eq!(lives.all().len(), 2);
    lives.assert_one_at_a_time();
    stop_all([a, b, p]).await;
}

/// Equal priorities never preempt; nor does a leader with `preempt_after = "off"`.
#[tokio::test(start_paused = true)]
async fn equals_never_preempt_and_off_means_never() {
    let (store, lives, a, b) = group().await;
    let c = start(&store, "c", &lives, 0);
    sleep(AFTER * 3).await;
    assert_eq!(lives.all().len(), 1, "equals: {:?}", lives.all());
    stop_all([a, b, c]).await;

    let store = Arc::new(MemoryStore::default());
    let lives = Lives::default();
    let a = Instance::start_with(&store, "a", &lives, None, |e| e.with_preempt_after(None));
    lives.nth(1).await;
    let p = start(&store, "p", &lives, 10);
    sleep(AFTER * 3).await;
    assert!(
        store.member("p").unwrap().member.settled.is_some(),
        "p said it is settled"
    );
    assert_eq!(lives.all().len(), 1, "off: {:?}", lives.all());
    stop_all([a, p]).await;
}

/// Preemption counts only members confirmed alive: a preferred member with an advertised
/// URL that does not answer a wake-up there (dead since it settled, or a forged record) is
/// not stepped down for, and is passed over; once it answers, it preempts when it is no
/// longer passed over.
#[tokio::test(start_paused = true)]
async fn a_preferred_member_that_does_not_answer_is_passed_over() {
    use crate::elector::wake::{Sender, WakeSent};
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    let store = Arc::new(MemoryStore::default());
    let lives = Lives::default();
    let answers = Arc::new(AtomicBool::new(false));
    let probes = Arc::new(AtomicUsize::new(0));
    let deliver: crate::elector::wake::Deliver = {
        let (answers, probes) = (answers.clone(), probes.clone());
        Arc::new(
            move |url: &str, _token: Option<&crate::secret::Secret>, _: Option<String>, _probe| {
                assert_eq!(url, "http://p:9464");
                probes.fetch_add(1, Ordering::SeqCst);
                let sent = match answers.load(Ordering::SeqCst) {
                    true => WakeSent::Ok,
                    false => WakeSent::Failed,
                };
                Box::pin(async move { sent })
            },
        )
    };
    let a = Instance::start_with(&store, "a", &lives, None, |e| {
        e.with_preempt_after(Some(AFTER))
            .with_wake_sender(Sender::Simulated(deliver))
    });
    lives.nth(1).await;
    let p = Instance::start_with(&store, "p", &lives, None, |e| {
        e.with_priority(10)
            .with_preempt_after(Some(AFTER))
            .with_advertise("http://p:9464")
    });
    joined(&store, "p").await;
    sleep(AFTER * 3).await;
    assert!(store.member("p").unwrap().member.settled.is_some());
    let probed = probes.load(Ordering::SeqCst);
    println!(
        "{probed} wake-up(s) sent to p, unanswered; leaders: {:?}",
        lives.all()
    );
    assert!(probed >= 1, "the leader asked p");
    assert_eq!(lives.all().len(), 1, "a stays the leader");
    assert!(store.calls(Op::Change).is_empty());

    answers.store(true, Ordering::SeqCst);
    let answered = Instant::now();
    let next = lives.nth(2).await;
    assert_eq!(next.identity, "p");
    let waited = next.start - answered;
    println!("p led {waited:?} after it began to answer (passed over for 300 s)");
    assert!(waited + AFTER * 3 >= Pace::PASSED_OVER_FOR, "{waited:?}");
    lives.assert_one_at_a_time();
    stop_all([a, p]).await;
}

/// A member that dies before its `preempt_after` is never preempted for, although its
/// record looks alive for a while after.
#[tokio::test(start_paused = true)]
async fn a_member_that_dies_before_its_time_cancels_the_preemption() {
    let (store, lives, a, b) = group().await;
    let p = start(&store, "p", &lives, 10);
    joined(&store, "p").await;
    sleep(AFTER - secs(5.0)).await;
    p.kill();
    sleep(secs(10.0)).await;
    assert!(
        store.member("p").unwrap().is_alive(),
        "its record still looks alive past its preempt_after"
    );
    sleep(AFTER * 2).await;
    assert_eq!(lives.all().len(), 1, "{:?}", lives.all());
    assert!(store.calls(Op::Change).is_empty());
    stop_all([a, b]).await;
}

/// A preferred member that crash-loops (killed every `preempt_after / 2`) never preempts;
/// once it stays up, it preempts once, `preempt_after` after its last join.
#[tokio::test(start_paused = true)]
async fn a_crash_looping_member_preempts_at_most_once_per_window() {
    let (store, lives, a, b) = group().await;
    for _ in 0..16 {
        let p = start(&store, "p", &lives, 10);
        sleep(AFTER / 2).await;
        p.kill();
    }
    assert_eq!(lives.all().len(), 1, "no preemption: {:?}", lives.all());
    let p = start(&store, "p", &lives, 10);
    let next = lives.nth(2).await;
    assert_eq!(next.identity, "p");
    // Its record was created once the one its last crash left had expired.
    let record_age = store.member("p").unwrap().age;
    println!("p led {record_age:?} after its last join (whole seconds)");
    assert!(record_age >= AFTER - secs(1.0) && record_age <= AFTER + secs(1.0));
    sleep(AFTER * 2).await;
    assert_eq!(lives.all().len(), 2, "one preemption");
    lives.assert_one_at_a_time();
    stop_all([a, b, p]).await;
}
