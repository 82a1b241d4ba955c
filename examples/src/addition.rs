//! The synthetic task `tiny_transformer` learns: two-digit addition written as characters.
//! A problem is the nine tokens `AB+CD=SSS` (operands zero-padded to two digits, the sum to
//! three); the model reads the first eight and predicts each next token, and only the three
//! digits of the sum are scored. Held-out problems are pairs never seen in training.

use autograd_core::{ensure, no_grad, shape, Result, Rng, Tensor};
use autograd_ops::data::{DataLoader, TensorDataset};
use autograd_ops::{argmax, narrow, AdamW, AdamWConfig, Optimizer};

use crate::transformer::{Config, Transformer};

/// Tokens: the digits `0..=9`, then `+` and `=`.
pub const VOCAB: usize = 12;
/// Tokens of one written problem.
pub const LENGTH: usize = 9;
/// Tokens the model reads (all but the last).
pub const CONTEXT: usize = LENGTH - 1;
/// Tokens of the question `AB+CD=`; the answer follows.
pub const PROMPT: usize = 6;
const PLUS: i32 = 10;
const EQUALS: i32 = 11;
/// Target of the positions that are not scored.
pub const IGNORE: i32 = -1;

/// One problem `a + b` with `a, b < 100`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Problem {
    /// First operand.
    pub a: u32,
    /// Second operand.
    pub b: u32,
}

impl Problem {
    /// Its tokens `AB+CD=SSS`.
    pub fn tokens(self) -> [i32; LENGTH] {
        let d = |n: u32, place: u32| ((n / place) % 10) as i32;
        let s = self.a + self.b;
        [
            d(self.a, 10),
            d(self.a, 1),
            PLUS,
            d(self.b, 10),
            d(self.b, 1),
            EQUALS,
            d(s, 100),
            d(s, 10),
            d(s, 1),
        ]
    }

    /// As written, `"07+85=092"`.
    pub fn text(self) -> String {
        self.tokens().iter().map(|&t| character(t)).collect()
    }
}

/// All 10,000 problems shuffled with `seed` and split into `(train, held_out)` with
/// `held_out` problems in the second part.
pub fn split(held_out: usize, seed: u64) -> (Vec<Problem>, Vec<Problem>) {
    let mut all: Vec<Problem> = (0..100)
        .flat_map(|a| (0..100).map(move |b| Problem { a, b }))
        .collect();
    shuffle(&mut all, &mut Rng::new(seed));
    let test = all.split_off(all.len() - held_out.min(all.len()));
    (all, test)
}

fn shuffle<T>(v: &mut [T], rng: &mut Rng) {
    for i in (1..v.len()).rev() {
        v.swap(i, (rng.next_u64() % (i as u64 + 1)) as usize);
    }
}

/// Inputs `[N, CONTEXT]` and next-token targets `[N, CONTEXT]` (Int32), with every target
/// before the answer set to [`IGNORE`].
pub fn batch(problems: &[Problem]) -> Result<(Tensor, Tensor)> {
    let mut ids = Vec::with_capacity(problems.len() * CONTEXT);
    let mut targets = Vec::with_capacity(problems.len() * CONTEXT);
    for p in problems {
        let t = p.tokens();
        ids.extend_from_slice(&t[..CONTEXT]);
        targets.extend((1..LENGTH).map(|i| if i >= PROMPT { t[i] } else { IGNORE }));
    }
    let n = problems.len();
    Ok((
        Tensor::from_vec(ids, shape![n, CONTEXT])?,
        Tensor::from_vec(targets, shape![n, CONTEXT])?,
    ))
}

/// The model's answers to `problems` by greedy decoding: it reads the question, writes one
/// digit at a time and reads its own digits back. Each answer is the three predicted tokens
/// written out (a token that is not a digit shows as `+` or `=`).
pub fn answers(model: &Transformer, problems: &[Problem]) -> Result<Vec<String>> {
    let _guard = no_grad();
    let n = problems.len();
    let mut ids: Vec<i32> = problems
        .iter()
        .flat_map(|p| {
            p.tokens()
                .into_iter()
                .take(PROMPT)
                .chain([0; CONTEXT - PROMPT])
        })
        .collect();
    let mut written = vec![String::with_capacity(LENGTH - PROMPT); n];
    // the logits at position `pos` predict token `pos + 1`; causal attention keeps the
    // placeholders after `pos` from changing them
    for pos in PROMPT - 1..CONTEXT {
        let logits = model.forward(&Tensor::from_vec(ids.clone(), shape![n, CONTEXT])?)?;
        let next = argmax(&narrow(&logits, 1, pos, 1)?, 2, false)?.values::<i32>()?;
        for (row, token) in next.into_iter().enumerate() {
            written[row].push(character(token));
            if pos + 1 < CONTEXT {
                ids[row * CONTEXT + pos + 1] = token;
            }
        }
    }
    Ok(written)
}

/// The fraction of `problems` whose three answer digits are all right.
pub fn exact_match(model: &Transformer, problems: &[Problem]) -> Result<f64> {
    let written = answers(model, problems)?;
    let right = problems
        .iter()
        .zip(&written)
        .filter(|(p, w)| p.text()[PROMPT..] == w[..])
        .count();
    Ok(right as f64 / problems.len().max(1) as f64)
}

fn character(token: i32) -> char {
    match token {
        PLUS => '+',
        EQUALS => '=',
        d => char::from(b'0' + d as u8),
    }
}

/// What to train.
#[derive(Debug, Clone)]
pub struct Training {
    /// The model's sizes (vocab and context are the task's).
    pub model: Config,
    /// Optimizer steps.
    pub steps: usize,
    /// Problems per step.
    pub batch: usize,
    /// AdamW's peak learning rate (linear warm-up over the first 5% of steps, then cosine
    /// decay to a tenth).
    pub lr: f32,
    /// Seeds the initialisation and the batch order (the split has its own seed).
    pub seed: u64,
}

impl Training {
    /// The model sizes for this task: 2 blocks of width 64 with 2 heads and an MLP of 256.
    pub fn model(checkpoint: bool) -> Config {
        Config {
            vocab: VOCAB,
            context: CONTEXT,
            d_model: 64,
            heads: 2,
            layers: 2,
            ff: 256,
            checkpoint,
        }
    }

    fn lr_at(&self, step: usize) -> f32 {
        let warm = (self.steps / 20).max(1);
        if step < warm {
            return self.lr * (step + 1) as f32 / warm as f32;
        }
        let progress = (step - warm) as f32 / (self.steps - warm).max(1) as f32;
        self.lr * (0.1 + 0.9 * 0.5 * (1.0 + (std::f32::consts::PI * progress).cos()))
    }
}

/// Trains a fresh model on `train`, calling `on_step(step, loss)` after every optimizer step.
pub fn train(
    config: &Training,
    train: &[Problem],
    mut on_step: impl FnMut(usize, f64),
) -> Result<Transformer> {
    ensure!(!train.is_empty(), Value, "train: no training problems");
    let mut rng = Rng::new(config.seed);
    let model = Transformer::new(config.model, &mut rng)?;
    let mut opt = AdamW::new(
        model.parameters(),
        AdamWConfig {
            lr: config.lr,
            ..AdamWConfig::default()
        },
    )?;
    // full batches only, reshuffled every epoch, for as many epochs as the steps take
    let (ids, targets) = batch(train)?;
    let loader = DataLoader::new(
        TensorDataset::new(vec![ids, targets])?,
        config.batch.clamp(1, train.len()),
    )?
    .shuffle(config.seed)
    .drop_last(true);
    let (mut step, mut epoch) = (0, 0);
    while step < config.steps {
        for fields in loader.epoch(epoch)? {
            if step == config.steps {
                break;
            }
            let [ids, targets] = <[Tensor; 2]>::try_from(fields?).map_err(|_| {
                autograd_core::Error::Runtime("an addition batch has two fields".into())
            })?;
            let loss = model.loss(&ids, &targets, Some(IGNORE))?;
            opt.zero_grad()?;
            loss.backward()?;
            opt.set_lr(config.lr_at(step))?;
            opt.step()?;
            on_step(step, loss.item()?.to_f64());
            step += 1;
        }
        epoch += 1;
    }
    Ok(model)
}
