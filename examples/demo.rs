//! `cargo run --example demo`: Azurite plus three `leasehold` daemons sharing one lease, each
//! running a child that prints who leads and with which epoch. Kill the leader and watch the
//! failover.
//!
//! Keys (then Enter): nothing = stop the leader gracefully (SIGTERM), `k` = SIGKILL the leader,
//! `q` = quit. A stopped daemon rejoins as a follower 5 s later. Ctrl-C quits too.
//!
//! Options: `--instances N` (3), `--seconds N` (run that long, then quit), `--port P` (Azurite's
//! port; 10000 when free, so that `leasehold status -c config/azurite.toml` works alongside;
//! 0 = any). `LEASEHOLD_BIN` names a prebuilt binary instead of building one.

#[path = "../tests/common/azurite.rs"]
mod azurite;
#[path = "../tests/common/build.rs"]
mod build;

use nix::sys::signal::{SigHandler, Signal, kill, signal};
use nix::unistd::Pid;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_interrupt(_: i32) {
    INTERRUPTED.store(true, Ordering::SeqCst);
}

/// Which daemon leads, as read from their logs.
type Leader = Arc<Mutex<Option<usize>>>;

struct Instance {
    name: String,
    /// Where its `/healthz`, `/readyz`, `/status` and `/metrics` answer.
    http: String,
    process: Option<Child>,
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
    // SAFETY: the handler only stores to an atomic.
    unsafe {
        signal(Signal::SIGINT, SigHandler::Handler(on_interrupt)).expect("SIGINT handler");
        signal(Signal::SIGTERM, SigHandler::Handler(on_interrupt)).expect("SIGTERM handler");
    }

    let bin = leasehold_binary();
    println!("demo: starting Azurite (npm package azurite@3.35.0; installed on first use)...");
    let azurite = azurite::Azurite::start_preferring(port);
    let config = build::manifest_dir().join("config/azurite.toml");
    println!("demo: Azurite listens on {}", azurite.endpoint());

    let leader: Leader = Arc::new(Mutex::new(None));
    let mut daemons: Vec<Instance> = (1..=instances)
        .map(|i| Instance {
            name: format!("worker-{i}"),
            http: http_address(9463 + i as u16),
            process: None,
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
         (SIGTERM), k Enter = SIGKILL the leader, q Enter = quit.\ndemo: who leads, from another \
         terminal: {status_hint}"
    );

    for d in &daemons {
        println!(
            "demo: {} answers on http://{}/readyz (200 while it leads), /status, /metrics",
            d.name, d.http
        );
    }
    let keys = keyboard();
    let began = Instant::now();
    loop {
        if INTERRUPTED.load(Ordering::SeqCst) || seconds.is_some_and(|s| began.elapsed() >= s) {
            break;
        }
        for (i, d) in daemons.iter_mut().enumerate() {
            if let Some(p) = &mut d.process
                && let Ok(Some(status)) = p.try_wait()
            {
                println!("demo: {} exited ({status}); it rejoins in 5 s", d.name);
                d.process = None;
                d.restart_at = Some(Instant::now() + Duration::from_secs(5));
                let mut l = leader.lock().unwrap();
                if *l == Some(i) {
                    *l = None;
                }
            }
            if d.restart_at.is_some_and(|t| Instant::now() >= t) {
                d.restart_at = None;
                d.process = Some(start_daemon(&bin, &config, &azurite, i, d, leader.clone()));
            }
        }
        match keys.recv_timeout(Duration::from_millis(100)) {
            Ok(key) if key == "q" => break,
            Ok(key) => {
                let sig = if key == "k" {
                    Signal::SIGKILL
                } else {
                    Signal::SIGTERM
                };
                let current = *leader.lock().unwrap();
                match current.and_then(|i| daemons[i].process.as_ref().map(|p| (i, p.id()))) {
                    Some((i, pid)) => {
                        println!(
                            "demo: sending {sig} to the leader {} (pid {pid})",
                            daemons[i].name
                        );
                        let _ = kill(Pid::from_raw(pid as i32), sig);
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

    println!("demo: stopping the daemons (each stops its child, then releases the lease)...");
    for d in &daemons {
        if let Some(p) = &d.process {
            let _ = kill(Pid::from_raw(p.id() as i32), Signal::SIGTERM);
        }
    }
    for d in &mut daemons {
        if let Some(p) = &mut d.process {
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline && matches!(p.try_wait(), Ok(None)) {
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = p.kill();
            let _ = p.wait();
        }
    }
    drop(azurite);
    println!("demo: done");
}

/// `127.0.0.1:<preferred>` when that port is free, else any free port.
fn http_address(preferred: u16) -> String {
    let port = if std::net::TcpListener::bind(("127.0.0.1", preferred)).is_ok() {
        preferred
    } else {
        azurite::free_port()
    };
    format!("127.0.0.1:{port}")
}

/// The leasehold binary: `LEASEHOLD_BIN`, or built now with this example's profile.
fn leasehold_binary() -> PathBuf {
    if let Some(bin) = std::env::var_os("LEASEHOLD_BIN") {
        return PathBuf::from(bin);
    }
    let exe = std::env::current_exe().expect("current exe");
    let profile_dir = exe.parent().and_then(|p| p.parent()).expect("target dir");
    let mut build = build::cargo_command();
    build.args(["build", "--quiet", "--bin", "leasehold"]);
    if !cfg!(debug_assertions) {
        build.arg("--release");
    }
    println!("demo: building leasehold...");
    let status = build.status().expect("run cargo");
    assert!(status.success(), "cargo build failed");
    profile_dir.join("leasehold")
}

fn start_daemon(
    bin: &PathBuf,
    config: &PathBuf,
    azurite: &azurite::Azurite,
    index: usize,
    instance: &Instance,
    leader: Leader,
) -> Child {
    let name = &instance.name;
    let mut command = Command::new(bin);
    command.args(["run", "-c"]).arg(config).args([
        "--identity",
        name,
        "--http-listen",
        &instance.http,
    ]);
    if azurite.port != 10000 {
        // The example config says UseDevelopmentStorage=true (port 10000); point it elsewhere.
        command.args(["--connection-string", &azurite.connection_string()]);
    }
    let mut child = command
        .env("RUST_LOG", "leasehold=info")
        .env_remove("AZURE_STORAGE_CONNECTION_STRING")
        .env_remove("AZURE_STORAGE_KEY")
        .env_remove("AZURE_STORAGE_SAS_TOKEN")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .expect("start leasehold");
    println!("demo: started {name} (pid {})", child.id());
    let out = child.stdout.take().expect("stdout");
    let err = child.stderr.take().expect("stderr");
    let tag = format!("{name:>8} │ ");
    relay(out, tag.clone(), index, leader.clone());
    relay(err, tag, index, leader);
    child
}

use std::os::unix::process::CommandExt;

/// Prints a daemon's output with its name, and follows who leads.
fn relay(stream: impl std::io::Read + Send + 'static, tag: String, index: usize, leader: Leader) {
    std::thread::spawn(move || {
        for line in BufReader::new(stream).lines().map_while(Result::ok) {
            if line.contains("acquired leadership") {
                *leader.lock().unwrap() = Some(index);
            } else if line.contains("released leadership") || line.contains("lost leadership") {
                let mut l = leader.lock().unwrap();
                if *l == Some(index) {
                    *l = None;
                }
            }
            println!("{tag}{line}");
        }
    });
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
