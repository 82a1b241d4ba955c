//! What the examples' command lines share: value parsers that refuse zero counts and
//! non-positive or non-finite rates when the flags are read (clap then prints the flag, the
//! value and the reason, and exits with status 2), and a `main` wrapper that prints a failed
//! run's error as a sentence and exits with status 1.

use std::process::ExitCode;

use autograd_core::Result;

/// A count that must be at least 1 (epochs, steps, batch sizes, widths).
pub fn positive(s: &str) -> std::result::Result<usize, String> {
    match s.parse::<usize>() {
        Ok(0) => Err("must be at least 1".into()),
        Ok(n) => Ok(n),
        Err(e) => Err(format!("not a whole number of at most {}: {e}", usize::MAX)),
    }
}

/// A learning rate: finite and greater than 0.
pub fn rate(s: &str) -> std::result::Result<f32, String> {
    match s.parse::<f32>() {
        Ok(r) if r.is_finite() && r > 0.0 => Ok(r),
        Ok(r) => Err(format!("must be finite and greater than 0, got {r}")),
        Err(e) => Err(format!("not a number: {e}")),
    }
}

/// Runs an example's body: `Ok` exits with status 0; an error is printed to stderr as
/// `error: <message>` and exits with status 1.
pub fn run(body: impl FnOnce() -> Result<()>) -> ExitCode {
    match body() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{positive, rate};

    #[test]
    fn counts_and_rates_are_refused_at_zero_negative_or_unbounded() {
        assert_eq!(positive("3"), Ok(3));
        assert!(positive("0").is_err());
        assert!(positive("-1").is_err());
        assert!(positive("100000000000000000000000").is_err());
        assert_eq!(rate("0.01"), Ok(0.01));
        for bad in ["0", "-1e-3", "inf", "NaN", "abc"] {
            assert!(rate(bad).is_err(), "{bad}");
        }
    }
}
