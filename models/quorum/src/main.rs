//! `quorum-model [--members 2|3] [--horizon TICKS] [--fault KIND]... [--skew TICKS]
//! [--mutant NAME]`: explores the model and
//! prints the states explored, the time taken, the faults reached, and either "no violation"
//! or the shortest counterexample. Exit 0 when the properties hold, 1 on a violation, 2 on a
//! bad argument (one line).
#![forbid(unsafe_code)]

use std::process::ExitCode;

use quorum_model::{Config, Fault, Mutant, Outcome, explore};

fn main() -> ExitCode {
    let config = match parse(std::env::args().skip(1)) {
        Ok(config) => config,
        Err(message) => {
            eprintln!("quorum-model: error: {message}");
            return ExitCode::from(2);
        }
    };
    let report = explore(&config);
    let faults: Vec<_> = Fault::ALL
        .into_iter()
        .filter(|&f| config.allows(f))
        .map(Fault::name)
        .collect();
    println!(
        "{} members, horizon {} ticks, faults [{}], mutant {}: {} states in {:.2?}",
        config.members,
        config.horizon,
        faults.join(", "),
        config.mutant.map_or("none", Mutant::name),
        report.states,
        report.elapsed
    );
    println!("reached: {:?}", report.reached);
    match report.outcome {
        Outcome::Holds => {
            println!("no violation");
            ExitCode::SUCCESS
        }
        Outcome::Violated { violation, trace } => {
            println!("violation: {violation}, after {} steps:", trace.len());
            for step in trace {
                println!("  {step}");
            }
            ExitCode::from(1)
        }
    }
}

/// The config the arguments name.
fn parse(mut args: impl Iterator<Item = String>) -> Result<Config, String> {
    let mut members = 2;
    let mut horizon = None;
    let mut mutant = None;
    let mut kinds = Vec::new();
    let mut skew = None;
    while let Some(flag) = args.next() {
        let mut value = || args.next().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--members" => {
                members = match value()?.as_str() {
                    "2" => 2,
                    "3" => 3,
                    other => return Err(format!("--members must be 2 or 3, not `{other}`")),
                };
            }
            "--horizon" => {
                let v = value()?;
                let ticks = v.parse::<i8>().ok().filter(|t| (1..=30).contains(t));
                horizon =
                    Some(ticks.ok_or_else(|| format!("--horizon must be 1 to 30, not `{v}`"))?);
            }
            "--mutant" => mutant = Some(value()?.parse::<Mutant>()?),
            "--skew" => {
                let v = value()?;
                let ticks = v.parse::<i8>().ok().filter(|t| (0..=10).contains(t));
                skew = Some(ticks.ok_or_else(|| format!("--skew must be 0 to 10, not `{v}`"))?);
            }
            "--fault" => {
                let kind = value()?.parse::<Fault>()?;
                kinds.push(kind);
            }
            other => {
                return Err(format!(
                    "unknown argument `{other}` (usage: quorum-model [--members 2|3] [--horizon TICKS] [--fault KIND]... [--skew TICKS] [--mutant NAME])"
                ));
            }
        }
    }
    let mut config = Config::new(members);
    if let Some(mutant) = mutant {
        config = config.with_mutant(mutant);
    }
    for kind in kinds {
        config = config.with_fault(kind);
    }
    if let Some(skew) = skew {
        config.skew = skew;
    }
    if let Some(horizon) = horizon {
        config.horizon = horizon;
    }
    Ok(config)
}
