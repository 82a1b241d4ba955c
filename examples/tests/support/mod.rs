//! What the tests that run example binaries share.

use std::path::PathBuf;

/// `target/<profile>/examples/<name>`, built by `cargo test` with the crate's other examples.
pub fn example_binary(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    let profile_dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("tests run from target/<profile>/deps");
    let path = profile_dir
        .join("examples")
        .join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
    assert!(
        path.exists(),
        "{} is missing: run through `cargo test`, which builds the examples",
        path.display()
    );
    path
}
