//! The operator's subcommands to their exit codes: `status` (once, or `--watch`), `check` and
//! `break`, over `crate::ops`; each loads the group's config and its store and runs on a small
//! runtime of its own.

use super::exit::{EXIT_CONFIG, EXIT_DENIED, EXIT_FAILED, fail};
use super::given::Invocation;
use crate::config::{Config, Group};
use crate::fmt::human;
use crate::logging;
use crate::ops::{self, CheckLine};
use crate::store::target::StorageTarget;
use crate::store::{AzureStore, Failure, StoreError};
use leasehold_core::quorum::ReplicaSet;
use serde_json::Map;
use std::future::Future;
use std::process::ExitCode;
use std::time::Duration;

/// `leasehold status`: who leads the group now, and the line of members. With `watch`, looks
/// again every so often and shows it again whenever it changed, until Ctrl-C.
/// With `--json`, a failure is also one JSON object on stdout (`error`, and once the config
/// is read `container`, `blob` and `endpoint`), so that a script reading stdout gets an answer.
///
/// With `[[storage.replica]]` it reads every replica side by side and succeeds while a majority
/// answers (docs/operations.md, "status"): one replica down is what the replicas are for.
pub(super) fn status(given: &Invocation, json: bool, watch: Option<Duration>) -> ExitCode {
    one_shot(given, json, |group, stores| async move {
        let Some(every) = watch else {
            return match look(&stores, &group).await {
                Ok(report) => {
                    print!("{}", shown(&report, json));
                    match &report.error {
                        // Fewer than a majority answered: the report, and a failure.
                        Some(line) => {
                            let denied = report.replicas.iter().any(|r| r.denied);
                            fail(if denied { EXIT_DENIED } else { EXIT_FAILED }, line)
                        }
                        None => ExitCode::SUCCESS,
                    }
                }
                Err(Unread::Store(e)) => storage_failure(&e, &group, json),
                Err(Unread::Replicas(unanswered)) => replicas_unanswered(&unanswered, &group, json),
            };
        };
        watch_status(&stores, &group, json, every).await
    })
}

/// Why `status` has no report.
enum Unread {
    /// The one account's request failed.
    Store(StoreError),
    /// No replica answered.
    Replicas(ops::Unanswered),
}

/// The group's blob and members, and with `[lease].slots` > 1 every slot (one more listing;
/// a failed one leaves the slots out rather than the whole report). With replicas, each
/// replica's.
async fn look(stores: &Stores, group: &Group) -> Result<ops::LeaseReport, Unread> {
    let store = match stores {
        Stores::One(store) => store,
        Stores::Replicas(set, stores) => {
            let replicas = replicas(stores, group);
            let pace = leasehold_core::Pace::new(&group.timing);
            let young = pace.lock_delay() + leasehold_core::Pace::SERVICE_CLOCK;
            return ops::replica_status(&replicas, set, young, group.http_listen)
                .await
                .map_err(Unread::Replicas);
        }
    };
    let mut report = ops::status(store, &group.storage, group.http_listen)
        .await
        .map_err(Unread::Store)?;
    if group.slots > 1 {
        report.with_slots(ops::slots(store, group.slots).await.unwrap_or_default());
    }
    Ok(report)
}

/// The replicas of `group` with their stores, in the set's order.
fn replicas<'a>(stores: &'a [AzureStore], group: &'a Group) -> Vec<ops::Replica<'a, AzureStore>> {
    stores
        .iter()
        .zip(&group.replicas)
        .enumerate()
        .map(|(i, (store, target))| ops::Replica {
            n: i + 1,
            store,
            target,
        })
        .collect()
}

/// `status` when no replica answered: each replica's error (on stdout; with `--json`, the
/// error object with a `replicas` array), and the one line on stderr.
fn replicas_unanswered(unanswered: &ops::Unanswered, group: &Group, json: bool) -> ExitCode {
    let code = if unanswered.denied() {
        EXIT_DENIED
    } else {
        EXIT_FAILED
    };
    if !json {
        for r in &unanswered.replicas {
            println!(
                "replica {}: {}",
                r.replica,
                r.error.as_deref().unwrap_or("?")
            );
        }
        return fail(code, &unanswered.line);
    }
    let mut fields = whereabouts(group);
    fields.insert(
        "replicas".into(),
        serde_json::to_value(&unanswered.replicas).unwrap_or_default(),
    );
    failed(code, &unanswered.line, Some(fields))
}

fn shown(report: &ops::LeaseReport, json: bool) -> String {
    if json {
        format!("{}\n", serde_json::to_string(report).unwrap_or_default())
    } else {
        report.render()
    }
}

/// `status --watch`: on a terminal the screen is cleared and redrawn, elsewhere each new view
/// follows the last; nothing is written while nothing changed. With `--json`, a stream of
/// events for followers to act on (as client-go's `OnNewLeader`): one object per line and per
/// change, `status --json`'s fields plus `event` (`initial`, `leader_changed`: another leader or
/// epoch, `changed`: anything else, `error`) and `observed_at`.
async fn watch_status(stores: &Stores, group: &Group, json: bool, every: Duration) -> ExitCode {
    use std::io::{IsTerminal, Write};
    let redraw = !json && std::io::stdout().is_terminal();
    let mut last: Option<String> = None;
    // The leader and epoch of the last view shown: a change of them is a `leader_changed`.
    let mut last_leader: Option<(Option<String>, Option<u64>)> = None;
    loop {
        let looked = tokio::select! {
            r = look(stores, group) => r,
            _ = tokio::signal::ctrl_c() => return ExitCode::SUCCESS,
        };
        let observed_at = crate::store::rfc3339(time::OffsetDateTime::now_utc());
        let (digest, text) = match looked {
            Ok(report) if json => {
                let leader = (report.leader.clone(), report.epoch);
                let event = match &last_leader {
                    None => "initial",
                    Some(before) if *before != leader => "leader_changed",
                    Some(_) => "changed",
                };
                let digest = report.digest();
                if last.as_ref() != Some(&digest) {
                    last_leader = Some(leader);
                }
                (digest, watch_event(&report, event, &observed_at))
            }
            Ok(report) => (report.digest(), shown(&report, json)),
            // Refused credentials do not pass: the watch ends as one `status` would.
            Err(Unread::Store(e)) if e.failure() == Failure::Denied => {
                return storage_failure(&e, group, json);
            }
            Err(Unread::Replicas(u)) if u.replicas.iter().all(|r| r.denied) => {
                return replicas_unanswered(&u, group, json);
            }
            // Passing trouble: said once, and looked at again.
            Err(unread) => {
                let (said, e) = match unread {
                    Unread::Store(e) => {
                        (ops::storage_error_line(&e, &group.storage), e.to_string())
                    }
                    Unread::Replicas(u) => (u.line.clone(), u.line),
                };
                let text = if json {
                    let event = serde_json::json!({
                        "event": "error",
                        "observed_at": observed_at,
                        "error": said,
                    });
                    format!("{event}\n")
                } else {
                    format!("cannot read the lease blob: {said}\n")
                };
                (format!("error {e}"), text)
            }
        };
        if last.as_ref() != Some(&digest) {
            let mut out = String::new();
            if redraw {
                out += "\x1b[H\x1b[2J";
            } else if last.is_some() && !json {
                out += "\n";
            }
            if !json {
                out += &format!(
                    "{} (every {}; Ctrl-C ends)\n",
                    crate::store::rfc3339(time::OffsetDateTime::now_utc()),
                    human(every)
                );
            }
            out += &text;
            let mut stdout = std::io::stdout().lock();
            // A closed pipe (`| head`) ends the watch.
            if stdout
                .write_all(out.as_bytes())
                .and_then(|()| stdout.flush())
                .is_err()
            {
                return ExitCode::SUCCESS;
            }
            last = Some(digest);
        }
        tokio::select! {
            () = tokio::time::sleep(every) => {}
            _ = tokio::signal::ctrl_c() => return ExitCode::SUCCESS,
        }
    }
}

/// One line of `status --watch --json`: the report, with `event` and `observed_at`.
fn watch_event(report: &ops::LeaseReport, event: &str, observed_at: &str) -> String {
    let mut line = serde_json::Map::new();
    line.insert("event".into(), event.into());
    line.insert("observed_at".into(), observed_at.into());
    if let Ok(serde_json::Value::Object(fields)) = serde_json::to_value(report) {
        line.extend(fields);
    }
    format!("{}\n", serde_json::Value::Object(line))
}

/// `leasehold break`: break the lease, for `period` or the safe default of the config. A
/// period of zero lets another instance lead while the old leader's child may still run, so it
/// needs `force`.
///
/// With `[[storage.replica]]` it breaks the lease on every replica it reaches, side by side, and
/// succeeds once a majority is broken or free (docs/operations.md, "break").
pub(super) fn break_lease(given: &Invocation, period: Option<Duration>, force: bool) -> ExitCode {
    one_shot(given, false, |group, stores| async move {
        let safe = group.timing.safe_break_period();
        if period == Some(Duration::ZERO) && !force {
            return fail(
                EXIT_CONFIG,
                &format!(
                    "--period 0s lets another instance lead at once while the old leader's child \
                     may still run for up to {} (renew_interval + stop_timeout + safety_margin): \
                     two children at once; add --force to do it anyway, or leave --period out \
                     (the default waits that long)",
                    human(safe)
                ),
            );
        }
        let period = period.unwrap_or(safe);
        let store = match &stores {
            Stores::One(store) => store,
            Stores::Replicas(set, stores) => {
                let broken = ops::break_group(&replicas(stores, &group), set, period).await;
                print!("{}", broken.render());
                return match (broken.succeeded(), broken.denied()) {
                    (true, _) => ExitCode::SUCCESS,
                    (false, true) => fail(EXIT_DENIED, &broken.failure_line()),
                    (false, false) => fail(EXIT_FAILED, &broken.failure_line()),
                };
            }
        };
        match ops::break_lease(store, &group.storage, period).await {
            Ok(outcome) => {
                print!("{}", outcome.render());
                ExitCode::SUCCESS
            }
            Err(e) => storage_failure(&e, &group, false),
        }
    })
}

/// `leasehold check`: a checklist on stdout, one line per step, with a hint on failure.
pub(super) fn check(given: &Invocation, offline: bool) -> ExitCode {
    let env = |name: &str| std::env::var(name).ok();
    let (mut lines, group) = ops::check_config(given.path(), &given.overrides, &env);
    let group = match group {
        Some(group) if !offline => group,
        _ => return report(&lines, group.is_none()),
    };
    logging::init_quiet(given.format);
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            lines.push(CheckLine::fail("runtime", e.to_string(), ""));
            return report(&lines, false);
        }
    };
    // A replica's blob carries its set's stamp; the one account's none.
    let set = crate::config::replica_set(&group.replicas).map(|s| s.fingerprint());
    let prove = |target: &StorageTarget, table: &str| match AzureStore::new(target) {
        Ok(store) => rt.block_on(ops::check(&store, target, &group.timing, set)),
        Err(e) => vec![CheckLine::fail(
            "endpoint",
            e.to_string(),
            format!("check {table}"),
        )],
    };
    if group.replicas.is_empty() {
        lines.extend(prove(&group.storage, "[storage]"));
        return report(&lines, false);
    }
    // Every account in turn, each to its first failure: all that is wrong shows at once.
    let mut passed = Vec::new();
    let mut ids = Vec::new();
    for (i, target) in group.replicas.iter().enumerate() {
        let n = i + 1;
        let proved = prove(target, &format!("[storage.replica {n}]"));
        let ok = proved.iter().all(CheckLine::passed);
        passed.push(ok);
        lines.extend(ops::of_replica(n, proved));
        // Its id, once its blob passed: two replicas with one id count once.
        let read = |store: AzureStore| rt.block_on(ops::replica_id(&store));
        ids.push(AzureStore::new(target).ok().filter(|_| ok).and_then(read));
    }
    lines.push(ops::replicas_line(&passed));
    lines.extend(ops::distinct_replicas_line(&ids));
    report(&lines, false)
}

/// Prints the checklist; exit 2 when the config itself failed, 1 when another step did.
fn report(lines: &[CheckLine], config_failed: bool) -> ExitCode {
    for line in lines {
        print!("{}", line.render());
    }
    if config_failed {
        ExitCode::from(EXIT_CONFIG)
    } else if lines.iter().all(CheckLine::passed) {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_FAILED)
    }
}

/// Where `status` and `break` find the group's lease: one account, or the replicas (their
/// set, and a store each, in the set's order).
enum Stores {
    One(AzureStore),
    Replicas(ReplicaSet, Vec<AzureStore>),
}

impl Stores {
    /// The stores of `group`; an error line naming the replica's table when one cannot be made.
    fn of(group: &Group) -> Result<Self, String> {
        let Some(set) = crate::config::replica_set(&group.replicas) else {
            return AzureStore::new(&group.storage)
                .map(Stores::One)
                .map_err(|e| e.to_string());
        };
        let stores = AzureStore::for_replicas(&group.replicas)
            .map_err(|(n, e)| format!("[storage.replica {n}]: {e}"))?;
        Ok(Stores::Replicas(set, stores))
    }
}

/// `status` and `break`: load the group config (replicas and all) and its stores, then run one
/// async command on a small runtime. With `json`, a failure before the command runs is a JSON
/// object on stdout too.
fn one_shot<F, Fut>(given: &Invocation, json: bool, command: F) -> ExitCode
where
    F: FnOnce(Group, Stores) -> Fut,
    Fut: Future<Output = ExitCode>,
{
    let env = |name: &str| std::env::var(name).ok();
    let config = Config::load_or_defaults(given.path(), &given.overrides);
    let group = match config.and_then(|c| c.validate_group(&env)) {
        Ok(g) => g,
        Err(e) => return failed(EXIT_CONFIG, &e.to_string(), json.then(Map::new)),
    };
    logging::init_quiet(given.format);
    let store = match Stores::of(&group) {
        Ok(s) => s,
        Err(e) => return failed(EXIT_CONFIG, &e, json.then(|| whereabouts(&group))),
    };
    match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt.block_on(command(group, store)),
        Err(e) => fail(EXIT_FAILED, &format!("cannot start the runtime: {e}")),
    }
}

/// The exit code of a failed storage request in a one-shot command, and its one line: what
/// failed, where, and what to fix (with `json`, on stdout as an object too).
fn storage_failure(e: &StoreError, group: &Group, json: bool) -> ExitCode {
    let fields = json.then(|| whereabouts(group));
    if e.failure() == Failure::Denied {
        let line = format!("storage refused the credentials ({e}); {}", e.denied_hint());
        failed(EXIT_DENIED, &line, fields)
    } else {
        failed(
            EXIT_FAILED,
            &ops::storage_error_line(e, &group.storage),
            fields,
        )
    }
}

/// Where the group's blob is, as `status --json`'s error object says it.
fn whereabouts(group: &Group) -> Map<String, serde_json::Value> {
    let storage = &group.storage;
    let mut fields = Map::new();
    fields.insert("container".into(), storage.container.clone().into());
    fields.insert("blob".into(), storage.blob.clone().into());
    // With replicas there is an endpoint a replica, each in its row.
    if group.replicas.is_empty() {
        let endpoint = crate::secret::redact_urls(&storage.endpoint);
        fields.insert("endpoint".into(), endpoint.into());
    }
    fields
}

/// [`fail`]'s line on stderr and its exit code; with `json` fields, also `{"error": line,
/// ...fields}` on stdout, for `--json`'s readers.
fn failed(code: u8, line: &str, json: Option<Map<String, serde_json::Value>>) -> ExitCode {
    if let Some(mut fields) = json {
        fields.insert("error".into(), line.into());
        println!("{}", serde_json::Value::Object(fields));
    }
    fail(code, &line)
}
