//! What the storage requests cost: each operation the daemons count (`op` of
//! `leasehold_lease_operations_total`) in its Azure price class, the price sheet the bench
//! prices them at, and the model of what each part of a group costs under ordered succession
//! (issue 16) until the binary measures it.
//!
//! To price a new operation, add its `op` name to [`class_of`]; an operation it does not know
//! is shown as "unpriced" in the report rather than guessed.

use crate::fleet::{LeaseOps, Role, Timing};
use std::collections::BTreeMap;

/// Azure bills by the month of 730 hours.
pub const MINUTES_PER_MONTH: f64 = 730.0 * 60.0;

/// Azure Blob Storage's transaction classes ("Map each REST operation to a price", standard
/// general-purpose v2 column).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Class {
    /// "All other operations": every Lease Blob action (acquire, renew, release, break,
    /// change; failed ones too), Get Blob Properties, Set Blob Metadata.
    Other,
    /// Read operations (Get Blob): priced like "other" on hot accounts.
    Read,
    /// "List and create container operations": List Blobs.
    List,
    /// Write operations: Put Blob (a member record created).
    Write,
    /// Delete Blob: free on general-purpose v2.
    Free,
    /// An operation this table does not know yet.
    Unpriced,
}

impl Class {
    pub const ALL: [Class; 6] = [
        Class::Other,
        Class::Read,
        Class::List,
        Class::Write,
        Class::Free,
        Class::Unpriced,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Self::Other => "other",
            Self::Read => "read",
            Self::List => "list",
            Self::Write => "write",
            Self::Free => "free",
            Self::Unpriced => "unpriced",
        }
    }
}

/// The price class of a daemon's storage operation, by the `op` label it counts it under
/// (`leasehold::store::Op`'s names).
pub fn class_of(op: &str) -> Class {
    match op {
        // Lease Blob actions.
        "acquire" | "renew" | "release" | "change" => Class::Other,
        "member_acquire" | "member_renew" => Class::Other,
        // Get Blob Properties (and the start-up check of the blob), Set Blob Metadata.
        "read" | "prepare" | "member_read" => Class::Other,
        "write_epoch" | "write_notice" | "member_write" => Class::Other,
        "list_members" => Class::List,
        "member_create" => Class::Write,
        "member_delete" => Class::Free,
        _ => Class::Unpriced,
    }
}

/// A published price sheet: dollars per 10,000 operations by class.
pub struct PriceSheet {
    pub name: &'static str,
    pub other: f64,
    pub read: f64,
    pub list: f64,
    pub write: f64,
}

/// The prices every figure is computed at; page.md states where they come from.
pub const SHEET: PriceSheet = PriceSheet {
    name: "Azure Blob Storage, hot tier, LRS, general-purpose v2, East US, pay-as-you-go, USD, \
           as of July 2024",
    other: 0.0044,
    read: 0.0044,
    list: 0.055,
    write: 0.055,
};

impl PriceSheet {
    /// Dollars per operation of `class` (an unpriced one at the dearest class, so that a
    /// forgotten operation shows up in the cost instead of hiding).
    pub fn each(&self, class: Class) -> f64 {
        let per_10k = match class {
            Class::Other => self.other,
            Class::Read => self.read,
            Class::List => self.list,
            Class::Write | Class::Unpriced => self.write,
            Class::Free => 0.0,
        };
        per_10k / 10_000.0
    }

    /// How many "other" operations one List Blobs costs.
    pub fn list_ratio(&self) -> f64 {
        self.list / self.other
    }
}

/// Requests per minute by class.
#[derive(Debug, Clone, Default)]
pub struct Rates(pub BTreeMap<Class, f64>);

impl Rates {
    /// From the operations counted over `minutes`.
    pub fn measured(ops: &LeaseOps, minutes: f64) -> Self {
        let mut out = BTreeMap::new();
        for (op, n) in &ops.0 {
            *out.entry(class_of(op)).or_insert(0.0) += n / minutes;
        }
        Self(out)
    }

    pub fn get(&self, class: Class) -> f64 {
        self.0.get(&class).copied().unwrap_or(0.0)
    }

    pub fn total(&self) -> f64 {
        self.0.values().sum()
    }

    /// Requests a minute with a List counted as ten (the yardstick).
    pub fn weighted(&self) -> f64 {
        self.total() + 9.0 * self.get(Class::List)
    }

    /// Dollars a month at `sheet`.
    pub fn monthly_cost(&self, sheet: &PriceSheet) -> f64 {
        self.0
            .iter()
            .map(|(class, per_min)| per_min * MINUTES_PER_MONTH * sheet.each(*class))
            .sum()
    }

    /// Transactions a month.
    pub fn monthly(&self) -> f64 {
        self.total() * MINUTES_PER_MONTH
    }

    pub fn plus(&self, other: &Rates, times: f64) -> Rates {
        let mut out = self.0.clone();
        for (class, n) in &other.0 {
            *out.entry(*class).or_insert(0.0) += n * times;
        }
        Rates(out)
    }

    /// "other 15.0 · list 0.2 /min", the classes that occur.
    pub fn text(&self) -> String {
        Class::ALL
            .iter()
            .filter(|c| self.get(**c) > 0.0)
            .map(|c| format!("{} {:.1}", c.name(), self.get(*c)))
            .collect::<Vec<_>>()
            .join(" · ")
    }
}

/// The model of ordered succession, per minute, at `timing`: member records renewed every 10 s
/// (a 30 s record lease); the successor polls the lease every 1.0-1.2 × acquire_interval like
/// today's followers, and lists (then reads the lease blob) every 30-36 s like the leader; the
/// others read the lease blob every 5-6 × acquire_interval and list every 5-6 minutes; the
/// leader renews as today and lists every 30-36 s (preemption off).
pub fn succession_model(timing: &Timing) -> BTreeMap<Role, Rates> {
    let poll = 60.0 / (1.1 * timing.acquire_interval.as_secs_f64());
    let record_renews = 60.0 / 10.0;
    let (often, rarely) = (60.0 / 33.0, 1.0 / 5.5);
    let rates = |other: f64, lists: f64| {
        Rates(BTreeMap::from([
            (Class::Other, other),
            (Class::List, lists),
        ]))
    };
    BTreeMap::from([
        (
            Role::Leader,
            rates(
                60.0 / timing.renew_interval.as_secs_f64() + record_renews,
                often,
            ),
        ),
        (Role::Successor, rates(poll + record_renews + often, often)),
        (
            Role::OtherFollower,
            rates(poll / 5.0 + record_renews, rarely),
        ),
    ])
}

/// A group of `n`: the leader, and the followers as `follower_roles` says (e.g. today: n - 1
/// followers; with succession: one successor, n - 2 others).
pub fn group_rates(parts: &[(&Rates, f64)]) -> Rates {
    parts.iter().fold(Rates::default(), |sum, (rates, times)| {
        sum.plus(rates, *times)
    })
}
