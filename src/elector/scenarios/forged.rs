//! Forged member records (docs/safety.md, "Recovery from anything", issue 25 case 3), on paused
//! time: anyone who can write to the container can create live, settled records of high priority
//! that no process stands behind. Without `advertise` on them nothing can confirm them alive before
//! a preemption (with it, the leader's wake-up goes unanswered and it stays: preempt.rs), so a
//! leader preempts for the first, its handoff is not taken within the confirm window, the forged
//! member is passed over and the lease goes to the next member in line after the leader, a real
//! one, which learns from the handoff notice whom to pass over. Each such round passes over at
//! least one forged record, for [`Pace::PASSED_OVER_FOR`], in every member that leads next; so with
//! k forged records there are at most k rounds per [`Pace::PASSED_OVER_FOR`], and a round leaves
//! the group without a leader for at most the lease running out on its own (the leader could not
//! confirm that the blob was still as it left it):
//!
//! ```text
//! share <= k x (L + M + longest poll + 1 s) / Pace::PASSED_OVER_FOR
//! ```
//!
//! 5 x 18.2 s of 300 s (30.3 %) for five; measured: about 9 %.

use crate::elector::testing::{Instance, Lives, joined, stop_all, timing};
use crate::store::memory::MemoryStore;
use crate::store::{GroupStore, LeaseId, Member, MemberKey};
use leasehold_core::Pace;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::{Instant, sleep};

const AFTER: Duration = Duration::from_secs(30);

/// Creates a live record of `identity` with priority 10, marked settled, that nobody stands
/// behind, and keeps its lease (as a forger would) until the task is dropped.
fn forge(store: &Arc<MemoryStore>, identity: &str) -> tokio::task::JoinHandle<()> {
    let store = Arc::new(store.client(Duration::ZERO));
    let key = MemberKey::of(identity);
    let member = Member {
        identity: identity.to_owned(),
        priority: 10,
        acquires_with: LeaseId::random(),
        advertise: None,
        wake_token: None,
        standby_until: None,
        slots: 1,
        settled: Some(AFTER * 10),
    };
    tokio::spawn(async move {
        store.create_member(&key, &member).await.expect("forged");
        let id = LeaseId::random();
        store.acquire_member(&key, id, 60).await.expect("leased");
        loop {
            sleep(Duration::from_secs(20)).await;
            let _ = store.renew_member(&key, id).await;
        }
    })
}

/// Five forged records of high priority beside a real group of two: over 30 minutes, the
/// share of time without a leader stays within the bound above, and the group never runs two
/// tasks at once.
#[tokio::test(start_paused = true)]
async fn five_forged_records_cost_the_group_a_bounded_share_of_its_time() {
    let store = Arc::new(MemoryStore::default());
    let lives = Lives::default();
    let start = |id: &str| {
        Instance::start_with(&store, id, &lives, None, |e| {
            e.with_preempt_after(Some(AFTER))
        })
    };
    let a = start("a");
    lives.nth(1).await;
    let b = start("b");
    joined(&store, "b").await;
    let began = Instant::now();
    let forgers: Vec<_> = (1..=5).map(|i| forge(&store, &format!("f{i}"))).collect();
    let span = Duration::from_secs(30 * 60);
    sleep(span).await;
    let end = Instant::now();

    // Time with no task alive, from the forgery to the end.
    let mut lives_now = lives.all();
    lives_now.sort_by_key(|l| l.start);
    let mut covered_until = began;
    let mut leaderless = Duration::ZERO;
    let mut gaps = 0;
    for l in &lives_now {
        let gone = l.gone.unwrap_or(end).min(end);
        if gone <= began {
            continue;
        }
        let start = l.start.max(began);
        if start > covered_until {
            leaderless += start - covered_until;
            gaps += 1;
        }
        covered_until = covered_until.max(gone);
    }
    if end > covered_until {
        leaderless += end - covered_until;
        gaps += 1;
    }
    let t = timing();
    let round = t.duration + t.safety_margin + t.longest_poll() + Duration::from_secs(1);
    let bound = 5.0 * round.as_secs_f64() / Pace::PASSED_OVER_FOR.as_secs_f64();
    let share = leaderless.as_secs_f64() / span.as_secs_f64();
    println!(
        "five forged records for {span:?}: {} terms, {gaps} gaps, leaderless {leaderless:?} \
         ({:.1} %; bound {:.1} %: five rounds of at most {round:?} per {:?})",
        lives_now.len(),
        share * 100.0,
        bound * 100.0,
        Pace::PASSED_OVER_FOR
    );
    assert!(gaps >= 1, "the forged records did draw preemptions");
    assert!(share <= bound, "{share} > {bound}");
    let windows = (span.as_secs() / Pace::PASSED_OVER_FOR.as_secs() + 1) as usize;
    assert!(gaps <= 5 * windows, "{gaps} rounds in {windows} windows");
    lives.assert_one_at_a_time();
    for f in forgers {
        f.abort();
    }
    stop_all([a, b]).await;
}
