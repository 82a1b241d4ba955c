//! What the digits examples share around their models: an epoch of mini-batch training and the
//! per-epoch curves, printed and drawn.

use std::path::Path;

use autograd_core::{no_grad, Result, Tensor};
use autograd_ops::data::{DataLoader, TensorDataset};
use autograd_ops::{argmax, cross_entropy, CrossEntropyOptions, Optimizer};

use crate::digits::Digits;

use crate::plot::{write_svg, Panel, Series};

/// The curves of one training run, one entry per epoch of this run.
#[derive(Debug, Clone, Default)]
pub struct History {
    /// Epochs done before this run (by the run it resumed); entry `i` of each curve is epoch
    /// `first_epoch + i + 1`.
    pub first_epoch: usize,
    /// Mean training loss over the epoch's batches.
    pub train_loss: Vec<f64>,
    /// Held-out loss at the end of the epoch.
    pub test_loss: Vec<f64>,
    /// Training accuracy at the end of the epoch (0..1).
    pub train_accuracy: Vec<f64>,
    /// Held-out accuracy at the end of the epoch (0..1).
    pub test_accuracy: Vec<f64>,
}

impl History {
    /// Adds an epoch: its mean training loss, the training accuracy and the held-out
    /// `(loss, accuracy)` measured after it.
    pub fn record(
        &mut self,
        train_loss: f64,
        train_accuracy: f64,
        (test_loss, test_accuracy): (f64, f64),
    ) {
        self.train_loss.push(train_loss);
        self.train_accuracy.push(train_accuracy);
        self.test_loss.push(test_loss);
        self.test_accuracy.push(test_accuracy);
    }

    /// Prints the training loss and held-out accuracy of every fifth epoch and of the last.
    pub fn print_epochs(&self) {
        let n = self.train_loss.len();
        for (e, (l, a)) in self.train_loss.iter().zip(&self.test_accuracy).enumerate() {
            if e % 5 == 4 || e + 1 == n {
                println!(
                    "epoch {:3}: train loss {l:.4}, held-out accuracy {:.2}%",
                    self.first_epoch + e + 1,
                    100.0 * a
                );
            }
        }
    }

    /// Draws the loss and accuracy curves, training and held out, into an SVG file at `path`.
    pub fn write_svg(&self, path: &Path) -> Result<()> {
        let series = |name: &str, color: &str, v: &[f64]| Series {
            name: name.into(),
            color: color.into(),
            points: v
                .iter()
                .enumerate()
                .map(|(i, &y)| ((self.first_epoch + i + 1) as f64, y))
                .collect(),
        };
        write_svg(
            path,
            &[
                Panel {
                    title: "cross-entropy loss".into(),
                    x_label: "epoch".into(),
                    y_label: "loss".into(),
                    series: vec![
                        series("train", "#1f77b4", &self.train_loss),
                        series("held out", "#ff7f0e", &self.test_loss),
                    ],
                },
                Panel {
                    title: "accuracy".into(),
                    x_label: "epoch".into(),
                    y_label: "accuracy".into(),
                    series: vec![
                        series("train", "#1f77b4", &self.train_accuracy),
                        series("held out", "#ff7f0e", &self.test_accuracy),
                    ],
                },
            ],
        )
    }
}

/// Epoch `epoch` of `loader`'s (images, labels) batches: for each, the cross-entropy of
/// `forward`'s logits, a backward pass and an optimizer step, then `on_step(epoch, loss)`.
/// Returns the mean loss over the batches.
pub fn train_epoch<O: Optimizer>(
    loader: &DataLoader<TensorDataset>,
    epoch: usize,
    opt: &mut O,
    forward: impl Fn(&Tensor) -> Result<Tensor>,
    on_step: &mut impl FnMut(usize, f64),
) -> Result<f64> {
    let (mut total, mut batches) = (0.0, 0u32);
    for batch in loader.epoch(epoch as u64)? {
        let [x, y] = <[Tensor; 2]>::try_from(batch?)
            .map_err(|_| autograd_core::Error::Runtime("a digits batch has two fields".into()))?;
        let loss = cross_entropy(&forward(&x)?, &y, CrossEntropyOptions::default())?;
        opt.zero_grad()?;
        loss.backward()?;
        opt.step()?;
        let l = loss.item()?.to_f64();
        total += l;
        batches += 1;
        on_step(epoch, l);
    }
    Ok(total / f64::from(batches.max(1)))
}

/// `(mean loss, accuracy)` of `forward`'s logits on `data`, without recording a graph.
pub fn evaluate(data: &Digits, forward: impl Fn(&Tensor) -> Result<Tensor>) -> Result<(f64, f64)> {
    let _guard = no_grad();
    let (x, y) = data.tensors()?;
    let logits = forward(&x)?;
    let loss = cross_entropy(&logits, &y, CrossEntropyOptions::default())?;
    let predicted = argmax(&logits, 1, false)?.values::<i32>()?;
    let right = predicted
        .iter()
        .zip(&data.labels)
        .filter(|(p, l)| p == l)
        .count();
    Ok((
        loss.item()?.to_f64(),
        right as f64 / data.len().max(1) as f64,
    ))
}
