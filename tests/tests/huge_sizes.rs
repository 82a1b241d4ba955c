//! No public call aborts the process on a size that cannot be allocated: every op, reader,
//! constructor, traversal and optimizer step, given broadcast inputs of 2^40 elements (one
//! storage slot each), empty inputs with a 2^40 extent, or both, returns `Error::Value` where
//! the result cannot be had, and a value where it can.
//!
//! An abort cannot be caught inside the process, so each probe runs in a child: this test
//! binary run again on the ignored test `probe_in_child`, with the probe's name in
//! `HUGE_SIZES_PROBE` and its address space limited to 4 GiB (so a buffer of a few GiB that the
//! library should not have asked for fails as fast as one of 4 TiB). The parent fails, naming
//! each probe whose child died, hung, or returned something else than its probe expects.

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use autograd_core::{
    grad, no_grad, shape, DType, ErrorKind, GradOptions, Layout, Result, Rng, Shape, Stride, Tensor,
};
use autograd_ops as ops;

/// 2^40: elements no machine holds as f32s (4 TiB).
const H: usize = 1 << 40;

/// A unary op (or reduction) under test.
type Unary = fn(&Tensor) -> Result<Tensor>;
/// A binary op under test.
type Binary = fn(&Tensor, &Tensor) -> Result<Tensor>;

/// What a probe found wrong, if anything.
type Check = std::result::Result<(), Box<dyn std::error::Error>>;

/// `Ok` when `holds`, else the complaint `why`.
fn expect(holds: bool, why: impl Into<String>) -> Check {
    if holds {
        Ok(())
    } else {
        Err(why.into().into())
    }
}

/// A Float32 view of `dims` over one storage slot holding 1.
fn huge(dims: &[usize]) -> Tensor {
    Tensor::scalar(1.0)
        .broadcast_to(dims)
        .expect("a broadcast view")
}

/// A Float32 leaf of `dims` over one storage slot (stride 0 in every mode).
fn huge_leaf(dims: &[usize]) -> Tensor {
    let layout = Layout::new(
        Shape::from(dims.to_vec()),
        Stride::from(vec![0; dims.len()]),
    )
    .expect("a broadcast layout");
    Tensor::scalar(1.0)
        .with_layout_detached(layout, 0)
        .expect("a broadcast leaf")
}

/// A Float32 tensor of `dims` with no element.
fn empty(dims: &[usize]) -> Tensor {
    Tensor::zeros(dims.to_vec(), &DType::Float32).expect("an empty tensor")
}

fn ids(values: &[i32]) -> Tensor {
    Tensor::from_vec(values.to_vec(), shape![values.len()]).expect("ids")
}

/// `r` is `Error::Value`: the size could not be had.
fn value_error<T>(r: Result<T>) -> Check {
    match r {
        Err(e) if e.kind() == ErrorKind::Value => Ok(()),
        Err(e) => Err(format!("an error of kind {:?}, not Value: {e}", e.kind()).into()),
        Ok(_) => Err("a value where none can be allocated".into()),
    }
}

/// `r` is a tensor of extents `dims`.
fn ok_dims(r: Result<Tensor>, dims: &[usize]) -> Check {
    match r {
        Ok(t) if t.dims() == dims => Ok(()),
        Ok(t) => Err(format!("extents {:?}, want {dims:?}", t.dims()).into()),
        Err(e) => Err(format!("an error: {e}").into()),
    }
}

/// Every probe: its name and what it checks.
#[allow(clippy::too_many_lines)]
fn probes() -> Vec<(String, Box<dyn Fn() -> Check>)> {
    let mut p: Vec<(String, Box<dyn Fn() -> Check>)> = Vec::new();
    let mut add = |name: &str, f: Box<dyn Fn() -> Check>| p.push((name.to_string(), f));

    // Display of empty tensors with huge extents, and of a huge broadcast view.
    add(
        "display_empty_with_a_huge_extent",
        Box::new(|| {
            let (plain, alt) = (
                format!("{}", empty(&[0, H])),
                format!("{:#}", empty(&[0, H])),
            );
            expect(
                plain == "[]" && alt.starts_with("tensor([]"),
                format!("{plain:?} / {alt:?}"),
            )
        }),
    );
    add(
        "display_empty_inside",
        Box::new(|| {
            let s = format!("{}", empty(&[2, 0, 1 << 29]));
            expect(s == "[[], []]", s)
        }),
    );
    add(
        "display_huge_broadcast",
        Box::new(|| {
            let s = format!("{}", huge(&[H]));
            expect(s == "[1, 1, 1, ..., 1, 1, 1]", s)
        }),
    );

    // Readers and constructors.
    add(
        "values",
        Box::new(|| value_error(huge(&[H]).values::<f32>())),
    );
    add("scalars", Box::new(|| value_error(huge(&[H]).scalars())));
    add(
        "contiguous",
        Box::new(|| value_error(huge(&[H]).contiguous())),
    );
    add(
        "to_array",
        Box::new(|| value_error(huge(&[H]).to_array::<f32>())),
    );
    add(
        "zeros",
        Box::new(|| value_error(Tensor::zeros(shape![H], &DType::Float32))),
    );
    add(
        "full",
        Box::new(|| value_error(Tensor::full(shape![H, 2], 1.0f32))),
    );
    add(
        "try_offsets",
        Box::new(|| value_error(huge(&[H]).layout().try_offsets())),
    );

    // Unary elementwise ops and casts: huge results fail, empty ones succeed.
    let unary: [(&str, Unary); 19] = [
        ("neg", ops::neg),
        ("abs", ops::abs),
        ("exp", ops::exp),
        ("log", ops::log),
        ("sqrt", ops::sqrt),
        ("rsqrt", ops::rsqrt),
        ("tanh", ops::tanh),
        ("sigmoid", ops::sigmoid),
        ("relu", ops::relu),
        ("gelu", ops::gelu),
        ("gelu_tanh", ops::gelu_tanh),
        ("silu", ops::silu),
        ("sin", ops::sin),
        ("cos", ops::cos),
        ("powf", |a| ops::powf(a, 2.0)),
        ("clamp", |a| ops::clamp(a, 0.0, 1.0)),
        ("to_dtype", |a| ops::to_dtype(a, &DType::Float64)),
        ("mul_scalar", |a| ops::mul_scalar(a, 2.0)),
        ("rdiv_scalar", |a| ops::rdiv_scalar(a, 2.0)),
    ];
    for (name, f) in unary {
        add(
            &format!("{name}_huge"),
            Box::new(move || value_error(f(&huge(&[H, 2])))),
        );
        add(
            &format!("{name}_empty"),
            Box::new(move || ok_dims(f(&empty(&[0, H])), &[0, H])),
        );
    }

    // Binary ops, broadcasting a huge operand against a small one.
    let binary: [(&str, Binary); 12] = [
        ("add", ops::add),
        ("sub", ops::sub),
        ("mul", ops::mul),
        ("div", ops::div),
        ("maximum", ops::maximum),
        ("minimum", ops::minimum),
        ("eq", ops::eq),
        ("ne", ops::ne),
        ("lt", ops::lt),
        ("le", ops::le),
        ("gt", ops::gt),
        ("ge", ops::ge),
    ];
    for (name, f) in binary {
        add(
            &format!("{name}_huge"),
            Box::new(move || value_error(f(&huge(&[H, 1]), &empty(&[2]).add_scalar(1.0)?))),
        );
        add(
            &format!("{name}_empty"),
            Box::new(move || ok_dims(f(&empty(&[0, 1]), &huge(&[1, H])), &[0, H])),
        );
    }
    add(
        "where_cond_huge",
        Box::new(|| {
            // a broadcast Bool mask, so that where_cond itself meets the huge result
            let mask = Tensor::from_vec(vec![true], shape![1])?.broadcast_to(&[H])?;
            value_error(ops::where_cond(&mask, &huge(&[H]), &huge(&[H])))
        }),
    );

    // Reductions whose result is huge, and over empty tensors.
    let reductions: [(&str, Unary); 5] = [
        ("sum_axes", |a| ops::sum_axes(a, &[1], false)),
        ("mean_axes", |a| ops::mean_axes(a, &[1], false)),
        ("max_axes", |a| ops::max_axes(a, &[1], false)),
        ("min_axes", |a| ops::min_axes(a, &[1], false)),
        ("var_axes", |a| ops::var_axes(a, &[1], false, 1)),
    ];
    for (name, f) in reductions {
        add(
            &format!("{name}_huge"),
            Box::new(move || value_error(f(&huge(&[H, 2])))),
        );
        add(
            &format!("{name}_empty"),
            Box::new(move || ok_dims(f(&empty(&[0, H])), &[0])),
        );
    }
    add(
        "sum_empty",
        Box::new(|| ok_dims(ops::sum(&empty(&[0, H])), &[1])),
    );
    add(
        "mean_empty",
        Box::new(|| ok_dims(ops::mean(&empty(&[0, H])), &[1])),
    );
    // argmax/argmin: a huge result cannot be had; indices past Int32 are refused (Value) too
    add(
        "argmax_huge",
        Box::new(|| value_error(ops::argmax(&huge(&[H, 2]), 1, false))),
    );
    add(
        "argmin_huge",
        Box::new(|| value_error(ops::argmin(&huge(&[H, 2]), 1, false))),
    );
    add(
        "argmax_empty",
        Box::new(|| ok_dims(ops::argmax(&empty(&[0, 1 << 20]), 1, false), &[0])),
    );
    add(
        "argmin_empty",
        Box::new(|| ok_dims(ops::argmin(&empty(&[0, 1 << 20]), 1, false), &[0])),
    );

    // Views cost nothing; copies of them fail.
    add(
        "views_of_huge",
        Box::new(|| {
            let v = huge(&[H, 2])
                .transpose(0, 1)?
                .narrow(1, 5, H - 10)?
                .select(0, 1)?
                .unsqueeze(0)?;
            ok_dims(Ok(v.clone()), &[1, H - 10])?;
            ok_dims(ops::reshape(&v, &[H - 10]), &[H - 10])?;
            value_error(v.contiguous())
        }),
    );
    add(
        "unbind_huge",
        Box::new(|| ok_dims(huge(&[2, H]).unbind(0).map(|v| v[1].clone()), &[H])),
    );

    // Indexing and joining.
    add(
        "concat_huge",
        Box::new(|| value_error(ops::concat(&[huge(&[H]), huge(&[H])], 0))),
    );
    add(
        "stack_huge",
        Box::new(|| value_error(ops::stack(&[huge(&[H]), huge(&[H])], 0))),
    );
    add(
        "index_select_huge",
        Box::new(|| value_error(ops::index_select(&huge(&[H, 2]), 1, &ids(&[0])))),
    );
    add(
        "gather_huge",
        Box::new(|| {
            let index = Tensor::from_vec(vec![0i32], shape![1, 1])?.broadcast_to(&[H, 1])?;
            value_error(ops::gather(&huge(&[H, 2]), 1, &index))
        }),
    );
    add(
        "scatter_add_huge",
        Box::new(|| {
            let src = Tensor::from_vec(vec![1.0f32], shape![1, 1])?;
            value_error(ops::scatter_add(
                &huge(&[H, 2]),
                1,
                &Tensor::from_vec(vec![0i32], shape![1, 1])?,
                &src,
            ))
        }),
    );
    add(
        "embedding_huge",
        Box::new(|| value_error(ops::embedding(&huge(&[2, H]), &ids(&[0, 1])))),
    );

    // Products.
    add(
        "matmul_huge",
        Box::new(|| value_error(ops::matmul(&huge(&[H, 1]), &huge(&[1, 2])))),
    );
    add(
        "linear_huge",
        Box::new(|| value_error(ops::linear(&huge(&[H, 1]), &huge(&[2, 1]), None))),
    );

    // Network ops over broadcast rows of 2^40 elements, and over empty batches.
    add(
        "softmax_huge_row",
        Box::new(|| value_error(ops::softmax(&huge(&[1, H]), 1))),
    );
    add(
        "log_softmax_huge_row",
        Box::new(|| value_error(ops::log_softmax(&huge(&[1, H]), 1))),
    );
    add(
        "layer_norm_huge_row",
        Box::new(|| value_error(ops::layer_norm(&huge(&[1, H]), &[H], None, None, 1e-5))),
    );
    add(
        "layer_norm_empty_batch_without_weight",
        Box::new(|| {
            ok_dims(
                ops::layer_norm(&empty(&[0, H]), &[H], None, None, 1e-5),
                &[0, H],
            )
        }),
    );
    add(
        "layer_norm_empty_batch_with_broadcast_weight",
        Box::new(|| {
            let (w, b) = (huge(&[H]), huge(&[H]));
            ok_dims(
                ops::layer_norm(&empty(&[0, H]), &[H], Some(&w), Some(&b), 1e-5),
                &[0, H],
            )
        }),
    );
    add(
        "cross_entropy_huge_row",
        Box::new(|| {
            value_error(ops::cross_entropy(
                &huge(&[1, H]),
                &ids(&[0]),
                ops::CrossEntropyOptions::default(),
            ))
        }),
    );
    add(
        "nll_loss_backward_over_a_huge_row",
        Box::new(|| {
            let x = huge_leaf(&[1, H]);
            let loss = ops::nll_loss(&x, &ids(&[0]), None)?;
            expect(
                loss.values::<f32>()? == [-1.0],
                "nll_loss of a row of ones is -1",
            )?;
            value_error(grad(
                &loss,
                &[&x],
                &Tensor::scalar(1.0),
                GradOptions::default(),
            ))
        }),
    );
    add(
        "dropout_huge",
        Box::new(|| value_error(ops::dropout(&huge(&[H]), 0.5, true, &mut Rng::new(0)))),
    );
    add(
        "mse_loss_empty",
        Box::new(|| ok_dims(ops::mse_loss(&empty(&[0, H]), &empty(&[0, H])), &[1])),
    );
    add(
        "causal_attention_huge",
        Box::new(|| {
            let q = huge(&[1, 1, 1 << 20, 2]);
            value_error(ops::causal_attention(&q, &q, &q, None))
        }),
    );
    add(
        "flash_causal_attention_huge",
        Box::new(|| {
            let q = huge(&[1, 1, 1 << 38, 4]);
            value_error(ops::flash_causal_attention(&q, &q, &q, None))
        }),
    );
    add(
        "embedding_layer_huge_ids",
        Box::new(|| {
            let layer =
                ops::Embedding::from_weight(Tensor::from_vec(vec![1.0f32; 4], shape![2, 2])?)?;
            value_error(layer.forward(&ids(&[1]).broadcast_to(&[H])?))
        }),
    );

    // Convolutions and windows whose geometry overflows: sizes from the options, not the
    // inputs, so each is refused before any kernel computes a product of them.
    let padded = |p: usize| ops::Conv2dOptions::new().padding(ops::Padding::Explicit([p, p]));
    add(
        "unfold_with_padding_past_every_index",
        Box::new(move || {
            // 2^32 windows a side: 2^64 columns
            let x = Tensor::zeros(shape![1, 1, 2, 2], &DType::Float32)?;
            value_error(ops::unfold(&x, [1, 1], &padded((1 << 31) - 1)))
        }),
    );
    add(
        "fold_with_padding_past_every_index",
        Box::new(move || {
            value_error(ops::fold(
                &empty(&[1, 1, 0]),
                [2, 2],
                [1, 1],
                &padded((1 << 31) - 1),
            ))
        }),
    );
    add(
        "fold_of_a_kernel_with_too_many_taps",
        Box::new(|| {
            value_error(ops::fold(
                &empty(&[1, 1, 0]),
                [2, 2],
                [1 << 40, 1 << 40],
                &ops::Conv2dOptions::new(),
            ))
        }),
    );
    add(
        "conv2d_with_padding_past_isize",
        Box::new(move || {
            let x = Tensor::zeros(shape![1, 1, 2, 2], &DType::Float32)?;
            let w = Tensor::zeros(shape![1, 1, 1, 1], &DType::Float32)?;
            value_error(ops::conv2d(&x, &w, None, &padded(1 << 62)))?;
            value_error(ops::conv2d(&x, &w, None, &padded(1 << 63)))
        }),
    );
    add(
        "conv2d_with_a_dilated_same_kernel_past_usize",
        Box::new(|| {
            let x = Tensor::zeros(shape![1, 1, 2, 2], &DType::Float32)?;
            let w = Tensor::zeros(shape![1, 1, 3, 3], &DType::Float32)?;
            let options = ops::Conv2dOptions::new()
                .padding(ops::Padding::Same)
                .dilation([usize::MAX, 1]);
            value_error(ops::conv2d(&x, &w, None, &options))
        }),
    );
    add(
        "conv2d_with_channels_times_groups_past_usize",
        Box::new(|| {
            let x = Tensor::zeros(shape![1, 0, 2, 2], &DType::Float32)?;
            let w = empty(&[0, 1 << 62, 1, 1]);
            value_error(ops::conv2d(
                &x,
                &w,
                None,
                &ops::Conv2dOptions::new().groups(8),
            ))
        }),
    );
    add(
        "conv_transpose2d_with_padding_past_usize",
        Box::new(|| {
            let x = Tensor::zeros(shape![1, 1, 2, 2], &DType::Float32)?;
            let w = Tensor::zeros(shape![1, 1, 1, 1], &DType::Float32)?;
            let big = |o: ops::ConvTranspose2dOptions| ops::conv_transpose2d(&x, &w, None, &o);
            value_error(big(
                ops::ConvTranspose2dOptions::new().padding([usize::MAX, 0])
            ))?;
            value_error(big(ops::ConvTranspose2dOptions::new()
                .stride([usize::MAX, 1])
                .output_padding([1, 0])))
        }),
    );
    add(
        "conv_with_strides_past_every_extent",
        Box::new(|| {
            // one output along the strided axis: a stride of any size never steps
            let w = Tensor::zeros(shape![1, 1, 1, 1], &DType::Float32)?;
            let x = Tensor::ones(shape![1, 1, 4, 4], &DType::Float32)?;
            let tall = ops::Conv2dOptions::new().stride([1 << 62, 1]);
            ok_dims(ops::conv2d(&x, &w, None, &tall), &[1, 1, 1, 4])?;
            let one = Tensor::ones(shape![1, 1, 1, 1], &DType::Float32)?;
            let padded = ops::Conv2dOptions::new()
                .padding(ops::Padding::Explicit([(1 << 32) - 1; 2]))
                .stride([1 << 33; 2]);
            ok_dims(ops::conv2d(&one, &w, None, &padded), &[1, 1, 1, 1])?;
            // a channels-last input read where it lies, too large a plane for a bordered copy
            let nhwc =
                Tensor::ones(shape![1, 200, 200, 4], &DType::Float32)?.permute(&[0, 3, 1, 2])?;
            let w4 = Tensor::ones(shape![1, 4, 1, 1], &DType::Float32)?;
            let wide = ops::Conv2dOptions::new().stride([1, 1 << 62]);
            let y = ops::conv2d(&nhwc, &w4, None, &wide)?;
            ok_dims(Ok(y.clone()), &[1, 1, 200, 1])?;
            expect(
                y.values::<f32>()?.iter().all(|&v| v == 4.0),
                "each output sums four channels of ones",
            )?;
            let input_one_row = Tensor::ones(shape![1, 1, 1, 3], &DType::Float32)?;
            let up = ops::ConvTranspose2dOptions::new().stride([1 << 62, 1]);
            ok_dims(
                ops::conv_transpose2d(&input_one_row, &w, None, &up),
                &[1, 1, 1, 3],
            )
        }),
    );
    add(
        "conv2d_whose_geometry_alone_is_past_isize",
        Box::new(move || {
            // every extent passes on its own; the output's element count does not
            let x = Tensor::zeros(shape![1, 1, 2, 2], &DType::Float32)?;
            let w = Tensor::zeros(shape![1, 1, 1, 1], &DType::Float32)?;
            value_error(ops::conv2d(&x, &w, None, &padded(1 << 31)))
        }),
    );
    add(
        "flash_causal_attention_qkv_with_heads_past_usize",
        Box::new(|| {
            let qkv = Tensor::zeros(shape![1, 1, 3], &DType::Float32)?;
            value_error(ops::flash_causal_attention_qkv(&qkv, usize::MAX / 2, None))
        }),
    );

    // Output sizes chosen by the caller: a result too large is refused before anything is
    // allocated for it, and an empty batch gives an empty result of any size.
    add(
        "pad_past_memory",
        Box::new(|| {
            let a = Tensor::zeros(shape![1, 1], &DType::Float32)?;
            let constant = ops::PadMode::Constant(0.0);
            // the leading axis, the last axis, and extents whose product overflows
            value_error(ops::pad(&a, &[0i64, 0, 1 << 62, 0], constant))?;
            value_error(ops::pad(&a, &[1i64 << 61, 1 << 61], constant))?;
            value_error(ops::pad(&a, &[1i64 << 62, 0, 1 << 62, 0], constant))?;
            // an empty result of any extents is had, and so is its gradient
            let e = empty(&[0, 1]);
            let y = ops::pad(&e, &[1i64 << 40, 0], constant)?;
            ok_dims(Ok(y.clone()), &[0, (1 << 40) + 1])?;
            ok_dims(
                ops::pad(&empty(&[1, 0]), &[0i64, 0, 1 << 40, 0], constant),
                &[(1 << 40) + 1, 0],
            )?;
            ops::sum(&y)?.backward()?;
            ok_dims(e.grad()?.ok_or("no gradient")?.contiguous(), &[0, 1])
        }),
    );
    add(
        "adaptive_avg_pool2d_past_memory",
        Box::new(|| {
            let x = Tensor::zeros(shape![1, 1, 2, 2], &DType::Float32)?;
            value_error(ops::adaptive_avg_pool2d(&x, [usize::MAX, 1]))?;
            value_error(ops::adaptive_avg_pool2d(&x, [H, 1]))?;
            ok_dims(
                ops::adaptive_avg_pool2d(&empty(&[0, 1, 2, 2]), [H, 1]),
                &[0, 1, H, 1],
            )
        }),
    );
    add(
        "interpolate_past_memory",
        Box::new(|| {
            let x = Tensor::zeros(shape![1, 1, 2, 2], &DType::Float32)?;
            let bilinear = ops::Interpolation::Bilinear {
                align_corners: false,
            };
            value_error(ops::interpolate(&x, [usize::MAX, 1], bilinear))?;
            value_error(ops::interpolate(&x, [H, 1], ops::Interpolation::Nearest))?;
            ok_dims(
                ops::interpolate(&empty(&[0, 1, 2, 2]), [H, 1], bilinear),
                &[0, 1, H, 1],
            )
        }),
    );
    add(
        "chunk_of_an_empty_axis_into_too_many_pieces",
        Box::new(|| value_error(empty(&[0]).chunk(usize::MAX, 0))),
    );
    add(
        "index_put_with_broadcast_indices_past_memory",
        Box::new(|| {
            let a = Tensor::zeros(shape![1, 1], &DType::Float32)?;
            let index = |dims: [usize; 2]| {
                Tensor::from_vec(vec![0i64], shape![1, 1]).and_then(|i| i.broadcast_to(&dims))
            };
            let put = |n: usize| {
                ops::index_put(
                    &a,
                    &[index([n, 1])?, index([1, n])?],
                    &Tensor::scalar(1.0),
                    false,
                )
            };
            // 2^62 positions cannot be had; 2^64 cannot be counted
            value_error(put(1 << 31))?;
            value_error(put(1 << 32))
        }),
    );
    add(
        "flip_huge",
        Box::new(|| value_error(ops::flip(&huge(&[H]), &[0]))),
    );
    add(
        "repeat_interleave_huge",
        Box::new(|| {
            value_error(ops::repeat_interleave(&huge(&[H]), 2, 0))?;
            let one = Tensor::from_vec(vec![2i64], shape![1])?;
            value_error(ops::repeat_interleave(&huge(&[H]), &one, 0))
        }),
    );
    add(
        "attention_with_a_mask_of_rows_past_usize",
        Box::new(|| {
            // 8 queries of 2^62 keys: a row mask repeated along the keys has 2^65 entries
            let q = Tensor::zeros(shape![1, 1, 8, 1], &DType::Float32)?;
            let kv = huge(&[1, 1, 1 << 62, 1]);
            let mask = Tensor::from_vec(vec![true], shape![1, 1, 1, 1])?
                .broadcast_to(&[1usize, 1, 8, 1])?;
            let options = ops::AttentionOptions::new().mask(ops::AttentionMask::Attend(mask));
            value_error(ops::scaled_dot_product_attention(&q, &kv, &kv, &options))
        }),
    );
    add(
        "diagonal_at_the_lowest_offset",
        Box::new(|| {
            let a = Tensor::zeros(shape![2, 2], &DType::Float32)?;
            ok_dims(a.diagonal(i64::MIN, 0, 1), &[0])?;
            ok_dims(a.diagonal(i64::MAX, 0, 1), &[0])
        }),
    );
    add(
        "data_loader_prefetching_without_bound",
        Box::new(|| {
            use autograd_ops::data::{DataLoader, TensorDataset};
            let fours = TensorDataset::new(vec![Tensor::zeros(shape![4, 1], &DType::Float32)?])?;
            let loader = DataLoader::new(fours, 2)?.prefetch(usize::MAX);
            let batches = loader.epoch(0)?.collect::<Result<Vec<_>>>()?;
            expect(
                batches.len() == 2,
                format!("{} batches of 4 samples by 2", batches.len()),
            )
        }),
    );

    // Traversals: the gradient of a broadcast leaf of 2^40 positions cannot be had; the
    // failure changes no `.grad` and keeps the graph.
    add(
        "backward_into_a_huge_broadcast_leaf",
        Box::new(|| {
            let x = huge_leaf(&[H]);
            let y = ops::mul_scalar(&x.select(0, 7)?, 3.0)?;
            value_error(y.backward_with(None, false))?;
            expect(x.grad()?.is_none(), "a failed backward wrote .grad")?;
            // the graph was not released: a retry fails the same way, not as released
            value_error(y.backward_with(None, false))
        }),
    );

    // Optimizer state the size of a broadcast parameter.
    add(
        "sgd_momentum_over_a_huge_parameter",
        Box::new(|| {
            let p = huge_leaf(&[H]);
            p.set_grad(Some(huge(&[H])))?;
            // a broadcast parameter is refused before any state is allocated for it
            let config = ops::SgdConfig {
                momentum: 0.9,
                ..Default::default()
            };
            value_error(ops::Sgd::new(vec![p.clone()], config))
        }),
    );
    add(
        "adamw_over_a_huge_parameter",
        Box::new(|| {
            let p = huge_leaf(&[H]);
            p.set_grad(Some(huge(&[H])))?;
            value_error(ops::AdamW::new(
                vec![p.clone()],
                ops::AdamWConfig::default(),
            ))
        }),
    );

    // Mutation of a huge view.
    add(
        "fill_of_a_huge_view_is_an_error",
        Box::new(|| {
            let _off = no_grad();
            match huge(&[H]).fill(2.0) {
                Ok(()) => Err("filled 2^40 aliased positions".into()),
                Err(_) => Ok(()),
            }
        }),
    );
    p
}

/// The child's side: runs the probe `HUGE_SIZES_PROBE` names and reports its verdict on
/// stdout (the parent reads `PROBE ok` or `PROBE failed: …`).
#[test]
#[ignore = "run by every_public_call_survives_huge_and_empty_sizes in a child process"]
fn probe_in_child() {
    let Ok(name) = std::env::var("HUGE_SIZES_PROBE") else {
        return;
    };
    let probes = probes();
    let (_, probe) = probes
        .iter()
        .find(|(n, _)| *n == name)
        .unwrap_or_else(|| panic!("no probe named {name}"));
    match probe() {
        Ok(()) => println!("PROBE ok"),
        Err(why) => println!("PROBE failed: {why}"),
    }
}

/// What became of one probe's child.
fn run_child(name: &str) -> Check {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut child = Command::new("sh")
        .arg("-c")
        .arg("ulimit -v 4194304 && exec \"$0\" \"$@\"")
        .arg(exe)
        .args([
            "probe_in_child",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("HUGE_SIZES_PROBE", name)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start the child: {e}"))?;
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().map_err(|e| e.to_string())? {
            break status;
        }
        if start.elapsed() > Duration::from_secs(120) {
            let _ = child.kill();
            return Err("hung for 120 s".into());
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let mut out = String::new();
    let mut err = String::new();
    if let Some(mut s) = child.stdout.take() {
        let _ = s.read_to_string(&mut out);
    }
    if let Some(mut s) = child.stderr.take() {
        let _ = s.read_to_string(&mut err);
    }
    let verdict = out
        .lines()
        .find_map(|l| l.split_once("PROBE ").map(|(_, v)| v));
    match verdict {
        Some("ok") if status.success() => Ok(()),
        Some(v) if v.starts_with("failed") => Err(v.into()),
        _ => {
            let cause = err
                .lines()
                .find(|l| l.contains("memory allocation") || l.contains("panicked"))
                .or_else(|| err.lines().last())
                .unwrap_or("");
            Err(format!("the child died ({status}): {cause}").into())
        }
    }
}

#[test]
#[cfg(target_os = "linux")]
fn every_public_call_survives_huge_and_empty_sizes() {
    let names: Vec<String> = probes().into_iter().map(|(n, _)| n).collect();
    assert!(names.len() > 100, "the sweep lost probes: {}", names.len());
    let failures: Vec<String> = names
        .iter()
        .filter_map(|n| run_child(n).err().map(|why| format!("{n}: {why}")))
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {} probes failed:\n{}",
        failures.len(),
        names.len(),
        failures.join("\n")
    );
}
