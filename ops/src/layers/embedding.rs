//! `Embedding`: rows of a table looked up by id, PyTorch's `nn.Embedding`, with its
//! `padding_idx` and `max_norm` options.

use autograd_core::{ensure, ops::embedding, shape, Captured, DType, Result, Rng, Tensor};

use super::embedding_lookup::{embedding_padded, renormalise};
use crate::{init, Module};

/// The options of an [`Embedding`], PyTorch's keyword arguments of `nn.Embedding`. `Default`
/// has no padding row, no maximum norm and `norm_type` 2.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EmbeddingOptions {
    /// A row that receives no gradient (a padding token's), initialised to zeros by
    /// [`Embedding::with_options`], as PyTorch does.
    pub padding_idx: Option<usize>,
    /// When set, every row a forward pass references whose `norm_type`-norm exceeds it is
    /// scaled in place to this norm before the lookup (PyTorch's `max_norm`).
    pub max_norm: Option<f32>,
    /// The `p` of the norm `max_norm` bounds: positive, or infinite for the largest magnitude.
    pub norm_type: f32,
}

impl Default for EmbeddingOptions {
    fn default() -> EmbeddingOptions {
        EmbeddingOptions {
            padding_idx: None,
            max_norm: None,
            norm_type: 2.0,
        }
    }
}

impl Captured for EmbeddingOptions {}

impl EmbeddingOptions {
    /// Checks the options against a table of `num` rows: a padding row in range, a positive
    /// finite `max_norm`, a positive (or infinite) `norm_type`; `Error::Value` otherwise.
    fn check(&self, num: usize) -> Result<()> {
        if let Some(p) = self.padding_idx {
            ensure!(
                p < num,
                Value,
                "Embedding: padding_idx {p} is out of range for {num} rows"
            );
        }
        if let Some(m) = self.max_norm {
            ensure!(
                m > 0.0 && m.is_finite(),
                Value,
                "Embedding: max_norm must be positive and finite, got {m}"
            );
        }
        ensure!(
            self.norm_type > 0.0,
            Value,
            "Embedding: norm_type must be positive, got {}",
            self.norm_type
        );
        Ok(())
    }
}

/// A lookup table `weight` of shape `[num_embeddings, embedding_dim]`: `forward(ids)` gives
/// the rows of Int32 `ids`, shape `[..ids, embedding_dim]`. A repeated id's rows add their
/// gradients into its one row of the table. A [`Module`] with one tensor, `weight`.
/// [`EmbeddingOptions`] add PyTorch's padding row and max-norm renormalisation.
///
/// ```
/// use autograd_core::{shape, Rng, Tensor};
/// use autograd_ops::Embedding;
/// let table = Embedding::new(10, 4, &mut Rng::new(0)).unwrap();
/// let ids = Tensor::from_vec(vec![1i32, 7, 1], shape![3]).unwrap();
/// assert_eq!(table.forward(&ids).unwrap().dims(), [3, 4]);
/// ```
#[derive(Debug, Module)]
#[module(crate = crate)]
pub struct Embedding {
    weight: Tensor,
    #[module(skip)]
    options: EmbeddingOptions,
}

impl Embedding {
    /// A table of `num_embeddings` rows of width `embedding_dim`, drawn from `N(0, 1)` as
    /// PyTorch initialises it.
    pub fn new(num_embeddings: usize, embedding_dim: usize, rng: &mut Rng) -> Result<Embedding> {
        Embedding::with_options(
            num_embeddings,
            embedding_dim,
            EmbeddingOptions::default(),
            rng,
        )
    }

    /// [`Embedding::new`] with `options`; the padding row, if any, starts at zeros, as
    /// PyTorch initialises it. Options that do not fit the table are `Error::Value`.
    ///
    /// ```
    /// use autograd_core::{shape, Rng, Tensor};
    /// use autograd_ops::{Embedding, EmbeddingOptions};
    /// let opts = EmbeddingOptions { padding_idx: Some(0), ..EmbeddingOptions::default() };
    /// let table = Embedding::with_options(5, 3, opts, &mut Rng::new(0)).unwrap();
    /// let ids = Tensor::from_vec(vec![0i32], shape![1]).unwrap();
    /// assert_eq!(table.forward(&ids).unwrap().values::<f32>().unwrap(), [0.0; 3]);
    /// ```
    pub fn with_options(
        num_embeddings: usize,
        embedding_dim: usize,
        options: EmbeddingOptions,
        rng: &mut Rng,
    ) -> Result<Embedding> {
        options.check(num_embeddings)?;
        let weight = init::normal(shape![num_embeddings, embedding_dim], 0.0, 1.0, rng)?;
        if let Some(p) = options.padding_idx {
            let _guard = autograd_core::no_grad();
            autograd_core::kernel::update::<f32, _>(&weight, |w| {
                w[p * embedding_dim..(p + 1) * embedding_dim].fill(0.0);
                Ok(())
            })?;
        }
        Ok(Embedding { weight, options })
    }

    /// A table over a given Float32 `weight` of shape `[num, dim]` (`Error::Type` for another
    /// dtype, `Error::Value` for another rank). The layer holds the handle.
    pub fn from_weight(weight: Tensor) -> Result<Embedding> {
        ensure!(
            weight.dtype() == &DType::Float32,
            Type,
            "an Embedding weight must be Float32, got {}",
            weight.dtype()
        );
        ensure!(
            weight.dims().len() == 2,
            Value,
            "an Embedding weight has shape [num_embeddings, embedding_dim], got {}",
            weight.shape()
        );
        Ok(Embedding {
            weight,
            options: EmbeddingOptions::default(),
        })
    }

    /// [`Embedding::from_weight`] with `options` (PyTorch's `from_pretrained`: the padding
    /// row keeps the values given). Options that do not fit the table are `Error::Value`.
    pub fn from_weight_with_options(
        weight: Tensor,
        options: EmbeddingOptions,
    ) -> Result<Embedding> {
        let mut table = Embedding::from_weight(weight)?;
        options.check(table.num_embeddings())?;
        table.options = options;
        Ok(table)
    }

    /// The rows of `ids` (Int32, any shape, each in `0..num_embeddings`): `[..ids, dim]`,
    /// recorded for autograd; the padding row's lookups take no gradient.
    ///
    /// With `max_norm`, the rows `ids` references are first renormalised **in place**, as
    /// PyTorch does: each whose norm exceeds `max_norm` is scaled to it (over `norm + 1e-7`),
    /// under `no_grad`, in one write that bumps the weight's version. So a graph recorded
    /// earlier that saved the weight (an earlier `forward` not yet differentiated) fails its
    /// backward with a version error, as PyTorch's does. Ids out of range are `Error::Value`,
    /// ids of another dtype `Error::Type`, before anything is written.
    pub fn forward(&self, ids: &Tensor) -> Result<Tensor> {
        if let Some(max_norm) = self.options.max_norm {
            renormalise(&self.weight, ids, max_norm, self.options.norm_type)?;
        }
        match self.options.padding_idx {
            Some(p) => embedding_padded(&self.weight, ids, p),
            None => embedding(&self.weight, ids),
        }
    }

    /// The options the table was made with.
    pub fn options(&self) -> EmbeddingOptions {
        self.options
    }

    /// The table, `[num_embeddings, embedding_dim]`.
    pub fn weight(&self) -> &Tensor {
        &self.weight
    }

    /// The number of rows.
    pub fn num_embeddings(&self) -> usize {
        self.weight.dims()[0]
    }

    /// The width of a row.
    pub fn embedding_dim(&self) -> usize {
        self.weight.dims()[1]
    }

    /// The table: a handle sharing storage, `.grad` and versions with the layer's own.
    pub fn parameters(&self) -> Vec<Tensor> {
        vec![self.weight.clone()]
    }
}
