//! S1: saving and loading a 100 MiB state dict (25 Float32 tensors of 1024 x 1024) through
//! safetensors, from and to the page cache. The load runs in a child process so that its peak
//! RSS is its own: the target is at most the file plus the parameters plus 10%.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use autograd_core::{Error, Result, Tensor};
use autograd_ops::module::join;
use autograd_ops::{Module, Role};

use crate::{in_child, ms, peak_rss_mib, status_mib};

/// The environment variable naming the file a load child reads.
const FILE_VAR: &str = "AUTOGRAD_BENCH_S1_FILE";

/// A module of `n` square Float32 tensors named `layers.{i}.weight`.
struct Stack(Vec<Tensor>);

impl Stack {
    fn new(n: usize, side: usize, fill: f32) -> Result<Stack> {
        (0..n)
            .map(|i| Tensor::full(vec![side, side], fill + i as f32))
            .collect::<Result<_>>()
            .map(Stack)
    }
}

impl Module for Stack {
    fn visit(&self, prefix: &str, f: &mut dyn FnMut(&str, &Tensor, Role)) {
        for (i, t) in self.0.iter().enumerate() {
            f(
                &join(prefix, &format!("layers.{i}.weight")),
                t,
                Role::Parameter,
            );
        }
    }
    fn set_training(&mut self, _: bool) {}
}

/// The tensor count and side of the workload (`--quick`: 4 of 256 x 256).
fn size(quick: bool) -> (usize, usize) {
    if quick {
        (4, 256)
    } else {
        (25, 1024)
    }
}

fn runtime(e: impl std::fmt::Display) -> Error {
    Error::Runtime(e.to_string())
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

/// Runs S1: saves in this process, then loads in a child; prints one JSON line.
pub(crate) fn s1(quick: bool, child: bool) -> Result<()> {
    let (n, side) = size(quick);
    if child {
        return load_child(n, side);
    }
    let dir = std::env::temp_dir().join(format!("autograd-bench-s1-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(runtime)?;
    let path = dir.join("state.safetensors");
    let result = save_then_load(&path, n, side, quick);
    let _ = std::fs::remove_dir_all(&dir);
    result
}

fn save_then_load(path: &Path, n: usize, side: usize, quick: bool) -> Result<()> {
    let model = Stack::new(n, side, 0.5)?;
    let runs = if quick { 2 } else { 5 };
    model.save(path)?;
    let save = median(
        (0..runs)
            .map(|_| {
                let start = Instant::now();
                model.save(path)?;
                Ok(start.elapsed())
            })
            .collect::<Result<_>>()?,
    );
    let bytes = std::fs::metadata(path).map_err(runtime)?.len() as f64;
    let child = in_child("S1", quick, &[(FILE_VAR, path)])?;
    let gb = |d: Duration| bytes / d.as_secs_f64() / 1e9;
    println!(
        "{{\"workload\":\"S1\",\"threads\":{},\"file_mib\":{:.1},\"save_ms\":{:.2},\"save_gbps\":{:.3}{}}}",
        autograd_core::kernel::threads(),
        bytes / (1u64 << 20) as f64,
        ms(save),
        gb(save),
        child.trim()
    );
    Ok(())
}

/// The child's half: a zeroed model of the same shapes loads the file several times; prints
/// the load's median time, GB/s and the RSS before the first load and at its peak, as a JSON
/// fragment the parent appends to its line.
fn load_child(n: usize, side: usize) -> Result<()> {
    let path = PathBuf::from(std::env::var_os(FILE_VAR).ok_or_else(|| runtime("no S1 file"))?);
    let mut model = Stack::new(n, side, 0.0)?;
    let before = status_mib("VmRSS:");
    let bytes = std::fs::metadata(&path).map_err(runtime)?.len() as f64;
    let times = (0..5)
        .map(|_| {
            let start = Instant::now();
            model.load(&path)?;
            Ok(start.elapsed())
        })
        .collect::<Result<Vec<_>>>()?;
    let first = times[0];
    let load = median(times);
    let expected = 0.5 + (n - 1) as f32;
    let got = model.0[n - 1].values::<f32>()?[side];
    autograd_core::ensure!(got == expected, Runtime, "S1 loaded {got}, not {expected}");
    let peak = peak_rss_mib();
    let file = bytes / (1u64 << 20) as f64;
    // `before` holds the parameters and the process's own footprint
    print!(
        ",\"load_ms\":{:.2},\"load_gbps\":{:.3},\"first_load_ms\":{:.2},\"rss_before_load_mib\":{before:.1},\"peak_rss_mib\":{peak:.1},\"peak_over_file_plus_before\":{:.3}",
        ms(load),
        bytes / load.as_secs_f64() / 1e9,
        ms(first),
        peak / (file + before)
    );
    Ok(())
}
