//! The witness child of leasehold's tests, chaos runs and benchmark: it records its life in a
//! shared history file and holds a lock that tells when the last of its processes died. It lives
//! in the test kit (`leasehold_testkit::witness`, whose top says what it records and how); this
//! example is the program, so that `cargo test`, which builds the examples, builds it too.

fn main() {
    leasehold_testkit::witness::main();
}
