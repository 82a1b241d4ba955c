//! `train_digits --save` keeps a model that `predict_digits` reads back to the same held-out
//! accuracy and loss, and `--resume` continues from it; a file that holds no digits model is
//! refused with a message, not a panic.

use std::path::Path;
use std::process::Command;

mod support;

/// Runs example `name` with `args`; its stdout, failing the test on a non-zero exit.
fn stdout_of(name: &str, args: &[&str]) -> String {
    let out = Command::new(support::example_binary(name))
        .args(args)
        .env("RAYON_NUM_THREADS", "1")
        .output()
        .expect("the example runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{name} {args:?}: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// `loss …, accuracy …%` of the line that reports the held-out set.
fn held_out(stdout: &str) -> String {
    let line = stdout
        .lines()
        .find(|l| l.contains("held-out: loss"))
        .unwrap_or_else(|| panic!("no held-out line in {stdout}"));
    let from = line.find("loss").unwrap_or(0);
    let to = line.find('%').map_or(line.len(), |i| i + 1);
    line[from..to].to_string()
}

#[test]
fn a_saved_model_predicts_what_training_ended_with_and_resumes() {
    let dir = std::env::temp_dir().join(format!("save-and-predict-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    let path = |name: &str| dir.join(name).display().to_string();
    let (model, svg) = (path("model.safetensors"), path("curves.svg"));
    let trained = stdout_of(
        "train_digits",
        &["--quick", "--save", &model, "--output", &svg],
    );
    assert!(Path::new(&path("model.optim.safetensors")).exists());
    let predicted = stdout_of("predict_digits", &["--model", &model]);
    assert_eq!(held_out(&predicted), held_out(&trained), "{predicted}");
    assert!(predicted.contains("9610 parameters"), "{predicted}");

    let resumed = stdout_of(
        "train_digits",
        &[
            "--quick",
            "--resume",
            &model,
            "--save",
            &path("again.safetensors"),
            "--output",
            &svg,
        ],
    );
    assert!(resumed.contains("held-out: loss"), "{resumed}");

    // a file of other tensors: refused, exit code 1, naming what is missing
    let other = path("other.safetensors");
    std::fs::write(&other, b"").expect("write");
    let out = Command::new(support::example_binary("predict_digits"))
        .args(["--model", &other])
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(1));
    assert!(!String::from_utf8_lossy(&out.stderr).is_empty());
    std::fs::remove_dir_all(&dir).ok();
}
