//! A fast scalar front-end, micrograd-style: record `f32` or `f64` programs with operator
//! overloading, then one reverse sweep gives every gradient.
//!
//! ```
//! use autograd_core::tape::ScalarTape;
//!
//! let tape = ScalarTape::new();
//! let x = tape.var(2.0);
//! let y = x.sin() * x + 3.0;
//! let grads = tape.gradients(y);
//! // dy/dx = cos(x) x + sin(x)
//! assert!((grads[x] - (2.0f64.cos() * 2.0 + 2.0f64.sin())).abs() < 1e-12);
//!
//! // The same program in single precision: name the float type once, on the tape.
//! let tape = ScalarTape::<f32>::empty();
//! let x = tape.var(2.0);
//! let y = x.sin() * x + 3.0;
//! let dy: f32 = tape.gradients(y)[x];
//! assert!((dy - (2.0f32.cos() * 2.0 + 2.0f32.sin())).abs() < 1e-6);
//! ```
//!
//! The float type `F` is a parameter of [`ScalarTape`], [`Var`] and [`Gradients`], defaulting to
//! `f64`; the sealed trait [`Float`] lists what the tape needs of it and is implemented for `f32`
//! and `f64` only. [`ScalarTape::new`] makes an `f64` tape, so code written before the parameter
//! existed infers as it did; [`ScalarTape::empty`] makes a tape of any precision.
//!
//! Design for speed: a generic [`Tape<F>`] node carries a name, a parent `Vec` and a boxed
//! closure (three allocations), and its sweep allocates a `Vec` of contributions per node. Here
//! each recorded op is one entry in a flat array (24 bytes for `f64`, 16 for `f32`): the value
//! and an op code (parent ids as `u32`, plus a constant where the VJP needs one), so recording
//! is one push. The sweep is a single `match` per node over a flat adjoint array plus a bitset
//! of reached nodes (the `Option` per node of the generic sweep, in one float and 1 bit), and
//! the adjoint array, zero where unreached, is returned as is. The semantics are exactly those of
//! [`Tape::backward_dense_all`] on the equivalent generic tape ([`ScalarTape::to_tape`], whose
//! closures call the same VJP function): only reached nodes run their VJP, a first contribution
//! is kept as is and later ones are summed in the order produced.
//!
//! The tape sits behind a `RefCell` so that `Var`s (which borrow the tape) can record through
//! `&ScalarTape` in operator impls; a `Cell`-per-field design would not allow pushing to a
//! `Vec`, and `UnsafeCell` would buy little over one flag check per op. A `ScalarTape` is
//! therefore `Send` but not `Sync`: record on one thread.

use std::cell::RefCell;
use std::fmt;
use std::ops::{Add, AddAssign, Div, DivAssign, Index, Mul, MulAssign, Neg, Sub, SubAssign};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::float::Float;
use super::{Node, Tape};

/// One recorded scalar op: parent ids and any constant its VJP needs.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Op<F> {
    /// An input that requires a gradient.
    Var,
    /// A constant leaf: no gradient is accumulated into it.
    Const,
    Add(u32, u32),
    Sub(u32, u32),
    Mul(u32, u32),
    Div(u32, u32),
    /// `x + c`, `c + x` or `x - c`.
    AddConst(u32),
    /// `c - x`.
    ConstSub(u32),
    /// `x * c` or `c * x`.
    MulConst(u32, F),
    /// `x / c`.
    DivConst(u32, F),
    /// `c / x`.
    ConstDiv(u32),
    Neg(u32),
    Sin(u32),
    Cos(u32),
    Exp(u32),
    Ln(u32),
    Tanh(u32),
    Powi(u32, i32),
    Sqrt(u32),
    Relu(u32),
}

impl<F: Copy> Op<F> {
    fn name(self) -> &'static str {
        match self {
            Op::Var => "var",
            Op::Const => "const",
            Op::Add(..) => "add",
            Op::Sub(..) => "sub",
            Op::Mul(..) => "mul",
            Op::Div(..) => "div",
            Op::AddConst(..) => "add_const",
            Op::ConstSub(..) => "const_sub",
            Op::MulConst(..) => "mul_const",
            Op::DivConst(..) => "div_const",
            Op::ConstDiv(..) => "const_div",
            Op::Neg(..) => "neg",
            Op::Sin(..) => "sin",
            Op::Cos(..) => "cos",
            Op::Exp(..) => "exp",
            Op::Ln(..) => "ln",
            Op::Tanh(..) => "tanh",
            Op::Powi(..) => "powi",
            Op::Sqrt(..) => "sqrt",
            Op::Relu(..) => "relu",
        }
    }

    /// Parent ids in argument order.
    fn parents(self) -> ([u32; 2], usize) {
        match self {
            Op::Var | Op::Const => ([0, 0], 0),
            Op::Add(a, b) | Op::Sub(a, b) | Op::Mul(a, b) | Op::Div(a, b) => ([a, b], 2),
            Op::AddConst(a)
            | Op::ConstSub(a)
            | Op::MulConst(a, _)
            | Op::DivConst(a, _)
            | Op::ConstDiv(a)
            | Op::Neg(a)
            | Op::Sin(a)
            | Op::Cos(a)
            | Op::Exp(a)
            | Op::Ln(a)
            | Op::Tanh(a)
            | Op::Powi(a, _)
            | Op::Sqrt(a)
            | Op::Relu(a) => ([a, 0], 1),
        }
    }
}

/// The contributions of one node's VJP, in order.
#[derive(Clone, Copy)]
enum Contrib<F> {
    None,
    One(u32, F),
    Two(u32, F, u32, F),
}

impl<F: Copy> Contrib<F> {
    fn to_vec(self) -> Vec<(usize, F)> {
        match self {
            Contrib::None => Vec::new(),
            Contrib::One(a, ca) => vec![(a as usize, ca)],
            Contrib::Two(a, ca, b, cb) => vec![(a as usize, ca), (b as usize, cb)],
        }
    }
}

/// The local VJP of `op` at cotangent `g`, given the node's value `out` and the values of its
/// parents (`val(id)`). Shared by the fast sweep and [`ScalarTape::to_tape`], so both compute
/// bit-identical contributions.
#[inline]
fn vjp<F: Float>(op: Op<F>, g: F, out: F, val: impl Fn(u32) -> F) -> Contrib<F> {
    match op {
        Op::Var | Op::Const => Contrib::None,
        // d(a + b) = da + db
        Op::Add(a, b) => Contrib::Two(a, g, b, g),
        // d(a - b) = da - db
        Op::Sub(a, b) => Contrib::Two(a, g, b, -g),
        // d(a b) = b da + a db
        Op::Mul(a, b) => Contrib::Two(a, g * val(b), b, g * val(a)),
        // d(a / b) = da / b - (a / b^2) db = da / b - (out / b) db
        Op::Div(a, b) => {
            let vb = val(b);
            Contrib::Two(a, g / vb, b, -g * out / vb)
        }
        Op::AddConst(a) => Contrib::One(a, g),
        Op::ConstSub(a) | Op::Neg(a) => Contrib::One(a, -g),
        Op::MulConst(a, c) => Contrib::One(a, g * c),
        Op::DivConst(a, c) => Contrib::One(a, g / c),
        // d(c / x) = -(c / x^2) dx = -(out / x) dx
        Op::ConstDiv(a) => Contrib::One(a, -g * out / val(a)),
        Op::Sin(a) => Contrib::One(a, g * F::cos(val(a))),
        Op::Cos(a) => Contrib::One(a, -g * F::sin(val(a))),
        Op::Exp(a) => Contrib::One(a, g * out),
        // singular at x = 0: 1/0
        Op::Ln(a) => Contrib::One(a, g / val(a)),
        Op::Tanh(a) => Contrib::One(a, g * (F::ONE - out * out)),
        // d(x^0) = 0 (x^-1 would be singular at x = 0)
        Op::Powi(a, 0) => Contrib::One(a, g * F::ZERO),
        Op::Powi(a, n) => {
            let slope = match n.checked_sub(1) {
                Some(m) => F::powi(val(a), m),
                None => F::powf(val(a), F::from_i32(n) - F::ONE),
            };
            Contrib::One(a, g * F::from_i32(n) * slope)
        }
        // singular at x = 0: 1/(2 * 0)
        Op::Sqrt(a) => Contrib::One(a, g * F::HALF / out),
        // relu'(0) = 0
        Op::Relu(a) => Contrib::One(a, if val(a) > F::ZERO { g } else { F::ZERO }),
    }
}

/// The reverse sweep from `out` over the nodes that `needs` accepts: only reached nodes run
/// their VJP; contributions to other nodes are dropped. (`needs` is a closure so the common
/// all-variables case compiles to a sweep without the test.)
fn sweep<F: Float>(
    nodes: &[Entry<F>],
    adj: &mut Adjoints<F>,
    out: u32,
    needs: impl Fn(usize) -> bool,
) {
    for i in (0..=out as usize).rev() {
        let Some(g) = adj.get(i).filter(|_| needs(i)) else {
            continue;
        };
        let node = nodes[i];
        let mut add = |a: u32, c: F| {
            if needs(a as usize) {
                adj.accumulate(a, c);
            }
        };
        match vjp(node.op, g, node.value, |j| nodes[j as usize].value) {
            Contrib::None => {}
            Contrib::One(a, ca) => add(a, ca),
            Contrib::Two(a, ca, b, cb) => {
                add(a, ca);
                add(b, cb);
            }
        }
    }
}

/// Whether each node requires a gradient: inputs do, constants do not, and every op inherits
/// the disjunction of its parents' flags.
fn needs_grad<F: Copy>(nodes: &[Entry<F>]) -> Vec<bool> {
    let mut needs: Vec<bool> = Vec::with_capacity(nodes.len());
    for node in nodes {
        let flag = match node.op {
            Op::Var => true,
            Op::Const => false,
            op => {
                let (ids, n) = op.parents();
                ids[..n].iter().any(|&p| needs[p as usize])
            }
        };
        needs.push(flag);
    }
    needs
}

/// The optional-gradient array of the sweep in two flat parts: `adj[i]` is meaningful once
/// bit `i` of `reached` is set, and stays zero otherwise (so it is already totalized).
struct Adjoints<F> {
    adj: Vec<F>,
    reached: Vec<u64>,
}

impl<F: Float> Adjoints<F> {
    fn new(n: usize) -> Adjoints<F> {
        // Zeroed allocations (`vec!` of a zero float): fresh pages need no explicit fill.
        Adjoints {
            adj: vec![F::ZERO; n],
            reached: vec![0; n.div_ceil(64)],
        }
    }

    #[inline]
    fn get(&self, i: usize) -> Option<F> {
        (self.reached[i / 64] >> (i % 64) & 1 == 1).then(|| self.adj[i])
    }

    /// Adds `c` into slot `i`: a first contribution is kept as is.
    #[inline]
    fn accumulate(&mut self, i: u32, c: F) {
        let i = i as usize;
        let (word, bit) = (&mut self.reached[i / 64], 1u64 << (i % 64));
        if *word & bit == 0 {
            *word |= bit;
            self.adj[i] = c;
        } else {
            self.adj[i] += c;
        }
    }
}

/// One recorded node: its value and op, side by side so recording is a single push.
#[derive(Clone, Copy)]
struct Entry<F> {
    value: F,
    op: Op<F>,
}

struct Inner<F> {
    nodes: Vec<Entry<F>>,
    has_constants: bool,
}

impl<F> Inner<F> {
    #[inline]
    fn push<'t>(&mut self, tape: &'t ScalarTape<F>, value: F, op: Op<F>) -> Var<'t, F> {
        let Ok(id) = u32::try_from(self.nodes.len()) else {
            panic!("a scalar tape holds at most 2^32 nodes")
        };
        self.nodes.push(Entry { value, op });
        Var { tape, id }
    }
}

/// A tape for scalar programs in `F` (`f64` from [`new`](ScalarTape::new), `f32` from
/// `ScalarTape::<f32>::empty()`), recorded through [`Var`]s with operator overloading.
///
/// Reuse one tape across iterations of an optimisation loop with [`clear`](ScalarTape::clear),
/// which keeps the allocated capacity.
///
/// # Panics
///
/// Recording more than 2^32 nodes on one tape panics (node ids are `u32`).
pub struct ScalarTape<F = f64> {
    inner: RefCell<Inner<F>>,
    /// Unique for the life of the process, so gradients know the tape they came from.
    id: u64,
    /// Bumped by [`clear`](ScalarTape::clear), so gradients of a cleared recording are refused.
    generation: u64,
}

impl<F: Float> Default for ScalarTape<F> {
    fn default() -> Self {
        ScalarTape::empty()
    }
}

fn next_tape_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

impl<F> fmt::Debug for ScalarTape<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ScalarTape({} nodes)", self.inner.borrow().nodes.len())
    }
}

/// A scalar of type `F` recorded on a [`ScalarTape<F>`]: a node id and the tape it belongs to.
///
/// # Panics
///
/// Combining `Var`s of two different tapes panics.
pub struct Var<'t, F = f64> {
    tape: &'t ScalarTape<F>,
    id: u32,
}

// By hand rather than derived: a derive would ask `F: Clone`, which `&ScalarTape<F>` does not need.
impl<F> Clone for Var<'_, F> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<F> Copy for Var<'_, F> {}

impl<F: Float> fmt::Debug for Var<'_, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Var(#{} = {})", self.id, self.value())
    }
}

/// `new` and `with_capacity` make `f64` tapes, as `HashMap::new` makes maps with the default
/// hasher: a type parameter's default does not guide inference, so generic constructors would
/// leave `ScalarTape::new()` with an undetermined float type wherever only literals meet it.
impl ScalarTape<f64> {
    /// An empty `f64` tape (for `f32`: [`ScalarTape::<f32>::empty`](ScalarTape::empty)).
    pub fn new() -> ScalarTape<f64> {
        ScalarTape::empty()
    }

    /// An empty `f64` tape with room for `nodes` recorded ops.
    pub fn with_capacity(nodes: usize) -> ScalarTape<f64> {
        ScalarTape::empty_with_capacity(nodes)
    }
}

impl<F: Float> ScalarTape<F> {
    /// An empty tape of any precision: `ScalarTape::<f32>::empty()`.
    pub fn empty() -> ScalarTape<F> {
        ScalarTape::empty_with_capacity(0)
    }

    /// An empty tape of any precision with room for `nodes` recorded ops.
    pub fn empty_with_capacity(nodes: usize) -> ScalarTape<F> {
        ScalarTape {
            inner: RefCell::new(Inner {
                nodes: Vec::with_capacity(nodes),
                has_constants: false,
            }),
            id: next_tape_id(),
            generation: 0,
        }
    }

    /// Number of recorded nodes.
    pub fn len(&self) -> usize {
        self.inner.borrow().nodes.len()
    }

    /// Whether nothing is recorded.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Forgets every node, keeping the capacity. Needs every `Var` of the tape to be gone.
    pub fn clear(&mut self) {
        let inner = self.inner.get_mut();
        inner.nodes.clear();
        inner.has_constants = false;
        self.generation += 1;
    }

    /// A new input that requires a gradient.
    #[inline]
    pub fn var(&self, value: F) -> Var<'_, F> {
        self.inner.borrow_mut().push(self, value, Op::Var)
    }

    /// `values.len()` new inputs.
    pub fn vars(&self, values: &[F]) -> Vec<Var<'_, F>> {
        values.iter().map(|&v| self.var(v)).collect()
    }

    /// A constant leaf: usable wherever a `Var` is, but it receives no gradient.
    pub fn constant(&self, value: F) -> Var<'_, F> {
        let mut inner = self.inner.borrow_mut();
        inner.has_constants = true;
        inner.push(self, value, Op::Const)
    }

    /// The gradient of `output` with respect to every node (zero for nodes `output` does not
    /// depend on), by one reverse sweep from the unit seed.
    ///
    /// # Panics
    ///
    /// If `output` belongs to another tape.
    pub fn gradients(&self, output: Var<'_, F>) -> Gradients<F> {
        self.gradients_seeded(output, F::ONE)
    }

    /// [`gradients`](ScalarTape::gradients) with cotangent `seed` for `output`.
    ///
    /// # Panics
    ///
    /// If `output` belongs to another tape.
    pub fn gradients_seeded(&self, output: Var<'_, F>, seed: F) -> Gradients<F> {
        assert!(
            std::ptr::eq(self, output.tape),
            "gradients: the output Var belongs to another ScalarTape"
        );
        let inner = self.inner.borrow();
        let nodes = &inner.nodes[..];
        let out = output.id;
        let mut adj = Adjoints::new(nodes.len());
        adj.accumulate(out, seed);
        if inner.has_constants {
            // Nodes computed from constants alone do not require a gradient (a node inherits
            // the disjunction of its parents' flags): they neither run their VJP nor receive
            // contributions, as in the generic sweep; a seed placed on one is kept.
            let needs = needs_grad(nodes);
            sweep(nodes, &mut adj, out, |i| needs[i]);
        } else {
            sweep(nodes, &mut adj, out, |_| true);
        }
        let grads = adj.adj;
        Gradients {
            tape: (self.id, self.generation),
            grads,
        }
    }

    /// The equivalent generic tape: one [`Node`] per recorded op, with the same values, names
    /// (`"sin"`, `"mul_const"`, ...), parents and VJP; constants, and ops on constants alone,
    /// do not require a gradient.
    /// `backward_dense_all` on it gives exactly what [`gradients`](ScalarTape::gradients) gives.
    pub fn to_tape(&self) -> Tape<F> {
        let inner = self.inner.borrow();
        let mut tape = Tape::empty();
        let value_of = |id: u32| inner.nodes.get(id as usize).map_or(F::ZERO, |n| n.value);
        let needs = needs_grad(&inner.nodes);
        for (i, &Entry { value, op }) in inner.nodes.iter().enumerate() {
            let (ids, n) = op.parents();
            let known = [(ids[0], value_of(ids[0])), (ids[1], value_of(ids[1]))];
            let parents = ids[..n].iter().map(|&p| p as usize).collect();
            let node = Node::new(value, parents, move |g: &F| {
                let val = |j: u32| {
                    if j == known[0].0 {
                        known[0].1
                    } else {
                        known[1].1
                    }
                };
                Ok(vjp(op, *g, value, val).to_vec())
            })
            .named(op.name())
            .with_requires_grad(needs[i]);
            tape.add_node(node);
        }
        tape
    }
}

impl<'t, F: Float> Var<'t, F> {
    /// The forward value.
    pub fn value(self) -> F {
        self.tape.inner.borrow().nodes[self.id as usize].value
    }

    /// The node id on the tape (and on [`ScalarTape::to_tape`]).
    pub fn id(self) -> usize {
        self.id as usize
    }

    #[inline]
    fn unary(self, op: Op<F>, f: impl FnOnce(F) -> F) -> Var<'t, F> {
        let mut inner = self.tape.inner.borrow_mut();
        let v = f(inner.nodes[self.id as usize].value);
        inner.push(self.tape, v, op)
    }

    #[inline]
    fn binary(self, other: Var<'t, F>, op: Op<F>, f: impl FnOnce(F, F) -> F) -> Var<'t, F> {
        assert!(
            std::ptr::eq(self.tape, other.tape),
            "cannot combine Vars of two different ScalarTapes"
        );
        let mut inner = self.tape.inner.borrow_mut();
        let v = f(
            inner.nodes[self.id as usize].value,
            inner.nodes[other.id as usize].value,
        );
        inner.push(self.tape, v, op)
    }

    /// `sin(x)`.
    #[inline]
    pub fn sin(self) -> Var<'t, F> {
        self.unary(Op::Sin(self.id), F::sin)
    }
    /// `cos(x)`.
    #[inline]
    pub fn cos(self) -> Var<'t, F> {
        self.unary(Op::Cos(self.id), F::cos)
    }
    /// `e^x`.
    #[inline]
    pub fn exp(self) -> Var<'t, F> {
        self.unary(Op::Exp(self.id), F::exp)
    }
    /// The natural logarithm.
    #[inline]
    pub fn ln(self) -> Var<'t, F> {
        self.unary(Op::Ln(self.id), F::ln)
    }
    /// `tanh(x)`.
    #[inline]
    pub fn tanh(self) -> Var<'t, F> {
        self.unary(Op::Tanh(self.id), F::tanh)
    }
    /// `x^n` for an integer `n`.
    #[inline]
    pub fn powi(self, n: i32) -> Var<'t, F> {
        self.unary(Op::Powi(self.id, n), |x| F::powi(x, n))
    }
    /// The square root.
    #[inline]
    pub fn sqrt(self) -> Var<'t, F> {
        self.unary(Op::Sqrt(self.id), F::sqrt)
    }
    /// `max(x, 0)`, with derivative 0 at `x = 0`.
    #[inline]
    pub fn relu(self) -> Var<'t, F> {
        self.unary(Op::Relu(self.id), |x| if x > F::ZERO { x } else { F::ZERO })
    }
}

impl<'t, F: Float> Neg for Var<'t, F> {
    type Output = Var<'t, F>;
    #[inline]
    fn neg(self) -> Var<'t, F> {
        self.unary(Op::Neg(self.id), |x| -x)
    }
}

/// `Var ⊕ Var` and `Var ⊕ F` for one operator, plus `Var ⊕= Var | F`, for every `F: Float`.
macro_rules! binary_ops {
    ($Trait:ident, $method:ident, $Assign:ident, $assign:ident, $op:tt,
     $vv:ident, |$a:ident, $c:ident| $vc:expr) => {
        impl<'t, F: Float> $Trait for Var<'t, F> {
            type Output = Var<'t, F>;
            #[inline]
            fn $method(self, other: Var<'t, F>) -> Var<'t, F> {
                self.binary(other, Op::$vv(self.id, other.id), |x, y| x $op y)
            }
        }
        impl<'t, F: Float> $Trait<F> for Var<'t, F> {
            type Output = Var<'t, F>;
            #[inline]
            fn $method(self, $c: F) -> Var<'t, F> {
                let $a = self.id;
                self.unary($vc, |x| x $op $c)
            }
        }
        impl<'t, F: Float> $Assign for Var<'t, F> {
            #[inline]
            fn $assign(&mut self, other: Var<'t, F>) {
                *self = *self $op other;
            }
        }
        impl<F: Float> $Assign<F> for Var<'_, F> {
            #[inline]
            fn $assign(&mut self, c: F) {
                *self = *self $op c;
            }
        }
    };
}

binary_ops!(Add, add, AddAssign, add_assign, +, Add, |a, c| Op::AddConst(a));
binary_ops!(Sub, sub, SubAssign, sub_assign, -, Sub, |a, c| Op::AddConst(a));
binary_ops!(Mul, mul, MulAssign, mul_assign, *, Mul, |a, c| Op::MulConst(a, c));
binary_ops!(Div, div, DivAssign, div_assign, /, Div, |a, c| Op::DivConst(a, c));

/// `F ⊕ Var` for one operator and one concrete float type (a generic impl for the foreign
/// `F` is not allowed).
macro_rules! const_first_ops {
    ($t:ident: $($Trait:ident, $method:ident, $op:tt, |$a:ident, $c:ident| $cv:expr;)*) => {$(
        impl<'t> $Trait<Var<'t, $t>> for $t {
            type Output = Var<'t, $t>;
            #[inline]
            fn $method(self, v: Var<'t, $t>) -> Var<'t, $t> {
                let ($a, $c) = (v.id, self);
                v.unary($cv, |x| $c $op x)
            }
        }
    )*};
}

macro_rules! const_first_ops_for {
    ($($t:ident),*) => {$(
        const_first_ops!($t:
            Add, add, +, |a, c| Op::AddConst(a);
            Sub, sub, -, |a, c| Op::ConstSub(a);
            Mul, mul, *, |a, c| Op::MulConst(a, c);
            Div, div, /, |a, c| Op::ConstDiv(a);
        );
    )*};
}

const_first_ops_for!(f32, f64);

/// Gradients from one sweep of a [`ScalarTape<F>`], indexed by [`Var`] (or by node id through
/// [`as_slice`](Gradients::as_slice)).
#[derive(Clone, PartialEq)]
pub struct Gradients<F = f64> {
    /// The tape and recording that produced them, to refuse a `Var` of another.
    tape: (u64, u64),
    grads: Vec<F>,
}

impl<F: fmt::Debug> fmt::Debug for Gradients<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Gradients").field(&self.grads).finish()
    }
}

impl<F: Float> Gradients<F> {
    /// The gradient with respect to `v`: zero for a node recorded after the sweep's output.
    ///
    /// # Panics
    ///
    /// If `v` belongs to another tape, or to a recording of this tape made after a `clear`.
    #[inline]
    pub fn wrt(&self, v: Var<'_, F>) -> F {
        *self.slot(v)
    }

    #[inline]
    fn slot(&self, v: Var<'_, F>) -> &F {
        assert!(
            (v.tape.id, v.tape.generation) == self.tape,
            "Gradients: the Var belongs to another ScalarTape (or to a later recording of this one)"
        );
        self.grads.get(v.id as usize).unwrap_or(F::zero_ref())
    }

    /// One gradient per node id.
    pub fn as_slice(&self) -> &[F] {
        &self.grads
    }

    /// One gradient per node id.
    pub fn into_vec(self) -> Vec<F> {
        self.grads
    }
}

impl<F: Float> Index<Var<'_, F>> for Gradients<F> {
    type Output = F;
    #[inline]
    fn index(&self, v: Var<'_, F>) -> &F {
        self.slot(v)
    }
}

/// Workload T1 (the W1s chain on the scalar front-end), in `f32` as the benchmark document asks
/// of every workload: records `y = x` with `x = 0.5`, then `steps` times `y = y * 0.999 + x`
/// (two ops a step), sweeps from `y`, and returns the total time, tape creation and drop
/// included. Nanoseconds per recorded op = `time / (2 * steps + 1)`.
pub fn bench_t1(steps: usize) -> Duration {
    let start = Instant::now();
    let dx = {
        let tape = ScalarTape::<f32>::empty();
        let x = tape.var(0.5);
        let mut y = x;
        for _ in 0..steps {
            y = y * 0.999 + x;
        }
        tape.gradients(y).wrt(x)
    };
    let elapsed = start.elapsed();
    std::hint::black_box(dx);
    elapsed
}
