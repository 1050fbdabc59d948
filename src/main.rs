//! The `leasehold` command. All of it is the library's ([`leasehold::command::main`]), built
//! with the `daemon` feature (on by default).

fn main() -> std::process::ExitCode {
    leasehold::command::main()
}
