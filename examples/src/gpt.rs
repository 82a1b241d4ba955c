//! Character-level GPT training, as the `train_gpt` example runs it and the bench's W11 and W12
//! time it: the sizes of nanoGPT's CPU configuration and of GPT-2 small, a character
//! vocabulary over a text, random windows of it as batches, and sampling.

use autograd_core::{ensure, no_grad, shape, Result, Rng, Tensor};
use autograd_ops::softmax;

use crate::transformer::{Config, Transformer};

/// nanoGPT's CPU configuration (W11): context 64, 4 layers, 4 heads, d_model 128, MLP 512,
/// with a vocabulary of `vocab` (65 for nanoGPT's Shakespeare).
pub fn w11(vocab: usize) -> Config {
    Config {
        vocab,
        context: 64,
        d_model: 128,
        heads: 4,
        layers: 4,
        ff: 512,
        checkpoint: false,
    }
}

/// GPT-2 small (W12): vocabulary 50,257, context 256 (GPT-2's is 1,024), 12 layers, 12 heads,
/// d_model 768, MLP 3,072; 124M parameters with the head tied to the token embedding.
pub fn w12() -> Config {
    Config {
        vocab: 50_257,
        context: 256,
        d_model: 768,
        heads: 12,
        layers: 12,
        ff: 3072,
        checkpoint: false,
    }
}

/// A character vocabulary: the distinct characters of a text, sorted, a token each.
#[derive(Debug, Clone)]
pub struct Chars {
    chars: Vec<char>,
}

impl Chars {
    /// The vocabulary of `text` (`Error::Value` when it is empty).
    pub fn of(text: &str) -> Result<Chars> {
        let mut chars: Vec<char> = text.chars().collect();
        chars.sort_unstable();
        chars.dedup();
        ensure!(!chars.is_empty(), Value, "the text to train on is empty");
        Ok(Chars { chars })
    }

    /// The number of tokens.
    pub fn len(&self) -> usize {
        self.chars.len()
    }

    /// Whether there are none (never, for a vocabulary built by [`Chars::of`]).
    pub fn is_empty(&self) -> bool {
        self.chars.is_empty()
    }

    /// The tokens of `text`; `Error::Value` for a character outside the vocabulary.
    pub fn encode(&self, text: &str) -> Result<Vec<i32>> {
        text.chars()
            .map(|c| {
                self.chars.binary_search(&c).map(|i| i as i32).map_err(|_| {
                    autograd_core::Error::Value(format!("{c:?} is not in the vocabulary"))
                })
            })
            .collect()
    }

    /// The text of `tokens` (a token past the vocabulary, from a larger model vocabulary, as
    /// `?`).
    pub fn decode(&self, tokens: &[i32]) -> String {
        tokens
            .iter()
            .map(|&t| {
                usize::try_from(t)
                    .ok()
                    .and_then(|t| self.chars.get(t))
                    .copied()
                    .unwrap_or('?')
            })
            .collect()
    }
}

/// `batch` random windows of `context + 1` tokens of `tokens`: the first `context` of each as
/// the input `[batch, context]` and the last `context` as the targets.
pub fn windows(
    tokens: &[i32],
    batch: usize,
    context: usize,
    rng: &mut Rng,
) -> Result<(Tensor, Tensor)> {
    ensure!(
        tokens.len() > context,
        Value,
        "a text of {} tokens is too short for windows of {} (the context and its next token)",
        tokens.len(),
        context + 1
    );
    let starts = tokens.len() - context;
    let (mut ids, mut targets) = (
        Vec::with_capacity(batch * context),
        Vec::with_capacity(batch * context),
    );
    for _ in 0..batch {
        let s = (rng.next_u64() % starts as u64) as usize;
        ids.extend_from_slice(&tokens[s..s + context]);
        targets.extend_from_slice(&tokens[s + 1..=s + context]);
    }
    Ok((
        Tensor::from_vec(ids, shape![batch, context])?,
        Tensor::from_vec(targets, shape![batch, context])?,
    ))
}

/// `n` tokens sampled after `prompt` (at least one token), each from the model's next-token
/// distribution at `temperature`, with at most the last `context` tokens as input.
pub fn sample(
    model: &Transformer,
    prompt: &[i32],
    n: usize,
    temperature: f32,
    rng: &mut Rng,
) -> Result<Vec<i32>> {
    ensure!(
        !prompt.is_empty(),
        Value,
        "sampling needs a prompt of at least one token"
    );
    ensure!(
        temperature.is_finite() && temperature > 0.0,
        Value,
        "the temperature must be finite and positive, got {temperature}"
    );
    let _guard = no_grad();
    let context = model.config().context;
    let mut tokens = prompt.to_vec();
    for _ in 0..n {
        let window = &tokens[tokens.len().saturating_sub(context)..];
        let ids = Tensor::from_vec(window.to_vec(), shape![1, window.len()])?;
        let logits = model.forward(&ids)?;
        let vocab = model.config().vocab;
        let last = logits
            .reshape(&[window.len(), vocab])?
            .select(0, window.len() - 1)?;
        let probs =
            softmax(&autograd_ops::mul_scalar(&last, 1.0 / temperature)?, 0)?.values::<f32>()?;
        let mut u = rng.uniform_f32();
        let mut next = probs.len() - 1;
        for (i, p) in probs.iter().enumerate() {
            if u < *p {
                next = i;
                break;
            }
            u -= p;
        }
        tokens.push(next as i32);
    }
    Ok(tokens[prompt.len()..].to_vec())
}
