//! The simulator's command (docs/testing.md, "The simulator"): simulated histories of a leadership
//! group, each judged by the checker, on every core.
//!
//! ```text
//! cargo run --release --example simulate -- [--seeds N | --minutes M | --seed S] [--members K]
//!     [--mutant NAME] [--from SEED] [--history-minutes H] [--threads T] [--full-trace]
//!     [--engine sync|tokio] [--replicas 3|5|any]
//! ```
//!
//! * `--seeds N`: seeds 1 to N (or `--from F`: F to F + N - 1). The default: `--seeds 200`.
//! * `--minutes M`: as many seeds as fit in M minutes of wall-clock time, from a random seed
//!   (or `--from F`).
//! * `--seed S`: one history, its readable trace printed (`--full-trace`: every request too;
//!   `--log`: the members' own logs on stderr, `RUST_LOG` filtered, default `debug`, stamped
//!   with virtual time).
//! * `--members K`: members at the start (default 5); `--history-minutes H`: each history's
//!   length in virtual time (default 10).
//! * `--every-violation`: every violation of every seed, one a line (`seed S: (rule) at ...`).
//! * `--schedule NAME`: a scripted schedule of faults, one of the regressions kept as scripts
//!   (`all`: every one), with its trace.
//! * `--mutant NAME`: a deliberately broken rule (`deadline-from-answer`, `change-before-gone`,
//!   `start-before-epoch`, `trust-the-notice`, `release-the-stuck`, `lead-on-the-reservation`,
//!   `hop-waits-out-refusal`, `watcher-stays`, `slot-refill-late`, `guard-sleeps`,
//!   `no-crash-backoff`, `create-unmarked`, `brand-new-slot-delayed`; with `--replicas`:
//!   `minority-leads`, `deadline-from-latest`, `epoch-from-one`, `no-replica-lock-delay`,
//!   `count-unknown-outcome`), which the checker must catch.
//! * `--engine NAME`: `sync` (the default: the core's members driven with no runtime) or
//!   `tokio` (the second oracle: the shell's elector on tokio's paused clock, whose own races it
//!   keeps simulated); either plays scripted schedules too.
//! * `--replicas N`: every history's group leads on a replica set of `N` storage accounts (3,
//!   5, or `any`: 3 or 5 drawn from each seed), a store a replica, with faults per replica
//!   (docs/quorum.md, "What the simulator plays"); the synchronous engine only. Without it, one
//!   account, and the seeds' histories (and their trace hash) are what they were.
//!
//! The line before the last gives the histories' shape (their mean members, virtual length and
//! events: what a rate of histories a minute is read against). The last line is
//! `simulate: histories=N violations=V histories_per_min=R trace_hash=H`,
//! where V counts the rules broken in all histories and H hashes every history's whole trace
//! (with `--seed S`, that one's). Exit 0 without violations; 1 with, after the first failing
//! seed's trace and the one-line command that replays it.

use leasehold::sim::{
    Config, Engine, History, Mutant, combine_hashes, open_faults, regressions, run,
};
use std::collections::BTreeMap;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A history allocates and frees at nearly every step (its tasks, its requests, its trace):
/// mimalloc's thread-local heaps spend less on it than the system allocator.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// What to run.
enum Seeds {
    Range {
        from: u64,
        count: u64,
    },
    For(Duration, u64),
    One(u64),
    /// Scripted schedules: one by name, or every one (`all`); with `--seeds N`, each with the
    /// protocol's seeds 1 to N (or from `--from`) instead of its own.
    Scripted(String, Option<(u64, u64)>),
}

struct Args {
    seeds: Seeds,
    members: usize,
    history_minutes: u64,
    mutant: Option<Mutant>,
    engine: Engine,
    /// `--replicas`: 1 (one account), 3, 5, or 0 (drawn).
    replicas: usize,
    threads: usize,
    full_trace: bool,
    /// With `--seed` or `--schedule`: the members' logs (`RUST_LOG`, default `debug`), on
    /// virtual time.
    log: bool,
    /// Every violation of every seed, one a line.
    every: bool,
}

fn usage() -> String {
    "usage: simulate [--seeds N | --minutes M | --seed S] [--members K] [--mutant NAME] \
     [--from SEED] [--history-minutes H] [--threads T] [--full-trace] [--log] \
     [--every-violation] [--schedule NAME|all] [--engine sync|tokio] [--replicas 3|5|any]"
        .to_owned()
}

fn parse() -> Result<Args, String> {
    let mut args = std::env::args().skip(1);
    let (mut count, mut minutes, mut one, mut from) = (None, None, None, None);
    let mut schedule: Option<String> = None;
    let mut members = 5;
    let mut history_minutes = 10;
    let mut mutant = None;
    let mut engine = Engine::Sync;
    let mut replicas = 1;
    let mut threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    let mut full_trace = false;
    let mut log = false;
    let mut every = false;
    let number = |flag: &str, value: Option<String>| -> Result<u64, String> {
        let value = value.ok_or_else(|| format!("{flag} needs a value; {}", usage()))?;
        value
            .parse()
            .map_err(|_| format!("{flag} {value:?}: give a whole number"))
    };
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--seeds" => count = Some(number("--seeds", args.next())?),
            "--minutes" => minutes = Some(number("--minutes", args.next())?),
            "--seed" => one = Some(number("--seed", args.next())?),
            "--from" => from = Some(number("--from", args.next())?),
            "--members" => members = number("--members", args.next())? as usize,
            "--history-minutes" => history_minutes = number("--history-minutes", args.next())?,
            "--threads" => threads = number("--threads", args.next())?.max(1) as usize,
            "--full-trace" => full_trace = true,
            "--log" => log = true,
            "--every-violation" => every = true,
            "--schedule" => {
                let name = args
                    .next()
                    .ok_or_else(|| format!("--schedule needs a name (or all); {}", usage()))?;
                let names: Vec<&str> = (regressions().iter())
                    .chain(open_faults().iter())
                    .map(|s| s.name)
                    .collect();
                if name != "all" && !names.contains(&name.as_str()) {
                    return Err(format!(
                        "--schedule {name:?}: no such schedule; give all or one of {names:?}"
                    ));
                }
                schedule = Some(name);
            }
            "--mutant" => {
                let name = args
                    .next()
                    .ok_or_else(|| format!("--mutant needs a name; {}", usage()))?;
                let names: Vec<&str> = Mutant::ALL.iter().map(|m| m.name()).collect();
                mutant = Some(Mutant::from_name(&name).ok_or_else(|| {
                    format!("--mutant {name:?}: no such mutant; give one of {names:?}")
                })?);
            }
            "--engine" => {
                let name = args
                    .next()
                    .ok_or_else(|| format!("--engine needs a name; {}", usage()))?;
                engine = Engine::from_name(&name)
                    .ok_or_else(|| format!("--engine {name:?}: give tokio or sync"))?;
            }
            "--replicas" => {
                replicas = match args.next().as_deref() {
                    Some("3") => 3,
                    Some("5") => 5,
                    Some("any") => 0,
                    other => return Err(format!("--replicas {other:?}: give 3, 5 or any")),
                };
            }
            "-h" | "--help" => return Err(usage()),
            other => return Err(format!("unknown argument {other:?}; {}", usage())),
        }
    }
    if !(1..=64).contains(&members) {
        return Err(format!("--members {members}: give 1 to 64"));
    }
    if replicas != 1 && engine != Engine::Sync {
        return Err("--replicas: the synchronous engine plays replica sets (--engine sync)".into());
    }
    if history_minutes == 0 {
        return Err("--history-minutes 0: give at least 1".to_owned());
    }
    let seeds = match (count, minutes, one) {
        _ if schedule.is_some() => Seeds::Scripted(
            schedule.unwrap_or_default(),
            count.map(|n| (from.unwrap_or(1), n)),
        ),
        (None, None, Some(s)) => Seeds::One(s),
        (None, Some(m), None) => Seeds::For(
            Duration::from_secs(60 * m),
            from.unwrap_or_else(|| fastrand::u64(1..1 << 40)),
        ),
        (Some(n), None, None) => Seeds::Range {
            from: from.unwrap_or(1),
            count: n,
        },
        (None, None, None) => Seeds::Range {
            from: from.unwrap_or(1),
            count: 200,
        },
        _ => {
            return Err(format!(
                "give one of --seeds, --minutes, --seed; {}",
                usage()
            ));
        }
    };
    Ok(Args {
        seeds,
        members,
        history_minutes,
        mutant,
        engine,
        replicas,
        threads,
        full_trace,
        log,
        every,
    })
}

fn config(args: &Args, seed: u64) -> Config {
    Config::new(seed)
        .members(args.members)
        .minutes(args.history_minutes)
        .mutant(args.mutant)
        .engine(args.engine)
        .replicas(args.replicas)
}

fn main() -> ExitCode {
    let args = match parse() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("simulate: {e}");
            return ExitCode::from(2);
        }
    };
    let began = Instant::now();
    if args.log {
        tracing_subscriber::fmt()
            .with_env_filter(
                tracing_subscriber::EnvFilter::try_from_default_env()
                    .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("debug")),
            )
            .with_timer(VirtualTime)
            .with_writer(std::io::stderr)
            .with_ansi(false)
            .init();
    }
    if let Seeds::Scripted(name, seeds) = &args.seeds {
        let mut histories = Vec::new();
        // `all`: the regressions (an open fault breaks a rule until it is fixed).
        let scripts: Vec<_> = match name.as_str() {
            "all" => regressions(),
            _ => (regressions().into_iter().chain(open_faults()))
                .filter(|s| s.name == name)
                .collect(),
        };
        for schedule in scripts {
            let seeds = match seeds {
                Some((from, n)) => (*from..from + n).collect(),
                None => vec![schedule.seed],
            };
            for seed in seeds {
                let mut config = Config::scripted(schedule.clone());
                config.seed = seed;
                config.mutant = args.mutant;
                config.engine = args.engine;
                let history = run(&config);
                match history.violations.len() {
                    0 => println!("schedule {} (seed {seed}): no rule broken", schedule.name),
                    n => println!("schedule {} (seed {seed}): {n} violation(s)", schedule.name),
                }
                if args.full_trace {
                    for e in &history.events {
                        println!("{e}");
                    }
                }
                histories.push(history);
            }
        }
        if let ([one], false) = (&histories[..], args.full_trace) {
            print!("{}", one.report());
        }
        return finish(&args, &histories, began);
    }
    if let Seeds::One(seed) = args.seeds {
        let history = run(&config(&args, seed));
        if args.full_trace {
            for e in &history.events {
                println!("{e}");
            }
        } else {
            print!("{}", history.report());
        }
        return finish(&args, &[history], began);
    }
    let (first, stop): (u64, Box<dyn Fn(u64) -> bool + Send + Sync>) = match args.seeds {
        Seeds::Range { from, count } => (from, Box::new(move |s| s >= from + count)),
        Seeds::For(limit, from) => {
            println!(
                "simulate: seeds from {from} for {} minutes",
                limit.as_secs() / 60
            );
            (from, Box::new(move |_| began.elapsed() >= limit))
        }
        Seeds::One(_) | Seeds::Scripted(..) => unreachable!(),
    };
    let next = AtomicU64::new(first);
    let done: Mutex<BTreeMap<u64, History>> = Mutex::default();
    // With a mutant: the seeds whose history breaks a rule with it and none without it.
    let caught: Mutex<Vec<u64>> = Mutex::default();
    let stop = Arc::new(stop);
    std::thread::scope(|scope| {
        for _ in 0..args.threads {
            scope.spawn(|| {
                loop {
                    let seed = next.fetch_add(1, Ordering::SeqCst);
                    if stop(seed) {
                        break;
                    }
                    let mut history = run(&config(&args, seed));
                    if args.mutant.is_some()
                        && !history.violations.is_empty()
                        && run(&config(&args, seed).mutant(None)).violations.is_empty()
                    {
                        caught.lock().unwrap().push(seed);
                    }
                    if history.violations.is_empty() {
                        // Keep the hash and the verdict, not the trace.
                        history.events = Vec::new();
                    }
                    done.lock().unwrap().insert(seed, history);
                }
            });
        }
    });
    let histories: Vec<History> = done.into_inner().unwrap().into_values().collect();
    if let Some(m) = args.mutant {
        let mut caught = caught.into_inner().unwrap();
        caught.sort();
        match caught.first() {
            Some(seed) => println!(
                "mutant {} caught in {} of {} seeds that pass without it; first: seed {seed} ({})",
                m.name(),
                caught.len(),
                histories.len(),
                config(&args, *seed).replay_command()
            ),
            None => println!("mutant {} NOT caught", m.name()),
        }
    }
    finish(&args, &histories, began)
}

/// Log timestamps in the history's virtual time (tokio's paused clock), from its start.
struct VirtualTime;

impl tracing_subscriber::fmt::time::FormatTime for VirtualTime {
    fn format_time(&self, w: &mut tracing_subscriber::fmt::format::Writer<'_>) -> std::fmt::Result {
        static START: std::sync::OnceLock<tokio::time::Instant> = std::sync::OnceLock::new();
        let start = *START.get_or_init(tokio::time::Instant::now);
        let t = tokio::time::Instant::now().saturating_duration_since(start);
        write!(w, "{:>4}.{:03}s", t.as_secs(), t.subsec_millis())
    }
}

/// The shape of the histories run, so that a rate of histories a minute can be read against it:
/// their mean number of members, virtual length and events.
fn say_shape(histories: &[History]) {
    let n = histories.len().max(1) as f64;
    let members: usize = histories.iter().map(|h| h.shape.members).sum();
    let length: Duration = histories.iter().map(|h| h.shape.virtual_length).sum();
    let events: usize = histories.iter().map(|h| h.shape.events).sum();
    println!(
        "shape: mean members={:.1} virtual_length={:.1}s events={:.0}",
        members as f64 / n,
        length.as_secs_f64() / n,
        events as f64 / n
    );
}

/// Prints the first failing history (if any) and the last line; the exit code.
fn finish(args: &Args, histories: &[History], began: Instant) -> ExitCode {
    let violations: usize = histories.iter().map(|h| h.violations.len()).sum();
    let failing: Vec<&History> = histories
        .iter()
        .filter(|h| !h.violations.is_empty())
        .collect();
    if let Some(first) = failing.first()
        && histories.len() > 1
    {
        println!("first failing seed: {}", first.seed);
        print!("{}", first.report());
        println!(
            "failing seeds ({}): {:?}",
            failing.len(),
            failing.iter().map(|h| h.seed).take(50).collect::<Vec<_>>()
        );
    }
    if args.every {
        for h in &failing {
            for v in &h.violations {
                println!("seed {}: {v}", h.seed);
            }
        }
    }
    if violations > 0 {
        let mut by_rule: BTreeMap<char, (usize, u64)> = BTreeMap::new();
        for h in histories {
            for v in &h.violations {
                by_rule.entry(v.rule).or_insert((0, h.seed)).0 += 1;
            }
        }
        for (rule, (count, seed)) in by_rule {
            println!("rule ({rule}): {count} violation(s), first in seed {seed}");
        }
    }
    if let Some(m) = args.mutant {
        println!("mutant: {}", m.name());
    }
    let hash = histories
        .iter()
        .fold(0u64, |run, h| combine_hashes(run, h.hash));
    let hash = match histories {
        [one] => one.hash,
        _ => hash,
    };
    let minutes = began.elapsed().as_secs_f64() / 60.0;
    say_shape(histories);
    println!(
        "simulate: histories={} violations={violations} histories_per_min={:.0} trace_hash={hash:016x}",
        histories.len(),
        histories.len() as f64 / minutes.max(1e-9)
    );
    if violations == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
