//! The handwritten-digits data set shipped in `data/digits.csv.gz`: loading, scaling and a
//! seeded train/test split.

use std::io::Read;
use std::path::{Path, PathBuf};

use autograd_core::{bail, ensure, shape, Error, Result, Rng, Tensor};

/// Pixels per image (8 x 8).
pub const FEATURES: usize = 64;
/// Digit classes.
pub const CLASSES: usize = 10;
/// The largest pixel intensity in the file.
const MAX_PIXEL: f32 = 16.0;

/// Images with their labels: `features` holds `len() * FEATURES` intensities scaled to
/// `[0, 1]`, row by row.
#[derive(Debug, Clone, Default)]
pub struct Digits {
    /// Scaled pixel intensities, one row of [`FEATURES`] per image.
    pub features: Vec<f32>,
    /// The class of each image, `0..CLASSES`.
    pub labels: Vec<i32>,
}

/// The copy shipped beside the examples.
pub fn shipped_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("data/digits.csv.gz")
}

/// Reads a gzip'd digits file: 64 intensities in `0..=16` and a label in `0..=9` per line.
/// A malformed line is `Error::Value` naming it.
pub fn load(path: &Path) -> Result<Digits> {
    let file = std::fs::File::open(path)
        .map_err(|e| Error::Runtime(format!("cannot open {}: {e}", path.display())))?;
    let mut text = String::new();
    flate2::read::GzDecoder::new(file)
        .read_to_string(&mut text)
        .map_err(|e| Error::Runtime(format!("cannot read {}: {e}", path.display())))?;
    parse(&text)
}

/// Parses the decompressed text of a digits file.
pub fn parse(text: &str) -> Result<Digits> {
    let mut d = Digits::default();
    for (n, line) in text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
    {
        let fields: Vec<&str> = line.trim().split(',').collect();
        ensure!(
            fields.len() == FEATURES + 1,
            Value,
            "line {}: {} fields, expected {} pixels and a label",
            n + 1,
            fields.len(),
            FEATURES
        );
        for f in &fields[..FEATURES] {
            match f.trim().parse::<u8>() {
                Ok(p) if f32::from(p) <= MAX_PIXEL => d.features.push(f32::from(p) / MAX_PIXEL),
                _ => bail!(Value, "line {}: pixel {f:?} is not in 0..=16", n + 1),
            }
        }
        match fields[FEATURES].trim().parse::<i32>() {
            Ok(l) if (0..CLASSES as i32).contains(&l) => d.labels.push(l),
            _ => bail!(
                Value,
                "line {}: label {:?} is not in 0..=9",
                n + 1,
                fields[FEATURES]
            ),
        }
    }
    Ok(d)
}

impl Digits {
    /// Number of images.
    pub fn len(&self) -> usize {
        self.labels.len()
    }

    /// Whether there is no image.
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty()
    }

    /// A seeded shuffle split into `(train, test)`, `test_fraction` (in `[0, 1]`, else
    /// `Error::Value`) of the images held out.
    pub fn split(&self, test_fraction: f64, seed: u64) -> Result<(Digits, Digits)> {
        ensure!(
            (0.0..=1.0).contains(&test_fraction),
            Value,
            "the held-out fraction must be in [0, 1], got {test_fraction}"
        );
        let mut order: Vec<usize> = (0..self.len()).collect();
        let mut rng = Rng::new(seed);
        for i in (1..order.len()).rev() {
            let j = (rng.next_u64() % (i as u64 + 1)) as usize;
            order.swap(i, j);
        }
        let test = (self.len() as f64 * test_fraction).round() as usize;
        Ok((self.subset(&order[test..])?, self.subset(&order[..test])?))
    }

    /// The images at `rows`, in that order; `Error::Value` for a row past the last image (or
    /// features that do not hold `FEATURES` values an image).
    pub fn subset(&self, rows: &[usize]) -> Result<Digits> {
        let mut d = Digits::default();
        for &r in rows {
            let (Some(features), Some(&label)) = (
                self.features.get(r * FEATURES..(r + 1) * FEATURES),
                self.labels.get(r),
            ) else {
                bail!(
                    Value,
                    "image {r} does not exist: the set has {} labels and {} feature values",
                    self.labels.len(),
                    self.features.len()
                );
            };
            d.features.extend_from_slice(features);
            d.labels.push(label);
        }
        Ok(d)
    }

    /// The images as a `[len, FEATURES]` Float32 tensor and the labels as `[len]` Int32.
    pub fn tensors(&self) -> Result<(Tensor, Tensor)> {
        Ok((
            Tensor::from_vec(self.features.clone(), shape![self.len(), FEATURES])?,
            Tensor::from_vec(self.labels.clone(), shape![self.len()])?,
        ))
    }
}
