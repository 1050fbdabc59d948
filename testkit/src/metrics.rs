//! The Prometheus (OpenMetrics) text a daemon's `/metrics` answers, parsed into samples.

use std::collections::BTreeMap;

/// One sample line: `name{label="value",...} value`.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub value: f64,
}

/// Every sample of one `/metrics` answer.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Metrics {
    pub samples: Vec<Sample>,
}

impl Metrics {
    /// Parses the text format; comment lines (`# HELP`, `# TYPE`, `# EOF`) and lines that are
    /// not samples are skipped.
    pub fn parse(text: &str) -> Self {
        let samples = text
            .lines()
            .filter(|l| !l.starts_with('#'))
            .filter_map(parse_sample)
            .collect();
        Self { samples }
    }

    /// The sum of the samples of `name` whose labels include every pair of `labels` (an
    /// unlabelled metric: `&[]`); 0 when there is none.
    pub fn sum(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        self.samples
            .iter()
            .filter(|s| s.name == name)
            .filter(|s| {
                labels
                    .iter()
                    .all(|(k, v)| s.labels.get(*k).is_some_and(|have| have == v))
            })
            .map(|s| s.value)
            // fold from +0.0: an empty f64 sum is -0.0, which prints as "-0".
            .fold(0.0, |sum, v| sum + v)
    }

    /// The samples of `name` summed by the value of `label`, e.g. lease operations by `op`.
    pub fn by(&self, name: &str, label: &str) -> BTreeMap<String, f64> {
        let mut out = BTreeMap::new();
        for s in self.samples.iter().filter(|s| s.name == name) {
            if let Some(value) = s.labels.get(label) {
                *out.entry(value.clone()).or_insert(0.0) += s.value;
            }
        }
        out
    }
}

fn parse_sample(line: &str) -> Option<Sample> {
    let line = line.trim();
    let (series, value) = line.rsplit_once(' ')?;
    let value: f64 = value.parse().ok()?;
    let (name, labels) = match series.split_once('{') {
        Some((name, rest)) => (name, parse_labels(rest.strip_suffix('}')?)?),
        None => (series, BTreeMap::new()),
    };
    Some(Sample {
        name: name.to_owned(),
        labels,
        value,
    })
}

/// `a="x",b="y \"quoted\""`: values are quoted, with `\\`, `\"` and `\n` escaped.
fn parse_labels(text: &str) -> Option<BTreeMap<String, String>> {
    let mut labels = BTreeMap::new();
    let mut rest = text;
    while !rest.is_empty() {
        let (name, after) = rest.split_once("=\"")?;
        let mut value = String::new();
        let mut chars = after.char_indices();
        let end = loop {
            match chars.next()? {
                (i, '"') => break i,
                (_, '\\') => match chars.next()?.1 {
                    'n' => value.push('\n'),
                    c => value.push(c),
                },
                (_, c) => value.push(c),
            }
        };
        labels.insert(name.trim_start_matches(',').to_owned(), value);
        rest = &after[end + 1..];
    }
    Some(labels)
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "# HELP leasehold_is_leader Whether this instance leads.\n\
        # TYPE leasehold_is_leader gauge\n\
        leasehold_is_leader 1\n\
        leasehold_lease_operations_total{op=\"renew\",result=\"ok\"} 3\n\
        leasehold_lease_operations_total{op=\"acquire\",result=\"ok\"} 1\n\
        leasehold_lease_operations_total{op=\"acquire\",result=\"LeaseAlreadyPresent\"} 4\n\
        odd{note=\"a \\\"b\\\", c\"} 2.5\n\
        # EOF\n";

    #[test]
    fn sums_by_labels_in_any_order() {
        let m = Metrics::parse(TEXT);
        assert_eq!(m.sum("leasehold_is_leader", &[]), 1.0);
        assert_eq!(
            m.sum(
                "leasehold_lease_operations_total",
                &[("result", "ok"), ("op", "renew")]
            ),
            3.0
        );
        assert_eq!(
            m.sum("leasehold_lease_operations_total", &[("op", "acquire")]),
            5.0
        );
        assert_eq!(m.sum("missing", &[]).to_string(), "0");
        assert_eq!(
            m.by("leasehold_lease_operations_total", "op"),
            BTreeMap::from([("acquire".into(), 5.0), ("renew".into(), 3.0)])
        );
        assert_eq!(m.samples[4].labels["note"], "a \"b\", c");
    }
}
