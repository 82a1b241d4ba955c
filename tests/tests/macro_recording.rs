//! Recording with `#[differentiable]` ops: the spec's recording scenarios, the VJP's view of
//! saved inputs, captured values, residuals and the output, and the errors that name a
//! macro-defined node's parameters.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use autograd_core::{
    differentiable, is_grad_enabled, no_grad, record, Cotangent, DType, ErrorKind, Operation,
    Result, SavedState, Tensor, VjpCall, Written,
};
use autograd_tests::{grad_vals, map, mul, t, vals, zip};

// ---- ops (plain kernels and `mul` come from the test library) -------------------------------

/// `a * b + c`, with owned tensor parameters.
#[differentiable]
fn fma(a: Tensor, b: &Tensor, c: Tensor) -> Result<Tensor> {
    fn vjp(g: &Tensor, a: &Tensor, b: &Tensor) -> Result<[Option<Tensor>; 3]> {
        Ok([
            Some(zip(g, b, |g, y| g * y)?),
            Some(zip(g, a, |g, x| g * x)?),
            Some(g.clone()),
        ])
    }
    let ab = zip(&a, b, |x, y| x * y)?;
    zip(&ab, &c, |x, y| x + y)
}

/// Execution options of [`scale`]: plain values, so `Captured` (a tensor in them would be a
/// compile error, `ui/macro/options-holding-tensor.rs`, as `options: &Tensor` is,
/// `ui/macro/options-is-tensor.rs`).
struct ScaleOptions {
    shift: f32,
}

impl autograd_core::Captured for ScaleOptions {}

/// `c x + shift`; `c` is captured for the VJP, `options` is read by the forward body only, so
/// it is neither saved nor captured.
#[differentiable]
fn scale(x: &Tensor, c: f32, options: &ScaleOptions) -> Result<Tensor> {
    fn vjp(g: &Tensor, c: f32) -> Result<Option<Tensor>> {
        Ok(Some(map(g, |v| v * c)?))
    }
    map(x, |v| v * c + options.shift)
}

/// `f(x)` for a function `f` with derivative `df`, both taken as `fn` pointers: a plain
/// parameter must be `Captured`, which a closure is not (it could capture a tensor), and a
/// function pointer is.
#[differentiable]
fn apply(x: &Tensor, f: fn(f32) -> f32, df: fn(f32) -> f32) -> Result<Tensor> {
    fn vjp(g: &Tensor, x: &Tensor, df: fn(f32) -> f32) -> Result<Option<Tensor>> {
        Ok(Some(zip(g, x, |g, x| g * df(x))?))
    }
    map(x, f)
}

/// `x w` with per-element weights taken as `&[f32]` (stored as a `Vec<f32>` in the node).
#[differentiable]
fn weigh(x: &Tensor, w: &[f32]) -> Result<Tensor> {
    fn vjp(g: &Tensor, w: &[f32]) -> Result<Option<Tensor>> {
        let v = g
            .values::<f32>()?
            .iter()
            .zip(w)
            .map(|(g, w)| g * w)
            .collect();
        Ok(Some(Tensor::from_vec(v, g.shape().clone())?))
    }
    let v = x
        .values::<f32>()?
        .iter()
        .zip(w)
        .map(|(x, w)| x * w)
        .collect();
    Tensor::from_vec(v, x.shape().clone())
}

/// Rounds to Int32: a result that is not differentiable, so nothing is recorded.
#[differentiable]
fn round_to_int(x: &Tensor) -> Result<Tensor> {
    fn vjp(_g: &Tensor) -> Option<Tensor> {
        None
    }
    let v: Vec<i32> = x
        .values::<f32>()?
        .iter()
        .map(|v| v.round() as i32)
        .collect();
    Tensor::from_vec(v, x.shape().clone())
}

/// Int32 to Float32: differentiable result, but no differentiable input.
#[differentiable]
fn to_float(x: &Tensor) -> Result<Tensor> {
    fn vjp(_g: &Tensor) -> Option<Tensor> {
        None
    }
    let v: Vec<f32> = x.values::<i32>()?.iter().map(|&v| v as f32).collect();
    Tensor::from_vec(v, x.shape().clone())
}

/// `exp(x)`; the VJP reads the forward output.
#[differentiable]
fn exp(x: &Tensor) -> Result<Tensor> {
    fn vjp(g: &Tensor, output: &Tensor) -> Result<Option<Tensor>> {
        Ok(Some(zip(g, output, |g, y| g * y)?))
    }
    map(x, f32::exp)
}

/// `x * 2`, whose forward reuses its residual's storage as scratch after binding it: the VJP
/// must never see the overwritten values.
#[differentiable]
fn double_then_scratch(x: &Tensor) -> Result<Tensor> {
    #[residual]
    let two = x.f32_full_like(2.0)?;
    fn vjp(g: &Tensor, two: &Tensor) -> Result<Option<Tensor>> {
        Ok(Some(zip(g, two, |g, t| g * t)?))
    }
    let y = zip(x, &two, |a, b| a * b)?;
    two.fill(0.0f32)?;
    Ok(y)
}

/// `relu(x) * 2` keeping a tensor residual and a non-tensor residual.
#[differentiable]
fn relu2(x: &Tensor) -> Result<Tensor> {
    #[residual]
    let two = x.f32_full_like(2.0)?;
    #[residual]
    let mask: Vec<bool> = x.values::<f32>()?.iter().map(|&v| v > 0.0).collect();
    fn vjp(g: &Tensor, two: &Tensor, mask: &[bool]) -> Result<Option<Tensor>> {
        let masked: Vec<f32> = g
            .values::<f32>()?
            .iter()
            .zip(mask)
            .map(|(g, &m)| if m { *g } else { 0.0 })
            .collect();
        let masked = Tensor::from_vec(masked, g.shape().clone())?;
        Ok(Some(zip(&masked, two, |g, t| g * t)?))
    }
    let r = map(x, |v| v.max(0.0))?;
    zip(&r, &two, |a, b| a * b)
}

/// `x^2` whose forward body calls another macro-defined op.
#[differentiable]
fn square(x: &Tensor) -> Result<Tensor> {
    fn vjp(g: &Tensor, x: &Tensor) -> Result<Option<Tensor>> {
        Ok(Some(zip(g, x, |g, x| 2.0 * g * x)?))
    }
    mul(x, x)
}

/// The identity, returning its own input handle.
#[differentiable]
fn identity(x: &Tensor) -> Result<Tensor> {
    fn vjp(g: &Tensor) -> Option<Tensor> {
        Some(g.clone())
    }
    Ok(x.clone())
}

/// Returns its second input itself (an Int32 index, say): the result is not differentiable.
#[differentiable]
fn second(x: &Tensor, other: &Tensor) -> Result<Tensor> {
    fn vjp(_g: &Tensor) -> (Option<Tensor>, Option<Tensor>) {
        (None, None)
    }
    let _ = x;
    Ok(other.clone())
}

/// `2 x` with the error type spelled out: `Result<Tensor, Error>` is `Result<Tensor>`.
#[differentiable]
fn double_spelled_out(x: &Tensor) -> std::result::Result<Tensor, autograd_core::Error> {
    fn vjp(g: &Tensor) -> Result<Option<Tensor>> {
        Ok(Some(map(g, |v| 2.0 * v)?))
    }
    map(x, |v| 2.0 * v)
}

/// Generic over the scalar type of a captured parameter.
#[differentiable]
fn scale_by<S: Into<f32> + Copy + Send + Sync + 'static>(x: &Tensor, s: S) -> Result<Tensor> {
    fn vjp(g: &Tensor, s: S) -> Result<Option<Tensor>> {
        let s: f32 = s.into();
        Ok(Some(map(g, |v| v * s)?))
    }
    let s: f32 = s.into();
    map(x, |v| v * s)
}

static VJP_SAW_GRAD_ENABLED: AtomicBool = AtomicBool::new(true);

/// Records whether graph construction was enabled while its VJP ran.
#[differentiable]
fn probe(x: &Tensor) -> Result<Tensor> {
    fn vjp(g: &Tensor) -> Option<Tensor> {
        VJP_SAW_GRAD_ENABLED.store(is_grad_enabled(), Ordering::SeqCst);
        Some(g.clone())
    }
    FORWARD_SAW_GRAD_ENABLED.store(is_grad_enabled(), Ordering::SeqCst);
    map(x, |v| v)
}

static FORWARD_SAW_GRAD_ENABLED: AtomicBool = AtomicBool::new(true);

/// A VJP whose gradient has the wrong shape.
#[differentiable]
fn bad_shape(x: &Tensor) -> Result<Tensor> {
    fn vjp(_g: &Tensor) -> Result<Option<Tensor>> {
        Ok(Some(Tensor::from_vec(vec![1.0f32; 5], vec![5usize])?))
    }
    map(x, |v| v)
}

/// `x` (2 x 3) copied; the VJP returns its gradient in a transposed (column-major) layout.
#[differentiable]
fn copy_transposed_grad(x: &Tensor) -> Result<Tensor> {
    fn vjp(g: &Tensor) -> Result<Option<Tensor>> {
        let dims = g.dims();
        let (rows, cols) = (dims[0], dims[1]);
        let v = g.values::<f32>()?;
        // the same logical values, stored column by column
        let mut col_major = Vec::with_capacity(v.len());
        for j in 0..cols {
            for i in 0..rows {
                col_major.push(v[i * cols + j]);
            }
        }
        let stored = Tensor::from_vec(col_major, vec![cols, rows])?;
        Ok(Some(stored.transpose(0, 1)?))
    }
    map(x, |v| v)
}

/// Sums a broadcast `x` of shape (3,) viewed as (2, 3); the VJP returns a stride-0 gradient.
#[differentiable]
fn broadcast_grad(x: &Tensor) -> Result<Tensor> {
    fn vjp(g: &Tensor) -> Result<Option<Tensor>> {
        // g has the shape of x (2, 3); answer with a broadcast of its first row
        let row = Tensor::from_vec(g.values::<f32>()?[..3].to_vec(), vec![3usize])?;
        Ok(Some(row.broadcast_to(&[2, 3])?))
    }
    map(x, |v| v)
}

// ---- tests ----------------------------------------------------------------------------------

fn same(a: &[Tensor], b: &[&Tensor]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.same_tensor(y))
}

#[test]
fn records_a_node_for_a_differentiable_result() {
    let a = t(&[1.0, 2.0], &[2]);
    let b = t(&[3.0, 4.0], &[2]);
    let y = mul(&a, &b).unwrap();
    let node = y.autograd_ctx().expect("a node is recorded");
    assert_eq!(node.name(), "mul");
    assert!(same(&node.inputs(), &[&a, &b]));
    assert_eq!(node.input_versions().len(), 2);
    assert_eq!(node.input_name(0), Some("a"));
    assert_eq!(node.input_name(1), Some("b"));
    assert_eq!(node.input_name(2), None);
    assert!(node.context().is_empty());
    assert_eq!(vals(&y), [3.0, 8.0]);
}

#[test]
fn records_nothing_for_a_non_differentiable_result() {
    let x = t(&[1.2, 2.7], &[2]);
    let y = round_to_int(&x).unwrap();
    assert_eq!(y.dtype(), &DType::Int32);
    assert!(y.autograd_ctx().is_none());
}

#[test]
fn records_nothing_without_a_differentiable_input() {
    let x = Tensor::from_vec(vec![1i32, 2], vec![2usize]).unwrap();
    let y = to_float(&x).unwrap();
    assert!(y.is_differentiable());
    assert!(y.autograd_ctx().is_none());
}

#[test]
fn records_nothing_under_no_grad() {
    let a = t(&[1.0, 2.0], &[2]);
    let y = {
        let _guard = no_grad();
        mul(&a, &a).unwrap()
    };
    assert!(y.autograd_ctx().is_none());
    assert!(mul(&a, &a).unwrap().autograd_ctx().is_some());
}

#[test]
fn saves_the_positional_tensors_in_order() {
    let (a, b, c) = (t(&[1.0], &[1]), t(&[2.0], &[1]), t(&[3.0], &[1]));
    let y = fma(a.clone(), &b, c.clone()).unwrap();
    let node = y.autograd_ctx().unwrap();
    assert!(same(&node.inputs(), &[&a, &b, &c]));
    assert_eq!(node.input_name(2), Some("c"));
    y.backward().unwrap();
    assert_eq!(grad_vals(&a), Some(vec![2.0]));
    assert_eq!(grad_vals(&b), Some(vec![1.0]));
    assert_eq!(grad_vals(&c), Some(vec![1.0]));
}

#[test]
fn saves_a_tensor_passed_twice_twice() {
    let a = t(&[3.0], &[1]);
    let y = mul(&a, &a).unwrap();
    let node = y.autograd_ctx().unwrap();
    assert!(same(&node.inputs(), &[&a, &a]));
    assert_eq!(node.input_versions().len(), 2);
    y.backward().unwrap();
    assert_eq!(grad_vals(&a), Some(vec![6.0]));
}

#[test]
fn does_not_save_non_tensor_arguments_or_options() {
    let x = t(&[1.0, -2.0], &[2]);
    let y = scale(&x, 3.0, &ScaleOptions { shift: 0.5 }).unwrap();
    assert_eq!(vals(&y), vec![3.5, -5.5]);
    let node = y.autograd_ctx().unwrap();
    assert!(same(&node.inputs(), &[&x]));
    assert_eq!(node.input_versions().len(), 1);
    assert!(node.context().is_empty());
    y.backward_with(Some(&t(&[1.0, 2.0], &[2])), false).unwrap();
    assert_eq!(grad_vals(&x), Some(vec![3.0, 6.0]));
}

#[test]
fn borrowed_captured_parameters_are_owned_by_the_node() {
    let x = t(&[1.0, 1.0, 1.0], &[3]);
    let y = {
        let w = vec![1.0f32, 2.0, 3.0];
        weigh(&x, &w).unwrap()
    }; // `w` is gone; the node kept its own copy
    y.backward_with(Some(&t(&[1.0, 1.0, 1.0], &[3])), false)
        .unwrap();
    assert_eq!(grad_vals(&x), Some(vec![1.0, 2.0, 3.0]));
}

#[test]
fn function_pointers_are_plain_parameters() {
    let x = t(&[1.0, 3.0], &[2]);
    let y = apply(&x, |v| v * v, |v| 2.0 * v).unwrap();
    assert_eq!(vals(&y), vec![1.0, 9.0]);
    assert!(same(&y.autograd_ctx().unwrap().inputs(), &[&x]));
    y.backward_with(Some(&t(&[1.0, 0.5], &[2])), false).unwrap();
    assert_eq!(grad_vals(&x), Some(vec![2.0, 3.0]));
}

#[test]
fn generic_captured_parameters() {
    let x = t(&[1.0, 2.0], &[2]);
    let y = scale_by(&x, 2.0f32).unwrap();
    y.backward_with(Some(&t(&[1.0, 1.0], &[2])), false).unwrap();
    assert_eq!(grad_vals(&x), Some(vec![2.0, 2.0]));
    let z = scale_by(&x, 3u8).unwrap();
    assert_eq!(vals(&z), [3.0, 6.0]);
}

#[test]
fn the_vjp_reads_the_output_and_residuals() {
    let x = t(&[0.0, 1.0], &[2]);
    let y = exp(&x).unwrap();
    assert_eq!(y.autograd_ctx().unwrap().context().len(), 1);
    y.backward_with(Some(&t(&[1.0, 1.0], &[2])), false).unwrap();
    let g = grad_vals(&x).unwrap();
    assert!((g[0] - 1.0).abs() < 1e-6 && (g[1] - 1f32.exp()).abs() < 1e-5);

    let x = t(&[-1.0, 2.0], &[2]);
    let y = relu2(&x).unwrap();
    assert_eq!(vals(&y), [0.0, 4.0]);
    assert_eq!(y.autograd_ctx().unwrap().context().len(), 1); // the tensor residual
    y.backward_with(Some(&t(&[1.0, 1.0], &[2])), false).unwrap();
    assert_eq!(grad_vals(&x), Some(vec![0.0, 2.0]));
}

#[test]
fn the_node_does_not_own_its_result() {
    let x = t(&[0.5], &[1]);
    let y = exp(&x).unwrap();
    // the kept output is an alias, not the result tensor itself
    assert_result_alone_owns_its_node(y);
}

#[test]
fn forward_and_vjp_run_with_graph_construction_disabled() {
    let x = t(&[1.0], &[1]);
    let y = probe(&x).unwrap();
    assert!(!FORWARD_SAW_GRAD_ENABLED.load(Ordering::SeqCst));
    // called directly, outside any traversal
    y.autograd_ctx()
        .unwrap()
        .backward(&t(&[1.0], &[1]))
        .unwrap();
    assert!(!VJP_SAW_GRAD_ENABLED.load(Ordering::SeqCst));
    assert!(is_grad_enabled());

    // ops called inside a forward body record nothing of their own
    let z = square(&x).unwrap();
    let node = z.autograd_ctx().unwrap();
    assert_eq!(node.name(), "square");
    assert!(same(&node.inputs(), &[&x]));
}

#[test]
fn a_forward_returning_its_input_gets_a_fresh_result() {
    let x = t(&[1.0, 2.0], &[2]);
    let y = identity(&x).unwrap();
    assert!(!y.same_tensor(&x));
    assert!(x.autograd_ctx().is_none(), "the input stays a leaf");
    assert_eq!(y.autograd_ctx().unwrap().name(), "identity");
    y.backward_with(Some(&t(&[1.0, 1.0], &[2])), false).unwrap();
    assert_eq!(grad_vals(&x), Some(vec![1.0, 1.0]));
}

#[test]
fn every_path_returns_a_fresh_handle_without_a_node() {
    let x = t(&[1.0, 2.0], &[2]);
    let y = exp(&x).unwrap();
    // under no_grad: nothing recorded, and the input's node is not handed back either
    let z = {
        let _guard = no_grad();
        identity(&y).unwrap()
    };
    assert!(!z.same_tensor(&y));
    assert!(z.autograd_ctx().is_none());
    assert_eq!(vals(&z), vals(&y));
    assert!(y.autograd_ctx().is_some(), "the input keeps its node");

    // no differentiable input
    let i = Tensor::from_vec(vec![1i32, 2], vec![2usize]).unwrap();
    let j = second(&i, &i).unwrap();
    assert!(!j.same_tensor(&i));
    assert!(j.autograd_ctx().is_none());

    // a differentiable input but a non-differentiable result
    let j = second(&y, &i).unwrap();
    assert!(!j.same_tensor(&i));
    assert!(j.autograd_ctx().is_none());
}

#[test]
fn a_forward_may_spell_out_the_error_type() {
    let x = t(&[1.0], &[1]);
    let y = double_spelled_out(&x).unwrap();
    y.backward().unwrap();
    assert_eq!(grad_vals(&x), Some(vec![2.0]));
}

#[test]
fn errors_name_the_parameter_and_the_call_site() {
    let a = t(&[1.0], &[1]);
    let b = t(&[2.0], &[1]);
    let y = mul(&a, &b).unwrap();
    b.set(&[0], 5.0f32).unwrap();
    let e = y.backward().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Runtime);
    assert!(e.message().contains("input 1 (`b`) of mul"), "{e}");
    assert!(e.message().contains("macro_recording.rs"), "{e}");
    assert_eq!(grad_vals(&a), None);
}

#[test]
fn a_gradient_of_the_wrong_shape_is_a_value_error() {
    let x = t(&[1.0, 2.0], &[2]);
    let e = bad_shape(&x)
        .unwrap()
        .backward_with(Some(&t(&[1.0, 1.0], &[2])), false)
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Value);
    assert!(e.message().contains("input 0 (`x`) of bad_shape"), "{e}");
}

#[test]
fn a_cotangent_of_the_wrong_shape_is_a_value_error() {
    let x = t(&[1.0, 2.0], &[2]);
    let y = mul(&x, &x).unwrap();
    let e = y
        .autograd_ctx()
        .unwrap()
        .backward(&t(&[1.0, 2.0, 3.0], &[3]))
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Value);
    assert!(e.message().contains("cotangent of mul"), "{e}");
}

/// Backward of `y` (a function of `x`, two elements) fails with the in-place-modification
/// error naming `what`, and `x.grad` stays unset.
fn refused_as_modified(x: &Tensor, y: &Tensor, what: &str) {
    let e = y
        .backward_with(Some(&t(&[1.0, 1.0], &[2])), false)
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Runtime);
    assert!(
        e.message()
            .contains(&format!("in-place modification of {what}")),
        "{e}"
    );
    assert_eq!(grad_vals(x), None);
}

#[test]
fn a_modified_residual_is_an_error_not_a_wrong_gradient() {
    let x = t(&[1.0, 2.0], &[2]);
    let y = exp(&x).unwrap();
    y.set(&[0], 0.0f32).unwrap(); // the output the VJP would read
    refused_as_modified(&x, &y, "residual `output` of exp");

    let x = t(&[1.0, 2.0], &[2]);
    let y = relu2(&x).unwrap();
    let node = y.autograd_ctx().unwrap();
    node.context()[0].fill(7.0f32).unwrap();
    let e = y
        .backward_with(Some(&t(&[1.0, 1.0], &[2])), false)
        .unwrap_err();
    assert!(e.message().contains("residual `two` of relu2"), "{e}");
}

#[test]
fn released_nodes_are_refused() {
    let x = t(&[1.0], &[1]);
    let y = exp(&x).unwrap();
    y.backward().unwrap();
    let node = y.autograd_ctx().unwrap();
    assert!(node.is_released());
    assert!(node.context().is_empty() && node.inputs().is_empty());
    let e = y.backward().unwrap_err();
    assert!(e.message().contains("retain_graph=True"), "{e}");
}

#[test]
fn gradients_in_another_layout_are_laid_out_like_their_input() {
    let x = t(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]);
    let y = copy_transposed_grad(&x).unwrap();
    let g = t(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]);
    y.backward_with(Some(&g), false).unwrap();
    let gx = x.grad().unwrap().unwrap();
    assert_eq!(gx.layout(), x.layout());
    assert_eq!(vals(&gx), [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);

    // a broadcast input receives a non-injective gradient: re-laid out, then folded
    let base = t(&[1.0, 2.0, 3.0], &[3]);
    let xb = base.broadcast_to(&[2, 3]).unwrap().detach(); // a broadcast leaf
    let y = broadcast_grad(&xb).unwrap();
    y.backward_with(Some(&g), false).unwrap();
    // per-slot sums (1+1, 2+2, 3+3) replicated at every position of the broadcast target
    assert_eq!(
        vals(&xb.grad().unwrap().unwrap()),
        [2.0, 4.0, 6.0, 2.0, 4.0, 6.0]
    );
}

/// The engine's entry point (`vjp`) hands the gradient back as the VJP returned it, saying so,
/// and the engine lays it out; the other entry points lay it out themselves. Either way the
/// input gets its layout.
#[test]
fn every_entry_point_lays_a_gradient_out_alike() {
    let x = t(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]);
    let y = copy_transposed_grad(&x).unwrap();
    let g = t(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]);
    let node = y.autograd_ctx().unwrap();
    let direct = node.backward(&g).unwrap()[0].clone().unwrap();
    assert_eq!(direct.layout(), x.layout());
    let needed = node.backward_needed(&g, &[true]).unwrap()[0]
        .clone()
        .unwrap();
    assert_eq!(needed.layout(), x.layout());
    let mut out = Vec::new();
    node.backward_into(g.clone(), &[true], &mut out).unwrap();
    let into = out[0].clone().unwrap();
    assert_eq!(into.layout(), x.layout());
    let written = node
        .vjp(VjpCall::new(Cotangent::One(g.clone()), &[true], &mut out))
        .unwrap();
    assert_eq!(written, Written::Shaped);
    let returned = out[0].clone().unwrap();
    assert_ne!(returned.layout(), x.layout(), "as the VJP returned it");
    for other in [&direct, &needed, &into, &returned] {
        assert_eq!(vals(other), vals(&g));
    }
    let written = node
        .vjp(VjpCall::new(Cotangent::One(g.clone()), &[false], &mut out))
        .unwrap();
    assert_eq!(written, Written::Shaped);
    assert!(out[0].is_none(), "an unwanted gradient is dropped");
    y.backward_with(Some(&g), false).unwrap();
    assert_eq!(x.grad().unwrap().unwrap().layout(), x.layout());
}

/// A hand-written op whose backward returns one gradient for two inputs.
struct WrongCount {
    saved: SavedState,
}

impl Operation for WrongCount {
    fn name(&self) -> &'static str {
        "wrong_count"
    }
    fn saved(&self) -> &SavedState {
        &self.saved
    }
    fn backward(&self, g: &Tensor) -> Result<Vec<Option<Tensor>>> {
        Ok(vec![Some(g.clone())])
    }
}

#[test]
fn a_wrong_count_from_a_hand_written_operation_is_still_a_value_error() {
    let a = t(&[1.0], &[1]);
    let b = t(&[2.0], &[1]);
    let y = record(t(&[3.0], &[1]), &[&a, &b], Vec::new(), |saved| WrongCount {
        saved,
    });
    let e = y.backward().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Value);
    assert_eq!(grad_vals(&a), None);
}

static CALLS: AtomicUsize = AtomicUsize::new(0);

/// Counts backward calls by the length of a captured `&str` (stored as a `String`).
#[differentiable]
fn counted(x: &Tensor, tag: &str) -> Result<Tensor> {
    fn vjp(g: &Tensor, tag: &str) -> Option<Tensor> {
        CALLS.fetch_add(tag.len(), Ordering::SeqCst);
        Some(g.clone())
    }
    map(x, |v| v)
}

#[test]
fn captured_parameters_can_be_taken_by_reference_in_the_vjp() {
    let x = t(&[1.0], &[1]);
    let before = CALLS.load(Ordering::SeqCst);
    let y = {
        let tag = String::from("fives");
        counted(&x, &tag).unwrap()
    };
    y.backward().unwrap();
    assert_eq!(CALLS.load(Ordering::SeqCst) - before, 5);
}

/// `x + 1`, returning the very tensor it also keeps as a residual.
#[differentiable]
fn inc_kept(x: &Tensor) -> Result<Tensor> {
    #[residual]
    let y = map(x, |v| v + 1.0)?;
    fn vjp(g: &Tensor, y: &Tensor) -> Result<Option<Tensor>> {
        let _ = y;
        Ok(Some(g.clone()))
    }
    Ok(y)
}

/// Returns early, before computing its residual, for an empty input.
#[differentiable]
fn early(x: &Tensor) -> Result<Tensor> {
    if x.size() == 0 {
        return Ok(x.clone());
    }
    #[residual]
    let y = map(x, |v| v)?;
    fn vjp(g: &Tensor, y: &Tensor) -> Result<Option<Tensor>> {
        let _ = y;
        Ok(Some(g.clone()))
    }
    Ok(y)
}

#[test]
fn a_result_that_is_also_a_residual_does_not_make_a_cycle() {
    let x = t(&[1.0], &[1]);
    let y = inc_kept(&x).unwrap();
    assert_result_alone_owns_its_node(y);
}

/// The node keeps its output only as an alias (never the result itself), so dropping the
/// result frees the node: no reference cycle.
fn assert_result_alone_owns_its_node(y: Tensor) {
    let node = y.autograd_ctx().unwrap();
    assert!(!node.context()[0].same_tensor(&y));
    let weak = Arc::downgrade(&node);
    drop((node, y));
    assert!(
        weak.upgrade().is_none(),
        "dropping the result frees its node"
    );
}

#[test]
fn a_forward_that_skips_its_residual_is_a_runtime_error() {
    let x = Tensor::from_vec(Vec::<f32>::new(), vec![0usize]).unwrap();
    let e = early(&x).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Runtime);
    assert!(e.message().contains("residual `y`"), "{e}");
    assert!(early(&t(&[1.0], &[1])).unwrap().autograd_ctx().is_some());
}

/// Options the VJP reads: stored in the node, so they promise to hold no tensor.
#[derive(Debug, Clone)]
struct Clip {
    lo: f32,
    hi: f32,
}

impl autograd_core::Captured for Clip {}

/// `clamp(x, lo, hi)`; the VJP reads the options and, as `_x`, a parameter it does not use
/// (the form rustc's unused-variable hint suggests).
#[differentiable]
fn clip(x: &Tensor, clip: &Clip) -> Result<Tensor> {
    #[residual]
    let inside: Vec<bool> = x
        .values::<f32>()?
        .iter()
        .map(|v| (clip.lo..=clip.hi).contains(v))
        .collect();
    fn vjp(g: &Tensor, _x: &Tensor, _clip: Clip, inside: &[bool]) -> Result<Option<Tensor>> {
        let d = g
            .values::<f32>()?
            .iter()
            .zip(inside)
            .map(|(g, &i)| if i { *g } else { 0.0 })
            .collect();
        Ok(Some(g.f32_like(d)?))
    }
    map(x, |v| v.clamp(clip.lo, clip.hi))
}

#[test]
fn an_underscored_vjp_parameter_names_the_forward_value() {
    let x = t(&[-2.0, 0.5, 3.0], &[3]);
    let y = clip(&x, &Clip { lo: -1.0, hi: 1.0 }).unwrap();
    assert_eq!(vals(&y), [-1.0, 0.5, 1.0]);
    y.backward_with(Some(&t(&[1.0, 1.0, 1.0], &[3])), false)
        .unwrap();
    assert_eq!(grad_vals(&x), Some(vec![0.0, 1.0, 0.0]));
}

#[test]
fn a_residual_the_forward_body_overwrites_after_binding_is_an_error_not_a_wrong_gradient() {
    let x = t(&[1.0, 2.0], &[2]);
    let y = double_then_scratch(&x).unwrap();
    assert_eq!(vals(&y), vec![2.0, 4.0]);
    refused_as_modified(&x, &y, "residual `two` of double_then_scratch");
}

/// A parameter named like the guard the generated forward holds.
#[differentiable]
fn labelled(x: &Tensor, __guard: &str) -> Result<Tensor> {
    fn vjp(g: &Tensor) -> Result<Option<Tensor>> {
        Ok(Some(g.clone()))
    }
    assert_eq!(__guard, "label");
    map(x, |v| v)
}

#[test]
fn a_parameter_named_like_a_generated_local_is_the_caller_s_value() {
    let x = t(&[1.0, 2.0], &[2]);
    assert_eq!(vals(&labelled(&x, "label").unwrap()), vec![1.0, 2.0]);
}
