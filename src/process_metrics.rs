//! The `process_*` metrics that every official Prometheus client exports (client_golang's names,
//! types and units), read from `/proc/self` by the `procfs` crate at each scrape: CPU time,
//! memory, open files and their limit, threads, start time. Dashboards and alerts written for
//! any other exporter work on leasehold's as they are.
//!
//! The ready-made collectors for `prometheus-client` are built against other versions of it,
//! so this is the one `Collector` leasehold writes itself; what it reads is the crate's.

use procfs::process::{LimitValue, Process};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

/// This process, as `/metrics` shows it.
#[derive(Debug, Default)]
pub(crate) struct ProcessMetrics;

impl Collector for ProcessMetrics {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        // Whatever /proc does not tell (no /proc, a field missing) is left out, not made up.
        let Ok(me) = Process::myself() else {
            return Ok(());
        };
        let e = &mut encoder;
        if let Ok(stat) = me.stat() {
            let ticks = procfs::ticks_per_second() as f64;
            let page = procfs::page_size() as f64;
            gauge(
                e,
                "process_resident_memory_bytes",
                "Resident memory size in bytes.",
                stat.rss as f64 * page,
            )?;
            gauge(
                e,
                "process_virtual_memory_bytes",
                "Virtual memory size in bytes.",
                stat.vsize as f64,
            )?;
            gauge(
                e,
                "process_threads",
                "Number of OS threads in the process.",
                stat.num_threads as f64,
            )?;
            if let Ok(boot) = procfs::boot_time_secs() {
                gauge(
                    e,
                    "process_start_time_seconds",
                    "Start time of the process since unix epoch in seconds.",
                    boot as f64 + stat.starttime as f64 / ticks,
                )?;
            }
            let cpu = e.encode_descriptor(
                "process_cpu_seconds",
                "Total user and system CPU time spent in seconds.",
                None,
                MetricType::Counter,
            )?;
            ConstCounter::new((stat.utime + stat.stime) as f64 / ticks).encode(cpu)?;
        }
        if let Ok(open) = me.fd_count() {
            gauge(
                e,
                "process_open_fds",
                "Number of open file descriptors.",
                open as f64,
            )?;
        }
        if let Ok(limits) = me.limits()
            && let LimitValue::Value(max) = limits.max_open_files.soft_limit
        {
            gauge(
                e,
                "process_max_fds",
                "Maximum number of open file descriptors.",
                max as f64,
            )?;
        }
        Ok(())
    }
}

/// One gauge sample.
fn gauge(e: &mut DescriptorEncoder, name: &str, help: &str, value: f64) -> std::fmt::Result {
    let metric = e.encode_descriptor(name, help, None, MetricType::Gauge)?;
    ConstGauge::new(value).encode(metric)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_described_with_client_golangs_names() {
        let mut registry = prometheus_client::registry::Registry::default();
        registry.register_collector(Box::new(ProcessMetrics));
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        for name in [
            "process_cpu_seconds_total ",
            "process_resident_memory_bytes ",
            "process_virtual_memory_bytes ",
            "process_threads ",
            "process_start_time_seconds ",
            "process_open_fds ",
            "process_max_fds ",
        ] {
            let value: f64 = text
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .unwrap_or_else(|| panic!("{name}in {text}"))
                .parse()
                .unwrap();
            assert!(
                value > 0.0 || name.starts_with("process_cpu"),
                "{name}{value}"
            );
        }
        let started = text
            .lines()
            .find_map(|l| l.strip_prefix("process_start_time_seconds "))
            .unwrap()
            .parse::<f64>()
            .unwrap();
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        assert!(
            (now - 3600.0..=now + 1.0).contains(&started),
            "started {started}, now {now}"
        );
    }
}
