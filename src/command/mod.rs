//! The `leasehold` command (feature `daemon`): its command line and each subcommand run to its
//! exit code. The binary (`src/main.rs`) is one line, `leasehold::command::main()`; the rest is
//! crate-private, because the command line itself is the contract here (the README documents
//! it, `leasehold --help` and `leasehold man` show it).
//!
//! `args`: clap's definitions and [`main`]; `given`: what a subcommand is given; `run`:
//! `leasehold run`; `operator`: `status`, `check`, `break`; `usage`: usage errors in one line;
//! `pages`: man pages and completions; `exit`: the exit codes.

mod args;
mod exit;
mod given;
mod operator;
mod pages;
mod run;
mod usage;

pub use args::main;
