//! Health checks of the child while this instance leads (`[child.health]`).
//!
//! A leader whose child has stalled keeps renewing its lease and so blocks every healthy
//! instance (the Azure Leader Election pattern's warning). The checker runs only while a child
//! runs under a held lease: it is started with each run of the child and dropped with it. Checks
//! run one at a time, `interval` apart (start to start, and `timeout <= interval`), so they never
//! overlap; the first comes one interval after the child started. A check that has not answered
//! after `timeout` fails, and a check command is SIGKILLed with its whole process group. Failures
//! in the `start_period` do not count, and a success ends the start period early (Docker's
//! HEALTHCHECK semantics). `failures` consecutive counted failures make the child unhealthy.

use crate::child::ChildSpec;
use crate::config::{HealthSettings, Probe};
use crate::fmt::human;
use crate::telemetry::{HealthResult, Telemetry};
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use std::process::Stdio;
use std::time::Duration;
use tokio::time::{Instant, sleep_until};

/// How one check ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Pass,
    /// It answered, unhealthy; what it said.
    Fail(String),
    /// No answer within the timeout.
    Timeout,
}

impl Verdict {
    pub fn result(&self) -> HealthResult {
        match self {
            Self::Pass => HealthResult::Pass,
            Self::Fail(_) => HealthResult::Fail,
            Self::Timeout => HealthResult::Timeout,
        }
    }
}

/// The child was found unhealthy.
#[derive(Debug, Clone)]
pub struct Unhealthy {
    pub failures: u32,
    /// What the last check said.
    pub last: String,
}

/// Checks until the child is unhealthy; never returns while it stays healthy. Drop the future
/// to stop checking (a running check command is killed).
pub async fn until_unhealthy(
    health: &HealthSettings,
    spec: &ChildSpec,
    telemetry: &Telemetry,
    child_started: Instant,
) -> Unhealthy {
    let http = match &health.probe {
        Probe::Http(_) => reqwest::Client::builder()
            .timeout(health.timeout)
            .connect_timeout(health.timeout)
            .build()
            .ok(),
        Probe::Command(_) => None,
    };
    let start_period_ends = child_started + health.start_period;
    let mut started_up = health.start_period.is_zero();
    let mut consecutive = 0u32;
    let mut next = child_started + health.interval;
    loop {
        sleep_until(next).await;
        let began = Instant::now();
        next = began + health.interval;
        let verdict = match (&health.probe, &http) {
            (Probe::Http(url), Some(client)) => http_check(client, url, health.timeout).await,
            (Probe::Http(_), None) => Verdict::Fail("cannot build an HTTP client".to_owned()),
            (Probe::Command(command), _) => command_check(command, spec, health.timeout).await,
        };
        let counts = started_up || began >= start_period_ends;
        match &verdict {
            Verdict::Pass => {
                consecutive = 0;
                started_up = true;
            }
            _ if counts => consecutive += 1,
            _ => {}
        }
        let said = describe(&verdict, health.timeout);
        telemetry.health_checked(verdict.result(), consecutive, &said);
        match &verdict {
            Verdict::Pass => tracing::debug!("health check passed"),
            _ if counts => tracing::warn!(
                consecutive,
                of = health.failures,
                "health check failed: {said}"
            ),
            _ => {
                tracing::info!("health check failed during the start period (not counted): {said}")
            }
        }
        if consecutive >= health.failures {
            return Unhealthy {
                failures: consecutive,
                last: said,
            };
        }
    }
}

fn describe(verdict: &Verdict, timeout: Duration) -> String {
    match verdict {
        Verdict::Pass => "ok".to_owned(),
        Verdict::Fail(said) => said.clone(),
        Verdict::Timeout => format!("no answer within {}", human(timeout)),
    }
}

async fn http_check(client: &reqwest::Client, url: &str, timeout: Duration) -> Verdict {
    let answer = async {
        let response = client.get(url).send().await?;
        let status = response.status();
        let body = response.bytes().await.unwrap_or_default();
        Ok::<_, reqwest::Error>((status, body))
    };
    match tokio::time::timeout(timeout, answer).await {
        Err(_) => Verdict::Timeout,
        Ok(Err(e)) if e.is_timeout() => Verdict::Timeout,
        Ok(Err(e)) => Verdict::Fail(crate::secret::redact_urls(&error_chain(&e))),
        Ok(Ok((status, _))) if status.is_success() => Verdict::Pass,
        Ok(Ok((status, body))) => Verdict::Fail(format!("HTTP {status}: {}", one_line(&body))),
    }
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text = format!("{text}: {s}");
        source = s.source();
    }
    text
}

async fn command_check(command: &[String], spec: &ChildSpec, timeout: Duration) -> Verdict {
    let mut check = spec.command(command);
    check
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let process = match check.spawn() {
        Ok(p) => p,
        Err(e) => return Verdict::Fail(format!("cannot run {:?}: {e}", command[0])),
    };
    let group = process.id().map(|pid| KillGroup(Pid::from_raw(pid as i32)));
    let verdict = match tokio::time::timeout(timeout, process.wait_with_output()).await {
        Err(_) => Verdict::Timeout,
        Ok(Err(e)) => Verdict::Fail(format!("lost the check process: {e}")),
        Ok(Ok(out)) if out.status.success() => Verdict::Pass,
        Ok(Ok(out)) => {
            let mut said = one_line(&out.stdout);
            let err = one_line(&out.stderr);
            if !err.is_empty() {
                said = if said.is_empty() {
                    err
                } else {
                    format!("{said} | {err}")
                };
            }
            Verdict::Fail(format!(
                "exit {}: {said}",
                crate::child::exit_code(out.status)
            ))
        }
    };
    drop(group);
    verdict
}

/// SIGKILLs a check's process group when dropped: after a timeout, or when checking stops
/// mid-check, nothing the check started is left behind.
struct KillGroup(Pid);

impl Drop for KillGroup {
    fn drop(&mut self) {
        let _ = killpg(self.0, Signal::SIGKILL);
    }
}

/// The first 300 characters of some output, on one line.
fn one_line(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let text: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match text.char_indices().nth(300) {
        Some((i, _)) => format!("{}...", &text[..i]),
        None => text,
    }
}
