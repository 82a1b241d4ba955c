//! Checkpointing every block of an 8-block pre-LayerNorm transformer stack (issue 13): the
//! saved bytes between forward and backward are a fraction of the plain stack's, and the
//! gradients of the input and of every parameter agree to 1e-5.

use autograd_core::{checkpoint, graph_bytes, Result, Rng, Tensor};
use autograd_ops::{
    add, flash_causal_attention, gelu, mul, permute, reshape, sum, LayerNorm, Linear,
};

const B: usize = 2;
const T: usize = 16;
const C: usize = 32;
const HEADS: usize = 2;

/// x + attn(ln1(x)), then + mlp(ln2(.)): the block of a decoder-only transformer.
struct Block {
    ln1: LayerNorm,
    qkv: Linear,
    proj: Linear,
    ln2: LayerNorm,
    up: Linear,
    down: Linear,
}

impl Block {
    fn new(rng: &mut Rng) -> Block {
        Block {
            ln1: LayerNorm::new(&[C], 1e-5).unwrap(),
            qkv: Linear::new(C, 3 * C, true, rng).unwrap(),
            proj: Linear::new(C, C, true, rng).unwrap(),
            ln2: LayerNorm::new(&[C], 1e-5).unwrap(),
            up: Linear::new(C, 4 * C, true, rng).unwrap(),
            down: Linear::new(4 * C, C, true, rng).unwrap(),
        }
    }

    fn params(&self) -> Vec<Tensor> {
        let mut p = self.ln1.parameters();
        for l in [&self.qkv, &self.proj, &self.up, &self.down] {
            p.extend(l.parameters());
        }
        p.extend(self.ln2.parameters());
        p
    }

    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let d = C / HEADS;
        // [B, T, 3C] -> [3, B, H, T, D]
        let qkv = permute(
            &reshape(
                &self.qkv.forward(&self.ln1.forward(x)?)?,
                &[B, T, 3, HEADS, d],
            )?,
            &[2, 0, 3, 1, 4],
        )?;
        let [q, k, v] = [0, 1, 2].map(|i| qkv.select(0, i));
        let o = flash_causal_attention(&q?, &k?, &v?, None)?;
        let o = reshape(&permute(&o, &[0, 2, 1, 3])?, &[B, T, C])?;
        let x = add(x, &self.proj.forward(&o)?)?;
        let h = gelu(&self.up.forward(&self.ln2.forward(&x)?)?)?;
        add(&x, &self.down.forward(&h)?)
    }
}

fn stack(x: &Tensor, blocks: &[std::sync::Arc<Block>], checkpointed: bool) -> Result<Tensor> {
    let mut h = x.clone();
    for b in blocks {
        h = if checkpointed {
            let params = b.params();
            let deps: Vec<&Tensor> = params.iter().collect();
            let block = b.clone();
            checkpoint(&[&h], &deps, move |a| block.forward(&a[0]))?
        } else {
            b.forward(&h)?
        };
    }
    // a loss that weighs every position differently
    sum(&mul(&h, &h)?)
}

fn grads(leaves: &[Tensor]) -> Vec<Vec<f32>> {
    leaves
        .iter()
        .map(|t| {
            let g = t
                .grad()
                .unwrap()
                .expect("every leaf gets a gradient")
                .values::<f32>()
                .unwrap();
            t.set_grad(None).unwrap();
            g
        })
        .collect()
}

#[test]
fn an_eight_block_transformer_checkpointed_keeps_a_fraction_of_the_saved_bytes() {
    let mut rng = Rng::new(5);
    let blocks: Vec<std::sync::Arc<Block>> = (0..8)
        .map(|_| std::sync::Arc::new(Block::new(&mut rng)))
        .collect();
    let x = Tensor::randn(autograd_core::shape![B, T, C], &mut rng).unwrap();
    let mut leaves = vec![x.clone()];
    leaves.extend(blocks.iter().flat_map(|b| b.params()));

    let plain = stack(&x, &blocks, false).unwrap();
    let plain_bytes = graph_bytes(&plain).unwrap();
    plain.backward().unwrap();
    let want = grads(&leaves);

    let ck = stack(&x, &blocks, true).unwrap();
    let ck_bytes = graph_bytes(&ck).unwrap();
    ck.backward().unwrap();
    let got = grads(&leaves);

    let param_bytes: usize = leaves[1..].iter().map(|p| p.size() * 4).sum();
    assert!(
        ck_bytes * 2 < plain_bytes,
        "checkpointed {ck_bytes} B vs plain {plain_bytes} B"
    );
    assert!(
        (ck_bytes - param_bytes) * 8 < plain_bytes - param_bytes,
        "activations: checkpointed {} B vs plain {} B",
        ck_bytes - param_bytes,
        plain_bytes - param_bytes
    );
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        for (a, b) in g.iter().zip(w) {
            assert!(
                (a - b).abs() <= 1e-5 * (1.0 + b.abs()),
                "leaf {i}: {a} vs {b}"
            );
        }
    }
}
