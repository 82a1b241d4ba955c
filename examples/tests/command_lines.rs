//! The examples' command lines refuse what they cannot run: zero or unparsable counts,
//! non-positive rates, step counts that overflow, data files without images, unknown
//! workloads. Each exits non-zero with a message naming the problem, before any training.

use std::process::Command;

mod support;

/// Runs example `name` with `args`; its exit code and stderr.
fn run(name: &str, args: &[&str]) -> (Option<i32>, String) {
    let out = Command::new(support::example_binary(name))
        .args(args)
        .env("RAYON_NUM_THREADS", "1")
        .output()
        .expect("the example runs");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `name args` exits with `code` and says `says` on stderr.
fn refuses(name: &str, args: &[&str], code: i32, says: &str) {
    let (status, stderr) = run(name, args);
    assert_eq!(status, Some(code), "{name} {args:?}: {stderr}");
    assert!(
        stderr.contains(says),
        "{name} {args:?} should say {says:?}: {stderr}"
    );
}

#[test]
fn train_digits_refuses_zero_negative_and_overflowing_flags() {
    for flag in ["--epochs", "--batch", "--hidden"] {
        refuses("train_digits", &[flag, "0"], 2, "must be at least 1");
        refuses(
            "train_digits",
            &[&format!("{flag}=-3")],
            2,
            "not a whole number",
        );
        refuses(
            "train_digits",
            &[flag, "99999999999999999999999"],
            2,
            "not a whole number",
        );
    }
    for lr in ["0", "-1e-3", "nan", "inf"] {
        refuses(
            "train_digits",
            &[&format!("--lr={lr}")],
            2,
            "must be finite and greater than 0",
        );
    }
    refuses(
        "train_digits",
        &["--epochs", "1000000000000000000", "--batch", "1"],
        1,
        "more steps than can be counted",
    );
}

#[test]
fn train_cnn_digits_refuses_zero_rates_and_overflowing_flags() {
    for flag in ["--epochs", "--batch"] {
        refuses("train_cnn_digits", &[flag, "0"], 2, "must be at least 1");
    }
    refuses(
        "train_cnn_digits",
        &["--lr=nan"],
        2,
        "must be finite and greater than 0",
    );
    refuses(
        "train_cnn_digits",
        &["--epochs", "1000000000000000000", "--batch", "1"],
        1,
        "more steps than can be counted",
    );
}

#[test]
fn train_digits_refuses_a_data_file_without_images() {
    let dir = std::env::temp_dir().join(format!("train_digits_cli_{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    let empty = dir.join("empty.csv.gz");
    // a valid gzip stream of no bytes
    let gzip_of_nothing: [u8; 20] = [
        0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    ];
    std::fs::write(&empty, gzip_of_nothing).expect("the empty data file");
    let path = empty.to_string_lossy().into_owned();
    refuses("train_digits", &["--data", &path], 1, "0 images");
    refuses(
        "train_digits",
        &["--data", "/nonexistent/digits.csv.gz"],
        1,
        "error:",
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn tiny_transformer_refuses_zero_and_out_of_range_flags() {
    for flag in ["--steps", "--batch", "--held-out"] {
        refuses("tiny_transformer", &[flag, "0"], 2, "must be at least 1");
    }
    refuses(
        "tiny_transformer",
        &["--held-out", "10000"],
        2,
        "at most 9999",
    );
    refuses(
        "tiny_transformer",
        &["--lr=-1"],
        2,
        "must be finite and greater than 0",
    );
}

/// W10 needs MPI: a bench built without the `mpi` feature refuses it by name.
#[cfg(not(feature = "mpi"))]
#[test]
fn bench_refuses_w10_without_the_mpi_feature() {
    refuses(
        "bench",
        &["--quick", "W10"],
        1,
        "error: not implemented: W10 runs under mpirun in a bench built with --features mpi",
    );
}

#[test]
fn bench_refuses_an_unknown_workload_before_running_any() {
    let (status, stderr) = run("bench", &["--quick", "W1", "W99"]);
    assert_eq!(status, Some(1), "{stderr}");
    assert!(
        stderr.contains("error: value error: unknown workload W99"),
        "{stderr}"
    );
}
