//! The resolved shape of one convolution: input and output extents, kernel, stride, padding,
//! dilation and groups, checked once before any kernel runs.

use autograd_core::{bail, ensure, DType, Error, Result, Tensor};

use super::options::Padding;

/// A convolution of an input `[n, c, h, w]` with a weight `[cout, c / groups, kh, kw]` into an
/// output `[n, cout, oh, ow]`; `pad` is the padding before each axis (after it is implied by
/// `oh`, `ow`: positions outside the input read zeros).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Geom {
    pub n: usize,
    pub c: usize,
    pub h: usize,
    pub w: usize,
    pub cout: usize,
    pub kh: usize,
    pub kw: usize,
    pub stride: [usize; 2],
    pub pad: [usize; 2],
    pub dil: [usize; 2],
    pub groups: usize,
    pub oh: usize,
    pub ow: usize,
}

impl autograd_core::Captured for Geom {}

impl Geom {
    /// Kernel taps.
    pub fn k(&self) -> usize {
        self.kh * self.kw
    }
    /// Input channels of a group.
    pub fn cin_g(&self) -> usize {
        self.c / self.groups
    }
    /// Output channels of a group.
    pub fn cout_g(&self) -> usize {
        self.cout / self.groups
    }
    /// Output positions of an image.
    pub fn l(&self) -> usize {
        self.oh * self.ow
    }
    /// Elements of an input image.
    pub fn in_len(&self) -> usize {
        self.c * self.h * self.w
    }
    /// Elements of an output image.
    pub fn out_len(&self) -> usize {
        self.cout * self.l()
    }
    /// Elements of the weight.
    pub fn weight_len(&self) -> usize {
        self.cout * self.cin_g() * self.k()
    }
    /// The input's dims.
    pub fn input_dims(&self) -> [usize; 4] {
        [self.n, self.c, self.h, self.w]
    }
    /// The output's dims.
    pub fn output_dims(&self) -> [usize; 4] {
        [self.n, self.cout, self.oh, self.ow]
    }

    /// `self`, once every size the kernels derive from it fits an `isize` (`Error::Value`
    /// naming `op` otherwise): the input's, output's and columns' element counts, and the
    /// reach of the last window into the padded input. The kernels' counts and signed
    /// coordinates are products and sums of these; a stride enters a product only where an
    /// axis has two outputs or more, and is then below the padded extent.
    pub fn checked(self, op: &str) -> Result<Geom> {
        // with every factor at least 1, every partial product the kernels take fits too
        let product = |xs: &[usize]| xs.iter().try_fold(1usize, |a, &b| a.checked_mul(b.max(1)));
        // the last window's last tap, from the start of the padding
        let reach = |o: usize, stride: usize, k: usize, dil: usize| {
            o.saturating_sub(1)
                .checked_mul(stride)?
                .checked_add(k.saturating_sub(1).checked_mul(dil)?)
        };
        let sizes = [
            product(&[self.n, self.c, self.h, self.w]),
            product(&[self.n, self.cout, self.oh, self.ow]),
            product(&[self.n, self.c, self.kh, self.kw, self.oh, self.ow]),
            reach(self.oh, self.stride[0], self.kh, self.dil[0]),
            reach(self.ow, self.stride[1], self.kw, self.dil[1]),
            self.h.checked_add(self.pad[0]),
            self.w.checked_add(self.pad[1]),
        ];
        ensure!(
            sizes.iter().all(|s| s.is_some_and(|s| isize::try_from(s).is_ok())),
            Value,
            "{op}: sizes too large to index: input {:?}, kernel [{}, {}], stride {:?}, padding {:?}, dilation {:?}, output {:?}",
            self.input_dims(),
            self.kh,
            self.kw,
            self.stride,
            self.pad,
            self.dil,
            self.output_dims()
        );
        Ok(self)
    }
}

/// Refuses a tensor that is not Float32 (`Error::Type`).
pub(crate) fn ensure_f32(op: &str, what: &str, t: &Tensor) -> Result<()> {
    ensure!(
        t.dtype() == &DType::Float32,
        Type,
        "{op}: {what} must be Float32, got {}",
        t.dtype()
    );
    Ok(())
}

/// Refuses a tensor whose rank is not `rank` (`Error::Value`).
pub(crate) fn ensure_rank(op: &str, what: &str, t: &Tensor, rank: usize) -> Result<()> {
    ensure!(
        t.dims().len() == rank,
        Value,
        "{op}: {what} must have rank {rank}, got shape {}",
        t.shape()
    );
    Ok(())
}

/// Refuses a zero stride, dilation or group count (`Error::Value`).
pub(crate) fn ensure_positive(
    op: &str,
    stride: [usize; 2],
    dilation: [usize; 2],
    groups: usize,
) -> Result<()> {
    ensure!(
        stride.iter().all(|&s| s > 0),
        Value,
        "{op}: stride must be positive, got {stride:?}"
    );
    ensure!(
        dilation.iter().all(|&d| d > 0),
        Value,
        "{op}: dilation must be positive, got {dilation:?}"
    );
    ensure!(groups > 0, Value, "{op}: groups must be positive, got 0");
    Ok(())
}

/// The padding before and the total padding of each axis for `padding`, with `Same` refused
/// for a stride above 1 (as PyTorch refuses it).
pub(crate) fn resolve_padding(
    op: &str,
    padding: Padding,
    kernel: [usize; 2],
    stride: [usize; 2],
    dilation: [usize; 2],
) -> Result<([usize; 2], [usize; 2])> {
    let too_large = || {
        Error::Value(format!(
            "{op}: padding {padding:?} of kernel {kernel:?} with dilation {dilation:?} is too large to index"
        ))
    };
    Ok(match padding {
        Padding::Explicit(p) => {
            let total = [p[0].checked_mul(2), p[1].checked_mul(2)];
            let [Some(t0), Some(t1)] = total else {
                return Err(too_large());
            };
            (p, [t0, t1])
        }
        Padding::Valid => ([0, 0], [0, 0]),
        Padding::Same => {
            ensure!(
                stride == [1, 1],
                Value,
                "{op}: padding Same needs stride 1, got {stride:?}"
            );
            let total = [0, 1].map(|a| dilation[a].checked_mul(kernel[a].saturating_sub(1)));
            let [Some(t0), Some(t1)] = total else {
                return Err(too_large());
            };
            ([t0 / 2, t1 / 2], [t0, t1])
        }
    })
}

/// The output's `[height, width]` for an `input` of `[height, width]` under `total_pad`,
/// `kernel`, `stride` and `dilation` per axis (each checked as [`output_extent`]).
pub(crate) fn output_extents(
    op: &str,
    input: [usize; 2],
    total_pad: [usize; 2],
    kernel: [usize; 2],
    (stride, dilation): ([usize; 2], [usize; 2]),
) -> Result<[usize; 2]> {
    let axis = |i: usize, name: &str| {
        output_extent(
            op,
            name,
            input[i],
            total_pad[i],
            kernel[i],
            (stride[i], dilation[i]),
        )
    };
    Ok([axis(0, "height")?, axis(1, "width")?])
}

/// The output extent of one axis: `(input + total padding - span) / stride + 1`, where the
/// kernel's span `dilation (kernel - 1) + 1` must fit the padded input (`Error::Value`, as
/// is a padded input or span too large to index).
pub(crate) fn output_extent(
    op: &str,
    axis: &str,
    input: usize,
    total_pad: usize,
    kernel: usize,
    (stride, dilation): (usize, usize),
) -> Result<usize> {
    ensure!(kernel > 0, Value, "{op}: the kernel's {axis} extent is 0");
    let span = dilation
        .checked_mul(kernel - 1)
        .and_then(|s| s.checked_add(1));
    let padded = input
        .checked_add(total_pad)
        .filter(|&p| isize::try_from(p).is_ok());
    let (Some(span), Some(padded)) = (span, padded) else {
        bail!(
            Value,
            "{op}: the {axis} axis is too large to index: input {input} + padding {total_pad}, kernel {kernel} with dilation {dilation}"
        );
    };
    ensure!(
        span <= padded,
        Value,
        "{op}: the kernel's {axis} span {span} (kernel {kernel}, dilation {dilation}) is larger than the padded input's {padded} ({input} + padding {total_pad})"
    );
    Ok((padded - span) / stride + 1)
}
