//! Smoke test of the bench command: `bench --json --quick` runs every workload of BENCH.md
//! (the example binary `cargo test` builds beside this test) and prints one JSON line each,
//! with a positive median time and, for W3, a completed run with its peak memory.

use std::process::Command;

mod support;

/// The bench example's binary.
fn bench_binary() -> std::path::PathBuf {
    support::example_binary("bench")
}

fn field(line: &str, key: &str) -> Option<String> {
    let rest = line.split(&format!("\"{key}\":")).nth(1)?;
    Some(rest.split([',', '}']).next()?.trim_matches('"').to_string())
}

#[test]
fn the_quick_bench_prints_a_json_line_per_workload() {
    let out = Command::new(bench_binary())
        .args(["--json", "--quick"])
        .env("RAYON_NUM_THREADS", "1")
        .output()
        .expect("the bench runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "bench failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<&str> = stdout.lines().collect();
    for line in &lines {
        assert!(
            line.starts_with('{') && line.ends_with('}'),
            "not a JSON object: {line}"
        );
    }
    let expected = [
        "W1", "W1s", "W2", "W2g", "W3", "W4", "W5", "W6", "W7", "W8", "W8m", "T1", "D1", "W11",
        "W12", "W12c",
    ];
    for w in expected {
        let line = lines
            .iter()
            .find(|l| field(l, "workload").as_deref() == Some(w))
            .unwrap_or_else(|| panic!("no line for {w} in\n{stdout}"));
        let median: f64 = field(line, "median_ms")
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{w} has no median_ms: {line}"));
        assert!(median > 0.0 && median.is_finite(), "{line}");
    }
    // S1 reports throughputs and the load's peak memory, which holds no copy of the file
    let s1 = lines
        .iter()
        .find(|l| field(l, "workload").as_deref() == Some("S1"))
        .copied()
        .unwrap_or_default();
    for key in ["save_gbps", "load_gbps", "peak_rss_mib"] {
        let v: f64 = field(s1, key).and_then(|v| v.parse().ok()).unwrap_or(0.0);
        assert!(v > 0.0 && v.is_finite(), "{key} in {s1}");
    }
    let w2 = |name: &str| {
        let line = lines
            .iter()
            .find(|l| field(l, "workload").as_deref() == Some(name))
            .copied()
            .unwrap_or_default();
        field(line, "torch_peer")
    };
    assert_eq!(
        (w2("W2").as_deref(), w2("W2g").as_deref()),
        (Some("W2x"), Some("W2"))
    );
    let d1 = lines
        .iter()
        .find(|l| field(l, "workload").as_deref() == Some("D1"))
        .copied()
        .unwrap_or_default();
    let share: f64 = field(d1, "wait_share")
        .and_then(|v| v.parse().ok())
        .unwrap_or(f64::NAN);
    assert!((0.0..=1.0).contains(&share), "{d1}");
    let w3 = lines
        .iter()
        .find(|l| field(l, "workload").as_deref() == Some("W3"))
        .copied()
        .unwrap_or_default();
    assert_eq!(field(w3, "completed").as_deref(), Some("true"), "{w3}");
    let rss: f64 = field(w3, "peak_rss_mib")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0);
    assert!(rss > 0.0, "{w3}");
    // the phases of W3's median run add up to its time (each rounded to a millisecond)
    let number = |line: &str, k: &str| -> f64 {
        field(line, k)
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no number {k} in {line}"))
    };
    let phases: f64 = ["fwd_s", "bwd_s", "drop_s"]
        .iter()
        .map(|k| number(w3, k))
        .sum();
    assert!((phases - number(w3, "seconds")).abs() <= 0.003, "{w3}");
    assert!(
        number(w3, "fwd_s") > 0.0 && number(w3, "bwd_s") > 0.0,
        "{w3}"
    );
    // W1 and W1s split their time per op into the forward and backward passes, medians of
    // their own, which add up to about the median total
    for w in ["W1", "W1s"] {
        let line = lines
            .iter()
            .find(|l| field(l, "workload").as_deref() == Some(w))
            .copied()
            .unwrap_or_default();
        let (fwd, bwd) = (number(line, "fwd_ns_per_op"), number(line, "bwd_ns_per_op"));
        let total = number(line, "ns_per_op");
        assert!(fwd > 0.0 && bwd > 0.0, "{line}");
        assert!((0.5 * total..=1.5 * total).contains(&(fwd + bwd)), "{line}");
    }
}

#[test]
fn an_unknown_workload_fails_the_command_before_anything_runs() {
    let out = Command::new(bench_binary())
        .args(["--json", "--quick", "W1", "W9"])
        .output()
        .expect("the bench runs");
    assert!(!out.status.success(), "a typo must fail the command");
    assert!(out.stdout.is_empty(), "nothing ran: {:?}", out.stdout);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("unknown workload W9"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `BENCH_PROFILE` adds W11's per-op backward profile (from its child process) to stderr,
/// every op the GPT's backward runs named with its calls, and leaves stdout one JSON line.
#[test]
fn bench_profile_prints_the_gpt_backward_per_op() {
    let out = Command::new(bench_binary())
        .args(["--json", "--quick", "W11"])
        .env("RAYON_NUM_THREADS", "1")
        .env("BENCH_PROFILE", "1")
        .output()
        .expect("the bench runs");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "bench failed: {stdout}\n{stderr}");
    assert_eq!(stdout.lines().count(), 1, "{stdout}");
    assert_eq!(field(&stdout, "workload").as_deref(), Some("W11"));
    assert!(
        stderr.contains("W11: the backward of one step, per op"),
        "{stderr}"
    );
    // the quick GPT has one block: its four linear layers and the tied head, its two
    // LayerNorms and the final one, one attention, one GELU, two embeddings (token, position)
    let calls = |op: &str| -> Option<usize> {
        let line = stderr
            .lines()
            .find(|l| l.split_whitespace().next() == Some(op))?;
        line.split_whitespace().nth(1)?.parse().ok()
    };
    assert_eq!(calls("packed"), Some(1), "{stderr}");
    assert_eq!(calls("layer_norm"), Some(3), "{stderr}");
    assert_eq!(calls("gelu_tanh"), Some(1), "{stderr}");
    assert_eq!(calls("linear"), Some(5), "{stderr}");
    assert_eq!(calls("embedding"), Some(2), "{stderr}");
}
