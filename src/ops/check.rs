//! `leasehold check`: would `run` work here? The config as `run` loads it, the child's program,
//! then storage step by step: the endpoint, the credentials, the container and blob, and the
//! lease operations (an acquire-and-release probe); with `[[storage.replica]]`, every account in
//! turn, each line naming its replica, and whether a majority of them passed.

use super::held::verify;
use super::request::{UNREACHABLE_HINT, within};
use crate::config::{Config, ConfigError, Group, Overrides, find_program};
use crate::fmt::human;
use crate::store::target::StorageTarget;
use crate::store::{BlobState, Failure, LeaseCheck, LeaseId, LeaseState, LeaseStore, StoreError};
use crate::timing::Timing;
use leasehold_core::quorum::{Fingerprint, ReplicaId};
use std::ffi::OsStr;
use std::path::Path;
use tokio::time::Instant;

/// How a step of `check` went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mark {
    Ok,
    /// Passed, but something deserves attention (a secret file readable by others).
    Warn,
    Fail,
}

/// One line of `check`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckLine {
    pub mark: Mark,
    pub step: &'static str,
    pub detail: String,
    /// How to fix it, on failure.
    pub hint: Option<String>,
}

impl CheckLine {
    pub fn passed(&self) -> bool {
        self.mark != Mark::Fail
    }

    fn new(
        mark: Mark,
        step: &'static str,
        detail: impl Into<String>,
        hint: Option<String>,
    ) -> Self {
        Self {
            mark,
            step,
            detail: detail.into(),
            hint,
        }
    }

    pub fn warn(step: &'static str, detail: impl Into<String>) -> Self {
        Self::new(Mark::Warn, step, detail, None)
    }

    pub fn ok(step: &'static str, detail: impl Into<String>) -> Self {
        Self::new(Mark::Ok, step, detail, None)
    }

    pub fn fail(step: &'static str, detail: impl Into<String>, hint: impl Into<String>) -> Self {
        Self::new(Mark::Fail, step, detail, Some(hint.into()))
    }

    pub fn render(&self) -> String {
        let mut out = format!(
            "{:<5} {:<12} {}\n",
            match self.mark {
                Mark::Ok => "ok",
                Mark::Warn => "warn",
                Mark::Fail => "FAIL",
            },
            self.step,
            self.detail
        );
        if let Some(hint) = &self.hint {
            out += &format!("{:<5} {:<12} hint: {hint}\n", "", "");
        }
        out
    }
}

/// `leasehold check`'s first lines: the config as `run` would load it (one FAIL line and no group
/// when it would refuse it), its warnings, and the child's program found as `exec` would find
/// it. A missing `[child].command` passes: it may come after `--` at run time.
pub fn check_config(
    path: Option<&Path>,
    overrides: &Overrides,
    env: &dyn Fn(&str) -> Option<String>,
) -> (Vec<CheckLine>, Option<Group>) {
    let refused = |e: ConfigError| (vec![config_line(&e)], None);
    let config = match Config::load_or_defaults(path, overrides) {
        Ok(c) => c,
        Err(e) => return refused(e),
    };
    let group = match config.validate_group(env) {
        Ok(g) => g,
        Err(e) => return refused(e),
    };
    let child = match config.child_settings() {
        Ok(child) => Some(child),
        Err(ConfigError::Missing { key, .. }) if key == "[child].command" => None,
        Err(e) => return refused(config.origins.locate(e)),
    };
    let pod_label = match config.pod_label(env) {
        Ok(label) => label,
        Err(e) => return refused(e),
    };
    let source = path.map_or("the command line".into(), |p| p.display().to_string());
    let t = &group.timing;
    // This instance's own settings, each of which may come from the file, a variable or a flag.
    let mut own = vec![format!("priority {}", group.election.priority)];
    own.extend(match (&group.election.advertise, group.advertise_auto) {
        (Some(url), _) => Some(format!("advertise {url}")),
        (None, true) => Some("advertise auto".to_owned()),
        (None, false) => None,
    });
    own.extend(group.http_listen.map(|l| format!("http {l}")));
    own.extend(pod_label.map(|l| format!("pod label {} on {}", l.key, l.pod)));
    let mut lines = vec![CheckLine::ok(
        "config",
        format!(
            "{source}: {} ({}) in group {}/{}; lease {}, renew {}, stop timeout {}, margin {}",
            group.identity,
            own.join(", "),
            group.storage.container,
            group.storage.blob,
            human(t.duration),
            human(t.renew_interval),
            human(t.stop_timeout),
            human(t.safety_margin),
        ),
    )];
    if !group.replicas.is_empty() {
        let n = group.replicas.len();
        lines.push(CheckLine::ok(
            "replicas",
            format!(
                "{n} storage accounts; the lease is held on a majority ({}); every member lists \
                 the same accounts in the same order, and changing the set needs the group \
                 stopped or a new blob name (docs/quorum.md)",
                n / 2 + 1
            ),
        ));
    }
    lines.extend(
        group
            .warnings
            .iter()
            .map(|w| CheckLine::warn("config", w.clone())),
    );
    lines.push(match child {
        Some(child) => {
            let path = env("PATH");
            let program = &child.command[0];
            match find_program(
                &config.origins.name("[child].command"),
                program,
                child.working_dir.as_deref(),
                path.as_deref().map(OsStr::new),
            ) {
                Ok(found) => CheckLine::ok("child", format!("{program} is {}", found.display())),
                Err(e) => {
                    CheckLine::fail("child", e, "install the program, or fix [child].command")
                }
            }
        }
        None => CheckLine::ok(
            "child",
            "no [child].command; give it after `--` to leasehold run",
        ),
    });
    (lines, Some(group))
}

/// `check`'s lines for replica `n` (counted from 1), as [`check`] gave them: each
/// names the replica (the endpoint line says where it is), and its hints the replica's table.
pub fn of_replica(n: usize, lines: Vec<CheckLine>) -> Vec<CheckLine> {
    let table = format!("[storage.replica {n}].");
    lines
        .into_iter()
        .map(|line| CheckLine {
            detail: format!("replica {n}: {}", line.detail),
            hint: line
                .hint
                .map(|h| h.replace("[storage].endpoint", &format!("{table}endpoint"))),
            ..line
        })
        .collect()
}

/// The last line of `check` with replicas: whether every account passed, and if not, whether
/// the ones that did are still a majority. `passed` holds each replica's outcome, in order.
pub fn replicas_line(passed: &[bool]) -> CheckLine {
    let count = passed.len();
    let failed: Vec<String> = (1..=count)
        .filter(|n| !passed[n - 1])
        .map(|n| n.to_string())
        .collect();
    let working = count - failed.len();
    if failed.is_empty() {
        return CheckLine::ok("replicas", format!("all {count} accounts passed"));
    }
    let which = match failed.len() {
        1 => format!("replica {} failed", failed[0]),
        _ => format!("replicas {} failed", failed.join(", ")),
    };
    let majority = count / 2 + 1;
    let detail = if working >= majority {
        format!(
            "{which}; the {working} that passed are a majority, so the group could lead, but \
             {} more down would stop it",
            working - majority + 1
        )
    } else {
        format!(
            "{which}; {working} of {count} is no majority ({majority}): the group could not lead"
        )
    };
    CheckLine::fail(
        "replicas",
        detail,
        "fix the replicas whose lines above say FAIL",
    )
}

/// With replicas, a failing line when two of them carry one replica id (`ids`: each replica's
/// id as read, in order, `None` where it was not read): one account listed twice, under two
/// endpoints, or a blob copied from another replica. The set counts such replicas once, so it
/// survives fewer accounts down than its size says (docs/quorum.md, *One replica set*).
pub fn distinct_replicas_line(ids: &[Option<ReplicaId>]) -> Option<CheckLine> {
    let mut twice = Vec::new();
    for (i, id) in ids.iter().enumerate() {
        let Some(id) = id else { continue };
        if let Some(j) = ids[..i].iter().position(|seen| *seen == Some(*id)) {
            twice.push(format!("replicas {} and {}", j + 1, i + 1));
        }
    }
    (!twice.is_empty()).then(|| {
        CheckLine::fail(
            "replicas",
            format!(
                "{} carry one replica id: one account listed twice (two endpoints of one \
                 account), or a blob copied from another replica; the set counts them once",
                twice.join(", ")
            ),
            "list each account once; if they are different accounts, stop the group and delete \
             the lease blob on one of them (leasehold creates it stamped anew)",
        )
    })
}

/// The replica id `store`'s blob carries, if it could be read.
pub async fn replica_id<S: LeaseStore>(store: &S) -> Option<ReplicaId> {
    let (_, stamp) = within(store.read_stamped()).await.ok()?;
    stamp.id
}

/// A config that `check` could not load, as `run` would refuse it.
fn config_line(e: &ConfigError) -> CheckLine {
    CheckLine::fail("config", e.to_string(), "fix the config file or the flags")
}

/// `leasehold check`, after the config passed: reach the endpoint, have the credentials
/// accepted, find (or create) the container and blob, and prove the lease operations are
/// permitted. Stops at the first failure, since every step needs the previous one. On a replica
/// of the set whose fingerprint is `set`, the blob must carry that set's stamp, and is created
/// with it (docs/quorum.md, *One replica set*).
pub async fn check<S: LeaseStore>(
    store: &S,
    target: &StorageTarget,
    timing: &Timing,
    set: Option<Fingerprint>,
) -> Vec<CheckLine> {
    let mut lines = Vec::new();
    let stamped = match set {
        Some(_) => ", stamped for this replica set",
        None => "",
    };
    let unreadable =
        |e: &StoreError| CheckLine::fail("blob", format!("cannot read it: {e}"), e.denied_hint());
    let endpoint = crate::secret::redact_urls(&target.endpoint);
    let started = Instant::now();
    let read = within(store.read()).await;
    if let Err(e @ (StoreError::Unreachable(_) | StoreError::TimedOut(_))) = &read {
        lines.push(CheckLine::fail(
            "endpoint",
            format!("{endpoint}: {e}"),
            UNREACHABLE_HINT,
        ));
        return lines;
    }
    lines.push(CheckLine::ok(
        "endpoint",
        format!("{endpoint} answered in {}", human(started.elapsed())),
    ));
    if let Err(e) = &read
        && e.failure() == Failure::Denied
    {
        lines.push(CheckLine::fail(
            "credentials",
            format!("refused: {e}"),
            e.denied_hint(),
        ));
        return lines;
    }
    lines.push(CheckLine::ok(
        "credentials",
        format!(
            "accepted ({} for account {})",
            target.credential.describe(),
            target.account
        ),
    ));

    let state = match read {
        Ok(state) => {
            lines.push(CheckLine::ok(
                "container",
                format!("{} exists", target.container),
            ));
            if let Some(fingerprint) = set {
                match within(store.read_stamped()).await {
                    Ok((_, stamp)) if stamp.fingerprint == Some(fingerprint) => {}
                    Ok(_) => {
                        lines.push(CheckLine::fail(
                            "blob",
                            format!(
                                "{} exists but is not stamped for this replica set: it counts for \
                                 no member of the set",
                                target.blob
                            ),
                            "delete it (leasehold creates it stamped), or give the set a new \
                             blob name (docs/quorum.md)",
                        ));
                        return lines;
                    }
                    Err(e) => {
                        lines.push(unreadable(&e));
                        return lines;
                    }
                }
            }
            lines.push(CheckLine::ok(
                "blob",
                format!("{} exists{stamped}", target.blob),
            ));
            state
        }
        Err(e) if e.failure() == Failure::Missing => {
            let container_missing = e.code() == Some("ContainerNotFound");
            if !target.create_if_missing {
                let (step, name) = if container_missing {
                    ("container", &target.container)
                } else {
                    ("blob", &target.blob)
                };
                lines.push(CheckLine::fail(
                    step,
                    format!("{name} does not exist"),
                    "create it, or set [storage].create_if_missing = true",
                ));
                return lines;
            }
            let created = match set {
                Some(fingerprint) => within(store.create_stamped(fingerprint)).await,
                None => within(store.prepare(true)).await,
            };
            if let Err(e) = created {
                lines.push(CheckLine::fail(
                    if container_missing {
                        "container"
                    } else {
                        "blob"
                    },
                    format!("cannot create it: {e}"),
                    e.denied_hint(),
                ));
                return lines;
            }
            if container_missing {
                lines.push(CheckLine::ok(
                    "container",
                    format!("{} created (create_if_missing)", target.container),
                ));
            } else {
                lines.push(CheckLine::ok(
                    "container",
                    format!("{} exists", target.container),
                ));
            }
            lines.push(CheckLine::ok(
                "blob",
                format!("{} created{stamped} (create_if_missing)", target.blob),
            ));
            match within(store.read()).await {
                Ok(state) => state,
                Err(e) => {
                    lines.push(unreadable(&e));
                    return lines;
                }
            }
        }
        Err(e) => {
            lines.push(unreadable(&e));
            return lines;
        }
    };

    let holder = |state: &BlobState| {
        state
            .holder
            .as_ref()
            .map(|h| format!("{} (epoch {})", h.identity, h.epoch))
            .unwrap_or_else(|| "an instance that wrote no metadata yet".to_owned())
    };
    match state.lease {
        LeaseState::Leased if verify(store, &state).await == Some(LeaseCheck::HeldByAnother) => {
            lines.push(CheckLine::ok(
                "lease",
                "held by an instance that has not written its metadata yet; acquire not attempted",
            ))
        }
        LeaseState::Leased => lines.push(CheckLine::ok(
            "lease",
            format!("held by {}; acquire not attempted", holder(&state)),
        )),
        LeaseState::Breaking => lines.push(CheckLine::ok(
            "lease",
            "being broken; acquire not attempted",
        )),
        _ => {
            let probe = LeaseId::random();
            match within(store.acquire(probe, timing.lease_seconds())).await {
                Ok(()) => match within(store.release(probe)).await {
                    Ok(()) => lines.push(CheckLine::ok("lease", "acquire and release permitted (the lease was free)")),
                    Err(e) => lines.push(CheckLine::fail(
                        "lease",
                        format!("acquired, but the release failed: {e}; the probe lease expires within {}", human(timing.duration)),
                        e.denied_hint(),
                    )),
                },
                Err(e) if e.failure() == Failure::Held => lines.push(CheckLine::ok(
                    "lease",
                    "taken by another instance meanwhile; acquire not attempted",
                )),
                Err(e) => lines.push(CheckLine::fail("lease", format!("acquire refused: {e}"), e.denied_hint())),
            }
        }
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_replicas_lines_name_it_and_its_table() {
        let lines = vec![
            CheckLine::ok("endpoint", "http://127.0.0.1:1/a answered in 2ms"),
            CheckLine::fail("credentials", "refused: 403", UNREACHABLE_HINT),
        ];
        let shown = of_replica(2, lines);
        assert_eq!(
            shown[0].detail,
            "replica 2: http://127.0.0.1:1/a answered in 2ms"
        );
        assert_eq!(shown[1].detail, "replica 2: refused: 403");
        let hint = shown[1].hint.as_deref().unwrap_or_default();
        assert!(
            hint.starts_with("check [storage.replica 2].endpoint (or the connection string's"),
            "{hint}"
        );
        assert_eq!((shown[0].step, shown[1].mark), ("endpoint", Mark::Fail));
    }

    /// Whether the accounts that passed are still a majority, and how many more may fail.
    #[test]
    fn two_replicas_with_one_id_fail_the_check_by_their_numbers() {
        let (a, b) = (Some(ReplicaId(7)), Some(ReplicaId(8)));
        assert!(distinct_replicas_line(&[a, b, Some(ReplicaId(9))]).is_none());
        assert!(distinct_replicas_line(&[a, None, None]).is_none(), "unread");
        let line = distinct_replicas_line(&[a, b, a]).expect("one id twice");
        assert!(!line.passed());
        assert!(
            line.detail
                .starts_with("replicas 1 and 3 carry one replica id: one account listed twice"),
            "{}",
            line.detail
        );
        let line = distinct_replicas_line(&[a, a, b, b, a]).expect("two ids twice");
        assert!(
            line.detail
                .starts_with("replicas 1 and 2, replicas 3 and 4, replicas 1 and 5 carry"),
            "{}",
            line.detail
        );
    }

    #[test]
    fn the_replicas_line_says_whether_a_majority_passed() {
        let said = |passed: &[bool]| {
            let line = replicas_line(passed);
            (line.mark, line.detail)
        };
        assert_eq!(
            said(&[true; 3]),
            (Mark::Ok, "all 3 accounts passed".to_owned())
        );
        assert_eq!(
            said(&[true, false, true]),
            (
                Mark::Fail,
                "replica 2 failed; the 2 that passed are a majority, so the group could lead, \
                 but 1 more down would stop it"
                    .to_owned()
            )
        );
        assert_eq!(
            said(&[true, false, true, true, true]).1,
            "replica 2 failed; the 4 that passed are a majority, so the group could lead, but 2 \
             more down would stop it"
        );
        assert_eq!(
            said(&[false, true, false]).1,
            "replicas 1, 3 failed; 1 of 3 is no majority (2): the group could not lead"
        );
    }
}
