//! A decoder-only transformer (GPT-2 shaped): token and position embeddings, pre-LayerNorm
//! blocks of causal self-attention and a GELU MLP, a final LayerNorm and a linear head. The
//! `tiny_transformer` example trains it and the bench's W6 times one training step of it.

use std::sync::Arc;

use autograd_core::{checkpoint, ensure, shape, DType, Result, Rng, Tensor};
use autograd_ops::module::join;
use autograd_ops::{
    add, cross_entropy, flash_causal_attention_qkv, gelu_tanh, init, linear, reshape,
    CrossEntropyOptions, Embedding, LayerNorm, Linear, Module, Role,
};

/// The model's sizes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    /// Number of distinct tokens.
    pub vocab: usize,
    /// Longest sequence (positions with an embedding).
    pub context: usize,
    /// Width of the residual stream.
    pub d_model: usize,
    /// Attention heads per block; must divide `d_model`.
    pub heads: usize,
    /// Number of blocks.
    pub layers: usize,
    /// Width of the MLP's hidden layer.
    pub ff: usize,
    /// Checkpoint every block, and the final LayerNorm with the logits and the loss: keep only
    /// each segment's input for backward and recompute its interior.
    pub checkpoint: bool,
}

/// `x + attn(ln1(x))`, then `+ mlp(ln2(.))`: PyTorch's pre-LayerNorm block with causal
/// attention and a tanh-GELU MLP. Its state dict names are `ln1.weight`, `ln1.bias`,
/// `qkv.weight` (q, k and v stacked by rows), `qkv.bias`, `proj.*`, `ln2.*`, `up.*` and
/// `down.*`, so a PyTorch module with fields of those names loads into it and back.
#[derive(Debug, Module)]
pub struct Block {
    #[module(skip)]
    heads: usize,
    ln1: LayerNorm,
    qkv: Linear,
    proj: Linear,
    ln2: LayerNorm,
    up: Linear,
    down: Linear,
}

impl Block {
    /// A block of width `c.d_model` with `c.heads` heads and an MLP of `c.ff`, initialised as
    /// PyTorch initialises `Linear` and `LayerNorm`; `Error::Value` when `heads` does not
    /// divide `d_model`.
    pub fn new(c: &Config, rng: &mut Rng) -> Result<Block> {
        Block::with_init(c, Init::PyTorch, rng)
    }

    /// [`Block::new`] with the linear layers initialised by `init`.
    fn with_init(c: &Config, init: Init, rng: &mut Rng) -> Result<Block> {
        let d = c.d_model;
        ensure!(
            c.heads > 0 && d.is_multiple_of(c.heads),
            Value,
            "block: {} heads do not divide d_model {d}",
            c.heads
        );
        Ok(Block {
            heads: c.heads,
            ln1: LayerNorm::new(&[d], 1e-5)?,
            qkv: init.linear(d, 3 * d, true, rng)?,
            proj: init.linear(d, d, true, rng)?,
            ln2: LayerNorm::new(&[d], 1e-5)?,
            up: init.linear(d, c.ff, true, rng)?,
            down: init.linear(c.ff, d, true, rng)?,
        })
    }

    /// The block applied to `x` of shape `[B, T, d_model]`; `Error::Value` for another shape.
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let dims = x.dims();
        let &[_, _, c] = dims.as_slice() else {
            autograd_core::bail!(Value, "block: x must be [B, T, C], got {dims:?}")
        };
        ensure!(
            c == self.qkv.in_features(),
            Value,
            "block: x has width {c}, the block takes {}",
            self.qkv.in_features()
        );
        let normed = self.ln1.forward(x)?;
        // q, k and v side by side from the one projection, attended to in place: the context
        // comes back [B, T, C] and the gradient as one [B, T, 3C], with no head permutes
        let context = flash_causal_attention_qkv(&self.qkv.forward(&normed)?, self.heads, None)?;
        let x = add(x, &self.proj.forward(&context)?)?;
        let hidden = gelu_tanh(&self.up.forward(&self.ln2.forward(&x)?)?)?;
        add(&x, &self.down.forward(&hidden)?)
    }
}

/// How the linear layers and embeddings start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Init {
    /// PyTorch's defaults: Kaiming-uniform `Linear`s, `N(0, 1)` embeddings.
    PyTorch,
    /// GPT-2's: `N(0, 0.02)` weights of linear layers and embeddings, zero biases.
    Gpt2,
}

impl Init {
    fn linear(self, inputs: usize, outputs: usize, bias: bool, rng: &mut Rng) -> Result<Linear> {
        match self {
            Init::PyTorch => Linear::new(inputs, outputs, bias, rng),
            Init::Gpt2 => Linear::from_parameters(
                init::normal(shape![outputs, inputs], 0.0, 0.02, rng)?,
                bias.then(|| Tensor::zeros(shape![outputs], &DType::Float32))
                    .transpose()?,
            ),
        }
    }

    fn embedding(self, rows: usize, width: usize, rng: &mut Rng) -> Result<Embedding> {
        match self {
            Init::PyTorch => Embedding::new(rows, width, rng),
            Init::Gpt2 => {
                Embedding::from_weight(init::normal(shape![rows, width], 0.0, 0.02, rng)?)
            }
        }
    }
}

/// The model: with its own linear head initialised as PyTorch initialises `Embedding`,
/// `Linear` and `LayerNorm` ([`Transformer::new`]), or GPT-2's ([`Transformer::gpt`]).
#[derive(Debug)]
pub struct Transformer {
    config: Config,
    token: Embedding,
    position: Embedding,
    blocks: Vec<Arc<Block>>,
    /// The final LayerNorm and the logits' layer, shared with a checkpointed loss's graph.
    top: Arc<Top>,
}

/// What turns the residual stream into logits.
#[derive(Debug)]
struct Top {
    ln: LayerNorm,
    /// The logits' layer; `None` when tied to the token embedding.
    head: Option<Linear>,
}

impl Top {
    /// Logits of the residual stream `x`, through the head or the tied token embedding.
    fn logits(&self, x: &Tensor, token: &Tensor) -> Result<Tensor> {
        let x = self.ln.forward(x)?;
        match &self.head {
            Some(head) => head.forward(&x),
            None => linear(&x, token, None),
        }
    }
}

impl Transformer {
    /// A fresh model; `Error::Value` when a size is zero or `heads` does not divide `d_model`.
    pub fn new(config: Config, rng: &mut Rng) -> Result<Transformer> {
        Transformer::build(config, Init::PyTorch, rng)
    }

    /// A fresh GPT-2 (and nanoGPT) style model: the logits come from a bias-free head tied to
    /// the token embedding (one tensor used twice, its gradient the sum of both uses), and
    /// linear and embedding weights start at `N(0, 0.02)`, biases at zero. Errors as
    /// [`Transformer::new`].
    pub fn gpt(config: Config, rng: &mut Rng) -> Result<Transformer> {
        Transformer::build(config, Init::Gpt2, rng)
    }

    fn build(config: Config, init: Init, rng: &mut Rng) -> Result<Transformer> {
        let c = &config;
        ensure!(
            c.vocab > 0 && c.context > 0 && c.layers > 0 && c.ff > 0,
            Value,
            "transformer: every size must be positive, got {c:?}"
        );
        ensure!(
            c.heads > 0 && c.d_model.is_multiple_of(c.heads),
            Value,
            "transformer: {} heads do not divide d_model {}",
            c.heads,
            c.d_model
        );
        Ok(Transformer {
            token: init.embedding(c.vocab, c.d_model, rng)?,
            position: init.embedding(c.context, c.d_model, rng)?,
            blocks: (0..c.layers)
                .map(|_| Block::with_init(c, init, rng).map(Arc::new))
                .collect::<Result<_>>()?,
            top: Arc::new(Top {
                ln: LayerNorm::new(&[c.d_model], 1e-5)?,
                head: match init {
                    Init::PyTorch => Some(Linear::new(c.d_model, c.vocab, true, rng)?),
                    Init::Gpt2 => None,
                },
            }),
            config,
        })
    }

    /// The sizes it was built with.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Every parameter tensor, in the order of [`Module::named_parameters`].
    pub fn parameters(&self) -> Vec<Tensor> {
        Module::parameters(self)
    }

    /// Logits `[B, T, vocab]` for Int32 token ids `[B, T]` with `T <= context`.
    pub fn forward(&self, ids: &Tensor) -> Result<Tensor> {
        let x = self.residual(&self.embed(ids)?)?;
        self.top.logits(&x, self.token.weight())
    }

    /// The token plus position embeddings `[B, T, d_model]` of Int32 ids `[B, T]`.
    fn embed(&self, ids: &Tensor) -> Result<Tensor> {
        let dims = ids.dims();
        ensure!(
            dims.len() == 2 && dims[1] <= self.config.context,
            Value,
            "transformer: ids must be [B, T] with T <= {}, got {dims:?}",
            self.config.context
        );
        let t = dims[1];
        let positions = Tensor::from_vec((0..t as i32).collect::<Vec<_>>(), shape![t])?;
        // [B, T, C] + [T, C]: the position embedding broadcasts over the batch
        add(
            &self.token.forward(ids)?,
            &self.position.forward(&positions)?,
        )
    }

    /// The residual stream after every block for an embedded input `x` of shape
    /// `[B, T, d_model]` (before the final LayerNorm); each block checkpointed when the
    /// configuration asks.
    pub fn residual(&self, x: &Tensor) -> Result<Tensor> {
        let mut x = x.clone();
        for block in &self.blocks {
            x = if self.config.checkpoint {
                let params = Module::parameters(&**block);
                let deps: Vec<&Tensor> = params.iter().collect();
                let block = Arc::clone(block);
                checkpoint(&[&x], &deps, move |a| block.forward(&a[0]))?
            } else {
                block.forward(&x)?
            };
        }
        Ok(x)
    }

    /// The mean next-token cross-entropy of `forward(ids)` against Int32 `targets` `[B, T]`;
    /// positions whose target is `ignore` do not count. When the configuration checkpoints,
    /// the final LayerNorm, the logits and the loss are one more checkpointed segment: the
    /// logits (`B·T·vocab` floats, GPT-2's largest activation) are rebuilt in backward instead
    /// of kept.
    pub fn loss(&self, ids: &Tensor, targets: &Tensor, ignore: Option<i32>) -> Result<Tensor> {
        let x = self.residual(&self.embed(ids)?)?;
        let rows = targets.size();
        let targets = reshape(targets, &[rows])?;
        let (top, token, vocab) = (
            Arc::clone(&self.top),
            self.token.weight().clone(),
            self.config.vocab,
        );
        let head_loss = move |x: &Tensor| -> Result<Tensor> {
            let logits = top.logits(x, &token)?;
            cross_entropy(
                &reshape(&logits, &[rows, vocab])?,
                &targets,
                CrossEntropyOptions {
                    ignore_index: ignore,
                    label_smoothing: 0.0,
                },
            )
        };
        if !self.config.checkpoint {
            return head_loss(&x);
        }
        let mut params = Module::parameters(&self.top.ln);
        match &self.top.head {
            Some(head) => params.extend(Module::parameters(head)),
            None => params.push(self.token.weight().clone()),
        }
        let deps: Vec<&Tensor> = params.iter().collect();
        checkpoint(&[&x], &deps, move |a| head_loss(&a[0]))
    }
}

/// State-dict names as a PyTorch module with these fields would give them: `token.weight`,
/// `position.weight`, `blocks.0.ln1.weight`, …, `ln.weight`, `head.weight`, `head.bias` (no
/// `head` in a tied model: its weight is `token.weight`). Written by hand because the blocks
/// are shared (`Arc`) with the checkpointed graphs.
impl Module for Transformer {
    fn visit(&self, prefix: &str, f: &mut dyn FnMut(&str, &Tensor, Role)) {
        self.token.visit(&join(prefix, "token"), f);
        self.position.visit(&join(prefix, "position"), f);
        let blocks = join(prefix, "blocks");
        for (i, block) in self.blocks.iter().enumerate() {
            block.visit(&join(&blocks, &i.to_string()), f);
        }
        self.top.ln.visit(&join(prefix, "ln"), f);
        if let Some(head) = &self.top.head {
            head.visit(&join(prefix, "head"), f);
        }
    }

    /// No layer of this model depends on the mode (it has no dropout), so there is nothing
    /// to switch; a block shared with a live checkpointed graph is left as it is.
    fn set_training(&mut self, training: bool) {
        self.token.set_training(training);
        self.position.set_training(training);
        if let Some(top) = Arc::get_mut(&mut self.top) {
            top.ln.set_training(training);
            if let Some(head) = &mut top.head {
                head.set_training(training);
            }
        }
        for block in &mut self.blocks {
            if let Some(block) = Arc::get_mut(block) {
                block.set_training(training);
            }
        }
    }
}
