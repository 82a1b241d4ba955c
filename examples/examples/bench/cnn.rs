//! W9b: one training step of `train_cnn_digits`'s CNN at batch 64 on random 8x8 images
//! (`shared/peers/bench_torch_w9.py w9b` is PyTorch's side): median over 50 steps after 5.

use autograd_core::{shape, Result, Rng, Tensor};
use autograd_examples::cnn::Cnn;
use autograd_ops::{cross_entropy, AdamW, AdamWConfig, CrossEntropyOptions, Module, Optimizer};

use crate::{report, training_times};

/// Times W9b and prints its line.
pub(crate) fn w9b(quick: bool) -> Result<()> {
    let (batch, warm, steps) = if quick { (8, 1, 3) } else { (64, 5, 50) };
    let mut rng = Rng::new(0);
    let model = Cnn::new(&mut rng)?;
    let x = Tensor::randn(shape![batch, 1, 8, 8], &mut rng)?;
    let y = Tensor::from_vec(
        (0..batch)
            .map(|_| (rng.next_u64() % 10) as i32)
            .collect::<Vec<i32>>(),
        shape![batch],
    )?;
    let mut opt = AdamW::new(
        model.parameters(),
        AdamWConfig {
            lr: 1e-3,
            ..AdamWConfig::default()
        },
    )?;
    let (times, last) = training_times("W9b", warm, steps, || {
        opt.zero_grad()?;
        let loss = cross_entropy(&model.forward(&x)?, &y, CrossEntropyOptions::default())?;
        loss.backward()?;
        opt.step()?;
        Ok(loss.item()?.to_f64())
    })?;
    report(
        "W9b",
        &times,
        &format!(",\"batch\":{batch},\"final_loss\":{last:.4}"),
    );
    Ok(())
}
