//! `cargo run --example demo`: Azurite plus three `leasehold` daemons sharing one lease, each
//! running a child that prints who leads and with which epoch. Kill the leader and watch the
//! failover; stop it and watch it hand the lease to the first member in line. Every daemon
//! serves HTTP and so advertises its endpoint for wake-ups (`advertise = "auto"`, the default),
//! so a handover takes milliseconds; the line of members is shown whenever the leader changes.
//!
//! Keys (then Enter): nothing = stop the leader gracefully (SIGTERM), `k` = SIGKILL the leader,
//! `s` = show the line of members, `q` = quit. A stopped daemon rejoins 5 s later, at the back
//! of the line. Ctrl-C quits too.
//!
//! Options: `--instances N` (3), `--seconds N` (run that long, then quit), `--port P` (Azurite's
//! port; 10000 when free, so that `leasehold status -c config/azurite.toml` works alongside;
//! 0 = any). `LEASEHOLD_BIN` names a prebuilt binary instead of building one.

use leasehold_testkit::binaries::{build_leasehold, release_profile};
use leasehold_testkit::wait::{catch_interrupts, finish_in_order, interrupted};
use leasehold_testkit::{Azurite, Daemon, free_port, workspace_root};
use nix::sys::signal::Signal;
use std::io::BufRead;
use std::path::Path;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Which daemon leads, as read from their logs.
type Leader = Arc<Mutex<Option<usize>>>;

struct Instance {
    name: String,
    /// Where its `/healthz`, `/readyz`, `/status` and `/metrics` answer.
    http: String,
    daemon: Option<Daemon>,
    /// When a stopped daemon comes back.
    restart_at: Option<Instant>,
}

fn main() {
    let mut instances = 3;
    let mut seconds = None;
    let mut port = Some(10000);
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().expect("option needs a value");
        match arg.as_str() {
            "--instances" => instances = value().parse().expect("--instances N"),
            "--seconds" => {
                seconds = Some(Duration::from_secs(value().parse().expect("--seconds N")))
            }
            "--port" => port = Some(value().parse().expect("--port P")).filter(|p| *p != 0),
            other => {
                eprintln!("unknown option {other}; see the top of examples/demo.rs");
                std::process::exit(2);
            }
        }
    }
    catch_interrupts("demo");

    println!("demo: building leasehold...");
    let bin = build_leasehold(release_profile());
    println!("demo: starting Azurite (npm package azurite@3.35.0; installed on first use)...");
    let azurite = Azurite::start_preferring(port);
    let config = workspace_root().join("config/azurite.toml");
    println!("demo: Azurite listens on {}", azurite.endpoint());

    let leader: Leader = Arc::new(Mutex::new(None));
    let mut daemons: Vec<Instance> = (1..=instances)
        .map(|i| Instance {
            name: format!("worker-{i}"),
            http: http_address(9463 + i as u16),
            daemon: None,
            restart_at: Some(Instant::now()),
        })
        .collect();

    let status_hint = if azurite.port == 10000 {
        format!("{} status -c config/azurite.toml", bin.display())
    } else {
        format!(
            "{} status -c config/azurite.toml --connection-string '{}'",
            bin.display(),
            azurite.connection_string()
        )
    };
    println!(
        "demo: {instances} daemons share the lease on blob \"demo\". Keys: Enter = stop the leader \
         (SIGTERM), k Enter = SIGKILL the leader, s Enter = show the line of members, q Enter = \
         quit.\ndemo: who leads and the line of members, from another terminal: {status_hint} \
         (add --watch to follow it)"
    );

    for d in &daemons {
        println!(
            "demo: {} answers on http://{}/readyz (200 while it leads), /status, /metrics",
            d.name, d.http
        );
    }
    let keys = keyboard();
    let began = Instant::now();
    let mut shown: Option<usize> = None;
    loop {
        let now = *leader.lock().unwrap();
        if let Some(i) = now.filter(|_| now != shown) {
            shown = now;
            println!("demo: {} leads", daemons[i].name);
            show_line(&bin, &config, &azurite);
        }
        if interrupted() || seconds.is_some_and(|s| began.elapsed() >= s) {
            break;
        }
        for (i, d) in daemons.iter_mut().enumerate() {
            if let Some(status) = d.daemon.as_mut().and_then(|p| p.wait_exit(Duration::ZERO)) {
                println!("demo: {} exited ({status}); it rejoins in 5 s", d.name);
                d.daemon = None;
                d.restart_at = Some(Instant::now() + Duration::from_secs(5));
                let mut l = leader.lock().unwrap();
                if *l == Some(i) {
                    *l = None;
                }
            }
            if d.restart_at.is_some_and(|t| Instant::now() >= t) {
                d.restart_at = None;
                d.daemon = Some(start_daemon(&config, &azurite, i, d, leader.clone()));
            }
        }
        match keys.recv_timeout(Duration::from_millis(100)) {
            Ok(key) if key == "q" => break,
            Ok(key) if key == "s" => show_line(&bin, &config, &azurite),
            Ok(key) => {
                let sig = if key == "k" {
                    Signal::SIGKILL
                } else {
                    Signal::SIGTERM
                };
                let current = *leader.lock().unwrap();
                match current.and_then(|i| Some((i, daemons[i].daemon.as_ref()?))) {
                    Some((i, daemon)) => {
                        println!(
                            "demo: sending {sig} to the leader {} (pid {})",
                            daemons[i].name,
                            daemon.pid()
                        );
                        daemon.signal(sig);
                    }
                    None => println!("demo: nobody leads right now; try again in a moment"),
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            // No more keys (stdin closed): run on until Ctrl-C or --seconds, without spinning.
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                std::thread::sleep(Duration::from_millis(100))
            }
        }
    }

    finish_in_order();
    println!(
        "demo: stopping the daemons (the followers, then the leader, which stops its child)..."
    );
    // The followers first: stopped together with them, the leader would hand the lease to a
    // member that is leaving, wait for it to take it, pass it over, and so on down the line.
    let leading = *leader.lock().unwrap();
    let (last, first): (Vec<_>, Vec<_>) = daemons
        .iter_mut()
        .enumerate()
        .filter_map(|(i, d)| d.daemon.as_mut().map(|p| (i, p)))
        .partition(|(i, _)| Some(*i) == leading);
    for mut group in [first, last] {
        for (_, daemon) in &group {
            daemon.signal(Signal::SIGTERM);
        }
        // Whatever has not exited 10 s later is SIGKILLed when dropped.
        for (_, daemon) in &mut group {
            daemon.wait_exit(Duration::from_secs(10));
        }
    }
    drop(daemons);
    drop(azurite);
    println!("demo: done");
}

/// Prints the line of members as `leasehold status` lists it (its `members` table).
fn show_line(bin: &Path, config: &Path, azurite: &Azurite) {
    let mut status = std::process::Command::new(bin);
    status.arg("status").arg("-c").arg(config);
    if azurite.port != 10000 {
        status.args(["--connection-string", &azurite.connection_string()]);
    }
    let Ok(out) = status.output() else {
        return;
    };
    let text = String::from_utf8_lossy(&out.stdout);
    let mut lines = text.lines().skip_while(|l| !l.starts_with("members"));
    if let Some(head) = lines.next() {
        println!(
            "demo: the line of members: {}",
            head.trim_start_matches("members").trim()
        );
        for line in lines {
            println!("demo: {line}");
        }
    }
}

/// `127.0.0.1:<preferred>` when that port is free, else any free port.
fn http_address(preferred: u16) -> String {
    let port = if std::net::TcpListener::bind(("127.0.0.1", preferred)).is_ok() {
        preferred
    } else {
        free_port()
    };
    format!("127.0.0.1:{port}")
}

/// Starts one worker; its output is printed with its name, and tells who leads.
fn start_daemon(
    config: &Path,
    azurite: &Azurite,
    index: usize,
    instance: &Instance,
    leader: Leader,
) -> Daemon {
    let name = &instance.name;
    let mut launch = Daemon::launch(config, name)
        .args(&["--identity", name, "--http-listen", &instance.http])
        .env("RUST_LOG", "leasehold=info")
        .echo(false);
    if azurite.port != 10000 {
        // The example config says UseDevelopmentStorage=true (port 10000); point it elsewhere.
        launch = launch.args(&["--connection-string", &azurite.connection_string()]);
    }
    let tag = format!("{name:>8} │ ");
    let daemon = launch
        .each_line(move |line| {
            if line.contains("acquired leadership") {
                *leader.lock().unwrap() = Some(index);
            } else if line.contains("released leadership") || line.contains("lost leadership") {
                let mut l = leader.lock().unwrap();
                if *l == Some(index) {
                    *l = None;
                }
            }
            println!("{tag}{line}");
        })
        .spawn();
    println!("demo: started {name} (pid {})", daemon.pid());
    daemon
}

/// Lines typed by the user.
fn keyboard() -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines().map_while(Result::ok) {
            if tx.send(line.trim().to_lowercase()).is_err() {
                break;
            }
        }
    });
    rx
}
