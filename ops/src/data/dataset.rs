//! Datasets and how their samples become batches.

use autograd_core::{ensure, Result, Tensor};

/// A sample type that stacks into a batch along a new leading axis.
pub trait Collate: Sized + Send + 'static {
    /// What a batch of these samples is.
    type Batch: Send + 'static;
    /// Stacks `samples` (at least one) into a batch.
    fn collate(samples: Vec<Self>) -> Result<Self::Batch>;
}

impl Collate for Tensor {
    type Batch = Tensor;
    fn collate(samples: Vec<Tensor>) -> Result<Tensor> {
        Tensor::stack(&samples, 0)
    }
}

/// Samples of several fields (inputs, labels, ...): each field stacked on its own.
impl Collate for Vec<Tensor> {
    type Batch = Vec<Tensor>;
    fn collate(samples: Vec<Vec<Tensor>>) -> Result<Vec<Tensor>> {
        let fields = samples.first().map_or(0, Vec::len);
        ensure!(
            samples.iter().all(|s| s.len() == fields),
            Value,
            "samples of one batch have different numbers of fields"
        );
        (0..fields)
            .map(|f| {
                let field: Vec<Tensor> = samples.iter().map(|s| s[f].clone()).collect();
                Tensor::stack(&field, 0)
            })
            .collect()
    }
}

impl Collate for (Tensor, Tensor) {
    type Batch = (Tensor, Tensor);
    fn collate(samples: Vec<(Tensor, Tensor)>) -> Result<(Tensor, Tensor)> {
        let (a, b): (Vec<Tensor>, Vec<Tensor>) = samples.into_iter().unzip();
        Ok((Tensor::stack(&a, 0)?, Tensor::stack(&b, 0)?))
    }
}

/// Anything a [`DataLoader`](super::DataLoader) can batch: `len` samples, each read by index.
/// Shared with the loader's prefetching thread, so it is `Send + Sync`.
pub trait Dataset: Send + Sync + 'static {
    /// One sample.
    type Sample: Collate;
    /// The number of samples.
    fn len(&self) -> usize;
    /// Whether there are none.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Sample `index` (`index < len()`).
    fn get(&self, index: usize) -> Result<Self::Sample>;
    /// The batch of the samples at `indices` (at least one, each `< len()`): by default each
    /// sample read with [`Dataset::get`] and collated; a dataset that can gather a batch at
    /// once overrides it.
    fn batch(&self, indices: &[usize]) -> Result<<Self::Sample as Collate>::Batch> {
        let samples = indices
            .iter()
            .map(|&i| self.get(i))
            .collect::<Result<Vec<_>>>()?;
        Self::Sample::collate(samples)
    }
}

/// Tensors that share their leading extent, sample `i` being row `i` of each (inputs and
/// labels, say): a batch gathers its rows of every tensor at once.
#[derive(Debug, Clone)]
pub struct TensorDataset {
    fields: Vec<Tensor>,
    len: usize,
}

impl TensorDataset {
    /// A dataset over `fields`, which must be at least one tensor, each of rank at least one,
    /// all of one leading extent (the number of samples).
    pub fn new(fields: Vec<Tensor>) -> Result<TensorDataset> {
        ensure!(
            !fields.is_empty(),
            Value,
            "a TensorDataset needs at least one tensor"
        );
        for (f, t) in fields.iter().enumerate() {
            ensure!(
                !t.dims().is_empty(),
                Value,
                "field {f} of a TensorDataset is a scalar; samples are rows of the leading axis"
            );
        }
        let len = fields[0].dims()[0];
        for (f, t) in fields.iter().enumerate() {
            ensure!(
                t.dims()[0] == len,
                Value,
                "field {f} of a TensorDataset has {} rows, field 0 has {len}",
                t.dims()[0]
            );
        }
        Ok(TensorDataset { fields, len })
    }

    /// The tensors, in the order given.
    pub fn fields(&self) -> &[Tensor] {
        &self.fields
    }
}

impl Dataset for TensorDataset {
    type Sample = Vec<Tensor>;

    fn len(&self) -> usize {
        self.len
    }

    fn get(&self, index: usize) -> Result<Vec<Tensor>> {
        ensure!(
            index < self.len,
            Value,
            "sample {index} of a dataset of {} samples",
            self.len
        );
        self.fields
            .iter()
            .map(|t| t.select(0, index).and_then(|row| row.contiguous()))
            .collect()
    }

    fn batch(&self, indices: &[usize]) -> Result<Vec<Tensor>> {
        for &i in indices {
            ensure!(
                i < self.len,
                Value,
                "sample {i} of a dataset of {} samples",
                self.len
            );
        }
        let index: Vec<i64> = indices.iter().map(|&i| i as i64).collect();
        let n = index.len();
        let index = Tensor::from_vec(index, autograd_core::shape![n])?;
        self.fields
            .iter()
            .map(|t| autograd_core::ops::index_select(t, 0, &index))
            .collect()
    }
}
