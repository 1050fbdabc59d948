//! (8) A group on a majority of storage accounts (docs/quorum.md) beside one on one account:
//! three daemons each time, each advertising its HTTP endpoint, every account an Azurite of its own behind a proxy that adds 15 ms
//! each way (a 30 ms round trip: another region), the one account behind the same. For each: the
//! first leader of a fresh group, graceful handovers (SIGTERM to the leader → the next child
//! starts), crash failovers (SIGKILL to the leader → the next child starts; each trial once the
//! daemon killed before is back in line, so that the successor lives), and what the group asks
//! of storage once settled (requests a minute, per account, counted at the proxies).

use crate::fleet::Env;
use leasehold_testkit::wait::pause;
use leasehold_testkit::{
    Azurite, Daemon, Deadlines, Fault, FaultProxy, Group, check, free_addr, mono_now, secs,
    wait_until,
};
use nix::sys::signal::Signal;
use std::time::{Duration, Instant};

/// What one group measured.
#[derive(Debug, Clone)]
pub struct OnAccounts {
    /// 1, or the replicas in the set.
    pub accounts: usize,
    /// From the daemons' start to the first child (a fresh set's lock-delay included).
    pub first_lead: Option<Duration>,
    /// SIGTERM to the leader → the next child started; `None`: none within the wait.
    pub graceful: Vec<Option<Duration>>,
    /// SIGKILL to the leader → the next child started.
    pub crash: Vec<Option<Duration>>,
    /// Storage requests a minute once settled, all daemons together, per account.
    pub per_account_minute: f64,
    /// Two children at once, over the whole run.
    pub overlaps: usize,
}

/// What the phase measured: one account, then three replicas.
#[derive(Debug, Clone)]
pub struct Quorum {
    pub groups: Vec<OnAccounts>,
    pub window: Duration,
}

/// Runs the phase: `trials` handovers and failovers of each kind on each group, `window` of
/// requests once settled.
pub fn quorum(env: &Env, trials: usize, window: Duration) -> Quorum {
    let groups = [1, 3]
        .iter()
        .map(|&n| on_accounts(env, n, trials, window))
        .collect();
    Quorum { groups, window }
}

/// Three daemons of one group on `n` accounts (each behind a 30 ms round trip).
fn on_accounts(env: &Env, n: usize, trials: usize, window: Duration) -> OnAccounts {
    let azurites = Azurite::start_replicas(n);
    let proxies: Vec<FaultProxy> = azurites
        .iter()
        .map(|a| {
            let p = FaultProxy::start(a.port);
            p.set(Fault::Delay {
                up: Duration::from_millis(15),
                down: Duration::from_millis(15),
            });
            p
        })
        .collect();
    let group = Group::in_folder(
        env.azurite,
        &env.work.join(format!("quorum-{n}")),
        "bench",
        &format!("quorum-{n}"),
    );
    let strings: Vec<String> = proxies.iter().map(FaultProxy::connection_string).collect();
    let config = |id: &str, election: &str| match n {
        1 => group.config_via(id, &strings[0], "", election),
        _ => group.config_on_replicas(id, &strings, "", election),
    };
    // Each daemon advertises its HTTP endpoint (as the README's deployments do), on a port of
    // its own at each start: a leader wakes the member it hands the lease to, and a watcher
    // probes the member ahead of it (docs/succession.md).
    let spawn = |id: &str| {
        let addr = free_addr();
        let election = format!("\n[election]\nadvertise = \"http://{addr}\"\n");
        (Daemon::launch(&config(id, &election), id).deadline_log())
            .http_on(&addr)
            .spawn()
    };
    let names = ["q-1", "q-2", "q-3"];
    let started = Instant::now();
    let mut daemons: Vec<Daemon> = names.iter().map(|id| spawn(id)).collect();
    let first = group.wait_first_start(secs(60));
    let first_lead = first.as_ref().map(|_| started.elapsed());
    pause(secs(10));
    let count = || proxies.iter().map(|p| p.requests().len()).sum::<usize>();
    let (before, began) = (count(), Instant::now());
    pause(window);
    let sent = count() - before;
    let per_account_minute = sent as f64 / began.elapsed().as_secs_f64() * 60.0 / n as f64;
    let mut trial = |signal: Signal| -> Option<Duration> {
        let leader = group.history().current_leader()?.identity.clone();
        let at = daemons.iter().position(|d| d.identity == leader)?;
        let t0 = mono_now();
        daemons[at].signal(signal);
        let next = group.wait_start_after(t0, None, secs(40));
        let took = next.map(|e| e.t.saturating_sub(t0));
        daemons[at].wait_exit(secs(20));
        daemons[at] = spawn(&leader);
        // Back in the group, and a lead to hand over again. A daemon started again within a
        // record lease of its kill finds its old record held still, out of line until it runs
        // out (docs/succession.md): a leader killed meanwhile is a crash behind a ghost, whose
        // bound is a watch longer. Each trial is of the case its row's bound is for: the next
        // one begins once the restarted daemon joined the line again.
        let joined = daemons[at].wait_log("joined the line of members", secs(45));
        if !joined {
            eprintln!("bench: {leader}, started again, did not join the line within 45 s");
        }
        wait_until(secs(40), || group.history().current_leader().is_some());
        pause(secs(5));
        took
    };
    let graceful = (0..trials).map(|_| trial(Signal::SIGTERM)).collect();
    let crash = (0..trials).map(|_| trial(Signal::SIGKILL)).collect();
    let deadlines: Deadlines = daemons.iter().map(Daemon::deadlines).collect();
    let overlaps = check(&group.history(), &deadlines).overlaps.len();
    drop(daemons);
    OnAccounts {
        accounts: n,
        first_lead,
        graceful,
        crash,
        per_account_minute,
        overlaps,
    }
}
