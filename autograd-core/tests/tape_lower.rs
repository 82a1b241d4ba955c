//! Lowering a recorded tensor graph to a `Tape<Tensor>`, with two hand-written operations
//! (the op library depends on this crate; the property test against the engine over the op
//! library lives in the tests crate).

use autograd_core::tape::Tape;
use autograd_core::{
    grad, record, ErrorKind, GradOptions, Operation, Result, SavedState, Shape, Tensor,
};

struct Scale {
    saved: SavedState,
    c: f32,
}

impl Operation for Scale {
    fn name(&self) -> &'static str {
        "scale"
    }
    fn saved(&self) -> &SavedState {
        &self.saved
    }
    // d(c a) = c g da
    fn backward(&self, g: &Tensor) -> Result<Vec<Option<Tensor>>> {
        let a = self.saved.with("scale", |s| s.input(0).clone())?;
        let c = self.c;
        Ok(vec![Some(a.f32_like(
            g.values::<f32>()?.iter().map(|v| v * c).collect(),
        )?)])
    }
}

fn scale(a: &Tensor, c: f32) -> Tensor {
    let values = a.values::<f32>().unwrap().iter().map(|v| v * c).collect();
    let out = Tensor::from_vec(values, a.shape().clone()).unwrap();
    record(out, &[a], Vec::new(), |saved| Scale { saved, c })
}

struct Mul {
    saved: SavedState,
}

impl Operation for Mul {
    fn name(&self) -> &'static str {
        "mul"
    }
    fn saved(&self) -> &SavedState {
        &self.saved
    }
    // d(a b) = g b da + g a db
    fn backward(&self, g: &Tensor) -> Result<Vec<Option<Tensor>>> {
        let (a, b) = self
            .saved
            .with("mul", |s| (s.input(0).clone(), s.input(1).clone()))?;
        let gv = g.values::<f32>()?;
        let (av, bv) = (a.values::<f32>()?, b.values::<f32>()?);
        let ga = gv.iter().zip(&bv).map(|(g, b)| g * b).collect();
        let gb = gv.iter().zip(&av).map(|(g, a)| g * a).collect();
        Ok(vec![Some(a.f32_like(ga)?), Some(b.f32_like(gb)?)])
    }
}

fn mul(a: &Tensor, b: &Tensor) -> Tensor {
    let (av, bv) = (a.values::<f32>().unwrap(), b.values::<f32>().unwrap());
    let out = Tensor::from_vec(
        av.iter().zip(&bv).map(|(x, y)| x * y).collect::<Vec<f32>>(),
        a.shape().clone(),
    )
    .unwrap();
    record(out, &[a, b], Vec::new(), |saved| Mul { saved })
}

fn t(values: &[f32]) -> Tensor {
    Tensor::from_vec(values.to_vec(), Shape::from(&[values.len()][..])).unwrap()
}

fn vals(t: &Tensor) -> Vec<f32> {
    t.values::<f32>().unwrap()
}

fn retained() -> GradOptions {
    GradOptions {
        retain_graph: true,
        ..GradOptions::default()
    }
}

#[test]
fn a_leaf_lowers_to_one_node() {
    let x = t(&[1.0, 2.0]);
    let lowered = Tape::lower(&x).unwrap();
    assert_eq!(lowered.tape().size(), 1);
    assert_eq!(lowered.output(), 0);
    assert_eq!(lowered.id_of(&x), Some(0));
    let g = lowered.backward_all(&t(&[3.0, 4.0])).unwrap();
    assert_eq!(vals(&g[0]), vec![3.0, 4.0]);
}

#[test]
fn structure_of_a_lowered_diamond() {
    // h = 2x; y = h * (h * w): h is shared, x and w are leaves.
    let x = t(&[1.0, 2.0]);
    let w = t(&[3.0, -1.0]);
    let h = scale(&x, 2.0);
    let hw = mul(&h, &w);
    let y = mul(&h, &hw);
    let lowered = Tape::lower(&y).unwrap();
    let tape = lowered.tape();
    assert_eq!(tape.size(), 5);
    assert_eq!(lowered.output(), 4);
    let (ix, iw, ih, ihw) = (
        lowered.id_of(&x).unwrap(),
        lowered.id_of(&w).unwrap(),
        lowered.id_of(&h).unwrap(),
        lowered.id_of(&hw).unwrap(),
    );
    assert_eq!(lowered.id_of(&y), Some(4));
    assert!(lowered.id_of(&t(&[0.0])).is_none());
    for leaf in [ix, iw] {
        let n = tape.node(leaf).unwrap();
        assert!(n.parents.is_empty() && n.name.is_none() && !n.owns_value && n.requires_grad);
    }
    assert_eq!(tape.node(ih).unwrap().name.as_deref(), Some("scale"));
    assert_eq!(tape.node(ih).unwrap().parents, vec![ix]);
    assert_eq!(tape.node(ihw).unwrap().parents, vec![ih, iw]);
    assert_eq!(tape.node(4).unwrap().parents, vec![ih, ihw]);
    assert!(tape.node(4).unwrap().owns_value);
    for (id, node) in tape.nodes().iter().enumerate() {
        assert!(node.parents.iter().all(|&p| p < id));
    }
    assert!(vals(tape.value(4).unwrap()) == vals(&y));
}

#[test]
fn lowered_gradients_match_the_engine() {
    let x = t(&[1.0, 2.0, -0.5]);
    let w = t(&[3.0, -1.0, 0.25]);
    let unused = t(&[9.0, 9.0, 9.0]);
    let h = scale(&x, 2.0);
    let y = mul(&mul(&h, &w), &scale(&h, -1.5));
    let _z = mul(&unused, &x); // a consumer of x that y does not reach
    let seed = t(&[1.0, 0.5, -2.0]);
    let lowered = Tape::lower(&y).unwrap();
    let all = lowered.backward_all(&seed).unwrap();
    let engine = grad(&y, &[&x, &w, &h], &seed, retained()).unwrap();
    for (tensor, expected) in [&x, &w, &h].iter().zip(&engine) {
        let id = lowered.id_of(tensor).unwrap();
        assert_eq!(vals(&all[id]), vals(expected.as_ref().unwrap()));
    }
    assert!(lowered.id_of(&unused).is_none());
    // By hand: y = -1.5 h^2 w with h = 2x, i.e. -6 x^2 w, so dy/dx = -12 x w (times the seed).
    let by_hand: Vec<f32> = [1.0f32, 2.0, -0.5]
        .iter()
        .zip([3.0f32, -1.0, 0.25])
        .zip([1.0f32, 0.5, -2.0])
        .map(|((x, w), s)| -12.0 * x * w * s)
        .collect();
    assert_eq!(vals(&all[lowered.id_of(&x).unwrap()]), by_hand);
}

#[test]
fn non_differentiable_leaves_get_no_gradient() {
    // An Int32 leaf saved as an input: it does not require a gradient.
    let x = t(&[1.0, 2.0]);
    let k = Tensor::from_vec(vec![1i32, 2], Shape::from(&[2usize][..])).unwrap();
    let y = record(t(&[0.0, 0.0]), &[&x, &k], Vec::new(), |saved| ScaleBy {
        saved,
    });
    let lowered = Tape::lower(&y).unwrap();
    let ik = lowered.id_of(&k).unwrap();
    assert!(!lowered.tape().node(ik).unwrap().requires_grad);
    // the sweep gives x its gradient and k nothing
    let all = lowered.backward_all(&t(&[1.0, 1.0])).unwrap();
    assert_eq!(vals(&all[lowered.id_of(&x).unwrap()]), vec![1.0, 2.0]);
    assert_eq!(vals(&all[ik]), vec![0.0, 0.0]);
}

/// `x * k` for a Float32 `x` and an Int32 `k`: a gradient only for `x`.
struct ScaleBy {
    saved: SavedState,
}

impl Operation for ScaleBy {
    fn name(&self) -> &'static str {
        "scale_by"
    }
    fn saved(&self) -> &SavedState {
        &self.saved
    }
    fn backward(&self, g: &Tensor) -> Result<Vec<Option<Tensor>>> {
        let (x, k) = self
            .saved
            .with("scale_by", |s| (s.input(0).clone(), s.input(1).clone()))?;
        let gv = g.values::<f32>()?;
        let kv = k.values::<i32>()?;
        let gx = gv.iter().zip(&kv).map(|(g, k)| g * *k as f32).collect();
        Ok(vec![Some(x.f32_like(gx)?), None])
    }
}

#[test]
fn a_deep_chain_lowers_without_recursion() {
    let n = 100_000;
    let x = t(&[1.5]);
    let mut y = x.clone();
    for _ in 0..n {
        y = scale(&y, 1.0);
    }
    let lowered = Tape::lower(&y).unwrap();
    assert_eq!(lowered.tape().size(), n + 1);
    let all = lowered.backward_all(&t(&[2.0])).unwrap();
    assert_eq!(vals(&all[lowered.id_of(&x).unwrap()]), vec![2.0]);
    drop(lowered);
    drop(y);
}

#[test]
fn a_released_graph_is_an_error() {
    let x = t(&[1.0, 2.0]);
    let y = scale(&x, 3.0);
    let lowered = Tape::lower(&y).unwrap();
    // The engine releases the graph; the lowered tape's VJP now reports it.
    grad(&y, &[&x], &t(&[1.0, 1.0]), GradOptions::default()).unwrap();
    let e = lowered.backward_all(&t(&[1.0, 1.0])).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Runtime);
    assert!(e.message().contains("retain_graph"), "{e}");
    assert_eq!(Tape::lower(&y).unwrap_err().kind(), ErrorKind::Runtime);
}

#[test]
fn an_in_place_change_is_an_error() {
    let x = t(&[1.0, 2.0]);
    let w = t(&[3.0, 4.0]);
    let y = mul(&x, &w);
    let lowered = Tape::lower(&y).unwrap();
    w.set(&[0], 5.0f32).unwrap();
    let e = lowered.backward_all(&t(&[1.0, 1.0])).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Runtime);
    assert!(e.message().contains("in-place"), "{e}");
}

#[test]
fn a_bad_seed_is_an_error() {
    let x = t(&[1.0, 2.0]);
    let y = scale(&x, 3.0);
    let lowered = Tape::lower(&y).unwrap();
    assert_eq!(
        lowered
            .backward_all(&t(&[1.0, 1.0, 1.0]))
            .unwrap_err()
            .kind(),
        ErrorKind::Value
    );
    let (tape, out) = lowered.into_parts();
    assert_eq!(
        tape.backward_dense_all(out, t(&[1.0])).unwrap_err().kind(),
        ErrorKind::Value
    );
}

#[test]
fn backward_all_refuses_an_output_the_engine_refuses() {
    let seed = t(&[5.0, 7.0]);
    let x64 = Tensor::from_vec(vec![1.0f64, 2.0], Shape::from(&[2][..])).unwrap();
    let e = Tape::lower(&x64).unwrap().backward_all(&seed).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Runtime);
    assert_eq!(
        grad(&x64, &[], &seed, GradOptions::default())
            .unwrap_err()
            .kind(),
        ErrorKind::Runtime
    );
    let pieces = Tensor::from_subtensors(&[
        Tensor::from_vec(vec![1.0f32], Shape::from(&[1][..])).unwrap(),
        Tensor::from_vec(vec![2.0f32], Shape::from(&[1][..])).unwrap(),
    ])
    .unwrap();
    let e = Tape::lower(&pieces)
        .unwrap()
        .backward_all(&seed)
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotImplemented);
}

/// `1 / a`, whose VJP `-g / a^2` is NaN at `a = 0` even for `g = 0`.
struct Recip {
    saved: SavedState,
}

impl Operation for Recip {
    fn name(&self) -> &'static str {
        "recip"
    }
    fn saved(&self) -> &SavedState {
        &self.saved
    }
    fn backward(&self, g: &Tensor) -> Result<Vec<Option<Tensor>>> {
        let a = self.saved.with("recip", |s| s.input(0).clone())?;
        let (g, a) = (g.values::<f32>()?, a.values::<f32>()?);
        let d = g.iter().zip(&a).map(|(g, a)| -g / (a * a)).collect();
        Ok(vec![Some(Tensor::from_vec(
            d,
            Shape::from(&[a.len()][..]),
        )?)])
    }
}

/// The identity with no gradient for its input, as a stop-gradient.
struct Stop {
    saved: SavedState,
}

impl Operation for Stop {
    fn name(&self) -> &'static str {
        "stop"
    }
    fn saved(&self) -> &SavedState {
        &self.saved
    }
    fn backward(&self, _: &Tensor) -> Result<Vec<Option<Tensor>>> {
        Ok(vec![None])
    }
}

#[test]
fn a_lowered_tape_with_a_vjp_that_returns_none_is_not_zero_preserving() {
    let x = t(&[0.0]);
    let r = record(t(&[f32::INFINITY]), &[&x], Vec::new(), |saved| Recip {
        saved,
    });
    let s = record(r.detach(), &[&r], Vec::new(), |saved| Stop { saved });
    let lowered = Tape::lower(&s).unwrap();
    let ids = [lowered.id_of(&x).unwrap(), lowered.id_of(&r).unwrap()];
    // backward_dense never reaches r: x's totalized gradient is 0, as the engine has none
    let all = lowered.backward_all(&t(&[1.0])).unwrap();
    assert_eq!(vals(&all[ids[0]]), [0.0]);
    assert!(grad(&s, &[&x], &t(&[1.0]), retained()).unwrap()[0].is_none());
    // backward_dense_from runs recip's VJP on a zero cotangent: -0 / 0 = NaN
    let mut seeds: Vec<Tensor> = (0..lowered.tape().size())
        .map(|id| {
            let v = lowered.tape().value(id).unwrap();
            v.f32_full_like(0.0).unwrap()
        })
        .collect();
    seeds[lowered.output()] = t(&[1.0]);
    let from = lowered.tape().backward_dense_from(seeds).unwrap();
    assert!(vals(&from[ids[0]])[0].is_nan());
}

#[test]
fn a_graph_with_a_multi_result_node_is_not_lowered() {
    let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], Shape::from(&[2, 2][..])).unwrap();
    let rows = autograd_core::ops::unbind(&x, 0).unwrap();
    let y = scale(&rows[1], 2.0);
    let e = Tape::lower(&y).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotImplemented, "{e}");
}
