//! Fuzzing views and ops over random hierarchical layouts (issue 42, item 5), on the stable
//! toolchain with proptest.
//!
//! Each case draws
//! - a *base* leaf: a random shape tree (leaf modes, nested modes such as `(2,(3,2))` or
//!   `((2,2),3)`, a bare-leaf root, rank 0, zero extents) under random strides (compact in a
//!   random leaf order, with holes, stride 0 on random leaves, compact with one stride shrunk so
//!   modes overlap, or small arbitrary strides), placed at a random offset in a larger carrier with
//!   [`Tensor::with_layout_detached`];
//! - a chain of steps over a growing pool of tensors (the base first): the views `transpose`,
//!   `permute`, `narrow`, `slice`, `select`, `broadcast_to`, `expand`, `reshape`, `view`,
//!   `flatten`, `unsqueeze`, `squeeze`, `unbind`, with arguments that are sometimes out of range
//!   (huge ones included), and elementwise ops and reductions (`neg`, `tanh`, `sin`,
//!   `sigmoid`, `exp`, `abs`, `relu`, `mul_scalar`, `add_scalar`, `add`, `sub`, `mul`, `div`,
//!   `maximum` against pool tensors or broadcast constants, `sum`, `sum_axes`, `mean_axes`);
//! - a scalar loss `sum(t1 * w1) + sum(t2 * w2) + ...` over some tensors of the pool.
//!
//! Every call runs under `catch_unwind`, so a panic fails the case. Each step is predicted by
//! the plain-loop reference of `fuzz_reference.rs`: a step it expects to succeed must give the
//! predicted shape tree and values (bit for bit where no arithmetic happened), share storage
//! when it is a view, and record its node; a step it expects to fail must fail with an `Error`
//! of the kind the call documents and leave its inputs unchanged (layout, values, version).
//! The gradient of the loss with respect to the base, from `backward` and from functional
//! `grad`, must match central differences of the reference in `f64` per storage slot (so a
//! broadcast base gets per-slot sums at every position of the slot), and, where no op with a
//! kink is involved, pass [`gradcheck`] too. A base whose aliasing stride-0 modes do not explain
//! must be refused with `Error::Value` at `backward`.
//!
//! Negative strides and offsets are never allowed by this API (extents and strides are
//! non-negative, offsets are `usize`): the fuzzer checks that `Layout::new` refuses negative
//! leaves and that `with_layout_detached` refuses a layout reaching past its carrier, both with
//! `Error::Value`.
//!
//! The test command runs 256 cases (well under a second). A long run takes any case count from
//! `PROPTEST_CASES`; 200,000 cases take three to four minutes on two cores:
//!
//! ```text
//! PROPTEST_CASES=200000 cargo test -p autograd-tests --test fuzz_views
//! ```
//!
//! A failing case is shrunk and its seed saved in `fuzz_views.proptest-regressions`, which
//! proptest replays first on every later run. A gap it found (`view` of a non-compact empty
//! tensor) is fixed and kept as `a_view_of_an_empty_tensor_always_exists`.

mod fuzz_reference;

use std::panic::{catch_unwind, AssertUnwindSafe};

use autograd_core::{
    grad, gradcheck, CarrierId, ErrorKind, GradOptions, GradcheckOptions, IntTuple, Layout, Result,
    Shape, Stride, Tensor, VersionSnapshot,
};
use autograd_ops as ops;
use fuzz_reference::{self as reference, Expect, Model};
use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::TestCaseError;

type Check<T = ()> = std::result::Result<T, TestCaseError>;

/// Cases of the test command; `PROPTEST_CASES` overrides it for long runs.
const DEFAULT_CASES: u32 = 256;

fn config() -> ProptestConfig {
    let mut config = ProptestConfig::default();
    if std::env::var_os("PROPTEST_CASES").is_none() {
        config.cases = DEFAULT_CASES;
    }
    config
}

// ---- what a case draws --------------------------------------------------------------------

/// One top-level mode of the base shape.
#[derive(Debug, Clone)]
enum ModeGen {
    /// A leaf of this extent.
    Leaf(usize),
    /// A nested mode of these leaves, e.g. `(3,2)`, or `(3)` for one.
    Nested(Vec<usize>),
    /// A mode nested two deep, `((a,b),c)`.
    Deep(Vec<usize>, usize),
}

/// The base leaf.
#[derive(Debug, Clone)]
struct BaseGen {
    modes: Vec<ModeGen>,
    /// A rank-1 shape with a leaf mode is written as a bare leaf (`6` rather than `(6)`).
    bare_root: bool,
    /// 0 and 1: compact over a random leaf order; 2: the same with holes; 3: small arbitrary
    /// strides (may alias); 4: compact with one stride shrunk, so modes overlap.
    stride_kind: u8,
    keys: Vec<u32>,
    holes: Vec<bool>,
    zeros: Vec<bool>,
    smalls: Vec<u8>,
    offset: usize,
    extra: usize,
    seed: u32,
}

/// Which pool tensor a step takes: the newest, or any.
#[derive(Debug, Clone)]
struct Pick(bool, Index);

impl Pick {
    fn at(&self, n: usize) -> usize {
        if self.0 {
            n - 1
        } else {
            self.1.index(n)
        }
    }
}

/// An argument drawn before the extents it is relative to are known; see [`Arg::of`].
#[derive(Debug, Clone, Copy)]
struct Arg(u8);

impl Arg {
    /// The argument for a bound `n` (a rank or an extent): mostly below `n`, sometimes `n`
    /// itself (one past the end), rarely huge (overflow paths).
    fn of(self, n: usize) -> usize {
        match self.0 {
            255 => usize::MAX,
            254 => 1 << 40,
            r if r < 48 => usize::from(r) % (n + 1),
            r => usize::from(r) % n.max(1),
        }
    }
}

/// A step as drawn, before the pool it acts on is known.
#[derive(Debug, Clone)]
enum Spec {
    Transpose(Pick, Arg, Arg),
    Permute(Pick, Vec<u8>, bool),
    /// dim, start, length; `slice` when set
    Narrow(Pick, Arg, Arg, Arg, bool),
    Select(Pick, Arg, Arg),
    Broadcast(Pick, Vec<usize>, Vec<u8>, bool),
    Reshape(Pick, Vec<u8>, bool, bool),
    Flatten(Pick, Arg, Arg),
    Unsqueeze(Pick, Arg),
    Squeeze(Pick, Arg),
    Unbind(Pick, Arg),
    Unary(Pick, UnaryOp),
    Binary(Pick, Pick, BinOp),
    BinaryConst(Pick, usize, Vec<bool>, bool, BinOp, u8),
    Sum(Pick),
    SumAxes(Pick, Vec<Arg>, bool, bool),
}

#[derive(Debug, Clone)]
struct Case {
    base: BaseGen,
    specs: Vec<Spec>,
    loss: Vec<Pick>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum UnaryOp {
    Neg,
    Tanh,
    Sin,
    Sigmoid,
    Exp,
    Abs,
    Relu,
    MulScalar(f32),
    AddScalar(f32),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    Maximum,
}

fn extent() -> impl Strategy<Value = usize> {
    prop_oneof![12 => 1usize..=4, 1 => Just(0usize)]
}

fn arg() -> impl Strategy<Value = Arg> {
    any::<u8>().prop_map(Arg)
}

fn pick() -> impl Strategy<Value = Pick> {
    (any::<bool>(), any::<Index>()).prop_map(|(r, i)| Pick(r, i))
}

fn mode_gen() -> impl Strategy<Value = ModeGen> {
    prop_oneof![
        4 => extent().prop_map(ModeGen::Leaf),
        3 => prop::collection::vec(extent(), 1..=2).prop_map(ModeGen::Nested),
        1 => (prop::collection::vec(extent(), 2), extent()).prop_map(|(a, b)| ModeGen::Deep(a, b)),
    ]
}

fn base_gen() -> impl Strategy<Value = BaseGen> {
    (
        prop_oneof![1 => Just(0usize), 8 => 1usize..=3]
            .prop_flat_map(|rank| prop::collection::vec(mode_gen(), rank)),
        any::<bool>(),
        0u8..5,
        prop::collection::vec(any::<u32>(), 9),
        prop::collection::vec(prop::bool::weighted(0.3), 9),
        prop::collection::vec(prop::bool::weighted(0.2), 9),
        prop::collection::vec(0u8..5, 9),
        (0usize..4, 0usize..3, any::<u32>()),
    )
        .prop_map(
            |(modes, bare_root, stride_kind, keys, holes, zeros, smalls, (offset, extra, seed))| {
                BaseGen {
                    modes,
                    bare_root,
                    stride_kind,
                    keys,
                    holes,
                    zeros,
                    smalls,
                    offset,
                    extra,
                    seed,
                }
            },
        )
        .prop_filter("a base of at most 96 elements", |b| {
            reference::dims_of(&b.shape()).iter().product::<usize>() <= 96
        })
}

fn unary_op() -> impl Strategy<Value = UnaryOp> {
    prop_oneof![
        Just(UnaryOp::Neg),
        Just(UnaryOp::Tanh),
        Just(UnaryOp::Sin),
        Just(UnaryOp::Sigmoid),
        Just(UnaryOp::Exp),
        Just(UnaryOp::Abs),
        Just(UnaryOp::Relu),
        (-1.5f32..1.5).prop_map(UnaryOp::MulScalar),
        (-1.5f32..1.5).prop_map(UnaryOp::AddScalar),
    ]
}

fn bin_op() -> impl Strategy<Value = BinOp> {
    prop_oneof![
        Just(BinOp::Add),
        Just(BinOp::Sub),
        Just(BinOp::Mul),
        Just(BinOp::Div),
        Just(BinOp::Maximum),
    ]
}

fn spec() -> impl Strategy<Value = Spec> {
    prop_oneof![
        3 => (pick(), arg(), arg()).prop_map(|(p, a, b)| Spec::Transpose(p, a, b)),
        2 => (pick(), prop::collection::vec(0u8..5, 0..=4), prop::bool::weighted(0.2))
            .prop_map(|(p, k, c)| Spec::Permute(p, k, c)),
        3 => (pick(), arg(), arg(), arg(), any::<bool>())
            .prop_map(|(p, d, s, l, slice)| Spec::Narrow(p, d, s, l, slice)),
        3 => (pick(), arg(), arg()).prop_map(|(p, d, i)| Spec::Select(p, d, i)),
        3 => (
            pick(),
            prop::collection::vec(1usize..=3, 0..=2),
            prop::collection::vec(0u8..8, 6),
            any::<bool>()
        )
            .prop_map(|(p, lead, per, e)| Spec::Broadcast(p, lead, per, e)),
        3 => (pick(), prop::collection::vec(any::<u8>(), 0..=3), prop::bool::weighted(0.15), any::<bool>())
            .prop_map(|(p, s, wrong, view)| Spec::Reshape(p, s, wrong, view)),
        1 => (pick(), arg(), arg()).prop_map(|(p, a, b)| Spec::Flatten(p, a, b)),
        1 => (pick(), arg()).prop_map(|(p, d)| Spec::Unsqueeze(p, d)),
        1 => (pick(), arg()).prop_map(|(p, d)| Spec::Squeeze(p, d)),
        2 => (pick(), arg()).prop_map(|(p, d)| Spec::Unbind(p, d)),
        3 => (pick(), unary_op()).prop_map(|(p, o)| Spec::Unary(p, o)),
        2 => (pick(), pick(), bin_op()).prop_map(|(a, b, o)| Spec::Binary(a, b, o)),
        2 => (
            pick(),
            0usize..3,
            prop::collection::vec(prop::bool::weighted(0.3), 6),
            any::<bool>(),
            bin_op(),
            any::<u8>()
        )
            .prop_map(|(p, drop, ones, first, o, seed)| Spec::BinaryConst(p, drop, ones, first, o, seed)),
        1 => pick().prop_map(Spec::Sum),
        2 => (pick(), prop::collection::vec(arg(), 0..=3), any::<bool>(), any::<bool>())
            .prop_map(|(p, axes, keep, mean)| Spec::SumAxes(p, axes, keep, mean)),
    ]
}

fn case() -> impl Strategy<Value = Case> {
    (
        base_gen(),
        prop::collection::vec(spec(), 1..=12),
        prop::collection::vec(pick(), 1..=3),
    )
        .prop_map(|(base, specs, loss)| Case { base, specs, loss })
}

// ---- the base -----------------------------------------------------------------------------

impl BaseGen {
    /// The shape tree.
    fn shape(&self) -> IntTuple {
        let leaf = |e: usize| IntTuple::Int(e as i64);
        let modes: Vec<IntTuple> = self
            .modes
            .iter()
            .map(|m| match m {
                ModeGen::Leaf(e) => leaf(*e),
                ModeGen::Nested(v) => IntTuple::Tuple(v.iter().map(|&e| leaf(e)).collect()),
                ModeGen::Deep(v, e) => IntTuple::Tuple(vec![
                    IntTuple::Tuple(v.iter().map(|&e| leaf(e)).collect()),
                    leaf(*e),
                ]),
            })
            .collect();
        match modes.as_slice() {
            [IntTuple::Int(e)] if self.bare_root => IntTuple::Int(*e),
            _ => IntTuple::Tuple(modes),
        }
    }

    /// A stride per leaf (tree order).
    fn leaf_strides(&self, extents: &[i64]) -> Vec<i64> {
        let n = extents.len();
        let mut strides = vec![0i64; n];
        if self.stride_kind == 3 {
            for (s, &x) in strides.iter_mut().zip(&self.smalls) {
                *s = i64::from(x);
            }
        } else {
            // compact over a random order of the leaves, fastest first
            let mut order: Vec<usize> = (0..n).collect();
            order.sort_by_key(|&i| self.keys[i]);
            let mut next = 1i64;
            for i in order {
                strides[i] = next;
                let gap = if self.stride_kind == 2 && self.holes[i] {
                    2
                } else {
                    1
                };
                next *= extents[i].max(1) * gap;
            }
            if self.stride_kind == 4 && n > 0 {
                let k = self.keys[0] as usize % n;
                strides[k] = (strides[k] / 2).max(1);
                if let Some(j) = (0..n).find(|&j| j != k && strides[j] == strides[k] * 2) {
                    strides[j] = strides[k];
                }
            }
        }
        for (s, &z) in strides.iter_mut().zip(&self.zeros) {
            if z {
                *s = 0;
            }
        }
        strides
    }

    /// The stride tree, congruent to `shape`.
    fn stride(&self, shape: &IntTuple) -> IntTuple {
        let strides = self.leaf_strides(&reference::leaves_of(shape));
        let mut it = strides.into_iter();
        fill(shape, &mut || it.next().unwrap_or(0))
    }

    /// The storage values: distinct, in [-0.8, 0.8], exactly representable as `f32`.
    fn storage(&self, len: usize) -> Vec<f32> {
        let phase = f64::from(self.seed) / f64::from(u32::MAX);
        (0..len)
            .map(|k| {
                let u = (k as f64 * 0.618_033_988_75 + phase).fract();
                (u * 1.6 - 0.8) as f32
            })
            .collect()
    }
}

/// `shape` with every leaf replaced by `next()`, in tree order.
fn fill(shape: &IntTuple, next: &mut impl FnMut() -> i64) -> IntTuple {
    match shape {
        IntTuple::Int(_) => IntTuple::Int(next()),
        IntTuple::Tuple(v) => IntTuple::Tuple(v.iter().map(|c| fill(c, next)).collect()),
    }
}

/// One past the largest offset of `shape:stride` (0 when empty), computed here.
fn cosize(shape: &IntTuple, stride: &IntTuple) -> usize {
    let e = reference::leaves_of(shape);
    if e.contains(&0) {
        return 0;
    }
    let s = reference::leaves_of(stride);
    1 + e
        .iter()
        .zip(&s)
        .map(|(&e, &s)| ((e - 1) * s) as usize)
        .sum::<usize>()
}

// ---- running library calls ----------------------------------------------------------------

/// Runs a library call, failing the case if it panics.
fn guarded<T>(what: &str, f: impl FnOnce() -> Result<T>) -> Check<Result<T>> {
    catch_unwind(AssertUnwindSafe(f)).map_err(|payload| {
        let msg = payload
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| payload.downcast_ref::<&str>().map(|s| (*s).to_string()))
            .unwrap_or_default();
        TestCaseError::fail(format!("{what} panicked: {msg}"))
    })
}

/// A library call that must succeed.
fn must<T>(what: &str, f: impl FnOnce() -> Result<T>) -> Check<T> {
    guarded(what, f)?.map_err(|e| TestCaseError::fail(format!("{what} failed: {e}")))
}

/// A library call that must fail with `Error::Value`.
fn refused(what: &str, f: impl FnOnce() -> Result<Tensor>) -> Check {
    match guarded(what, f)? {
        Ok(t) => Err(TestCaseError::fail(format!(
            "{what} succeeded with {t:?}; expected Error::Value"
        ))),
        Err(e) if e.kind() == ErrorKind::Value => Ok(()),
        Err(e) => Err(TestCaseError::fail(format!(
            "{what} failed with {e}; expected Error::Value"
        ))),
    }
}

// ---- resolved steps -----------------------------------------------------------------------

/// The second operand of a binary op.
#[derive(Debug, Clone)]
enum Operand {
    Pool(usize),
    /// A constant of these flat extents, values from the seed.
    Const(Vec<usize>, u8),
}

/// A step with its pool indices and arguments fixed.
#[derive(Debug, Clone)]
enum Step {
    Transpose(usize, usize, usize),
    Permute(usize, Vec<usize>),
    Narrow(usize, usize, usize, usize, bool),
    Select(usize, usize, usize),
    Broadcast(usize, Vec<usize>, bool),
    Reshape(usize, Vec<usize>, bool),
    Flatten(usize, usize, usize),
    Unsqueeze(usize, usize),
    Squeeze(usize, usize),
    Unbind(usize, usize),
    Unary(usize, UnaryOp),
    Binary(Operand, Operand, BinOp),
    Sum(usize),
    SumAxes(usize, Vec<usize>, bool, bool),
}

impl Step {
    /// The pool tensors the step reads.
    fn inputs(&self) -> Vec<usize> {
        match self {
            Step::Transpose(s, ..)
            | Step::Permute(s, ..)
            | Step::Narrow(s, ..)
            | Step::Select(s, ..)
            | Step::Broadcast(s, ..)
            | Step::Reshape(s, ..)
            | Step::Flatten(s, ..)
            | Step::Unsqueeze(s, ..)
            | Step::Squeeze(s, ..)
            | Step::Unbind(s, ..)
            | Step::Unary(s, ..)
            | Step::Sum(s)
            | Step::SumAxes(s, ..) => vec![*s],
            Step::Binary(a, b, _) => [a, b]
                .into_iter()
                .filter_map(|o| match o {
                    Operand::Pool(i) => Some(*i),
                    Operand::Const(..) => None,
                })
                .collect(),
        }
    }

    /// The node a view records, and whether it must share its input's storage: always, or
    /// only when the input's storage order is its logical order (reshape, flatten).
    fn view_node(&self) -> Option<(&'static str, bool)> {
        Some(match self {
            Step::Transpose(..) => ("transpose", true),
            Step::Permute(..) => ("permute", true),
            Step::Narrow(..) => ("narrow", true),
            Step::Select(..) => ("select", true),
            Step::Broadcast(..) => ("broadcast_to", true),
            Step::Reshape(_, _, true) => ("view", true),
            Step::Reshape(_, _, false) => ("reshape", false),
            Step::Flatten(..) => ("flatten", false),
            Step::Unsqueeze(..) => ("unsqueeze", true),
            Step::Squeeze(..) => ("squeeze", true),
            Step::Unbind(..) => ("unbind", true),
            _ => return None,
        })
    }

    /// Whether the op has a kink (finite differences in `f32` may straddle it).
    fn has_kink(&self) -> bool {
        matches!(
            self,
            Step::Unary(_, UnaryOp::Abs | UnaryOp::Relu) | Step::Binary(_, _, BinOp::Maximum)
        )
    }
}

/// Constant values: nonzero, in ±[0.3, 1.2], exactly representable as `f32`.
fn const_vals(n: usize, seed: u64) -> Vec<f32> {
    (0..n as u64)
        .map(|k| {
            let u = ((k + seed) as f64 * 0.754_877_666).fract();
            let v = (0.3 + 0.9 * u) as f32;
            if (k + seed).is_multiple_of(3) {
                -v
            } else {
                v
            }
        })
        .collect()
}

fn const_tensor(dims: &[usize], seed: u64) -> Result<Tensor> {
    Tensor::from_vec(const_vals(dims.iter().product(), seed), Shape::from(dims))
}

fn const_model(dims: &[usize], seed: u64) -> Model {
    let vals = const_vals(dims.iter().product(), seed);
    Model::constant(dims, vals.into_iter().map(f64::from).collect())
}

impl UnaryOp {
    fn run(self, a: &Tensor) -> Result<Tensor> {
        match self {
            UnaryOp::Neg => ops::neg(a),
            UnaryOp::Tanh => ops::tanh(a),
            UnaryOp::Sin => ops::sin(a),
            UnaryOp::Sigmoid => ops::sigmoid(a),
            UnaryOp::Exp => ops::exp(a),
            UnaryOp::Abs => ops::abs(a),
            UnaryOp::Relu => ops::relu(a),
            UnaryOp::MulScalar(c) => ops::mul_scalar(a, c),
            UnaryOp::AddScalar(c) => ops::add_scalar(a, c),
        }
    }

    fn model(self, x: f64) -> f64 {
        match self {
            UnaryOp::Neg => -x,
            UnaryOp::Tanh => x.tanh(),
            UnaryOp::Sin => x.sin(),
            UnaryOp::Sigmoid => 1.0 / (1.0 + (-x).exp()),
            UnaryOp::Exp => x.exp(),
            UnaryOp::Abs => x.abs(),
            UnaryOp::Relu => x.max(0.0),
            UnaryOp::MulScalar(c) => f64::from(c) * x,
            UnaryOp::AddScalar(c) => f64::from(c) + x,
        }
    }
}

impl BinOp {
    fn run(self, a: &Tensor, b: &Tensor) -> Result<Tensor> {
        match self {
            BinOp::Add => ops::add(a, b),
            BinOp::Sub => ops::sub(a, b),
            BinOp::Mul => ops::mul(a, b),
            BinOp::Div => ops::div(a, b),
            BinOp::Maximum => ops::maximum(a, b),
        }
    }

    fn model(self, x: f64, y: f64) -> f64 {
        match self {
            BinOp::Add => x + y,
            BinOp::Sub => x - y,
            BinOp::Mul => x * y,
            BinOp::Div => x / y,
            BinOp::Maximum => x.max(y),
        }
    }
}

/// Runs a step in the library.
fn exec(step: &Step, pool: &[Tensor]) -> Result<Vec<Tensor>> {
    let one = |r: Result<Tensor>| r.map(|t| vec![t]);
    match step {
        Step::Transpose(s, a, b) => one(pool[*s].transpose(*a, *b)),
        Step::Permute(s, order) => one(pool[*s].permute(order)),
        Step::Narrow(s, d, start, len, false) => one(pool[*s].narrow(*d, *start, *len)),
        Step::Narrow(s, d, start, end, true) => one(pool[*s].slice(*d, *start..*end)),
        Step::Select(s, d, i) => one(pool[*s].select(*d, *i)),
        Step::Broadcast(s, dims, false) => one(pool[*s].broadcast_to(dims)),
        Step::Broadcast(s, dims, true) => one(pool[*s].expand(dims)),
        Step::Reshape(s, dims, false) => one(pool[*s].reshape(dims)),
        Step::Reshape(s, dims, true) => one(pool[*s].view(dims)),
        Step::Flatten(s, a, b) => one(pool[*s].flatten(*a, *b)),
        Step::Unsqueeze(s, d) => one(pool[*s].unsqueeze(*d)),
        Step::Squeeze(s, d) => one(pool[*s].squeeze(*d)),
        Step::Unbind(s, d) => pool[*s].unbind(*d),
        Step::Unary(s, op) => one(op.run(&pool[*s])),
        Step::Binary(a, b, op) => {
            let operand = |o: &Operand| match o {
                Operand::Pool(i) => Ok(pool[*i].clone()),
                Operand::Const(dims, seed) => const_tensor(dims, u64::from(*seed)),
            };
            one(op.run(&operand(a)?, &operand(b)?))
        }
        Step::Sum(s) => one(ops::sum(&pool[*s])),
        Step::SumAxes(s, axes, keep, false) => one(ops::sum_axes(&pool[*s], axes, *keep)),
        Step::SumAxes(s, axes, keep, true) => one(ops::mean_axes(&pool[*s], axes, *keep)),
    }
}

/// What the reference expects of a step.
fn expect(step: &Step, pool: &[Model]) -> Expect {
    match step {
        Step::Transpose(s, a, b) => reference::transpose(&pool[*s], *a, *b),
        Step::Permute(s, order) => reference::permute(&pool[*s], order),
        Step::Narrow(s, d, start, len, false) => reference::narrow(&pool[*s], *d, *start, *len),
        Step::Narrow(s, d, start, end, true) => {
            reference::narrow(&pool[*s], *d, *start, end.saturating_sub(*start))
        }
        Step::Select(s, d, i) => reference::select(&pool[*s], *d, *i),
        Step::Broadcast(s, dims, _) => reference::broadcast_to(&pool[*s], dims),
        Step::Reshape(s, dims, false) => reference::reshape(&pool[*s], dims),
        Step::Reshape(s, dims, true) => reference::view(&pool[*s], dims),
        Step::Flatten(s, a, b) => reference::flatten(&pool[*s], *a, *b),
        Step::Unsqueeze(s, d) => reference::unsqueeze(&pool[*s], *d),
        Step::Squeeze(s, d) => reference::squeeze(&pool[*s], *d),
        Step::Unbind(s, d) => reference::unbind(&pool[*s], *d),
        Step::Unary(s, op) => reference::unary(&pool[*s], |x| op.model(x)),
        Step::Binary(a, b, op) => {
            let operand = |o: &Operand| match o {
                Operand::Pool(i) => pool[*i].clone(),
                Operand::Const(dims, seed) => const_model(dims, u64::from(*seed)),
            };
            reference::binary(&operand(a), &operand(b), |x, y| op.model(x, y))
        }
        Step::Sum(s) => reference::sum(&pool[*s]),
        Step::SumAxes(s, axes, keep, mean) => reference::sum_axes(&pool[*s], axes, *keep, *mean),
    }
}

fn max_abs(v: &[f64]) -> f64 {
    v.iter().fold(0.0, |m, x| m.max(x.abs()))
}

/// The divisors of `n > 0`.
fn divisors(n: usize) -> Vec<usize> {
    (1..=n).filter(|&d| n.is_multiple_of(d)).collect()
}

/// Fixes a drawn step against the pool the reference holds: its pool indices, its arguments
/// relative to the extents, and the guards that keep values smooth and bounded (`exp` of large
/// values, kinks closer than 0.05, division by values near 0, and products that grow large
/// become tamer ops). `None` skips a step that would make a tensor of more than 512 elements.
fn resolve(spec: &Spec, pool: &[Model]) -> Option<Step> {
    let n = pool.len();
    Some(match spec {
        Spec::Transpose(p, a, b) => {
            let s = p.at(n);
            let rank = pool[s].rank();
            Step::Transpose(s, a.of(rank), b.of(rank))
        }
        Spec::Permute(p, keys, corrupt) => {
            let s = p.at(n);
            let rank = pool[s].rank();
            let order = if *corrupt {
                keys.iter().map(|&k| usize::from(k)).collect()
            } else {
                let mut order: Vec<usize> = (0..rank).collect();
                order.sort_by_key(|&i| (keys.get(i).copied().unwrap_or(0), i));
                order
            };
            Step::Permute(s, order)
        }
        Spec::Narrow(p, d, start, len, slice) => {
            let s = p.at(n);
            let dims = pool[s].dims();
            let d = d.of(dims.len());
            let extent = dims.get(d).copied().unwrap_or(0);
            let reversed = start.0 % 2 == 1;
            let start = start.of(extent);
            let len = len.of(extent.saturating_sub(start));
            // slice takes a range: the same elements as narrow(start, len); an empty one is
            // sometimes written reversed (`3..2`), which is empty too
            let second = match (*slice, len) {
                (false, len) => len,
                (true, 0) if reversed && start > 0 && start <= extent => start - 1,
                (true, len) => start.saturating_add(len),
            };
            Step::Narrow(s, d, start, second, *slice)
        }
        Spec::Select(p, d, i) => {
            let s = p.at(n);
            let dims = pool[s].dims();
            let d = d.of(dims.len());
            Step::Select(s, d, i.of(dims.get(d).copied().unwrap_or(0)))
        }
        Spec::Broadcast(p, lead, per, expand) => {
            let s = p.at(n);
            let mut dims = lead.clone();
            for (j, &d) in pool[s].dims().iter().enumerate() {
                let c = per.get(j).copied().unwrap_or(0);
                dims.push(match (d, c) {
                    (1, c) => usize::from(c % 4),
                    (d, 7) => d + 1,
                    (d, _) => d,
                });
            }
            if dims.iter().product::<usize>() > 512 {
                return None;
            }
            Step::Broadcast(s, dims, *expand)
        }
        Spec::Reshape(p, splits, wrong, view) => {
            let s = p.at(n);
            let size = pool[s].vals.len();
            let mut dims = Vec::new();
            if size == 0 {
                dims.push(usize::from(splits.first().copied().unwrap_or(0) % 3));
                dims.push(0);
            } else {
                let mut rest = size;
                for &k in splits {
                    let divs = divisors(rest);
                    let d = divs[usize::from(k) % divs.len()];
                    dims.push(d);
                    rest /= d;
                }
                dims.push(rest);
            }
            if *wrong {
                if let Some(last) = dims.last_mut() {
                    *last += 1;
                }
            }
            Step::Reshape(s, dims, *view)
        }
        Spec::Flatten(p, a, b) => {
            let s = p.at(n);
            let rank = pool[s].rank();
            let start = a.of(rank);
            Step::Flatten(
                s,
                start,
                start.saturating_add(b.of(rank.saturating_sub(start))),
            )
        }
        Spec::Unsqueeze(p, d) => {
            let s = p.at(n);
            Step::Unsqueeze(s, d.of(pool[s].rank() + 1))
        }
        Spec::Squeeze(p, d) => {
            // mostly one of the extent-1 modes, when there is one
            let s = p.at(n);
            let ones: Vec<usize> = (pool[s].dims().iter().enumerate())
                .filter_map(|(i, &e)| (e == 1).then_some(i))
                .collect();
            let d = match ones.len() {
                0 => d.of(pool[s].rank()),
                k if d.0 % 4 != 0 => ones[usize::from(d.0) % k],
                _ => d.of(pool[s].rank()),
            };
            Step::Squeeze(s, d)
        }
        Spec::Unbind(p, d) => {
            let s = p.at(n);
            Step::Unbind(s, d.of(pool[s].rank()))
        }
        Spec::Unary(p, op) => {
            let s = p.at(n);
            let v = &pool[s].vals;
            let op = match op {
                UnaryOp::Exp if max_abs(v) > 3.0 => UnaryOp::Tanh,
                UnaryOp::Abs | UnaryOp::Relu if v.iter().any(|x| x.abs() < 0.05) => UnaryOp::Neg,
                other => *other,
            };
            Step::Unary(s, op)
        }
        Spec::Binary(a, b, op) => {
            let (a, b) = (a.at(n), b.at(n));
            let op = guard_binary(*op, &pool[a], &pool[b]);
            Step::Binary(Operand::Pool(a), Operand::Pool(b), op)
        }
        Spec::BinaryConst(p, drop, ones, first, op, seed) => {
            let s = p.at(n);
            let dims = pool[s].dims();
            let kept = &dims[(*drop).min(dims.len())..];
            let cdims: Vec<usize> = kept
                .iter()
                .zip(ones.iter().chain(std::iter::repeat(&false)))
                .map(|(&d, &one)| if one { 1 } else { d })
                .collect();
            let c = const_model(&cdims, u64::from(*seed));
            let (x, y) = if *first {
                (Operand::Const(cdims, *seed), Operand::Pool(s))
            } else {
                (Operand::Pool(s), Operand::Const(cdims, *seed))
            };
            let op = if *first {
                guard_binary(*op, &c, &pool[s])
            } else {
                guard_binary(*op, &pool[s], &c)
            };
            Step::Binary(x, y, op)
        }
        Spec::Sum(p) => Step::Sum(p.at(n)),
        Spec::SumAxes(p, axes, keep, mean) => {
            let s = p.at(n);
            let dims = pool[s].dims();
            let axes: Vec<usize> = axes.iter().map(|a| a.of(dims.len())).collect();
            let empty_group = axes.iter().any(|&a| dims.get(a) == Some(&0));
            Step::SumAxes(s, axes, *keep, *mean && !empty_group)
        }
    })
}

/// `op`, or `add` where `op` would divide by a value near 0, straddle a tie of `maximum`, or
/// multiply large values.
fn guard_binary(op: BinOp, a: &Model, b: &Model) -> BinOp {
    let Some((a, b)) = reference::broadcast_operands(a, b) else {
        return op; // refused: no values to guard
    };
    let risky = match op {
        BinOp::Div => b.vals.iter().any(|y| y.abs() < 0.3),
        BinOp::Maximum => a
            .vals
            .iter()
            .zip(&b.vals)
            .any(|(x, y)| (x - y).abs() < 0.05),
        BinOp::Mul => max_abs(&a.vals) * max_abs(&b.vals) > 50.0,
        BinOp::Add | BinOp::Sub => false,
    };
    if risky {
        BinOp::Add
    } else {
        op
    }
}

// ---- checks -------------------------------------------------------------------------------

/// What an input looks like before a call that must fail, to check that it did not change.
struct Snapshot {
    layout: Layout,
    values: Vec<f32>,
    version: VersionSnapshot,
}

impl Snapshot {
    fn of(t: &Tensor) -> Check<Snapshot> {
        Ok(Snapshot {
            layout: t.layout().clone(),
            values: must("values", || t.values::<f32>())?,
            version: VersionSnapshot::of(t),
        })
    }

    fn unchanged(&self, t: &Tensor, what: &str) -> Check {
        prop_assert_eq!(
            t.layout(),
            &self.layout,
            "{} changed its input's layout",
            what
        );
        prop_assert_eq!(
            VersionSnapshot::of(t),
            self.version.clone(),
            "{} bumped its input's version",
            what
        );
        let now = must("values", || t.values::<f32>())?;
        prop_assert!(
            now.iter()
                .map(|x| x.to_bits())
                .eq(self.values.iter().map(|x| x.to_bits())),
            "{} changed its input's values",
            what
        );
        Ok(())
    }
}

/// `t` is what `m` predicts: shape tree, extents and values (bit for bit when exact).
fn check_model(t: &Tensor, m: &Model, what: &str) -> Check {
    prop_assert_eq!(t.shape().tree(), &m.shape, "{}: shape tree", what);
    prop_assert_eq!(t.dims(), m.dims(), "{}: extents", what);
    let got = must("values", || t.values::<f32>())?;
    prop_assert_eq!(got.len(), m.vals.len(), "{}: element count", what);
    for (p, (&g, &want)) in got.iter().zip(&m.vals).enumerate() {
        let g = f64::from(g);
        if m.exact {
            prop_assert!(
                g == want,
                "{}: position {} holds {} but storage has {}",
                what,
                p,
                g,
                want
            );
        } else {
            prop_assert!(
                (g - want).abs() <= 1e-3 * (1.0 + want.abs()),
                "{}: position {} is {} but the reference gives {}",
                what,
                p,
                g,
                want
            );
        }
    }
    Ok(())
}

/// The pool after running `steps` from the base, in the reference; only steps that succeeded
/// in the library (`ok`) add results.
fn model_pool(base: Model, steps: &[(Step, bool)]) -> Vec<Model> {
    let mut pool = vec![base];
    for (step, ok) in steps {
        if !*ok {
            continue;
        }
        if let Expect::Ok(v) | Expect::Either(v, _) = expect(step, &pool) {
            pool.extend(v);
        }
    }
    pool
}

/// The loss: `sum(pool[k] * w_j)` over the picked `k`, added up; each `w_j` a constant of
/// `pool[k]`'s flat extents.
fn loss(pool: &[Tensor], picks: &[usize]) -> Result<Tensor> {
    let mut total: Option<Tensor> = None;
    for (j, &k) in picks.iter().enumerate() {
        let w = const_tensor(&pool[k].dims(), 101 + j as u64)?;
        let term = ops::sum(&ops::mul(&pool[k], &w)?)?;
        total = Some(match total {
            None => term,
            Some(t) => ops::add(&t, &term)?,
        });
    }
    total.ok_or_else(|| autograd_core::Error::Value("no loss terms".into()))
}

fn model_loss(pool: &[Model], picks: &[usize]) -> f64 {
    picks
        .iter()
        .enumerate()
        .map(|(j, &k)| {
            let w = const_model(&pool[k].dims(), 101 + j as u64);
            pool[k]
                .vals
                .iter()
                .zip(&w.vals)
                .map(|(x, y)| x * y)
                .sum::<f64>()
        })
        .sum()
}

/// The library pool after replaying `steps` from `base` (gradcheck's function).
fn replay(base: &Tensor, steps: &[(Step, bool)]) -> Result<Vec<Tensor>> {
    let mut pool = vec![base.clone()];
    for (step, ok) in steps {
        if *ok {
            let out = exec(step, &pool)?;
            pool.extend(out);
        }
    }
    Ok(pool)
}

/// The pools of one case: library tensors and their reference models side by side (the base
/// first), and the steps run so far with whether each succeeded.
struct Run {
    tensors: Vec<Tensor>,
    models: Vec<Model>,
    done: Vec<(Step, bool)>,
    base_carrier: CarrierId,
}

impl Run {
    /// Resolves `spec` against the pool, runs it in the library and checks it against the
    /// reference: results as predicted (values, tree, shared storage, node), or a refusal of a
    /// documented kind that leaves its inputs as they were.
    fn step(&mut self, spec: &Spec) -> Check {
        let Some(step) = resolve(spec, &self.models) else {
            return Ok(());
        };
        let what = format!("{step:?}");
        let want = expect(&step, &self.models);
        let inputs = step.inputs();
        let before = inputs
            .iter()
            .map(|&i| Snapshot::of(&self.tensors[i]))
            .collect::<Check<Vec<_>>>()?;
        let got = guarded(&what, || exec(&step, &self.tensors))?;
        let ok = match (want, got) {
            (Expect::Ok(predicted) | Expect::Either(predicted, _), Ok(out)) => {
                self.check_results(&step, &what, &predicted, &out)?;
                true
            }
            (Expect::Err(kinds) | Expect::Either(_, kinds), Err(e)) => {
                prop_assert!(
                    kinds.contains(&e.kind()),
                    "{} failed with {} ({:?}); the kinds documented here are {:?}",
                    what,
                    e,
                    e.kind(),
                    kinds
                );
                for (&i, snap) in inputs.iter().zip(&before) {
                    snap.unchanged(&self.tensors[i], &what)?;
                }
                false
            }
            (Expect::Ok(_), Err(e)) => {
                return Err(TestCaseError::fail(format!(
                    "{what} failed with {e}; the reference expects success"
                )))
            }
            (Expect::Err(kinds), Ok(_)) => {
                return Err(TestCaseError::fail(format!(
                    "{what} succeeded; the reference expects an error of kind {kinds:?}"
                )))
            }
        };
        self.done.push((step, ok));
        Ok(())
    }

    /// Checks the results of a successful step and adds them to the pools.
    fn check_results(
        &mut self,
        step: &Step,
        what: &str,
        predicted: &[Model],
        out: &[Tensor],
    ) -> Check {
        prop_assert_eq!(out.len(), predicted.len(), "{}: number of results", what);
        let input = step.inputs()[0];
        let input_carrier = must("carrier", || Ok(self.tensors[input].carrier()?.id()))?;
        let contiguous = self.models[input].is_contiguous_view();
        for (t, m) in out.iter().zip(predicted) {
            check_model(t, m, what)?;
            let carrier = must("carrier", || Ok(t.carrier()?.id()))?;
            if let Some((node, always)) = step.view_node() {
                if always || contiguous {
                    prop_assert!(carrier == input_carrier, "{} copied its input", what);
                }
                let name = t.autograd_ctx().map(|n| n.name().to_string());
                prop_assert_eq!(name.as_deref(), Some(node), "{}: recorded node", what);
            }
            let mut m = m.clone();
            // a view of the base keeps reading base storage; a copy does not
            if carrier != self.base_carrier {
                m.slots = None;
            }
            self.tensors.push(t.clone());
            self.models.push(m);
        }
        Ok(())
    }
}

fn run_case(case: &Case) -> Check {
    let g = &case.base;
    let shape = g.shape();
    let stride = g.stride(&shape);
    let len = g.offset + cosize(&shape, &stride) + g.extra;
    let storage = g.storage(len);
    let storage64: Vec<f64> = storage.iter().map(|&x| f64::from(x)).collect();

    // layouts and placements the API refuses, all with Error::Value
    check_refusals(&shape, &stride, &storage, g.seed)?;

    let carrier = must("Tensor::from_vec", || {
        Tensor::from_vec(storage.clone(), Shape::from(&[len][..]))
    })?;
    let layout = must("Layout::new", || {
        Layout::new(Shape(shape.clone()), Stride(stride.clone()))
    })?;
    let base = must("with_layout_detached", || {
        carrier.with_layout_detached(layout, g.offset)
    })?;
    let base_model = Model::base(&shape, &stride, g.offset, &storage64);
    check_model(&base, &base_model, "the base")?;

    let mut run = Run {
        tensors: vec![base.clone()],
        models: vec![base_model.clone()],
        done: Vec::new(),
        base_carrier: must("carrier", || base.carrier().map(|c| c.id()))?,
    };
    for spec in &case.specs {
        run.step(spec)?;
    }

    let picks: Vec<usize> = case.loss.iter().map(|p| p.at(run.tensors.len())).collect();
    let l = must("loss", || loss(&run.tensors, &picks))?;
    let want_loss = model_loss(&run.models, &picks);
    let got_loss = f64::from(must("loss value", || l.values::<f32>())?[0]);
    prop_assert!(
        (got_loss - want_loss).abs() <= 1e-3 * (1.0 + want_loss.abs()),
        "loss {} but the reference gives {}",
        got_loss,
        want_loss
    );
    check_gradients(
        &base,
        &l,
        &base_model,
        &storage64,
        &run.done,
        &picks,
        (&shape, &stride, g.offset),
    )
}

/// `t` with leaf `k` (tree order) replaced by `-leaf - 1`.
fn negate_leaf(t: &IntTuple, k: usize) -> IntTuple {
    let leaves = reference::leaves_of(t);
    let mut i = 0;
    fill(t, &mut || {
        i += 1;
        if i - 1 == k {
            -leaves[k] - 1
        } else {
            leaves[i - 1]
        }
    })
}

/// `Layout::new` refuses negative leaves and trees that are not congruent, and
/// `with_layout_detached` a layout reaching past its carrier, all with `Error::Value`.
fn check_refusals(shape: &IntTuple, stride: &IntTuple, storage: &[f32], seed: u32) -> Check {
    let n = reference::leaves_of(shape).len();
    if n > 0 {
        let k = seed as usize % n;
        for (s, d, what) in [
            (shape.clone(), negate_leaf(stride, k), "a negative stride"),
            (negate_leaf(shape, k), stride.clone(), "a negative extent"),
        ] {
            match guarded("Layout::new", || Layout::new(Shape(s), Stride(d)))? {
                Err(e) if e.kind() == ErrorKind::Value => {}
                other => prop_assert!(false, "Layout::new with {}: {:?}", what, other),
            }
        }
    }
    let extra = IntTuple::Tuple(
        reference::top_modes(stride)
            .into_iter()
            .chain([IntTuple::Int(1)])
            .collect(),
    );
    match guarded("Layout::new", || {
        Layout::new(Shape(shape.clone()), Stride(extra))
    })? {
        Err(e) if e.kind() == ErrorKind::Value => {}
        other => prop_assert!(false, "Layout::new with trees that differ: {:?}", other),
    }
    match guarded("Layout::new", || {
        Layout::new(Shape::from(vec![usize::MAX]), Stride::from(vec![1usize]))
    })? {
        Err(e) if e.kind() == ErrorKind::Value => {}
        other => prop_assert!(false, "Layout::new with extent usize::MAX: {:?}", other),
    }
    // placed one element too far into the carrier
    let carrier = must("Tensor::from_vec", || {
        Tensor::from_vec(storage.to_vec(), Shape::from(&[storage.len()][..]))
    })?;
    let layout = must("Layout::new", || {
        Layout::new(Shape(shape.clone()), Stride(stride.clone()))
    })?;
    let past = storage.len() + 1 - cosize(shape, stride).min(storage.len());
    refused("with_layout_detached past the end", || {
        carrier.with_layout_detached(layout, past)
    })
}

/// The gradient of the loss with respect to the base, from `backward` and `grad`, against
/// central differences of the reference per storage slot; and gradcheck where no op has a kink.
fn check_gradients(
    base: &Tensor,
    l: &Tensor,
    base_model: &Model,
    storage: &[f64],
    done: &[(Step, bool)],
    picks: &[usize],
    (shape, stride, offset): (&IntTuple, &IntTuple, usize),
) -> Check {
    let one = Tensor::scalar(1.0);
    if reference::aliasing(shape, stride) == Some(false) {
        // aliasing that stride-0 modes do not explain: its gradient would be under-counted
        let r = guarded("backward", || l.backward_with(None, true))?;
        prop_assert_eq!(r.map_err(|e| e.kind()), Err(ErrorKind::Value), "backward");
        prop_assert!(
            must("grad", || base.grad())?.is_none(),
            "a failed backward set .grad"
        );
        let r = guarded("grad", || grad(l, &[base], &one, GradOptions::default()))?;
        prop_assert_eq!(
            r.map(|_| ()).map_err(|e| e.kind()),
            Err(ErrorKind::Value),
            "grad"
        );
        return Ok(());
    }

    // central differences of the reference, per storage slot, in f64: with a tiny step (the
    // reference derivative), and with gradcheck's step (to tell whether the function is smooth
    // enough at that scale for gradcheck's Float32 differences to mean anything)
    let options = GradcheckOptions {
        atol: 5e-2,
        rtol: 2e-2,
        ..GradcheckOptions::default()
    };
    let slots = base_model.slots.clone().unwrap_or_default();
    let mut fd = std::collections::HashMap::new();
    let mut coarse_ok = true;
    let mut perturbed = storage.to_vec();
    for &s in &slots {
        if fd.contains_key(&s) {
            continue;
        }
        let mut diff = |h: f64| {
            let mut at = |x: f64| {
                perturbed[s] = storage[s] + x;
                let base = Model::base(shape, stride, offset, &perturbed);
                model_loss(&model_pool(base, done), picks)
            };
            let d = (at(h) - at(-h)) / (2.0 * h);
            perturbed[s] = storage[s];
            d
        };
        let d = diff(1e-5);
        let coarse = diff(options.eps * storage[s].abs().max(1.0));
        coarse_ok &= (coarse - d).abs() <= 0.25 * (options.atol + options.rtol * d.abs());
        fd.insert(s, d);
    }
    let want: Vec<f64> = slots.iter().map(|s| fd[s]).collect();
    let scale = max_abs(&want);

    must("backward", || l.backward_with(None, true))?;
    let got = must("grad", || base.grad())?;
    let functional = must("grad()", || grad(l, &[base], &one, GradOptions::default()))?;
    let Some(got) = got else {
        prop_assert!(base.size() == 0, "the base got no .grad");
        return Ok(());
    };
    prop_assert_eq!(got.shape(), base.shape(), ".grad shape");
    let layout = if reference::aliasing(shape, stride).is_none() {
        base.layout().clone()
    } else {
        must("canonical", || Layout::canonical(base.shape().clone()))?
    };
    prop_assert_eq!(got.layout(), &layout, ".grad layout");
    let a = must("values", || got.values::<f32>())?;
    for (p, (&a, &e)) in a.iter().zip(&want).enumerate() {
        let a = f64::from(a);
        prop_assert!(
            (a - e).abs() <= 1e-3 * (1.0 + e.abs()) + 1e-4 * scale,
            ".grad at position {} (slot {}) is {} but central differences give {}",
            p,
            slots[p],
            a,
            e
        );
    }
    let f = functional[0].as_ref().map(Tensor::values::<f32>);
    match f {
        Some(Ok(f)) => prop_assert_eq!(f, a, "grad() and .grad differ"),
        other => prop_assert!(false, "grad() gave {:?}", other),
    }

    // The library's own finite differences, in Float32 (looser: the forward rounds), where
    // they can be trusted: no kink, a function smooth at gradcheck's step, and a loss small
    // enough that rounding it stays well inside the tolerance.
    let loss_value = model_loss(&model_pool(base_model.clone(), done), picks);
    if !coarse_ok || loss_value.abs() > 1e3 || done.iter().any(|(s, ok)| *ok && s.has_kink()) {
        return Ok(());
    }
    let f = |xs: &[Tensor]| loss(&replay(&xs[0], done)?, picks);
    must("gradcheck", || {
        gradcheck(f, std::slice::from_ref(base), options)
    })
    .map(|_| ())
}

proptest! {
    #![proptest_config(config())]

    /// Views, ops and gradients over random layouts agree with the plain-loop reference, and
    /// every refusal is an `Error` of a documented kind that changes nothing.
    #[test]
    fn random_views_and_ops_match_the_reference(case in case()) {
        run_case(&case)?;
    }
}

/// A gap this fuzzer found: `view` refused an empty tensor whose layout is not compact, where
/// PyTorch's `computeStride` (and DESIGN.md's "reshape/view share storage whenever a layout
/// expresses the result") gives an empty tensor every view of the same size.
#[test]
fn a_view_of_an_empty_tensor_always_exists() {
    // the fuzzer's minimal case: a compact [0, 0] (what reshape gives) viewed as itself
    let square = Tensor::from_vec(Vec::<f32>::new(), Shape::from(&[0usize, 0][..])).unwrap();
    assert!(square.view(&[0, 0]).is_ok(), "{:?}", square.view(&[0, 0]));
    let zeros = Tensor::from_vec(Vec::<f32>::new(), Shape::from(&[2usize, 0][..])).unwrap();
    // (0,2):(1,1), a transposed empty matrix
    let t = zeros.transpose(0, 1).unwrap();
    assert!(t.view(&[0, 2]).is_ok(), "{:?}", t.view(&[0, 2]));
    // a nested empty layout, ((1,0),1):((1,2),1) over a carrier of one element
    let carrier = Tensor::from_vec(vec![0.5f32], Shape::from(&[1usize][..])).unwrap();
    let nested = Layout::new(
        Shape(IntTuple::from(vec![IntTuple::from(vec![
            IntTuple::from(vec![1, 0]),
            IntTuple::from(1),
        ])])),
        Stride(IntTuple::from(vec![IntTuple::from(vec![
            IntTuple::from(vec![1, 2]),
            IntTuple::from(1),
        ])])),
    )
    .unwrap();
    let e = carrier.with_layout_detached(nested, 0).unwrap();
    assert!(e.view(&[1, 0]).is_ok(), "{:?}", e.view(&[1, 0]));
}
