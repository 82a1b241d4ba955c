//! `Embedding`: rows of a table looked up by id, PyTorch's `nn.Embedding`.

use autograd_core::{ensure, ops::embedding, shape, DType, Result, Rng, Tensor};

use crate::{init, Module};

/// A lookup table `weight` of shape `[num_embeddings, embedding_dim]`: `forward(ids)` gives
/// the rows of Int32 `ids`, shape `[..ids, embedding_dim]`. A repeated id's rows add their
/// gradients into its one row of the table. A [`Module`] with one tensor, `weight`.
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
}

impl Embedding {
    /// A table of `num_embeddings` rows of width `embedding_dim`, drawn from `N(0, 1)` as
    /// PyTorch initialises it.
    pub fn new(num_embeddings: usize, embedding_dim: usize, rng: &mut Rng) -> Result<Embedding> {
        let weight = init::normal(shape![num_embeddings, embedding_dim], 0.0, 1.0, rng)?;
        Ok(Embedding { weight })
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
        Ok(Embedding { weight })
    }

    /// The rows of `ids` (Int32, any shape, each in `0..num_embeddings`): `[..ids, dim]`,
    /// recorded for autograd.
    pub fn forward(&self, ids: &Tensor) -> Result<Tensor> {
        embedding(&self.weight, ids)
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
