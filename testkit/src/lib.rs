//! leasehold's test kit: what its integration tests, the fault suite, the chaos command, the
//! benchmark and the demo need to run the real `leasehold` binary against a real storage
//! emulator, to fault it, and to judge what happened. It drives the binary and talks to storage
//! with the Azure SDK; it does not link the leasehold library.
//!
//! Layout:
//! - [`azurite`]: the Azurite emulator (npm, pinned in `testkit/package.json`) on its own
//!   loopback port and data folder, tied to the process that starts it.
//! - [`etcd`]: etcd and `etcdctl lock` (Debian's packages, installed on first use when root),
//!   the benchmark's point of comparison.
//! - [`debian`]: the Debian tools some tests run (promtool, kubectl), installed with apt-get
//!   when missing and root.
//! - [`kubernetes`]: a stand-in for the Kubernetes API (the pod label of `[kubernetes]`).
//! - [`binaries`]: where the `leasehold` binary and the witness are, and building them.
//! - [`daemon`]: `leasehold run` as a process ([`Daemon`]: its log, signals, exit, HTTP
//!   endpoint, stalled output) and the one-shot commands ([`leasehold`]).
//! - [`group`]: a leadership group: a blob, its daemons' configs, its witness history.
//! - [`storage`]: a blob and an account as an operator sees them ([`BlobAdmin`], SAS tokens,
//!   containers, listings).
//! - [`witness`]: the test child; [`history`]: what the witnesses recorded.
//! - [`mod@check`]: the one checker of a history against the safety model.
//! - [`proxy`]: the fault-injecting TCP proxy between a daemon and storage.
//! - [`defaults`]: the design's default timings (L, R, M, G, a poll, a watch period).
//! - [`metrics`]: the Prometheus text of `/metrics`, parsed. [`http`]: `GET`, free ports.
//! - [`identity`]: the Entra ID stand-ins (a private CA, tokens, a fake `az`, token endpoints).
//! - [`procfs`]: process groups, guards, memory, CPU time and connections, from /proc.
//! - [`plot`]: the SVG plots of the benchmark and of the chaos command.
//! - [`wait`]: the monotonic clock, waiting with a deadline, the witness lock, Ctrl-C.
//! - [`process`]: starting processes that die with the one that started them; a command run
//!   to its end within a time limit.
//! - [`layout`]: which module file uses which, read from the source (tests/it/layout.rs).
//!
//! The common names are re-exported at the root: `use leasehold_testkit::*;`.

pub mod azurite;
pub mod binaries;
pub mod check;
pub mod daemon;
pub mod debian;
pub mod defaults;
pub mod etcd;
pub mod group;
pub mod history;
pub mod http;
pub mod identity;
pub mod kubernetes;
pub mod layout;
pub mod metrics;
pub mod plot;
pub mod process;
pub mod procfs;
pub mod proxy;
pub mod slots;
pub mod storage;
pub mod wait;
pub mod witness;

pub use azurite::{Azurite, AzuriteOptions, EMULATOR_ACCOUNT, EMULATOR_KEY};
pub use binaries::{example_bin, leasehold_bin, witness_bin, workspace_root};
pub use check::{Deadlines, Verdict, check};
pub use daemon::{
    AMBIENT_VARIABLES, DEADLINE_LOG, Daemon, Launch, leasehold, leasehold_command, leasehold_within,
};
pub use etcd::{Etcd, LockWaiter};
pub use group::{Group, Member};
pub use history::{Event, History, Life};
pub use http::{free_addr, free_port};
pub use metrics::Metrics;
pub use process::{output_within, output_within_fed};
pub use proxy::{Direction, Fault, FaultProxy};
pub use storage::{BlobAdmin, MemberProbe};
pub use wait::{figure, lock_freed, mono_now, secs, wait_until, wait_until_some};
