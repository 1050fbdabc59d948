//! A group whose lease is held on a majority of three storage accounts (docs/quorum.md), led by
//! the real binary: three Azurites, each behind a fault proxy of its own that every member goes
//! through (a region that can go down for everyone), witnesses as children. One region out
//! (blackholed, refusing, or slow) moves no leadership and stops no body; two out stop the body
//! by its deadline, nobody runs a child until a majority answers again; members that each win a
//! different replica first end with one leader. The witness history is checked throughout.

use crate::alerts::{Scrape, alert_test, firing, promtool_test};
use leasehold_testkit::*;
use std::sync::PoisonError;
use std::time::{Duration, Instant};

/// Three regions: an Azurite each, and the proxy in front of it.
struct Regions {
    // Kept alive for the test's length; dropped after the daemons (declared after them where
    // used), so that nothing of theirs is stopped under them.
    proxies: Vec<FaultProxy>,
    azurites: Vec<Azurite>,
    // Held for the test's length, and given back after the Azurites stopped ([`TURNS`]); none
    // when the test holds every turn itself.
    _turn: Option<Turn>,
}

/// The tests of this file take turns, two at a time: each starts three Azurites (node
/// processes) beside the shared one, and their bounds are the product's timings, which hold
/// while storage answers within its request timeout. All five side by side with the rest of
/// the suite on two cores starve every Azurite until each request times out, and a test
/// measures the machine (docs/testing.md). Two at a time keep the longest (three outages of
/// 60 s) beside the others, so that the suite takes no longer.
static TURNS: Turns = Turns {
    taken: std::sync::Mutex::new(0),
    freed: std::sync::Condvar::new(),
};

/// How many tests of this file may hold regions at once.
const AT_ONCE: usize = 2;

struct Turns {
    taken: std::sync::Mutex<usize>,
    freed: std::sync::Condvar,
}

/// A test's turn, given back when dropped.
struct Turn;

impl Turn {
    fn take() -> Self {
        // A test that failed holding the lock poisoned it; the count is still right.
        let mut taken = TURNS.taken.lock().unwrap_or_else(PoisonError::into_inner);
        while *taken >= AT_ONCE {
            taken = TURNS
                .freed
                .wait(taken)
                .unwrap_or_else(PoisonError::into_inner);
        }
        *taken += 1;
        Turn
    }
}

impl Drop for Turn {
    fn drop(&mut self) {
        *TURNS.taken.lock().unwrap_or_else(PoisonError::into_inner) -= 1;
        TURNS.freed.notify_one();
    }
}

impl Regions {
    fn start() -> Self {
        Self::start_in(Some(Turn::take()))
    }

    /// Three regions started under `turn`, or under the turns the test holds.
    fn start_in(turn: Option<Turn>) -> Self {
        let azurites = Azurite::start_replicas(3);
        let proxies = azurites.iter().map(|a| FaultProxy::start(a.port)).collect();
        Self {
            proxies,
            azurites,
            _turn: turn,
        }
    }

    fn connection_strings(&self) -> Vec<String> {
        self.proxies
            .iter()
            .map(FaultProxy::connection_string)
            .collect()
    }

    /// Replica `i`'s blob (from 0), as an operator reaches it, past its proxy.
    fn admin(&self, group: &Group, i: usize) -> BlobAdmin {
        BlobAdmin::new(
            &self.azurites[i].connection_string(),
            &group.container,
            &group.blob,
        )
    }

    /// Each replica's lease and metadata, for a failure's message.
    fn describe(&self, group: &Group) -> String {
        (0..3)
            .map(|i| {
                let admin = self.admin(group, i);
                format!(
                    "replica {}: leased {:?}, {:?}",
                    i + 1,
                    admin.is_leased(),
                    admin.metadata()
                )
            })
            .collect::<Vec<_>>()
            .join("; ")
    }

    /// The replicas (from 0) whose lease `identity` holds, as `leasehold status` tells it: the
    /// holder its metadata records, under the lease id it recorded (a lease taken since by
    /// another, without its metadata, is not `identity`'s).
    fn held_by(&self, group: &Group, identity: &str) -> Vec<usize> {
        let config = group.dir().join(format!("{identity}.toml"));
        let config = config.to_str().expect("a path");
        let out = leasehold(&["status", "--json", "-c", config], &[]);
        let Ok(report) = serde_json::from_slice::<serde_json::Value>(&out.stdout) else {
            return Vec::new();
        };
        let rows = report["replicas"].as_array().cloned().unwrap_or_default();
        (0..3)
            .filter(|&i| {
                rows.get(i)
                    .is_some_and(|r| r["holder"] == identity && r["lease_holder"] == "recorded")
            })
            .collect()
    }
}

/// A member of the group on the three regions, logging its kill deadlines for the checker and
/// serving `/metrics`.
fn member(group: &Group, regions: &Regions, identity: &str) -> Daemon {
    let config = group.config_on_replicas(identity, &regions.connection_strings(), "", "");
    Daemon::launch(&config, identity)
        .deadline_log()
        .http()
        .spawn()
}

/// `daemon`'s replica metrics: how many replicas it reaches, and whether each does.
fn reachable(daemon: &Daemon) -> (f64, Vec<f64>) {
    let addr = daemon.http.as_deref().expect("it serves HTTP");
    let (_, text) = http::get(addr, "/metrics").expect("/metrics answers");
    let metrics = Metrics::parse(&text);
    let each = (1..=3)
        .map(|r| {
            metrics.sum(
                "leasehold_replica_reachable",
                &[("replica", &r.to_string())],
            )
        })
        .collect();
    (metrics.sum("leasehold_replicas_reachable", &[]), each)
}

/// A fresh set's blobs are created by the first campaign, each counting for nobody until
/// `L + M` (and a second) old: the first child within that and a few polls.
const FIRST_LEAD: Duration = Duration::from_secs(30);

/// The three members, the first child's start, and who leads, once the leader holds every
/// replica (it wins the ones it lacks back at its renew pace).
fn three_members_one_leads(group: &Group, regions: &Regions) -> (Vec<Daemon>, Event) {
    let members: Vec<Daemon> = ["a", "b", "c"]
        .iter()
        .map(|id| member(group, regions, id))
        .collect();
    let started = Instant::now();
    let first = group.wait_first_start(FIRST_LEAD).unwrap_or_else(|| {
        panic!(
            "nobody led within {FIRST_LEAD:?}:\n{}",
            members.iter().map(Daemon::log).collect::<String>()
        )
    });
    eprintln!(
        "first child (by {}, epoch {}) {:.1}s after the members started (bound {FIRST_LEAD:?})",
        first.identity,
        first.epoch,
        started.elapsed().as_secs_f64()
    );
    let all = wait_until(secs(20), || {
        regions.held_by(group, &first.identity).len() == 3
    });
    assert!(
        all,
        "{} leads but holds only replicas {:?}",
        first.identity,
        regions.held_by(group, &first.identity)
    );
    (members, first)
}

/// The child started `first` still runs: no other start, no stop, and it beat recently.
fn assert_same_body(group: &Group, first: &Event, after: &str) {
    let history = group.history();
    let starts = history.starts();
    assert_eq!(
        starts.len(),
        1,
        "{after}: leadership moved or the body restarted: {:?}",
        history.lives()
    );
    assert_eq!(starts[0].pid, first.pid, "{after}");
    assert_eq!(
        history.stop_of(first.pid),
        None,
        "{after}: the body was stopped"
    );
    let last = history.last_seen(first.pid);
    let now = mono_now();
    assert!(
        now.saturating_sub(last) < secs(2),
        "{after}: the body's last beat was {:?} ago",
        now.saturating_sub(last)
    );
}

/// One region out for 60 s, three ways (blackholed, refusing connections, answering 150 ms late),
/// each time a region whose replica the leader holds: no leadership moves, no body stops (the
/// same child pid, the same epoch), and the leader holds all three again once it is back. The
/// three ways run side by side, each on a group and three regions of its own, so that the three
/// minutes of outages take one; the test holds every turn meanwhile (nine Azurites).
#[test]
fn one_region_out_moves_no_leadership_and_stops_no_body() {
    let _turns: Vec<Turn> = (0..AT_ONCE).map(|_| Turn::take()).collect();
    let outages = [
        (1, Fault::Blackhole, "blackholed"),
        (2, Fault::Reset, "refusing connections"),
        (
            0,
            Fault::slow_answers(Duration::from_millis(150)),
            "150 ms slow",
        ),
    ];
    std::thread::scope(|scope| {
        for (region, fault, how) in outages {
            scope.spawn(move || one_region_out(region, fault, how));
        }
    });
}

/// A group on three regions of its own, led, with region `region` out `how` for 60 s.
fn one_region_out(region: usize, fault: Fault, how: &str) {
    let group = Group::new(Azurite::shared());
    let regions = Regions::start_in(None);
    let (members, first) = three_members_one_leads(&group, &regions);
    regions.proxies[region].set(fault);
    let out = Instant::now();
    while out.elapsed() < secs(60) {
        std::thread::sleep(secs(5));
        assert_same_body(&group, &first, &format!("region {} {how}", region + 1));
    }
    regions.proxies[region].set(Fault::Pass);
    let back = Instant::now();
    let again = wait_until(secs(20), || {
        regions.held_by(&group, &first.identity).len() == 3
    });
    assert!(
        again,
        "{} did not win replica {} back",
        first.identity,
        region + 1
    );
    eprintln!(
        "region {} {how} for 60 s: the same body (pid {}, epoch {}); the replica held again \
         {:.1}s after it came back",
        region + 1,
        first.pid,
        first.epoch,
        back.elapsed().as_secs_f64()
    );
    assert_same_body(
        &group,
        &first,
        &format!("after region {} {how}", region + 1),
    );
    let daemons: Vec<&Daemon> = members.iter().collect();
    group.assert_safe(&daemons);
    drop(members);
}

/// Two regions out: the leader's body is stopped by its kill deadline (the second latest of its
/// replicas' deadlines), no child runs anywhere while they are; one back, and one child runs
/// again, with a greater epoch, within two polls and `R`s of a majority answering (the lease a
/// late acquire left on the returned replica released by its member).
#[test]
fn two_regions_out_stop_the_body_until_a_majority_answers() {
    let group = Group::new(Azurite::shared());
    let regions = Regions::start();
    let (members, first) = three_members_one_leads(&group, &regions);
    let leader = members
        .iter()
        .find(|d| d.identity == first.identity)
        .expect("the leader is a member");
    let deadline = leader
        .latest_deadline()
        .expect("the leader logged its kill deadline");
    let before = Scrape::of(leader);
    regions.proxies[1].set(Fault::Blackhole);
    regions.proxies[2].set(Fault::Blackhole);
    let out = mono_now();
    let stopped = group
        .wait_history(secs(30), |h| h.stop_of(first.pid).is_some())
        .and_then(|h| h.stop_of(first.pid));
    let stopped = stopped.unwrap_or_else(|| {
        panic!(
            "the body was not stopped with two regions out:\n{}",
            leader.log()
        )
    });
    let latest_deadline = leader.latest_deadline().unwrap_or(deadline);
    eprintln!(
        "two regions out: the body stopped {:.1}s after (its kill deadline {:.1}s after)",
        stopped.saturating_sub(out).as_secs_f64(),
        latest_deadline.saturating_sub(out).as_secs_f64()
    );
    assert!(
        stopped <= latest_deadline + defaults::G,
        "the body outlived its kill deadline: stopped at {stopped:?}, deadline {latest_deadline:?}"
    );
    // Nobody leads a minority: 20 s more without a child; each member says so in its metrics.
    std::thread::sleep(secs(20));
    for m in &members {
        let (count, each) = reachable(m);
        assert_eq!(
            (count, each.clone()),
            (1.0, vec![1.0, 0.0, 0.0]),
            "{}",
            m.identity
        );
    }
    // The two alerts, on the leader's series as served: before the outage, then during it.
    let during = Scrape::of(leader);
    the_replica_alerts_fire(&group, &before, &during, &first.identity);
    let history = group.history();
    assert_eq!(
        history.starts().len(),
        1,
        "a child ran with two regions out: {:?}",
        history.lives()
    );
    regions.proxies[1].set(Fault::Pass);
    let back = mono_now();
    // The acquires the partition held land as it ends, one of them taking the returned
    // replica's lease under an id its member no longer uses; the member releases it there when
    // that replica refuses its next acquire as held (docs/quorum.md, Leases left by a
    // partition). No round waits out the replica still out where what it may answer decides
    // nothing (an attempt that wins and reads a majority, a member yielding or retrying a
    // split, an attempt refused by both replicas that answer: docs/quorum.md, No split vote
    // that lasts): quiet, a child runs again within a second. The bound is two polls and `R`s
    // (a round whose retry finds the returned replica held for a moment by a third member's
    // attempt, and the next), with 5 s for a loaded machine. Without the release, that lease
    // would run out first, after `L`.
    let bound = (defaults::POLL + defaults::R) * 2 + secs(5);
    let again = group
        .wait_nth_start(2, secs(40))
        .unwrap_or_else(|| panic!("nobody led again with a majority back"));
    let took = again.t.saturating_sub(back);
    eprintln!(
        "one region back: a child again (by {}, epoch {}) {:.1}s after (bound {:.1}s)",
        again.identity,
        again.epoch,
        took.as_secs_f64(),
        bound.as_secs_f64()
    );
    assert!(
        took <= bound,
        "a child again {took:?} after a majority answered, past {bound:?}: a lease left by the \
         partition not released?\n{}\nlease requests since the outage:\n{}",
        members
            .iter()
            .map(Daemon::log)
            .collect::<Vec<_>>()
            .join("\n"),
        lease_requests(&group, &regions, &members, out)
    );
    assert!(again.epoch > first.epoch, "the epoch did not grow");
    regions.proxies[2].set(Fault::Pass);
    let daemons: Vec<&Daemon> = members.iter().collect();
    group.assert_safe(&daemons);
    drop(members);
}

/// How long a split start may take to end with one leader (below).
const SPLIT_START_BOUND: Duration = Duration::from_secs(45);

/// A split start: three members whose requests reach a different replica first each (each
/// region's proxy holds back the others' connections), on blobs that every member may count at
/// once: one leader within a few seconds, not three minorities held for ever. Every member goes
/// through the same proxies, so lists the same endpoints: a member with proxies of its own
/// would be a replica set of its own, which counts no blob of the others' (the rule *One replica
/// set*), and nobody would ever lead.
#[test]
fn a_split_start_ends_with_one_leader() {
    let group = Group::new(Azurite::shared());
    let regions = Regions::start();
    // The blobs, created and aged past their lock-delay by a first leadership that ends.
    // Kept, stopped, for their terms' deadlines.
    let (mut first, _) = three_members_one_leads(&group, &regions);
    for m in &mut first {
        m.stop(secs(20));
    }
    assert!(
        wait_until(secs(20), || (0..3)
            .all(|i| regions.admin(&group, i).lease_is_free())),
        "the leases were not released"
    );
    let before = group.history().starts().len();
    // Each member reaches its own replica at once and the two others 300 ms late: each region's
    // proxy is told each member's fault as it starts, before it connects (a connection opened
    // before would be slow everywhere).
    let slow = Fault::slow_requests(Duration::from_millis(300));
    for proxy in &regions.proxies {
        proxy.set(slow);
    }
    let (started, since) = (Instant::now(), mono_now());
    let members: Vec<Daemon> = ["a", "b", "c"]
        .iter()
        .enumerate()
        .map(|(m, id)| {
            let config = group.config_on_replicas(id, &regions.connection_strings(), "", "");
            let daemon = Daemon::launch(&config, id).deadline_log().spawn();
            for (r, proxy) in regions.proxies.iter().enumerate() {
                proxy.set_for(pid(&daemon), if r == m { Fault::Pass } else { slow });
            }
            daemon
        })
        .collect();
    // 1-2 s on a quiet machine (the figure printed below). The bound is what a loaded one
    // holds: CI's eight tests side by side on two cores saw 20-21 s, every request through the
    // 300 ms proxies (which find each connection's process in /proc) timing out at 4 s while
    // three more Azurites started, and the split then going round the back-off twice.
    let led = group
        .wait_nth_start(before + 1, SPLIT_START_BOUND)
        .unwrap_or_else(|| {
            panic!(
                "no leader after a split start ({}):\n{}\nlease requests:\n{}",
                regions.describe(&group),
                members.iter().map(Daemon::log).collect::<String>(),
                lease_requests(&group, &regions, &members, since)
            )
        });
    eprintln!(
        "split start: one leader ({}) {:.1}s after the members started (bound {:?})",
        led.identity,
        started.elapsed().as_secs_f64(),
        SPLIT_START_BOUND
    );
    std::thread::sleep(secs(5));
    let history = group.history();
    assert_eq!(
        history.starts().len(),
        before + 1,
        "another child within 5 s of the split's leader: {:?}\n{}\nlease requests:\n{}",
        history.lives(),
        members.iter().map(Daemon::log).collect::<String>(),
        lease_requests(&group, &regions, &members, since)
    );
    let daemons: Vec<&Daemon> = first.iter().chain(&members).collect();
    group.assert_safe(&daemons);
    drop(members);
}

/// A member that lists the group's accounts in another order is another replica set (the rule
/// *One replica set*): once it wins their leases it finds them stamped for the group's set,
/// says so in one WARN line that names the fix, once, and never leads on them.
#[test]
fn a_member_listing_the_accounts_in_another_order_says_so_and_never_leads() {
    let group = Group::new(Azurite::shared());
    let regions = Regions::start();
    let mut a = member(&group, &regions, "a");
    let first = group
        .wait_first_start(FIRST_LEAD)
        .unwrap_or_else(|| panic!("a did not lead within {FIRST_LEAD:?}:\n{}", a.log()));
    let mut reversed = regions.connection_strings();
    reversed.reverse();
    let config = group.config_on_replicas("b", &reversed, "", "");
    // a is gone before b starts, so that b's first attempt wins every replica and finds all
    // three stamped at once; what it finds then stays the same, and the line is not repeated.
    a.stop(secs(30));
    let b = Daemon::launch(&config, "b").deadline_log().spawn();
    let needle = "another replica set made";
    let (_, line) = b
        .wait_line(needle, secs(30))
        .unwrap_or_else(|| panic!("b did not say its set is another:\n{}", b.log()));
    eprintln!("b, on the group's replicas in another order: {line}");
    assert!(line.contains("WARN"), "{line}");
    assert!(line.contains("in the same order"), "{line}");
    // Its attempts go on, finding the same: said once.
    std::thread::sleep(secs(5));
    assert_eq!(b.log().matches(needle).count(), 1, "{}", b.log());
    let history = group.history();
    let starts = history.starts();
    assert_eq!(starts.len(), 1, "only a led: {:?}", history.lives());
    assert_eq!(starts[0].identity, first.identity);
    group.assert_safe(&[&a, &b]);
}

/// With `create_if_missing = false`, a fresh set's replicas are not created: the member says
/// which are missing and what to do, once, and leads on none of them.
#[test]
fn without_create_if_missing_missing_replicas_are_named_not_created() {
    let group = Group::new(Azurite::shared());
    let regions = Regions::start();
    let config = group.config_on_replicas("a", &regions.connection_strings(), "", "");
    let text = std::fs::read_to_string(&config).expect("the config");
    let text = text.replacen("[storage]\n", "[storage]\ncreate_if_missing = false\n", 1);
    std::fs::write(&config, text).expect("write the config");
    let a = Daemon::launch(&config, "a").deadline_log().spawn();
    let needle = "create_if_missing = false: it counts for nobody";
    let (_, line) = a
        .wait_line(needle, secs(30))
        .unwrap_or_else(|| panic!("a did not name the missing replicas:\n{}", a.log()));
    eprintln!("a, on three accounts without their blobs: {line}");
    assert!(line.contains("replica 1, 2, 3 of 3"), "{line}");
    std::thread::sleep(secs(5));
    assert_eq!(a.log().matches(needle).count(), 1, "{}", a.log());
    assert!(group.history().starts().is_empty(), "nobody led");
    assert!(
        (0..3).all(|i| !regions.admin(&group, i).exists()),
        "a blob was created: {}",
        regions.describe(&group)
    );
}

fn pid(daemon: &Daemon) -> u32 {
    daemon.pid().as_raw().unsigned_abs()
}

/// `LeaseholdReplicaUnreachable` and `LeaseholdNoMajority` (deploy/prometheus/alerts.yaml) on
/// `instance`'s series: silent while every replica answers (`before`), firing on the replicas
/// out and on the minority left (`during`), each after its `for`.
fn the_replica_alerts_fire(group: &Group, before: &Scrape, during: &Scrape, instance: &str) {
    let lease = before.lease();
    let unreachable = |replica: &str| {
        firing(
            &[
                ("instance", instance),
                ("lease", &lease),
                ("replica", replica),
                ("severity", "warning"),
            ],
            &format!("Replica {replica} of {lease} is unreachable from {instance}"),
            &format!(
                "Storage account {replica} (in the order of [[storage.replica]]) of {lease} has \
                 not answered {instance} for 2 minutes; the group keeps its leader while a \
                 majority answers. `leasehold check` names what fails; `leasehold status` shows \
                 each replica."
            ),
        )
    };
    let replica = alert_test(
        "LeaseholdReplicaUnreachable",
        &[(before, 60), (during, 60)],
        "295s",
        "425s",
        format!("{}{}", unreachable("2"), unreachable("3")),
    );
    let majority = alert_test(
        "LeaseholdNoMajority",
        &[(before, 60), (during, 60)],
        "295s",
        "335s",
        firing(
            &[
                ("instance", instance),
                ("lease", &lease),
                ("severity", "critical"),
            ],
            &format!("{instance} reaches no majority of the replicas of {lease}"),
            &format!(
                "{instance} reaches 1 replica(s) of {lease}, fewer than a leader must hold: no \
                 leader there until a majority answers again. `leasehold status` shows each \
                 replica."
            ),
        ),
    );
    promtool_test(group.dir(), &format!("{replica}{majority}"));
}

/// Every request on the group's blobs each region's proxy saw from `since` (on
/// CLOCK_MONOTONIC), in time order: when, which of `members` (`?`: not known), replica, action
/// and lease id (for a failure's message).
fn lease_requests(group: &Group, regions: &Regions, members: &[Daemon], since: Duration) -> String {
    let mut seen: Vec<(Duration, String)> = Vec::new();
    for (r, proxy) in regions.proxies.iter().enumerate() {
        for request in proxy.requests() {
            if request.at < since || !request.line.contains(&format!("/{}", group.blob)) {
                continue;
            }
            let from = members.iter().find(|m| Some(pid(m)) == request.from);
            let member = from.map_or("?", |m| m.identity.as_str());
            let what = request
                .line
                .split(' ')
                .take(2)
                .collect::<Vec<_>>()
                .join(" ");
            let action = request.lease_action.clone().unwrap_or(what);
            let id = request.lease_id.as_deref().unwrap_or("-");
            seen.push((
                request.at,
                format!(
                    "{:.3} member {member} replica {} {action} {}",
                    request.at.as_secs_f64(),
                    r + 1,
                    &id[..8.min(id.len())]
                ),
            ));
        }
    }
    seen.sort();
    seen.into_iter().map(|(_, l)| l + "\n").collect()
}
